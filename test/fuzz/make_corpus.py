"""Writes the checked-in inputs of the fuzz targets (run again after changing
a model here):

    python test/fuzz/make_corpus.py              # corpus/onnx_import/*.onnx
    python test/fuzz/make_corpus.py --decoder    # and models/gpt2_tiny.onnx

corpus/onnx_import/ is the seed corpus of onnx_import_fuzz.py: small ONNX
models, one per file, each a valid model SITS imports, so that mutants
start from the checks behind onnx.checker and shape inference: the
converters, the patterns, constant folding and the pre-flight check.

models/gpt2_tiny.onnx is the decoder engine_request_fuzz.py serves: GPT-2
from a `transformers` config (one layer, 16 wide, vocabulary 64, 96
positions, seeded weights) exported with its KV cache by
test/python/llm/hf_decoders.py. It is checked in so that the target
needs neither torch nor an export (seconds) at start.
"""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

HERE = pathlib.Path(__file__).resolve().parent
OUT = HERE / "corpus" / "onnx_import"
DECODER = HERE / "models" / "gpt2_tiny.onnx"


def _model(nodes, inputs, outputs, inits=(), opset=17, name="g", extra_opsets=()):
    graph = h.make_graph(nodes, name, inputs, outputs, list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset), *extra_opsets],
                         producer_name="sits-fuzz-seed")
    model.ir_version = 8 if opset <= 18 else 9
    return model


def _vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def _init(name, array):
    return numpy_helper.from_array(np.asarray(array), name)


def seeds() -> dict[str, onnx.ModelProto]:
    rng = np.random.default_rng(0)
    f32 = np.float32
    out = {}
    out["add"] = _model(
        [h.make_node("Add", ["x", "y"], ["z"], name="add")],
        [_vi("x", TP.FLOAT, ["n", 3]), _vi("y", TP.FLOAT, [3])], [_vi("z", TP.FLOAT, ["n", 3])])
    # A weight above 64 elements (a dense_resource blob) and a fused bias.
    out["matmul"] = _model(
        [h.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
         h.make_node("Add", ["m", "b"], ["y"], name="bias")],
        [_vi("x", TP.FLOAT, ["batch", 4])], [_vi("y", TP.FLOAT, ["batch", 20])],
        [_init("w", rng.standard_normal((4, 20)).astype(f32)),
         _init("b", rng.standard_normal(20).astype(f32))])
    out["gather"] = _model(
        [h.make_node("Gather", ["table", "ids"], ["e"], name="embed", axis=0),
         h.make_node("Gather", ["e", "k"], ["y"], name="pick", axis=1)],
        [_vi("ids", TP.INT64, ["b", "s"])], [_vi("y", TP.FLOAT, ["b", "s"])],
        [_init("table", rng.standard_normal((10, 4)).astype(f32)),
         _init("k", np.array(1, np.int64))])
    # Reshape to a shape given at run time (not provable: reported), and to a
    # constant shape with -1 and 0.
    out["reshape_shape_input"] = _model(
        [h.make_node("Reshape", ["x", "shape"], ["y"], name="dyn"),
         h.make_node("Reshape", ["x", "c"], ["z"], name="const")],
        [_vi("x", TP.FLOAT, [2, 3, 4]), _vi("shape", TP.INT64, [2])],
        [_vi("y", TP.FLOAT, ["a", "b"]), _vi("z", TP.FLOAT, [2, 12])],
        [_init("c", np.array([0, -1], np.int64))])
    out["conv"] = _model(
        [h.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1],
                     strides=[2, 2], kernel_shape=[3, 3]),
         h.make_node("Relu", ["c"], ["r"], name="relu"),
         h.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2],
                     strides=[1, 1])],
        [_vi("x", TP.FLOAT, [1, 2, 6, 6])], [_vi("y", TP.FLOAT, [1, 3, 2, 2])],
        [_init("w", rng.standard_normal((3, 2, 3, 3)).astype(f32)),
         _init("b", np.zeros(3, f32))])
    out["softmax"] = _model(
        [h.make_node("Softmax", ["x"], ["s"], name="softmax", axis=-1),
         h.make_node("LogSoftmax", ["x"], ["l"], name="logsoftmax", axis=1)],
        [_vi("x", TP.FLOAT, ["n", 5])],
        [_vi("s", TP.FLOAT, ["n", 5]), _vi("l", TP.FLOAT, ["n", 5])])
    # MatMul(Q, K^T) / sqrt(d) + mask -> Softmax -> MatMul(., V): one
    # sits.attention.
    d = 4
    out["attention"] = _model(
        [h.make_node("Transpose", ["k"], ["kt"], name="kt", perm=[0, 1, 3, 2]),
         h.make_node("MatMul", ["q", "kt"], ["qk"], name="qk"),
         h.make_node("Div", ["qk", "scale"], ["scaled"], name="scale"),
         h.make_node("Add", ["scaled", "mask"], ["masked"], name="mask"),
         h.make_node("Softmax", ["masked"], ["p"], name="softmax", axis=-1),
         h.make_node("MatMul", ["p", "v"], ["y"], name="pv")],
        [_vi("q", TP.FLOAT, [1, 2, 3, d]), _vi("k", TP.FLOAT, [1, 2, 3, d]),
         _vi("v", TP.FLOAT, [1, 2, 3, d])], [_vi("y", TP.FLOAT, [1, 2, 3, d])],
        [_init("scale", np.array(np.sqrt(d), f32)),
         _init("mask", np.triu(np.full((3, 3), -np.inf, f32), 1))])
    out["layernorm"] = _model(
        [h.make_node("LayerNormalization", ["x", "g", "b"], ["y"], name="ln", axis=-1,
                     epsilon=1e-5)],
        [_vi("x", TP.FLOAT, ["n", 8])], [_vi("y", TP.FLOAT, ["n", 8])],
        [_init("g", np.ones(8, f32)), _init("b", np.zeros(8, f32))])
    out["slice_concat_split"] = _model(
        [h.make_node("Slice", ["x", "starts", "ends", "axes"], ["s"], name="slice"),
         h.make_node("Concat", ["s", "x"], ["c"], name="concat", axis=1),
         h.make_node("Split", ["c", "parts"], ["a", "b"], name="split", axis=1)],
        [_vi("x", TP.FLOAT, [2, 6])], [_vi("a", TP.FLOAT, [2, 4]), _vi("b", TP.FLOAT, [2, 6])],
        [_init("starts", np.array([1], np.int64)), _init("ends", np.array([5], np.int64)),
         _init("axes", np.array([1], np.int64)), _init("parts", np.array([4, 6], np.int64))])
    out["reduce"] = _model(
        [h.make_node("ReduceMean", ["x", "axes"], ["m"], name="mean", keepdims=1),
         h.make_node("ReduceMax", ["x"], ["y"], name="max", keepdims=0),
         h.make_node("Sub", ["x", "m"], ["z"], name="center")],
        [_vi("x", TP.FLOAT, [2, "n", 3])],
        [_vi("y", TP.FLOAT, []), _vi("z", TP.FLOAT, [2, "n", 3])],
        [_init("axes", np.array([-1], np.int64))], opset=18)
    out["expand_where_cast"] = _model(
        [h.make_node("Expand", ["x", "shape"], ["e"], name="expand"),
         h.make_node("Greater", ["e", "zero"], ["pos"], name="gt"),
         h.make_node("Where", ["pos", "e", "zero"], ["w"], name="where"),
         h.make_node("Cast", ["w"], ["y"], name="cast", to=TP.INT32)],
        [_vi("x", TP.FLOAT, [1, 3])], [_vi("y", TP.INT32, [4, 3])],
        [_init("shape", np.array([4, 1], np.int64)), _init("zero", np.array(0, f32))])
    out["resize"] = _model(
        [h.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", mode="nearest")],
        [_vi("x", TP.FLOAT, [1, 1, 2, 3])], [_vi("y", TP.FLOAT, [1, 1, 4, 6])],
        [_init("scales", np.array([1, 1, 2, 2], f32))])
    out["topk_cumsum"] = _model(
        [h.make_node("TopK", ["x", "k"], ["v", "i"], name="topk", axis=-1),
         h.make_node("CumSum", ["v", "axis"], ["y"], name="cumsum", exclusive=1)],
        [_vi("x", TP.FLOAT, [2, 6])], [_vi("y", TP.FLOAT, [2, 3]), _vi("i", TP.INT64, [2, 3])],
        [_init("k", np.array([3], np.int64)), _init("axis", np.array(1, np.int64))])
    out["pad_transpose"] = _model(
        [h.make_node("Pad", ["x", "pads", "value"], ["p"], name="pad", mode="constant"),
         h.make_node("Transpose", ["p"], ["t"], name="transpose", perm=[1, 0]),
         h.make_node("Unsqueeze", ["t", "axes"], ["y"], name="unsqueeze")],
        [_vi("x", TP.FLOAT, [2, 3])], [_vi("y", TP.FLOAT, [1, 5, 4])],
        [_init("pads", np.array([1, 0, 1, 2], np.int64)), _init("value", np.array(0.5, f32)),
         _init("axes", np.array([0], np.int64))])
    out["quantize"] = _model(
        [h.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="quant"),
         h.make_node("DequantizeLinear", ["q", "s", "zp"], ["y"], name="dequant")],
        [_vi("x", TP.FLOAT, [2, 4])], [_vi("y", TP.FLOAT, [2, 4])],
        [_init("s", np.array(0.1, f32)), _init("zp", np.array(3, np.int8))])
    # Shape -> Gather -> Concat -> Reshape, as exporters compute a
    # reshape target from the run-time extents.
    out["dynamic_reshape"] = _model(
        [h.make_node("Shape", ["x"], ["sh"], name="shape"),
         h.make_node("Gather", ["sh", "i0"], ["b"], name="batch", axis=0),
         h.make_node("Unsqueeze", ["b", "ax"], ["b1"], name="unsq"),
         h.make_node("Concat", ["b1", "tail"], ["target"], name="target", axis=0),
         h.make_node("Reshape", ["x", "target"], ["y"], name="reshape")],
        [_vi("x", TP.FLOAT, ["batch", 2, 3])], [_vi("y", TP.FLOAT, ["batch", 6])],
        [_init("i0", np.array(0, np.int64)), _init("ax", np.array([0], np.int64)),
         _init("tail", np.array([6], np.int64))])
    # An opset older than SITS reads: upgraded by onnx.version_converter.
    out["old_opset"] = _model(
        [h.make_node("Unsqueeze", ["x"], ["u"], name="unsq", axes=[0]),
         h.make_node("Relu", ["u"], ["y"], name="relu")],
        [_vi("x", TP.FLOAT, [3])], [_vi("y", TP.FLOAT, [1, 3])], opset=11)
    out["gemm_bn"] = _model(
        [h.make_node("Gemm", ["x", "w", "c"], ["g"], name="gemm", transB=1, alpha=0.5),
         h.make_node("Sigmoid", ["g"], ["y"], name="sigmoid")],
        [_vi("x", TP.FLOAT, [2, 3])], [_vi("y", TP.FLOAT, [2, 4])],
        [_init("w", rng.standard_normal((4, 3)).astype(f32)), _init("c", np.ones(4, f32))])
    return out


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    import sits_mlir

    total = 0
    for name, model in seeds().items():
        onnx.checker.check_model(model)
        problems = sits_mlir.check(model)
        # reshape_shape_input's run-time shape is reported on purpose.
        assert name == "reshape_shape_input" or not problems, (name, problems)
        data = model.SerializeToString()
        (OUT / f"{name}.onnx").write_bytes(data)
        total += len(data)
    print(f"wrote {len(seeds())} seeds ({total} bytes) to {OUT}")
    if "--decoder" in sys.argv[1:]:
        write_decoder()
    return 0


def write_decoder() -> None:
    import tempfile
    import warnings

    sys.path.insert(0, str(HERE.parents[0] / "python" / "llm"))
    from hf_decoders import build

    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory() as tmp:
        dec = build("gpt2", tmp, layers=1, hidden=16, heads=2, vocab=64, positions=96)
        DECODER.parent.mkdir(exist_ok=True)
        DECODER.write_bytes(pathlib.Path(dec.path).read_bytes())
    print(f"wrote {DECODER} ({DECODER.stat().st_size} bytes)")


if __name__ == "__main__":
    sys.exit(main())
