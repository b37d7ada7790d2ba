"""Output shapes that only running the model tells: the artifact's shape
function (@main_shapes), dynamic broadcasts, and outputs that are one value."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h, numpy_helper

import sits_mlir


def _model(nodes, inputs, outputs, inits=()):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, TP.FLOAT, s) for n, s in inputs],
                         [h.make_tensor_value_info(n, TP.FLOAT, s) for n, s in outputs],
                         list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


def test_broadcast_of_independent_dynamic_extents(tmp_path):
    """x[a, b] + y[c, d]: each output extent is whichever input extent is
    not 1, known only at run time; the weights buffer is passed to both
    entry points."""
    w = numpy_helper.from_array(np.arange(2048, dtype=np.float32).reshape(1, 2048), "w")
    model = _model([h.make_node("Add", ["x", "y"], ["s"]), h.make_node("Add", ["s", "w"], ["z"])],
                   [("x", ["a", "b"]), ("y", ["c", "d"])], [("z", ["p", "q"])], [w])
    art = sits_mlir.compile(model, output=tmp_path / "m.sitsm")
    entries = {e["name"]: e for e in art.manifest["entry_points"]}
    assert entries["main"]["shape_function"] == "main_shapes"
    assert [a["role"] for a in entries["main_shapes"]["args"]] == \
        ["weights", "input", "input", "output"]
    m = art.load()
    rng = np.random.default_rng(0)
    for xs, ys in [((3, 2048), (3, 2048)), ((1, 2048), (5, 2048)), ((4, 1), (4, 2048)), ((1, 1), (2, 2048))]:
        x, y = rng.random(xs, np.float32), rng.random(ys, np.float32)
        want = x + y + np.arange(2048, dtype=np.float32)
        assert m.entry("main").output_shapes(x, y) == [want.shape]
        np.testing.assert_allclose(m(x, y), want, rtol=1e-6)


def test_concatenated_extent(tmp_path):
    """Concat of two dynamic inputs: the output extent is a sum."""
    model = _model([h.make_node("Concat", ["x", "y"], ["z"], axis=0)],
                   [("x", ["a", 3]), ("y", ["b", 3])], [("z", ["c", 3])])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    for a, b in [(1, 1), (2, 5), (7, 3)]:
        x, y = np.ones((a, 3), np.float32), np.zeros((b, 3), np.float32)
        np.testing.assert_array_equal(m(x, y), np.concatenate([x, y]))


def test_models_with_named_or_static_outputs_have_no_shape_function(tmp_path):
    model = _model([h.make_node("Relu", ["x"], ["y"])], [("x", ["batch", 8])],
                   [("y", ["batch", 8])])
    art = sits_mlir.compile(model, output=tmp_path / "m.sitsm")
    assert [e["name"] for e in art.manifest["entry_points"]] == ["main"]
    assert "shape_function" not in art.manifest["entry_points"][0]
    np.testing.assert_array_equal(art.load()(-np.ones((3, 8), np.float32)), np.zeros((3, 8)))


@pytest.mark.parametrize("dims", [[4, 8], ["n", 8]])
def test_outputs_that_are_one_value(tmp_path, dims):
    """Two outputs computing the same thing (CSE makes them one value) and
    an output that is also returned under another name."""
    model = _model([h.make_node("Relu", ["x"], ["a"]), h.make_node("Relu", ["x"], ["b"]),
                    h.make_node("Identity", ["a"], ["c"])],
                   [("x", dims)], [("a", dims), ("b", dims), ("c", dims)])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    x = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    a, b, c = m(x)
    for out in (a, b, c):
        np.testing.assert_array_equal(out, np.maximum(x, 0))
    assert len({a.ctypes.data, b.ctypes.data, c.ctypes.data}) == 3
