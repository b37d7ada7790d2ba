"""Hostile models found by test/fuzz/onnx_import_fuzz.py, each reduced to
what triggers it: every one ends as a CompileError or a reported node with
a clear reason, not a Python exception from deep inside, a native crash, or
gigabytes of memory."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

import sits_mlir
from sits_mlir.errors import CompileError


def _model(nodes, inputs, outputs, inits=(), opset=17, extra_opsets=()):
    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset), *extra_opsets])


def _vi(name, elem, shape):
    return h.make_tensor_value_info(name, elem, shape)


def _problems(model):
    return [p.message for p in sits_mlir.check(model)]


def test_invalid_utf8_in_a_string_field():
    """protobuf parses it and hands the field back as bytes, which nothing
    downstream expects (it raised UnicodeDecodeError)."""
    model = _model([h.make_node("Relu", ["x"], ["y"])], [_vi("x", TP.FLOAT, [2])],
                   [_vi("y", TP.FLOAT, [2])])
    model.graph.name = "gQ"
    data = model.SerializeToString().replace(b"gQ", b"g\xff")
    with pytest.raises(CompileError, match=r"string field model.graph.name is not valid UTF-8"):
        sits_mlir.check(data)


def test_contrib_node_without_inputs():
    """A com.microsoft op the skeleton replaces by a stand-in (it raised
    IndexError), and one whose converter check read input 0."""
    ms = h.make_opsetid("com.microsoft", 1)
    for op in ("SimplifiedLayerNormalization", "MatMulNBits"):
        model = _model([h.make_node(op, [], ["s"], domain="com.microsoft"),
                        h.make_node("Relu", ["s"], ["y"])],
                       [], [_vi("y", TP.FLOAT, [2])], extra_opsets=[ms])
        try:
            problems = _problems(model)
        except CompileError:
            continue
        assert problems and not any("cannot be checked" in p for p in problems), problems


def test_initializer_dims_beyond_its_data():
    """2^31 elements declared, one stored: ONNX's shape inference sized its
    work by the dims (tens of GB)."""
    starts = numpy_helper.from_array(np.array([1], np.int64), "starts")
    starts.dims[0] = 2**31 - 1
    model = _model([h.make_node("Slice", ["x", "starts", "ends"], ["y"])],
                   [_vi("x", TP.FLOAT, [4]), _vi("ends", TP.INT64, [1])],
                   [_vi("y", TP.FLOAT, None)], [starts])
    with pytest.raises(CompileError, match=r"initializer 'starts' declares 2147483647 elements"):
        sits_mlir.check(model)


def test_initializer_data_beyond_its_dims():
    """check() read only the dims; the import read the data and failed."""
    b = numpy_helper.from_array(np.zeros(6, np.float32), "b")
    b.dims[0] = 3
    model = _model([h.make_node("Add", ["x", "b"], ["y"])], [_vi("x", TP.FLOAT, [3])],
                   [_vi("y", TP.FLOAT, [3])], [b])
    with pytest.raises(CompileError, match=r"cannot read initializer 'b'"):
        sits_mlir.check(model)


@pytest.mark.parametrize("op, inputs", [
    ("Slice", ["x", "s", "e"]),      # ONNX's inference allocates per element
    ("Reshape", ["x", "s"]),         # symbolic inference builds a symbol per element
])
def test_huge_shape_input_is_refused_before_inference(op, inputs):
    model = _model([h.make_node(op, inputs, ["y"])],
                   [_vi("x", TP.FLOAT, [2, 6]), _vi("s", TP.INT64, [200_000]),
                    _vi("e", TP.INT64, [1])], [_vi("y", TP.FLOAT, ["a", "b"])])
    with pytest.raises(CompileError, match=r"input 1 \('s'\) .* holds a shape, axes or bounds"):
        sits_mlir.check(model)


def test_undefined_element_type():
    """An element type number ONNX does not define (it raised ValueError
    naming it)."""
    model = _model([h.make_node("Identity", ["x"], ["y"])], [_vi("x", 40, [2])],
                   [_vi("y", 40, [2])])
    assert any("<element type 40>" in p for p in _problems(model))


@pytest.mark.parametrize("eps", [-1.0, float("-inf"), float("nan")])
def test_norm_epsilon_must_be_finite_and_non_negative(eps):
    """sits.layer_norm / sits.rms_norm refuse it: the check must say so, not
    the import fail after the check passed."""
    scale = numpy_helper.from_array(np.ones(8, np.float32), "g")
    for op, opset in (("LayerNormalization", 17), ("RMSNormalization", 23)):
        model = _model([h.make_node(op, ["x", "g"], ["y"], epsilon=eps)],
                       [_vi("x", TP.FLOAT, ["n", 8])], [_vi("y", TP.FLOAT, ["n", 8])], [scale],
                       opset=opset)
        assert any("must be finite and non-negative" in p for p in _problems(model)), op


def test_required_input_with_an_empty_name():
    """Gelu at opset 17, before ONNX defines it (SITS imports it): the
    checker has no schema to find the empty required input with, and the
    import failed with KeyError."""
    model = _model([h.make_node("Gelu", [""], ["y"])], [_vi("x", TP.FLOAT, [2])],
                   [_vi("y", TP.FLOAT, [2])], opset=17)
    assert any("required input 0 is not given" in p for p in _problems(model))


def test_negative_extent_in_value_info_does_not_abort():
    """A value_info with a negative extent before a Slice: ONNX's Slice
    inference aborted the process (std::clamp's assertion). A subprocess,
    so that a regression fails this test instead of the run."""
    code = """
import numpy as np
import sits_mlir
from onnx import TensorProto as TP, helper as h, numpy_helper
g = h.make_graph([h.make_node("Identity", ["x"], ["t"]),
                  h.make_node("Slice", ["t", "s", "e"], ["y"])],
                 "g", [h.make_tensor_value_info("x", TP.FLOAT, ["n"])],
                 [h.make_tensor_value_info("y", TP.FLOAT, ["m"])],
                 [numpy_helper.from_array(np.array([1], np.int64), "s"),
                  numpy_helper.from_array(np.array([2], np.int64), "e")],
                 value_info=[h.make_tensor_value_info("t", TP.FLOAT, [-3])])
print(sits_mlir.check(h.make_model(g, opset_imports=[h.make_opsetid("", 17)])))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("op, attrs, outputs", [
    ("LayerNormalization", {"axis": (1 << 63) - 1}, ["y", "mean"]),
    ("Softmax", {"axis": -(1 << 40)}, ["y"]),
    ("Flatten", {"axis": 1 << 31}, ["y"]),
])
def test_axis_no_rank_can_hold_is_refused_before_inference(op, attrs, outputs):
    """ONNX's shape inference crashed the process on a LayerNormalization
    whose statistics output it sized from axis = 2^63 - 1: any `axis` far
    beyond every rank is a CompileError first, naming the node."""
    nodes = [h.make_node(op, ["x", "g", "b"] if op == "LayerNormalization" else ["x"],
                         outputs, name="n", **attrs)]
    inits = ([numpy_helper.from_array(np.ones(8, np.float32), "g"),
              numpy_helper.from_array(np.zeros(8, np.float32), "b")]
             if op == "LayerNormalization" else [])
    model = _model(nodes, [_vi("x", TP.FLOAT, ["n", 8])], [_vi("y", TP.FLOAT, ["n", 8])], inits)
    with pytest.raises(CompileError, match=r"node 'n' \(" + op + r"\) has axis = -?\d+: "
                       r"no tensor has that many dimensions"):
        sits_mlir.check(model)
