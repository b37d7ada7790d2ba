"""Pooling and normalization with dynamic extents: one artifact serves any
input size, the geometry (pads, ceil_mode, SAME_* padding, AveragePool
divisors, element counts) worked out at run time as onnxruntime does. An
input too small for the window, a channel count num_groups does not divide
and parameters of the wrong length fail the call (InputOutOfRangeError
naming the node) without reading outside the tensors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

import sits_mlir
from sits_mlir import runtime

ort = pytest.importorskip("onnxruntime")


def _compile(nodes, inputs, outputs, tmp_path, opset=22):
    graph = h.make_graph(nodes, "dyn", inputs, outputs)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return m, session


def _agree(m, session, rtol=1e-5, **feeds):
    want = session.run(None, feeds)
    got = m(**feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert a.shape == b.shape, (k, feeds["x"].shape, a.shape, b.shape)
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-5, err_msg=f"output {k}")


def _out(name, rank, dtype=TP.FLOAT):
    """An output whose extents the input decides."""
    return h.make_tensor_value_info(name, dtype, [None] * rank)


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _pools(rank):
    """MaxPool, AveragePool and LpPool nodes reading `x` over `rank`
    spatial axes: pads, count_include_pad, ceil_mode, strides, dilations,
    SAME_* padding (fewer at ranks 1 and 3, to compile fast)."""
    k, ones = [3] * rank, [1] * rank
    variants = [  # (attributes, AveragePool's count_include_pad values, LpPool)
        (dict(kernel_shape=k, pads=ones + [2] * rank, strides=[2] * rank), (0, 1), True),
        (dict(kernel_shape=k, pads=ones * 2, ceil_mode=1, strides=[2] * rank), (0, 1), False),
        (dict(kernel_shape=[2] * rank, ceil_mode=1, strides=[3] * rank, dilations=[2] * rank),
         (0,), False),
        # (onnxruntime leaves dilations out of SAME_* padding)
        (dict(kernel_shape=k, auto_pad="SAME_UPPER", strides=[2] * rank), (1,), True),
        (dict(kernel_shape=[2] * rank, auto_pad="SAME_LOWER"), (0,), False),
    ]
    if rank != 2:
        variants = [variants[1 if rank == 1 else 2]]
    nodes = []
    for i, (attrs, includes, lp) in enumerate(variants):
        nodes.append(h.make_node("MaxPool", ["x"], [f"max{i}"], **attrs))
        for inc in includes:
            nodes.append(h.make_node("AveragePool", ["x"], [f"avg{i}_{inc}"],
                                     count_include_pad=inc, **attrs))
        if lp:
            nodes.append(h.make_node("LpPool", ["x"], [f"lp{i}"], p=3, **attrs))
    return nodes


@pytest.mark.parametrize("rank", [1, 2, 3])
def test_pools_at_two_sizes(rank, tmp_path):
    nodes = _pools(rank) + [h.make_node("GlobalAveragePool", ["x"], ["gap"])]
    outs = [_out(n.output[0], 2 + rank) for n in nodes]
    dims = ["n", "c", "d1", "d2", "d3"][:2 + rank]
    m, session = _compile(nodes, [h.make_tensor_value_info("x", TP.FLOAT, dims)], outs,
                          tmp_path)
    for spatial in ([7, 9, 8][:rank], [6, 11, 5][:rank]):
        _agree(m, session, rtol=1e-4, x=_x([2, 3] + spatial))


def test_integer_max_pool(tmp_path):
    node = h.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], pads=[1, 0, 0, 1],
                       ceil_mode=1, strides=[2, 2])
    m, session = _compile([node], [h.make_tensor_value_info("x", TP.UINT8, ["n", "c", "h", "w"])],
                          [_out("y", 4, TP.UINT8)], tmp_path)
    rng = np.random.default_rng(2)
    for shape in ([1, 2, 5, 6], [2, 1, 4, 7]):
        _agree(m, session, x=rng.integers(0, 255, shape, dtype=np.uint8))


def test_input_smaller_than_the_window_fails(tmp_path):
    node = h.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], pads=[0, 0, 1, 0],
                       name="pool")
    m, session = _compile([node], [h.make_tensor_value_info("x", TP.FLOAT, ["n", "c", "h", "w"])],
                          [_out("y", 4)], tmp_path)
    _agree(m, session, x=_x([1, 2, 2, 3]))  # the end pad completes the window
    with pytest.raises(runtime.InputOutOfRangeError, match="pool.*smaller than the pooling"):
        m(x=_x([1, 2, 1, 3]))


@pytest.mark.parametrize("axis", [1, -1])
def test_layer_norm_statistics(axis, tmp_path):
    node = h.make_node("LayerNormalization", ["x", "s", "b"], ["y", "mean", "inv_std"],
                       axis=axis, epsilon=1e-3)
    dims = ["n", "t", "e"]
    norm = dims[axis:]
    m, session = _compile(
        [node], [h.make_tensor_value_info("x", TP.FLOAT, dims),
                 h.make_tensor_value_info("s", TP.FLOAT, norm),
                 h.make_tensor_value_info("b", TP.FLOAT, norm)],
        [_out(o, 3) for o in node.output], tmp_path)
    for shape in ([2, 3, 5], [1, 4, 7]):
        _agree(m, session, x=_x(shape), s=_x(shape[axis:], 1), b=_x(shape[axis:], 2))


def _channel_norm(tmp_path, op, **attrs):
    node = h.make_node(op, ["x", "s", "b"], ["y"], name="norm", **attrs)
    return _compile([node], [h.make_tensor_value_info("x", TP.FLOAT, ["n", "c", "h", "w"]),
                             # Symbols of their own: the runtime does not
                             # match their lengths with x's channels.
                             h.make_tensor_value_info("s", TP.FLOAT, ["cs"]),
                             h.make_tensor_value_info("b", TP.FLOAT, ["cb"])],
                    [_out("y", 4)], tmp_path)


@pytest.mark.parametrize("op, attrs", [("InstanceNormalization", {}),
                                       ("GroupNormalization", {"num_groups": 2})])
def test_channel_norms(op, attrs, tmp_path):
    m, session = _channel_norm(tmp_path, op, epsilon=1e-2, **attrs)
    for shape in ([2, 4, 3, 5], [1, 6, 4, 2]):
        _agree(m, session, rtol=1e-4, x=_x(shape), s=_x(shape[1], 1), b=_x(shape[1], 2))
    with pytest.raises(runtime.InputOutOfRangeError, match="norm.*input 1 does not have one"):
        m(x=_x([1, 4, 2, 2]), s=_x(3), b=_x(4))
    with pytest.raises(runtime.InputOutOfRangeError, match="norm.*input 2 does not have one"):
        m(x=_x([1, 4, 2, 2]), s=_x(4), b=_x(9))
    if op == "GroupNormalization":
        with pytest.raises(runtime.InputOutOfRangeError, match="num_groups does not divide"):
            m(x=_x([1, 5, 2, 2]), s=_x(5), b=_x(5))
