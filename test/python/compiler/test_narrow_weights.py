"""fp16 and bf16 weights of an fp32 model (`Cast(weight16) -> MatMul`, the
form a model stored in half precision takes when it computes in fp32) stay
in their stored type from the ONNX file to the artifact: the contractions
and the embedding gather read them as stored and widen them in registers,
no widened copy is made at import, and the outputs equal those of the
widened model. A widened weight something else reads still folds as
before; `precision="int8"` quantizes the stored values."""

import re

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as TP  # noqa: E402
from onnx import helper as h  # noqa: E402
from onnx import numpy_helper  # noqa: E402

import ml_dtypes  # noqa: E402

import sits_mlir  # noqa: E402
from sits_mlir.frontend.onnx import import_model  # noqa: E402

V, D, F = 128, 64, 96


def _weights():
    rng = np.random.default_rng(0)
    return {
        "table": rng.standard_normal((V, D)).astype(np.float16),           # Gather
        "w1": (rng.standard_normal((D, F)) / 8).astype(np.float16),         # MatMul
        "w2t": (rng.standard_normal((D, F)) / 8).astype(ml_dtypes.bfloat16),  # Gemm transB
        "w3": (rng.standard_normal((D, D)) / 8).astype(np.float16),         # MatMul + ReduceSum
        "bias": rng.standard_normal(D).astype(np.float32),
    }


def narrow_model():
    """ids [B, T] -> Gather(Cast(table)) -> MatMul(Cast(w1)) -> Relu -> Gemm
    by Cast(w2t)^T + bias -> MatMul(Cast(w3)); w3 widened is also summed
    into a second output."""
    w = _weights()
    n = h.make_node
    nodes = [n("Cast", ["table"], ["table32"], to=TP.FLOAT),
             n("Cast", ["w1"], ["w1_32"], to=TP.FLOAT),
             n("CastLike", ["w2t", "bias"], ["w2t_32"]),
             n("Cast", ["w3"], ["w3_32"], to=TP.FLOAT),
             n("Gather", ["table32", "ids"], ["x"]),
             n("MatMul", ["x", "w1_32"], ["h"]),
             n("Relu", ["h"], ["hr"]),
             n("Reshape", ["hr", "rows"], ["h2"]),
             n("Gemm", ["h2", "w2t_32", "bias"], ["y"], transB=1),
             n("MatMul", ["y", "w3_32"], ["out"]),
             n("ReduceSum", ["w3_32", "axis0"], ["w3_sum"], keepdims=0)]
    inits = [numpy_helper.from_array(np.asarray(w[k]), k)
             for k in ("table", "w1", "w2t", "w3", "bias")]
    inits += [numpy_helper.from_array(np.array([-1, F], np.int64), "rows"),
              numpy_helper.from_array(np.array([0], np.int64), "axis0")]
    graph = h.make_graph(
        nodes, "narrow", [h.make_tensor_value_info("ids", TP.INT64, ["batch", "seq"])],
        [h.make_tensor_value_info("out", TP.FLOAT, ["rows", D]),
         h.make_tensor_value_info("w3_sum", TP.FLOAT, [D])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8), w


def reference(w, ids):
    f = {k: np.asarray(v, np.float64) for k, v in w.items()}
    x = f["table"][ids]
    hr = np.maximum(x @ f["w1"], 0).reshape(-1, F)
    y = hr @ f["w2t"].T + f["bias"]
    return y @ f["w3"], f["w3"].sum(axis=0)


def test_weights_read_in_their_stored_type():
    model, _ = narrow_model()
    text = import_model(model).module.operation.get_asm(large_elements_limit=16)
    matmuls = [line for line in text.splitlines() if "sits.matmul" in line]
    assert len(matmuls) == 3
    assert re.search(r"tensor<\?x\?x64xf32>, tensor<64x96xf16>\) -> tensor<\?x\?x96xf32>",
                     matmuls[0]), matmuls[0]
    assert "tensor<64x96xbf16>" in matmuls[1] and "transpose_rhs" in matmuls[1]
    # w3 is also summed: it folds to f32 as before, for both readers.
    assert "tensor<64x64xf32>" in matmuls[2]
    # The table stays fp16; the gathered rows are widened.
    assert re.search(r"arith.constant dense_resource<[^>]*> : tensor<128x64xf16>", text)
    assert not re.search(r"tensor<128x64xf32>", text)
    assert not re.search(r"tensor<64x96xf32>", text)


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_outputs_and_artifact_bytes(tmp_path, precision):
    model, w = narrow_model()
    path = tmp_path / "narrow.onnx"
    onnx.save(model, path)
    artifact = sits_mlir.compile(str(path), "cpu", tmp_path / "narrow.sitsm", threads=2,
                                 precision=precision)
    ids = np.array([[3, 127, 0, 64, 5], [9, 8, 7, 6, 5]], np.int64)
    out, w3_sum = artifact.load().run(ids=ids)
    ref_out, ref_sum = reference(w, ids)
    np.testing.assert_allclose(w3_sum, ref_sum, rtol=1e-5, atol=1e-6)
    args = artifact.manifest["entry_points"][0]["args"]
    weight_bytes = next(a["shape"][0] for a in args if a["role"] == "weights")
    if precision == "fp32":
        np.testing.assert_allclose(out, ref_out, rtol=1e-5, atol=1e-5)
        # Stored: 2 bytes per table/w1/w2t element, 4 per w3 element (the
        # bias is small enough to live in the code).
        stored = 2 * (V * D + 2 * D * F) + 4 * D * D
        assert stored <= weight_bytes < stored + 4096
    else:
        # The fp16/bf16 weights quantize from their stored values (w1, w2t;
        # w3 was widened, and is quantized as f32).
        entries = [e for e in artifact.reports["precision"] if e.get("kind") == "quantized"]
        assert len(entries) == 3
        cos = float(np.dot(out.ravel(), ref_out.ravel())
                    / (np.linalg.norm(out) * np.linalg.norm(ref_out)))
        assert cos > 0.999
        assert weight_bytes < 2 * V * D + D * F * 2 + D * D + 4096
