"""Shapes no real model has, as a careless or hostile file declares them:
each ends as one CompileError naming the value, from `check()` as from
`compile()`, never as an MLIR assertion, a raw MLIRError or a hang."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h

import sits_mlir


def _relu(shape):
    graph = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                         [h.make_tensor_value_info("x", TP.FLOAT, shape)],
                         [h.make_tensor_value_info("y", TP.FLOAT, shape)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.mark.parametrize("shape, message", [
    ([-1, 8], r"'x' has a negative extent \(shape \[-1, 8\]\)"),
    ([-2, 8], r"'x' has a negative extent"),
    ([2**62, 8], r"'x' would hold 147573952589676412928 bytes"),
    ([2**31, 2**31], r"'x' would hold \d+ bytes .* more than the 1 TiB"),
    (["n", 2**40], r"'x' would hold 4398046511104 bytes"),
])
def test_impossible_extents_are_compile_errors(tmp_path, shape, message):
    model = _relu(shape)
    with pytest.raises(sits_mlir.CompileError, match=message):
        sits_mlir.check(model)
    with pytest.raises(sits_mlir.CompileError, match=message):
        sits_mlir.compile(model, output=tmp_path / "m.sitsm")


def test_empty_input_is_legal(tmp_path):
    """No elements is an odd input, not an impossible one: it compiles and
    gives an empty output."""
    model = _relu([0, 8])
    assert sits_mlir.check(model) == []
    m = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()
    y = m(np.zeros((0, 8), np.float32))
    assert y.shape == (0, 8) and y.dtype == np.float32


def test_huge_computed_shape_is_refused():
    """An Expand to a constant shape of 2^62 elements: inferred static,
    refused before any IR is built."""
    shape = h.make_tensor("s", TP.INT64, [2], [2**31, 2**31])
    graph = h.make_graph([h.make_node("Expand", ["x", "s"], ["y"])], "g",
                         [h.make_tensor_value_info("x", TP.FLOAT, [1, 1])],
                         [h.make_tensor_value_info("y", TP.FLOAT, ["a", "b"])], [shape])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])
    with pytest.raises(sits_mlir.CompileError, match=r"'y' would hold \d+ bytes"):
        sits_mlir.compile(model)


def test_check_does_not_hang_on_a_huge_shape_input():
    """A Reshape whose shape input is declared with 2^40 elements: symbolic
    inference would build one symbol per element. A subprocess, so that a
    regression fails instead of hanging the suite."""
    code = """
import sits_mlir
from onnx import TensorProto as TP, helper as h
g = h.make_graph([h.make_node("Reshape", ["x", "s"], ["y"])], "g",
    [h.make_tensor_value_info("x", TP.FLOAT, [2, 6]),
     h.make_tensor_value_info("s", TP.INT64, [2**40])],
    [h.make_tensor_value_info("y", TP.FLOAT, ["a", "b"])])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
try:
    sits_mlir.check(m)
except sits_mlir.CompileError as e:
    print(e)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert "'s' would hold 8796093022208 bytes" in done.stdout
