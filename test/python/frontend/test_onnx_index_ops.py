"""The index-driven ops (_ops_index.py) compiled for the CPU and run, next
to onnx.reference on cases the backend node tests leave out: NaN and ties,
integer types, constant axes, partial index shapes, scatters into values the
graph still uses, loss reductions."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

from sits_mlir.testing.onnx_backend import SitsBackend

RNG = np.random.default_rng(7)


def make(nodes, inputs, inits=None, opset=18, outputs=None):
    graph = h.make_graph(
        nodes, "test",
        [h.make_tensor_value_info(n, h.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in inputs.items()],
        [h.make_empty_tensor_value_info(o) for o in (outputs or [o for o in nodes[-1].output if o])],
        initializer=[numpy_helper.from_array(np.asarray(a), n) for n, a in (inits or {}).items()])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)
    return onnx.shape_inference.infer_shapes(model)


def check(model, inputs, rtol=1e-5, atol=1e-6):
    want = ReferenceEvaluator(model).run(None, inputs)
    got = SitsBackend.prepare(model).run([inputs[i.name] for i in model.graph.input
                                          if i.name in inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, g.dtype, w.shape, w.dtype)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    return got


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_nan_and_ties(op, last):
    x = np.array([[1, 3, 3, np.nan, 2, np.nan], [-np.inf, -np.inf, 0, 0, -1, 5],
                  [np.inf, 1, np.inf, 2, 2, -np.inf]], np.float32)
    node = h.make_node(op, ["x"], ["y"], axis=1, keepdims=0, select_last_index=last)
    check(make([node], {"x": x}), {"x": x})


@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float64])
def test_arg_types(dtype):
    x = RNG.integers(0, 4, (3, 4, 5)).astype(dtype)
    nodes = [h.make_node("ArgMax", ["x"], ["a"], axis=0, keepdims=1),
             h.make_node("ArgMin", ["x"], ["b"], axis=-1, select_last_index=1)]
    check(make(nodes, {"x": x}, outputs=["a", "b"]), {"x": x})


def test_hardmax_f64():
    x = RNG.integers(0, 3, (2, 3, 4)).astype(np.float64)
    check(make([h.make_node("Hardmax", ["x"], ["y"], axis=1)], {"x": x}), {"x": x})


@pytest.mark.parametrize("axis", [0, 1, 2])
def test_gather_elements(axis):
    x = RNG.standard_normal((4, 5, 6)).astype(np.float32)
    shape = list(x.shape)
    shape[axis] = 7
    idx = RNG.integers(-x.shape[axis], x.shape[axis], shape).astype(np.int32)
    node = h.make_node("GatherElements", ["x", "i"], ["y"], axis=axis)
    check(make([node], {"x": x, "i": idx}), {"x": x, "i": idx})


@pytest.mark.parametrize("op", ["CumSum", "CumProd"])
@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumulative_constant_axis(op, exclusive, reverse):
    x = RNG.integers(-3, 4, (2, 5, 3)).astype(np.int64)
    node = h.make_node(op, ["x", "axis"], ["y"], exclusive=exclusive, reverse=reverse)
    model = make([node], {"x": x}, {"axis": np.array(-2, np.int64)}, opset=26)
    check(model, {"x": x})


def test_scatter_elements_into_a_value_still_used():
    # The scatter must not clobber `a`, which the graph returns too.
    x = RNG.standard_normal((4, 3)).astype(np.float32)
    idx = np.array([[1, 0, 3], [3, 3, 0]], np.int64)
    upd = RNG.standard_normal((2, 3)).astype(np.float32)
    nodes = [h.make_node("Relu", ["x"], ["a"]),
             h.make_node("ScatterElements", ["a", "i", "u"], ["s"], axis=0, reduction="add"),
             h.make_node("Mul", ["a", "s"], ["y"])]
    check(make(nodes, {"x": x, "i": idx, "u": upd}), {"x": x, "i": idx, "u": upd})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_slices(reduction):
    x = RNG.integers(-5, 5, (4, 3, 2)).astype(np.int32)
    idx = np.array([[[1], [-1]], [[1], [0]]], np.int64)   # duplicates, negative
    upd = RNG.integers(-5, 5, (2, 2, 3, 2)).astype(np.int32)
    if reduction == "none":
        idx = np.array([[[1], [-1]], [[2], [0]]], np.int64)
    node = h.make_node("ScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    check(make([node], {"x": x, "i": idx, "u": upd}), {"x": x, "i": idx, "u": upd})


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
def test_losses(op, reduction, weighted):
    x = RNG.standard_normal((3, 4, 2, 5))
    if op == "NegativeLogLikelihoodLoss":
        x[0, 2, 1, 1] = -np.inf  # an ignored position must not turn into NaN
    t = RNG.integers(0, 4, (3, 2, 5)).astype(np.int32)
    t[0, 1, 1] = 2
    t[1, 0] = 2
    w = RNG.uniform(0.5, 2.0, 4)
    inputs, names = {"x": x, "t": t}, ["x", "t"]
    if weighted:
        inputs["w"], names = w, names + ["w"]
    outs = ["y", "lp"] if op == "SoftmaxCrossEntropyLoss" else ["y"]
    node = h.make_node(op, names, outs, reduction=reduction, ignore_index=2)
    check(make([node], inputs, outputs=outs), inputs, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("largest", [0, 1])
@pytest.mark.parametrize("axis", [0, -1])
def test_topk_nan_and_ties(largest, axis):
    x = np.array([[1, np.nan, 3, 3, -np.inf, np.nan, 0, -0.0],
                  [2, 2, 2, 2, 1, 1, np.inf, 5]], np.float32)
    x = x if axis == -1 else np.ascontiguousarray(x.T)
    k = np.array([2 if axis == 0 else 5], np.int64)
    node = h.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest)
    check(make([node], {"x": x}, {"k": k}, outputs=["v", "i"]), {"x": x})


@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_topk_ints(dtype):
    x = RNG.integers(0, 5, (3, 7, 2)).astype(dtype)
    node = h.make_node("TopK", ["x", "k"], ["v", "i"], axis=1)
    check(make([node], {"x": x}, {"k": np.array([7], np.int64)}, outputs=["v", "i"]), {"x": x})
