"""Index ops with indices out of range: ONNX makes them an error. The code
reads and writes only inside the tensor (indices are clamped) and reports
through the artifact's status argument, and the runtime fails the call with
InputOutOfRangeError naming the node; constant indices are checked at
compile time."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h, numpy_helper

import sits_mlir
from sits_mlir import runtime

BAD = [10, -11, 10**6, 2**40, -2**40, 2**63 - 1, -2**63]


def _model(nodes, inputs, outputs, inits=()):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                         list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def gather(tmp_path_factory):
    """A Gather from a 10-row table (an initializer) at dynamic indices."""
    table = numpy_helper.from_array(np.arange(40, dtype=np.float32).reshape(10, 4), "table")
    model = _model([h.make_node("Gather", ["table", "ids"], ["y"], name="embed")],
                   [("ids", TP.INT64, ["k"])], [("y", TP.FLOAT, ["k", 4])], [table])
    art = sits_mlir.compile(model, output=tmp_path_factory.mktemp("g") / "gather.sitsm")
    return art


def test_status_argument_in_the_manifest(gather):
    args = gather.manifest["entry_points"][0]["args"]
    assert args[-1] == {"role": "status", "name": "status", "dtype": "i32", "shape": [],
                        "messages": ["Gather node 'embed': an index of 'ids' (into axis 0 of "
                                     "'table') is out of range"]}
    m = gather.load()
    assert [o.name for o in m.outputs] == ["y"], "the status is not an output"


def test_in_range_indices_count_from_the_end(gather):
    m = gather.load()
    table = np.arange(40, dtype=np.float32).reshape(10, 4)
    ids = np.array([0, 9, -1, -10, 3], np.int64)
    np.testing.assert_array_equal(m(ids), table[ids])


@pytest.mark.parametrize("bad", BAD)
def test_out_of_range_gather_index_is_an_error(gather, bad):
    m = gather.load()
    with pytest.raises(runtime.InputOutOfRangeError, match="Gather node 'embed'") as e:
        m(np.array([1, bad, 2], np.int64))
    assert isinstance(e.value, IndexError) and e.value.subject == "main"
    # The model is intact after the refused call.
    np.testing.assert_array_equal(m(np.array([2], np.int64)), [[8, 9, 10, 11]])


def test_int32_indices_into_a_table_input(tmp_path):
    model = _model([h.make_node("Gather", ["table", "ids"], ["y"], name="g")],
                   [("table", TP.FLOAT, [5, "n"]), ("ids", TP.INT32, [2])],
                   [("y", TP.FLOAT, [2, "n"])])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    table = np.arange(15, dtype=np.float32).reshape(5, 3)
    np.testing.assert_array_equal(m(table, np.array([4, -5], np.int32)), table[[4, -5]])
    for bad in (5, -6, 2**31 - 1, -2**31):
        with pytest.raises(runtime.InputOutOfRangeError, match="axis 0 of 'table'"):
            m(table, np.array([0, bad], np.int32))


def test_constant_indices_out_of_range_are_a_compile_error():
    table = numpy_helper.from_array(np.zeros((10, 4), np.float32), "table")
    ids = numpy_helper.from_array(np.array([1, 10], np.int64), "ids")
    model = _model([h.make_node("Gather", ["table", "ids"], ["y"], name="g")],
                   [("x", TP.FLOAT, [1])], [("y", TP.FLOAT, [2, 4])], [table, ids])
    with pytest.raises(sits_mlir.CompileError, match="Gather node 'g'.*out of range.*n = 10"):
        sits_mlir.compile(model)


def test_gather_elements_and_scatters_report_their_node(tmp_path):
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    nodes = [h.make_node("GatherElements", ["x", "ge"], ["a"], axis=1, name="ge"),
             h.make_node("ScatterElements", ["x", "se", "u"], ["b"], axis=0, name="se"),
             h.make_node("ScatterND", ["x", "nd", "v"], ["c"], name="nd")]
    model = _model(nodes, [("x", TP.FLOAT, [3, 4]), ("ge", TP.INT64, [3, 2]),
                           ("se", TP.INT64, [1, 4]), ("u", TP.FLOAT, [1, 4]),
                           ("nd", TP.INT64, [2, 2]), ("v", TP.FLOAT, [2])],
                   [("a", TP.FLOAT, [3, 2]), ("b", TP.FLOAT, [3, 4]), ("c", TP.FLOAT, [3, 4])])
    art = sits_mlir.compile(model, output=tmp_path / "m.sitsm")
    assert len(art.manifest["entry_points"][0]["args"][-1]["messages"]) == 3
    m = art.load()
    ok = dict(ge=np.array([[0, -1]] * 3), se=np.array([[2, -3, 0, 1]]),
              nd=np.array([[2, 3], [-3, -4]]))
    u, v = np.ones((1, 4), np.float32), np.array([7, 8], np.float32)
    a, b, c = m(data, ok["ge"], ok["se"], u, ok["nd"], v)
    np.testing.assert_array_equal(a, np.take_along_axis(data, ok["ge"] % 4, 1))
    want_b = data.copy()
    want_b[[2, 0, 0, 1], [0, 1, 2, 3]] = 1
    np.testing.assert_array_equal(b, want_b)
    want_c = data.copy()
    want_c[2, 3], want_c[0, 0] = 7, 8
    np.testing.assert_array_equal(c, want_c)
    for name, bad, node in (("ge", np.array([[0, 4]] * 3), "GatherElements node 'ge'"),
                            ("se", np.array([[3, 0, 0, 0]]), "ScatterElements node 'se'"),
                            ("nd", np.array([[0, 0], [0, 4]]), "ScatterND node 'nd'"),
                            ("nd", np.array([[-4, 0], [0, 0]]), "ScatterND node 'nd'")):
        args = dict(ok, **{name: bad})
        with pytest.raises(runtime.InputOutOfRangeError, match=node):
            m(data, args["ge"], args["se"], u, args["nd"], v)



def test_reference_interpreter_reports_the_status_too():
    """sits_mlir.testing.reference runs the imported IR as the runtime
    runs the code: the status result is checked and dropped."""
    from sits_mlir.frontend.onnx import import_model
    from sits_mlir.testing.reference import ReferenceError, evaluate

    table = numpy_helper.from_array(np.arange(8, dtype=np.float32).reshape(4, 2), "table")
    model = _model([h.make_node("Gather", ["table", "ids"], ["y"], name="emb")],
                   [("ids", TP.INT64, [2])], [("y", TP.FLOAT, [2, 2])], [table])
    imported = import_model(model)
    out = evaluate(imported, {"ids": np.array([3, -4])})
    assert len(out) == 1
    np.testing.assert_array_equal(out[0], [[6, 7], [0, 1]])
    with pytest.raises(ReferenceError, match="Gather node 'emb'"):
        evaluate(imported, {"ids": np.array([4, 0])})


def test_negative_constant_index_along_a_dynamic_axis(tmp_path):
    """x[:, -1, :] of a decoder export: the last position of a run-time
    sequence length."""
    k = numpy_helper.from_array(np.array(-1, np.int64), "k")
    model = _model([h.make_node("Gather", ["x", "k"], ["y"], axis=1, name="last")],
                   [("x", TP.FLOAT, ["b", "s", 4])], [("y", TP.FLOAT, ["b", 4])], [k])
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    for s in (1, 5):
        x = np.random.default_rng(s).standard_normal((2, s, 4)).astype(np.float32)
        np.testing.assert_array_equal(m(x), x[:, -1, :])

