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


def test_extents_of_input_extents_need_no_shape_function(tmp_path):
    """A KV-cache-like output (past + new along an axis, through a layer
    with weights): the importer names its extent `a + b`, which the runtime
    evaluates from the input extents: no shape function, on the CPU as on
    GPU targets, and an output buffer of another extent is refused."""
    from sits_mlir.runtime import SignatureError

    w = numpy_helper.from_array(np.linspace(-1, 1, 8 * 16, dtype=np.float32).reshape(8, 16), "w")
    model = _model([h.make_node("Concat", ["past", "new"], ["cat"], axis=0),
                    h.make_node("MatMul", ["cat", "w"], ["mm"]),
                    h.make_node("Relu", ["mm"], ["y"])],
                   [("past", ["a", 8]), ("new", ["b", 8])], [("y", ["n", 16])], [w])
    art = sits_mlir.compile(model, output=tmp_path / "m.sitsm")
    assert [e["name"] for e in art.manifest["entry_points"]] == ["main"]
    assert art.manifest["entry_points"][0]["args"][-1]["dim_names"] == ["a + b", None]
    m = art.load()
    for a, b in [(0, 1), (2, 5)]:
        past, new = np.full((a, 8), 0.5, np.float32), np.ones((b, 8), np.float32)
        assert m.entry("main").output_shapes(past, new) == [(a + b, 16)]
        ref = np.maximum(np.concatenate([past, new]) @ numpy_helper.to_array(w), 0)
        np.testing.assert_allclose(m(past, new), ref, rtol=1e-6)
    with pytest.raises(SignatureError, match=r"\('a \+ b'\) must be 7"):
        m.entry("main").run_into([np.empty((8, 16), np.float32)],
                                 np.ones((2, 8), np.float32), np.ones((5, 8), np.float32))


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


def _scalar_model(op, names, dtype, out_dtype, **attrs):
    graph = h.make_graph([h.make_node(op, names, ["y"], **attrs)], "g",
                         [h.make_tensor_value_info(n, dtype, []) for n in names],
                         [h.make_tensor_value_info("y", out_dtype, ["n"])])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("dtype,args", [(TP.FLOAT, (0.5, 3.2, 0.7)), (TP.INT32, (10, -4, -3)),
                                        (TP.INT64, (2, 2, 1))])
def test_range_of_run_time_values(dtype, args, tmp_path):
    """Range's length follows its inputs' values: the shape function reads
    them (an empty result included)."""
    from onnx.reference import ReferenceEvaluator

    model = _scalar_model("Range", ["s", "l", "d"], dtype, dtype)
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    np_type = h.tensor_dtype_to_np_dtype(dtype)
    feeds = [np.array(v, np_type) for v in args]
    want = ReferenceEvaluator(model).run(None, dict(zip("sld", feeds)))[0]
    got = m(*feeds)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-6)


@pytest.mark.parametrize("op", ["HannWindow", "HammingWindow", "BlackmanWindow"])
@pytest.mark.parametrize("periodic", [0, 1])
def test_windows(op, periodic, tmp_path):
    from onnx.reference import ReferenceEvaluator

    model = _scalar_model(op, ["size"], TP.INT64, TP.FLOAT, periodic=periodic)
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    for size in (1, 2, 10):
        want = ReferenceEvaluator(model).run(None, {"size": np.array(size, np.int64)})[0]
        np.testing.assert_allclose(m(np.array(size, np.int64)), want, rtol=1e-6, atol=1e-7)


def test_matmul_broadcasts_dynamic_batch_extents(tmp_path):
    """[a, 1, m, k] @ [b, n, k, p]: batch extents of 1 broadcast at run time."""
    model = _model([h.make_node("MatMul", ["x", "y"], ["z"])],
                   [("x", ["a", "c", 3, 4]), ("y", ["b", "d", 4, 2])], [("z", ["e", "f", 3, 2])])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    rng = np.random.default_rng(2)
    for xs, ys in [((3, 1), (3, 2)), ((1, 2), (3, 2)), ((2, 2), (2, 2))]:
        x, y = rng.random(xs + (3, 4), np.float32), rng.random(ys + (4, 2), np.float32)
        np.testing.assert_allclose(m(x, y), x @ y, rtol=1e-5)


def test_matmuls_over_several_dynamic_leading_extents(tmp_path):
    """x[b, s, 64] @ w[64, 96] (a decoder projection: batch and sequence
    both dynamic) runs as one matmul over b * s rows, and x @ y with two
    dynamic batch extents on both sides as one batch; both match NumPy at
    every shape, extents of 1 included."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((64, 96)).astype(np.float32), "w")
    model = _model([h.make_node("MatMul", ["x", "w"], ["p"]),
                    h.make_node("MatMul", ["a", "c"], ["q"])],
                   [("x", ["b", "s", 64]), ("a", ["i", "j", 4, 8]), ("c", ["i", "j", 8, 5])],
                   [("p", ["b", "s", 96]), ("q", ["i", "j", 4, 5])], [w])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    weights = numpy_helper.to_array(w)
    for (b, s), (i, j) in [((1, 1), (1, 1)), ((8, 1), (2, 3)), ((3, 17), (5, 1)), ((1, 40), (3, 2))]:
        x = rng.standard_normal((b, s, 64)).astype(np.float32)
        a = rng.standard_normal((i, j, 4, 8)).astype(np.float32)
        c = rng.standard_normal((i, j, 8, 5)).astype(np.float32)
        p, q = m(x, a, c)
        np.testing.assert_allclose(p, x @ weights, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(q, a @ c, rtol=1e-5, atol=1e-5)


def test_shape_function_extents_no_buffer_can_have_are_refused(tmp_path):
    """Extents the data makes impossible (a Range of 2^45 elements, a
    window of negative size) are a SignatureError before any allocation,
    not a MemoryError or a numpy error."""
    from sits_mlir.runtime import SignatureError

    m = sits_mlir.compile(_scalar_model("Range", ["s", "l", "d"], TP.INT64, TP.INT64),
                          output=tmp_path / "r.sitsm").load()
    with pytest.raises(SignatureError, match=r"give output 'y' .* the shape \[35184372088832\]"):
        m(np.array(0, np.int64), np.array(2**45, np.int64), np.array(1, np.int64))
    assert m(np.array(0, np.int64), np.array(3, np.int64), np.array(1, np.int64)).tolist() == \
        [0, 1, 2]
    w = sits_mlir.compile(_scalar_model("HannWindow", ["size"], TP.INT64, TP.FLOAT),
                          output=tmp_path / "w.sitsm").load()
    with pytest.raises(SignatureError, match=r"the shape \[-5\], which no buffer can have"):
        w(np.array(-5, np.int64))

