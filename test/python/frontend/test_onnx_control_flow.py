"""Control flow with subgraph bodies: Scan (an scf.for carrying the states,
slicing the scan inputs and filling the scan outputs, either direction and
any axis), If (an scf.if whose branches give different shapes) and Loop (an
scf.while on a trip count and a condition). Each model compiles once and
runs on two sets of inputs, compared with onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

import sits_mlir

ort = pytest.importorskip("onnxruntime")

F = TP.FLOAT


def _model(nodes, inputs, outputs, opset=18):
    graph = h.make_graph(nodes, "control", inputs, outputs)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model


def _agree(model, tmp_path, *feed_sets):
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for feeds in feed_sets:
        want = session.run(None, feeds)
        got = m(**feeds)
        got = list(got) if isinstance(got, (tuple, list)) else [got]
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert g.shape == w.shape, (g.shape, w.shape)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def _scan_model():
    """States s [4] and t [4]; scan inputs x [T, 4] (axis 0, forward) and
    y [4, T] (axis 1, reversed); scan outputs u (axis 0, forward) and v
    (axis 1, reversed)."""
    body = h.make_graph(
        [h.make_node("Add", ["s_in", "x_t"], ["s_out"]),
         h.make_node("Mul", ["t_in", "half"], ["t_half"]),
         h.make_node("Add", ["t_half", "y_t"], ["t_out"]),
         h.make_node("Mul", ["s_out", "w"], ["u_t"]),
         h.make_node("Sub", ["t_out", "x_t"], ["v_t"])],
        "step",
        [h.make_tensor_value_info(n, F, [4]) for n in ("s_in", "t_in", "x_t", "y_t")],
        [h.make_tensor_value_info(n, F, [4]) for n in ("s_out", "t_out", "u_t", "v_t")])
    node = h.make_node("Scan", ["s0", "t0", "x", "y"], ["s", "t", "u", "v"], body=body,
                       num_scan_inputs=2, scan_input_axes=[0, 1], scan_input_directions=[0, 1],
                       scan_output_axes=[0, -1], scan_output_directions=[0, 1])
    half = h.make_node("Constant", [], ["half"], value=h.make_tensor("hv", F, [], [0.5]))
    return _model(
        [half, node],
        [h.make_tensor_value_info("s0", F, [4]), h.make_tensor_value_info("t0", F, [4]),
         h.make_tensor_value_info("x", F, ["T", 4]), h.make_tensor_value_info("y", F, [4, "T"]),
         h.make_tensor_value_info("w", F, [4])],
        [h.make_tensor_value_info("s", F, [4]), h.make_tensor_value_info("t", F, [4]),
         h.make_tensor_value_info("u", F, ["T", 4]), h.make_tensor_value_info("v", F, [4, "T"])])


def test_scan_states_and_outputs_both_directions(tmp_path):
    rng = np.random.default_rng(0)

    def feeds(steps):
        return {"s0": rng.standard_normal(4).astype(np.float32),
                "t0": rng.standard_normal(4).astype(np.float32),
                "x": rng.standard_normal((steps, 4)).astype(np.float32),
                "y": rng.standard_normal((4, steps)).astype(np.float32),
                "w": rng.standard_normal(4).astype(np.float32)}
    _agree(_scan_model(), tmp_path, feeds(3), feeds(6))


def test_scan_static_length(tmp_path):
    """The scan length known at compile time, a matrix state."""
    body = h.make_graph(
        [h.make_node("MatMul", ["acc_in", "m_t"], ["acc_out"]),
         h.make_node("ReduceSum", ["acc_out"], ["r_t"], keepdims=0)],
        "step", [h.make_tensor_value_info("acc_in", F, [3, 3]),
                 h.make_tensor_value_info("m_t", F, [3, 3])],
        [h.make_tensor_value_info("acc_out", F, [3, 3]), h.make_tensor_value_info("r_t", F, [])])
    node = h.make_node("Scan", ["a0", "ms"], ["a", "r"], body=body, num_scan_inputs=1)
    model = _model([node], [h.make_tensor_value_info("a0", F, [3, 3]),
                            h.make_tensor_value_info("ms", F, [5, 3, 3])],
                   [h.make_tensor_value_info("a", F, [3, 3]),
                    h.make_tensor_value_info("r", F, [5])])
    rng = np.random.default_rng(1)
    sets = [{"a0": np.eye(3, dtype=np.float32),
             "ms": (0.5 * rng.standard_normal((5, 3, 3))).astype(np.float32)} for _ in range(2)]
    _agree(model, tmp_path, *sets)


def test_if_branches_of_different_shapes(tmp_path):
    then = h.make_graph([h.make_node("Concat", ["x", "x"], ["a"], axis=0)], "then", [],
                        [h.make_tensor_value_info("a", F, None)])
    other = h.make_graph([h.make_node("Mul", ["x", "x"], ["b"])], "else", [],
                         [h.make_tensor_value_info("b", F, None)])
    node = h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    model = _model([node], [h.make_tensor_value_info("c", TP.BOOL, []),
                            h.make_tensor_value_info("x", F, [3, 2])],
                   [h.make_tensor_value_info("y", F, [None, 2])])
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    _agree(model, tmp_path, {"c": np.array(True), "x": x}, {"c": np.array(False), "x": x + 1})


def test_loop_trip_count_and_condition(tmp_path):
    """y += x while sum(y) < limit, at most M times; each y is a scan output."""
    body = h.make_graph(
        [h.make_node("Add", ["y_in", "x"], ["y_out"]),
         h.make_node("ReduceSum", ["y_out"], ["total"], keepdims=0),
         h.make_node("Less", ["total", "limit"], ["go"]),
         h.make_node("Identity", ["y_out"], ["y_scan"])],
        "body", [h.make_tensor_value_info("i", TP.INT64, []),
                 h.make_tensor_value_info("c_in", TP.BOOL, []),
                 h.make_tensor_value_info("y_in", F, [3])],
        [h.make_tensor_value_info("go", TP.BOOL, []), h.make_tensor_value_info("y_out", F, [3]),
         h.make_tensor_value_info("y_scan", F, [3])])
    node = h.make_node("Loop", ["M", "c", "y0"], ["y", "ys"], body=body)
    model = _model([node], [h.make_tensor_value_info("M", TP.INT64, []),
                            h.make_tensor_value_info("c", TP.BOOL, []),
                            h.make_tensor_value_info("y0", F, [3]),
                            h.make_tensor_value_info("x", F, [3]),
                            h.make_tensor_value_info("limit", F, [])],
                   [h.make_tensor_value_info("y", F, [3]),
                    h.make_tensor_value_info("ys", F, [None, 3])])
    y0, x = np.zeros(3, np.float32), np.array([1, 2, 3], np.float32)

    def feeds(m, limit, c=True):
        return {"M": np.array(m, np.int64), "c": np.array(c), "y0": y0, "x": x,
                "limit": np.array(limit, np.float32)}
    # Stopped by the condition, by the trip count, and not entered.
    _agree(model, tmp_path, feeds(10, 20.0), feeds(3, 100.0), feeds(5, 1.0, c=False))


def test_loop_iteration_number(tmp_path):
    """A Loop with a trip count only, reading its iteration number."""
    body = h.make_graph(
        [h.make_node("Cast", ["i"], ["fi"], to=F),
         h.make_node("Mul", ["fi", "x"], ["ix"]),
         h.make_node("Add", ["acc_in", "ix"], ["acc_out"]),
         h.make_node("Identity", ["c_in"], ["c_out"])],
        "body", [h.make_tensor_value_info("i", TP.INT64, []),
                 h.make_tensor_value_info("c_in", TP.BOOL, []),
                 h.make_tensor_value_info("acc_in", F, [2, 2])],
        [h.make_tensor_value_info("c_out", TP.BOOL, []),
         h.make_tensor_value_info("acc_out", F, [2, 2])])
    node = h.make_node("Loop", ["M", "", "a0"], ["a"], body=body)
    model = _model([node], [h.make_tensor_value_info("M", TP.INT64, []),
                            h.make_tensor_value_info("a0", F, [2, 2]),
                            h.make_tensor_value_info("x", F, [2, 2])],
                   [h.make_tensor_value_info("a", F, [2, 2])])
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    _agree(model, tmp_path, {"M": np.array(4, np.int64), "a0": x, "x": x},
           {"M": np.array(0, np.int64), "a0": x + 1, "x": x})
