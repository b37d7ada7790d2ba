"""Tensors with no elements: extents of 0, static or at run time, compile,
give correctly shaped empty outputs and read nothing.

Exported decoders with a partial rotary embedding split each head into a
rotated part and a pass-through part and concatenate them again; when the
rotary part covers the whole head, the pass-through slice is empty. Concat
skips such inputs, so their producers are not imported. Reductions over an
empty axis give the reduction's identity, a matmul with K = 0 its zeros,
as onnxruntime does.
"""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

import sits_mlir

INT64_MAX = np.iinfo(np.int64).max


def _model(rot_end: int, pass_end: int):
    """y = concat(x[..., :rot_end] * 2, x[..., rot_end:pass_end]) over the
    last axis of x [2, s, 4, 8]."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("zero", [0]), ("rot", [rot_end]), ("end", [pass_end]), ("axis", [-1]))]
    inits.append(numpy_helper.from_array(np.array(2, np.float32), "two"))
    nodes = [h.make_node("Slice", ["x", "zero", "rot", "axis"], ["r"], name="rotary_part"),
             h.make_node("Mul", ["r", "two"], ["r2"], name="rotate"),
             h.make_node("Slice", ["x", "rot", "end", "axis"], ["p"], name="pass_part"),
             h.make_node("Concat", ["r2", "p"], ["y"], axis=-1, name="join")]
    graph = h.make_graph(nodes, "partial_rotary",
                         [h.make_tensor_value_info("x", TP.FLOAT, [2, "s", 4, 8])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [2, "s", 4, 8])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


@pytest.mark.parametrize("pass_end", [8, INT64_MAX], ids=["end-8", "end-max"])
def test_whole_head_rotary_with_an_empty_pass_through(pass_end, tmp_path):
    m = sits_mlir.compile(_model(8, pass_end), output=tmp_path / "m.sitsm").load()
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(m(x), x * 2)


def test_partial_rotary_still_concatenates(tmp_path):
    m = sits_mlir.compile(_model(6, INT64_MAX), output=tmp_path / "m.sitsm").load()
    x = np.random.default_rng(1).standard_normal((2, 5, 4, 8)).astype(np.float32)
    np.testing.assert_array_equal(m(x), np.concatenate([x[..., :6] * 2, x[..., 6:]], -1))


def test_an_empty_slice_read_by_other_ops_is_an_empty_output(tmp_path):
    model = _model(8, 8)
    # The empty pass-through part is also an output: it is computed.
    model.graph.output.append(h.make_tensor_value_info("p", TP.FLOAT, [2, "s", 4, 0]))
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 8)).astype(np.float32)
    y, p = m(x)
    np.testing.assert_array_equal(y, x * 2)
    assert p.shape == (2, 3, 4, 0) and p.dtype == np.float32


def _graph_model(nodes, inputs, outputs, inits=()):
    graph = h.make_graph(nodes, "empty", inputs, outputs, list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


def _check_against_onnxruntime(model, path, feeds_list):
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    m = sits_mlir.compile(model, output=path).load()
    for feeds in feeds_list:
        want = session.run(None, feeds)
        got = m(**feeds)
        got = got if isinstance(got, (list, tuple)) else [got]
        for o, w, g in zip(model.graph.output, want, got):
            assert g.shape == w.shape, (o.name, feeds_shapes(feeds))
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=o.name)


def feeds_shapes(feeds):
    return {k: v.shape for k, v in feeds.items()}


# ONNX defines each one's value over an empty set but ReduceMean's.
REDUCTIONS = ["ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]


@pytest.mark.parametrize("op", REDUCTIONS)
def test_reduction_over_a_static_empty_axis_is_its_identity(op, tmp_path):
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    model = _graph_model([h.make_node(op, ["x", "axes"], ["y"], keepdims=1)],
                         [h.make_tensor_value_info("x", TP.FLOAT, [2, 0, 4])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [2, 1, 4])], [axes])
    with np.errstate(invalid="ignore"):
        _check_against_onnxruntime(model, tmp_path / "m.sitsm",
                                   [{"x": np.zeros((2, 0, 4), np.float32)}])


def test_matmul_with_an_empty_inner_extent_is_zero(tmp_path):
    bias = numpy_helper.from_array(np.arange(3, dtype=np.float32), "bias")
    model = _graph_model([h.make_node("MatMul", ["a", "b"], ["c"]),
                          h.make_node("Add", ["c", "bias"], ["y"])],
                         [h.make_tensor_value_info("a", TP.FLOAT, [2, 0]),
                          h.make_tensor_value_info("b", TP.FLOAT, [0, 3])],
                         [h.make_tensor_value_info("y", TP.FLOAT, [2, 3])], [bias])
    _check_against_onnxruntime(model, tmp_path / "m.sitsm",
                               [{"a": np.zeros((2, 0), np.float32),
                                 "b": np.zeros((0, 3), np.float32)}])


def test_extents_of_zero_at_run_time(tmp_path):
    """Dynamic extents fed 0 (an empty batch, no indices, no rows): every op
    gives onnxruntime's empty or identity result, and non-empty calls of the
    same artifact still agree."""
    rng = np.random.default_rng(3)
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(np.ones(8, np.float32), "scale"),
             numpy_helper.from_array(np.zeros(8, np.float32), "shift"),
             numpy_helper.from_array(rng.standard_normal((10, 8)).astype(np.float32), "table")]
    nodes = [h.make_node("Conv", ["x", "w"], ["conv"], pads=[1, 1, 1, 1]),
             h.make_node("Softmax", ["conv"], ["softmax"], axis=1),
             h.make_node("MaxPool", ["x"], ["pool"], kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("LayerNormalization", ["t", "scale", "shift"], ["norm"], axis=-1),
             h.make_node("ReduceSum", ["t"], ["total"], keepdims=0),
             h.make_node("Gather", ["table", "idx"], ["rows"]),
             h.make_node("Transpose", ["rows"], ["cols"], perm=[1, 0]),
             h.make_node("Concat", ["t", "rows"], ["both"], axis=0),
             h.make_node("MatMul", ["t", "u"], ["prod"])]
    f = TP.FLOAT
    model = _graph_model(
        nodes,
        [h.make_tensor_value_info("x", f, ["n", 3, 8, 8]), h.make_tensor_value_info("t", f, ["m", 8]),
         h.make_tensor_value_info("idx", TP.INT64, ["k"]), h.make_tensor_value_info("u", f, [8, "j"])],
        [h.make_tensor_value_info("softmax", f, ["n", 8, 8, 8]),
         h.make_tensor_value_info("pool", f, ["n", 3, 4, 4]),
         h.make_tensor_value_info("norm", f, ["m", 8]), h.make_tensor_value_info("total", f, []),
         h.make_tensor_value_info("cols", f, [8, "k"]), h.make_tensor_value_info("both", f, ["mk", 8]),
         h.make_tensor_value_info("prod", f, ["m", "j"])], inits)

    def feeds(n, m, k, j):
        return {"x": rng.standard_normal((n, 3, 8, 8)).astype(np.float32),
                "t": rng.standard_normal((m, 8)).astype(np.float32),
                "idx": rng.integers(0, 10, k).astype(np.int64),
                "u": rng.standard_normal((8, j)).astype(np.float32)}
    _check_against_onnxruntime(model, tmp_path / "m.sitsm",
                               [feeds(2, 3, 4, 5), feeds(0, 0, 0, 0), feeds(0, 2, 0, 3),
                                feeds(1, 0, 3, 0)])


@pytest.mark.parametrize("options", [{}, {"precision": "int8"}, {"precision": "int4"},
                                     {"precision": "auto"}, {"prune": 0.5}],
                         ids=["fp32", "int8", "int4", "auto", "prune"])
@pytest.mark.parametrize("k, n", [(0, 64), (64, 0)], ids=["k0", "n0"])
def test_empty_weights_under_the_graph_passes(k, n, options, tmp_path):
    """Quantization and pruning leave a weight with no elements alone."""
    weight = numpy_helper.from_array(np.ones((k, n), np.float32), "w")
    model = _graph_model([h.make_node("MatMul", ["x", "w"], ["y"])],
                         [h.make_tensor_value_info("x", TP.FLOAT, ["b", k])],
                         [h.make_tensor_value_info("y", TP.FLOAT, ["b", n])], [weight])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm", **options).load()
    y = m(np.ones((3, k), np.float32))
    np.testing.assert_array_equal(y, np.zeros((3, n), np.float32))
