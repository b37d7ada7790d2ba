"""Ops over extents known only at run time, against onnxruntime: a Reshape
to a constant shape or a Flatten that ONNX's shapes cannot prove to be a
collapse or an expansion, a Gather along a dynamic axis (extent 0 included),
and Attention with 3-D inputs whose output ONNX infers with a 0 extent."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

import sits_mlir
from sits_mlir import runtime

ort = pytest.importorskip("onnxruntime")


def _compiled_and_reference(model, tmp_path, name="m"):
    onnx.checker.check_model(model)
    m = sits_mlir.compile(model, output=tmp_path / f"{name}.sitsm").load()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return m, session


def _agree(m, session, **feeds):
    want = session.run(None, feeds)
    got = m(**feeds)
    got = got if isinstance(got, (list, tuple)) else [got]
    for g, w in zip(got, want):
        assert g.shape == w.shape, (g.shape, w.shape)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _graph(nodes, inputs, outputs, initializer=(), opset=18):
    graph = h.make_graph(nodes, "g", inputs, outputs, initializer=list(initializer))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])


@pytest.mark.parametrize("shape, target", [
    (["n", 8], [4, -1]),          # [n, 8] -> [4, 2n]
    (["a", "b", 3, "d"], [0, 0, -1]),   # merges a static extent with a dynamic one
    (["a", "b", "c"], [0, -1, 2]),      # splits a dynamic extent
])
def test_reshape_to_a_constant_shape_over_dynamic_extents(shape, target, tmp_path):
    node = h.make_node("Reshape", ["x", "s"], ["y"])
    model = _graph([node], [h.make_tensor_value_info("x", TP.FLOAT, shape)],
                   [h.make_tensor_value_info("y", TP.FLOAT, [None] * len(target))],
                   [h.make_tensor("s", TP.INT64, [len(target)], target)])
    m, session = _compiled_and_reference(model, tmp_path)
    rng = np.random.default_rng(0)
    sizes = {"n": [2, 6], "a": [1, 2], "b": [3, 1], "c": [4, 8], "d": [5, 2]}
    for k in range(2):
        dims = [d if isinstance(d, int) else sizes[d][k] for d in shape]
        _agree(m, session, x=rng.standard_normal(dims, dtype=np.float32))
    if target == [0, -1, 2]:  # an odd count does not make pairs
        with pytest.raises(runtime.InputOutOfRangeError, match="Reshape"):
            m(x=np.zeros((1, 1, 3), np.float32))


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1])
def test_flatten_of_dynamic_extents(axis, tmp_path):
    node = h.make_node("Flatten", ["x"], ["y"], axis=axis)
    model = _graph([node], [h.make_tensor_value_info("x", TP.FLOAT, ["a", "b", "c"])],
                   [h.make_tensor_value_info("y", TP.FLOAT, [None, None])])
    m, session = _compiled_and_reference(model, tmp_path)
    rng = np.random.default_rng(1)
    for dims in [(2, 3, 4), (1, 5, 1), (3, 0, 2)]:
        _agree(m, session, x=rng.standard_normal(dims, dtype=np.float32))


def test_gather_along_a_dynamic_axis(tmp_path):
    node = h.make_node("Gather", ["x", "i"], ["y"], axis=1, name="gather")
    model = _graph([node], [h.make_tensor_value_info("x", TP.FLOAT, [2, "n", 3]),
                            h.make_tensor_value_info("i", TP.INT64, ["k"])],
                   [h.make_tensor_value_info("y", TP.FLOAT, [None] * 3)])
    m, session = _compiled_and_reference(model, tmp_path)
    rng = np.random.default_rng(2)
    for n, idx in [(5, [0, 4, -1, 2]), (1, [0, -1]), (3, []), (0, [])]:
        _agree(m, session, x=rng.standard_normal((2, n, 3), dtype=np.float32),
               i=np.array(idx, np.int64))
    # Nothing to read along an empty axis: an error, and no read.
    with pytest.raises(runtime.InputOutOfRangeError, match="Gather node 'gather'"):
        m(x=np.zeros((2, 0, 3), np.float32), i=np.array([0], np.int64))
    with pytest.raises(runtime.InputOutOfRangeError, match="Gather node 'gather'"):
        m(x=np.zeros((2, 4, 3), np.float32), i=np.array([4], np.int64))


def test_attention_with_3d_inputs_of_dynamic_extents(tmp_path):
    """ONNX infers Y's last extent as 0 here; it is q_num_heads * v_head_size."""
    node = h.make_node("Attention", ["q", "k", "v"], ["y"], q_num_heads=2, kv_num_heads=2)
    model = _graph([node], [h.make_tensor_value_info(n, TP.FLOAT, ["b", s, "e"])
                            for n, s in (("q", "s"), ("k", "t"), ("v", "t"))],
                   [h.make_tensor_value_info("y", TP.FLOAT, [None] * 3)], opset=23)
    m, session = _compiled_and_reference(model, tmp_path)
    rng = np.random.default_rng(3)
    for b, s, t in [(1, 3, 5), (2, 4, 2)]:
        _agree(m, session, q=rng.standard_normal((b, s, 8), dtype=np.float32),
               k=rng.standard_normal((b, t, 8), dtype=np.float32),
               v=rng.standard_normal((b, t, 8), dtype=np.float32))
