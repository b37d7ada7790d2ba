"""Parameter inputs fed at run time: Reduce* axes, Squeeze/Unsqueeze axes,
a Reshape's shape and Trilu's k compile as graph inputs, and one artifact
serves any values of them, as onnxruntime does. Values ONNX makes an error
(an axis out of range, an axis named twice, a shape that does not fit)
fail the call with InputOutOfRangeError naming the node, and the code
never reads outside the input meanwhile."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

import sits_mlir
from sits_mlir import runtime

ort = pytest.importorskip("onnxruntime")


def _model(node, inputs, outputs):
    graph = h.make_graph([node], "params", inputs, outputs)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    onnx.checker.check_model(model)
    return model


def _out(rank):
    """An output whose extents the values decide."""
    return h.make_tensor_value_info("y", TP.FLOAT, [None] * rank)


def _compiled_and_reference(model, tmp_path, name="m"):
    m = sits_mlir.compile(model, output=tmp_path / f"{name}.sitsm").load()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return m, session


def _agree(m, session, **feeds):
    (want,) = session.run(None, feeds)
    got = m(**feeds)
    assert got.shape == want.shape, (feeds, got.shape, want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


REDUCTIONS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
              "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"]
AXES = [[1], [0, 2], [-1], [2, -3], [0, 1, 2]]


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("keepdims", [1, 0])
def test_reduce_with_run_time_axes(op, keepdims, tmp_path):
    """Each axes value of the list through one artifact (keepdims=0 needs
    their number fixed: two)."""
    count = 2 if not keepdims else None
    node = h.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    model = _model(node, [h.make_tensor_value_info("x", TP.FLOAT, [3, 4, 5]),
                          h.make_tensor_value_info("axes", TP.INT64, [count])],
                   [_out(3 if keepdims else 1)])
    m, session = _compiled_and_reference(model, tmp_path)
    x = np.random.default_rng(0).uniform(0.5, 2.0, (3, 4, 5)).astype(np.float32)
    for axes in AXES:
        if count is not None and len(axes) != count:
            continue
        _agree(m, session, x=x, axes=np.array(axes, np.int64))


@pytest.mark.parametrize("noop", [0, 1])
def test_reduce_with_no_run_time_axes(noop, tmp_path):
    """No axes reduce every axis, or none with noop_with_empty_axes (where
    even ReduceL2's square and root must not run)."""
    node = h.make_node("ReduceL2", ["x", "axes"], ["y"], noop_with_empty_axes=noop)
    model = _model(node, [h.make_tensor_value_info("x", TP.FLOAT, [3, 4]),
                          h.make_tensor_value_info("axes", TP.INT64, ["n"])],
                   [_out(2)])
    m, session = _compiled_and_reference(model, tmp_path)
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    for axes in ([], [0], [1, 0]):
        _agree(m, session, x=x, axes=np.array(axes, np.int64))


def test_bad_run_time_axes_fail_the_call(tmp_path):
    node = h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=0, name="total")
    model = _model(node, [h.make_tensor_value_info("x", TP.FLOAT, [3, 4, 5]),
                          h.make_tensor_value_info("axes", TP.INT64, [2])],
                   [_out(1)])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    x = np.ones((3, 4, 5), np.float32)
    with pytest.raises(runtime.InputOutOfRangeError, match="ReduceSum node 'total'"):
        m(x, np.array([0, 3], np.int64))
    with pytest.raises(runtime.InputOutOfRangeError, match="axes name an axis twice"):
        m(x, np.array([1, -2], np.int64))
    np.testing.assert_array_equal(m(x, np.array([0, 2], np.int64)), np.full(4, 15, np.float32))


def test_squeeze_and_unsqueeze_with_run_time_axes(tmp_path):
    squeeze = _model(h.make_node("Squeeze", ["x", "axes"], ["y"], name="squeeze"),
                     [h.make_tensor_value_info("x", TP.FLOAT, [1, 3, 1, 2]),
                      h.make_tensor_value_info("axes", TP.INT64, [1])],
                     [_out(3)])
    m, session = _compiled_and_reference(squeeze, tmp_path)
    x = np.arange(6, dtype=np.float32).reshape(1, 3, 1, 2)
    for axes in ([0], [2], [-2]):
        _agree(m, session, x=x, axes=np.array(axes, np.int64))
    with pytest.raises(runtime.InputOutOfRangeError, match="Squeeze node 'squeeze'"):
        m(x, np.array([1], np.int64))  # an extent of 3 cannot go

    unsqueeze = _model(h.make_node("Unsqueeze", ["x", "axes"], ["y"], name="unsqueeze"),
                       [h.make_tensor_value_info("x", TP.FLOAT, [3, 2]),
                        h.make_tensor_value_info("axes", TP.INT64, [2])],
                       [_out(4)])
    m, session = _compiled_and_reference(unsqueeze, tmp_path, "u")
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    for axes in ([0, 1], [0, 3], [-1, 1], [2, 3]):
        _agree(m, session, x=x, axes=np.array(axes, np.int64))
    for bad in ([4, 0], [1, 1]):
        with pytest.raises(runtime.InputOutOfRangeError, match="Unsqueeze node 'unsqueeze'"):
            m(x, np.array(bad, np.int64))


@pytest.mark.parametrize("allowzero", [0, 1])
def test_reshape_to_a_run_time_shape(allowzero, tmp_path):
    node = h.make_node("Reshape", ["x", "shape"], ["y"], allowzero=allowzero, name="reshape")
    model = _model(node, [h.make_tensor_value_info("x", TP.FLOAT, ["a", 3, 4]),
                          h.make_tensor_value_info("shape", TP.INT64, [3])],
                   [_out(3)])
    m, session = _compiled_and_reference(model, tmp_path)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    shapes = [[4, 2, 3], [2, -1, 2], [-1, 1, 4], [24, 1, 1]]
    shapes += [[0, 3, 4], [0, -1, 1]] if not allowzero else []
    for shape in shapes:
        _agree(m, session, x=x, shape=np.array(shape, np.int64))
    for bad in ([5, 5, 1], [-1, -1, 24], [2, -2, -6], [48, 1, 1]):
        with pytest.raises(runtime.InputOutOfRangeError, match="Reshape node 'reshape'"):
            m(x, np.array(bad, np.int64))


def test_trilu_with_a_run_time_k(tmp_path):
    for upper in (0, 1):
        node = h.make_node("Trilu", ["x", "k"], ["y"], upper=upper)
        model = _model(node, [h.make_tensor_value_info("x", TP.FLOAT, [4, 5]),
                              h.make_tensor_value_info("k", TP.INT64, [])],
                       [h.make_tensor_value_info("y", TP.FLOAT, [4, 5])])
        m, session = _compiled_and_reference(model, tmp_path, f"upper{upper}")
        x = np.arange(20, dtype=np.float32).reshape(4, 5)
        for k in (-6, -1, 0, 2, 7):
            _agree(m, session, x=x, k=np.array(k, np.int64))


def test_the_reference_interpreter_runs_them():
    """The frontend's oracle follows the branches and loops run-time
    parameters compile to."""
    from sits_mlir.frontend.onnx import import_model
    from sits_mlir.testing.reference import evaluate

    node = h.make_node("ReduceLogSumExp", ["x", "axes"], ["y"], keepdims=0)
    model = _model(node, [h.make_tensor_value_info("x", TP.FLOAT, [3, 4, 5]),
                          h.make_tensor_value_info("axes", TP.INT64, [2])], [_out(1)])
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    imported = import_model(model)
    x = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    for axes in ([0, 2], [-1, 1]):
        feeds = {"x": x, "axes": np.array(axes, np.int64)}
        (want,) = session.run(None, feeds)
        got = evaluate(imported, feeds)[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_split_with_run_time_lengths(tmp_path):
    node = h.make_node("Split", ["x", "split"], ["a", "b", "c"], axis=1, name="split")
    model = h.make_model(h.make_graph(
        [node], "params", [h.make_tensor_value_info("x", TP.FLOAT, [2, 7]),
                           h.make_tensor_value_info("split", TP.INT64, [3])],
        [h.make_tensor_value_info(n, TP.FLOAT, [2, None]) for n in "abc"]),
        opset_imports=[h.make_opsetid("", 18)])
    m, session = _compiled_and_reference(model, tmp_path)
    x = np.arange(14, dtype=np.float32).reshape(2, 7)
    for lengths in ([2, 3, 2], [0, 7, 0], [7, 0, 0], [1, 1, 5]):
        feeds = {"x": x, "split": np.array(lengths, np.int64)}
        for want, got in zip(session.run(None, feeds), m(**feeds)):
            np.testing.assert_array_equal(got, want)
    for bad in ([2, 2, 2], [3, 3, 3], [-1, 4, 4]):
        with pytest.raises(runtime.InputOutOfRangeError, match="Split node 'split'"):
            m(x, np.array(bad, np.int64))


@pytest.mark.parametrize("opset", [13, 18])
def test_split_of_a_dynamic_extent_into_parts(opset, tmp_path):
    """Equal parts of an extent only known at run time (opset 18's
    num_outputs: the last part takes what is left)."""
    attrs = {"axis": 0} if opset == 13 else {"axis": 0, "num_outputs": 3}
    node = h.make_node("Split", ["x"], ["a", "b", "c"], name="parts", **attrs)
    model = h.make_model(h.make_graph(
        [node], "params", [h.make_tensor_value_info("x", TP.FLOAT, ["n", 2])],
        [h.make_tensor_value_info(n, TP.FLOAT, [None, 2]) for n in "abc"]),
        opset_imports=[h.make_opsetid("", opset)])
    m, session = _compiled_and_reference(model, tmp_path)
    for n in ((3, 6, 9) if opset == 13 else (3, 7, 8)):
        x = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
        for want, got in zip(session.run(None, {"x": x}), m(x)):
            np.testing.assert_array_equal(got, want)
    if opset == 13:
        with pytest.raises(runtime.InputOutOfRangeError, match="Split node 'parts'"):
            m(np.zeros((4, 2), np.float32))


def test_expand_to_a_run_time_shape(tmp_path):
    """NumPy broadcasting both ways, the shape aligned to the right; a shape
    that does not broadcast fails the call."""
    node = h.make_node("Expand", ["x", "shape"], ["y"], name="expand")
    model = _model(node, [h.make_tensor_value_info("x", TP.FLOAT, [3, 1]),
                          h.make_tensor_value_info("shape", TP.INT64, ["n"])], [_out(3)])
    m, session = _compiled_and_reference(model, tmp_path)
    x = np.arange(3, dtype=np.float32).reshape(3, 1)
    for shape in ([2, 3, 4], [2, 1, 1], [1, 3, 5], [3, 1, 1], [2, 1, 6]):
        _agree(m, session, x=x, shape=np.array(shape, np.int64))
    for bad in ([2, 4, 1], [1, -1, 2], [3, 2]):
        with pytest.raises(runtime.InputOutOfRangeError, match="Expand node 'expand'"):
            m(x, np.array(bad, np.int64))


@pytest.mark.parametrize("count", [3, None])
def test_slice_with_run_time_bounds_axes_and_steps(count, tmp_path):
    """Starts, ends, axes and steps as graph inputs, their length fixed or
    itself known only at run time: negative bounds and steps, bounds past
    the ends, and axes in any order through one artifact."""
    node = h.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"], name="slice")
    params = [h.make_tensor_value_info(n, TP.INT64, [count])
              for n in ("starts", "ends", "axes", "steps")]
    model = _model(node, [h.make_tensor_value_info("x", TP.FLOAT, [6, 7, 8])] + params, [_out(3)])
    m, session = _compiled_and_reference(model, tmp_path)
    x = np.random.default_rng(0).standard_normal((6, 7, 8), dtype=np.float32)
    cases = [([0, 1, 2], [6, 6, 8], [0, 1, 2], [1, 2, 3]),
             ([-1, 100, -2], [-100, -100, 0], [2, 0, 1], [-1, -2, -3]),
             ([5, -3, 0], [1, 1000, 8], [-3, -1, 1], [-2, 1, 4]),
             ([2, 9, 0], [2, 10, 3], [0, 1, 2], [1, 1, 1])]  # empty slices
    if count is None:
        cases.append(([1], [5], [1], [2]))
    for starts, ends, axes, steps in cases:
        _agree(m, session, x=x, **{k: np.array(v, np.int64) for k, v in
                                   zip(("starts", "ends", "axes", "steps"),
                                       (starts, ends, axes, steps))})
    bad = [([0, 0, 0], [1, 1, 1], [0, 1, 1], [1, 1, 1]),  # an axis twice
           ([0, 0, 0], [1, 1, 1], [0, 1, 3], [1, 1, 1]),  # out of range
           ([0, 0, 0], [1, 1, 1], [0, 1, 2], [1, 0, 1])]  # a step of 0
    for starts, ends, axes, steps in bad:
        with pytest.raises(runtime.InputOutOfRangeError, match="Slice node 'slice'"):
            m(x=x, starts=np.array(starts, np.int64), ends=np.array(ends, np.int64),
              axes=np.array(axes, np.int64), steps=np.array(steps, np.int64))
    _agree(m, session, x=x, starts=np.array([1, 1, 1], np.int64),
           ends=np.array([3, 3, 3], np.int64), axes=np.array([0, 1, 2], np.int64),
           steps=np.array([1, 1, 1], np.int64))


def test_slice_along_dynamic_extents_with_constant_bounds(tmp_path):
    """Constant bounds over extents known only at run time (x[1:-1, ::-2]).
    (Extents below 2 along axis 0 are left out: onnxruntime's symbolic
    inference gives the result's extent as `n - 2`, which the runtime then
    checks.)"""
    node = h.make_node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])
    consts = [h.make_tensor(n, TP.INT64, [2], v) for n, v in
              (("starts", [1, -1]), ("ends", [-1, -1 << 62]), ("axes", [0, 1]), ("steps", [1, -2]))]
    graph = h.make_graph([node], "g", [h.make_tensor_value_info("x", TP.FLOAT, ["n", "m"])],
                         [_out(2)], initializer=consts)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 18)])
    m, session = _compiled_and_reference(model, tmp_path)
    for shape in [(5, 9), (2, 1), (4, 1), (3, 0)]:
        _agree(m, session, x=np.arange(np.prod(shape), dtype=np.float32).reshape(shape))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_with_run_time_pads_value_and_axes(mode, tmp_path):
    """Pads (negative ones crop), the constant value and the axes as graph
    inputs of dynamic length, over dynamic extents, in every mode."""
    inputs = ["x", "pads", "value", "axes"] if mode == "constant" else ["x", "pads", "", "axes"]
    node = h.make_node("Pad", inputs, ["y"], mode=mode, name="pad")
    graph_inputs = [h.make_tensor_value_info("x", TP.FLOAT, ["a", "b", "c"]),
                    h.make_tensor_value_info("pads", TP.INT64, [None]),
                    h.make_tensor_value_info("axes", TP.INT64, [None])]
    if mode == "constant":
        graph_inputs.append(h.make_tensor_value_info("value", TP.FLOAT, []))
    model = _model(node, graph_inputs, [_out(3)])
    m, session = _compiled_and_reference(model, tmp_path)
    rng = np.random.default_rng(4)
    cases = [((3, 4, 5), [1, 2, 2, 0], [0, 2]), ((2, 3, 4), [0, 1, 2, 1, 0, 3], [0, 1, 2]),
             ((4, 5, 6), [2, 3], [-1]), ((3, 1, 2), [0, 0], [1])]
    if mode == "constant":  # crops; an empty input pads to the value alone
        cases += [((4, 5, 6), [-1, 2, 0, -2], [1, 2]), ((0, 2, 3), [1, 1], [0])]
    for shape, pads, axes in cases:
        feeds = dict(x=rng.standard_normal(shape, dtype=np.float32),
                     pads=np.array(pads, np.int64), axes=np.array(axes, np.int64))
        if mode == "constant":
            feeds["value"] = np.array(2.5, np.float32)
        _agree(m, session, **feeds)
    bad = dict(x=np.ones((2, 3, 4), np.float32), pads=np.array([1, 1, 1], np.int64),
               axes=np.array([0, 1], np.int64))  # three pads for two axes
    if mode == "constant":
        bad["value"] = np.array(0, np.float32)
    with pytest.raises(runtime.InputOutOfRangeError, match="Pad node 'pad'"):
        m(**bad)
    if mode != "constant":  # nothing to repeat along an empty extent
        with pytest.raises(runtime.InputOutOfRangeError, match="Pad node 'pad'"):
            m(x=np.ones((0, 3, 4), np.float32), pads=np.array([1, 1], np.int64),
              axes=np.array([0], np.int64))
