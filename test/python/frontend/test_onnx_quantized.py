"""Quantized ONNX models against onnxruntime: com.microsoft MatMulNBits
(block-quantized INT4/INT8 weights, as onnxruntime's quantization tools
write them) and a blocked DequantizeLinear (opset 21) feeding a MatMul."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h, numpy_helper

import sits_mlir

ort = pytest.importorskip("onnxruntime")


def _run_both(model: onnx.ModelProto, feeds: dict, tmp_path, optimize=True):
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    want = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"]).run(None, feeds)
    got = sits_mlir.compile(str(path), target="cpu").load()(*feeds.values())
    got = got if isinstance(got, tuple) else (got,)
    return want, got


def _pack(values: np.ndarray, bits: int) -> np.ndarray:
    """[N, K'] values to bytes, lowest bits first (onnxruntime's layout)."""
    v = values.astype(np.uint8)
    if bits == 8:
        return v
    return (v[:, 0::2] | (v[:, 1::2] << 4)).astype(np.uint8)


def _nbits_model(k, n, bs, bits, zero_points: str, bias: bool, seed=0):
    rng = np.random.default_rng(seed)
    blocks = -(-k // bs)
    q = rng.integers(0, 1 << bits, size=(n, blocks * bs))
    b_packed = _pack(q, bits).reshape(n, blocks, bs * bits // 8)
    scales = (rng.random((n, blocks)) * 0.05 + 0.01).astype(np.float32)
    inits = [numpy_helper.from_array(b_packed, "B"),
             numpy_helper.from_array(scales.reshape(-1), "scales")]
    inputs = ["A", "B", "scales"]
    if zero_points == "packed":
        zp = rng.integers(0, 1 << bits, size=(n, blocks + (blocks % 2 if bits == 4 else 0)))
        inits.append(numpy_helper.from_array(_pack(zp, bits).reshape(-1), "zp"))
        inputs.append("zp")
    elif zero_points == "float":
        zp = (rng.random((n, blocks)) * (1 << bits)).astype(np.float32)
        inits.append(numpy_helper.from_array(zp.reshape(-1), "zp"))
        inputs.append("zp")
    if bias:
        inputs += ["", ""] if len(inputs) == 3 else [""]
        inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias"))
        inputs.append("bias")
    node = h.make_node("MatMulNBits", inputs, ["Y"], domain="com.microsoft", K=k, N=n,
                       bits=bits, block_size=bs, name="nbits")
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("A", TP.FLOAT, [3, k])],
                         [h.make_tensor_value_info("Y", TP.FLOAT, [3, n])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 21),
                                              h.make_opsetid("com.microsoft", 1)])


@pytest.mark.parametrize("k,n,bs,bits,zp,bias", [
    (128, 32, 32, 4, "none", False),
    (96, 24, 64, 4, "packed", True),     # K not a multiple of the block
    (256, 16, 128, 4, "float", False),
    (64, 8, 16, 8, "packed", False),
])
def test_matmul_nbits_matches_onnxruntime(k, n, bs, bits, zp, bias, tmp_path):
    model = _nbits_model(k, n, bs, bits, zp, bias)
    a = np.random.default_rng(1).standard_normal((3, k)).astype(np.float32)
    want, got = _run_both(model, {"A": a}, tmp_path)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


def test_matmul_nbits_imports_as_a_qmatmul():
    im = sits_mlir.frontend.onnx.import_model(_nbits_model(128, 32, 32, 4, "packed", True))
    text = str(im.module)
    assert "sits.qmatmul" in text and "transpose_weight" in text and "block_size = 32" in text


def test_matmul_nbits_refuses_act_order():
    model = _nbits_model(128, 32, 32, 4, "packed", False)
    node = model.graph.node[0]
    node.input.append("g_idx")
    model.graph.initializer.append(numpy_helper.from_array(np.zeros(128, np.int32), "g_idx"))
    with pytest.raises(sits_mlir.CompileError, match="g_idx"):
        sits_mlir.frontend.onnx.import_model(model)


def test_blocked_dequantize_matmul_matches_onnxruntime(tmp_path):
    rng = np.random.default_rng(2)
    k, n, bs = 64, 16, 16
    wq = rng.integers(-8, 8, size=(k, n)).astype(np.int8)
    scale = (rng.random((k // bs, n)) * 0.1 + 0.01).astype(np.float32)
    zp = rng.integers(-2, 3, size=(k // bs, n)).astype(np.int8)
    nodes = [h.make_node("DequantizeLinear", ["wq", "scale", "zp"], ["w"], axis=0, block_size=bs),
             h.make_node("MatMul", ["x", "w"], ["y"])]
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [4, k])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [4, n])],
                         [numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(scale, "scale"),
                          numpy_helper.from_array(zp, "zp")])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21)])
    x = rng.standard_normal((4, k)).astype(np.float32)
    # onnxruntime's optimizer rewrites DequantizeLinear + MatMul into its own
    # quantized kernel, which differs from the ONNX semantics by about 1%
    # here; unoptimized it computes them exactly, as does NumPy.
    want, got = _run_both(model, {"x": x}, tmp_path, optimize=False)
    exact = x @ ((wq.astype(np.float32) - np.repeat(zp, bs, 0)) * np.repeat(scale, bs, 0))
    np.testing.assert_allclose(want[0], exact, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[0], exact, rtol=1e-4, atol=1e-5)
