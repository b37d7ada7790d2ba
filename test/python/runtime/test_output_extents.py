"""Output extents the runtime computes from the input extents: a dynamic
output dimension whose name is an input dimension's name, or arithmetic of
such names (`past + seq`, as the compiler names a concatenation's extent).
The manifests are crafted; the code is never run."""

from __future__ import annotations

import numpy as np
import pytest

from runtime_helpers import arg
from sits_mlir import runtime


def _entry(make_artifact, name, inputs):
    args = [arg("input", d, "f32", [-1, 2], [d, None]) for d in inputs]
    args.append(arg("output", "y", "f32", [-1, 2], [name, None]))
    return runtime.load(make_artifact("add", [{"name": "main", "args": args}])).entry("main")


@pytest.mark.parametrize("name, inputs, expected", [
    ("a", {"a": 4}, 4),
    ("a + b", {"a": 2, "b": 5}, 7),
    ("a+b", {"a": 2, "b": 5}, 7),
    ("a - b", {"a": 5, "b": 2}, 3),
    ("2*a - 1", {"a": 3}, 5),
    ("(a + b) // 2", {"a": 3, "b": 4}, 3),
    ("a*b//4", {"a": 3, "b": 5}, 3),
    ("-a + 10", {"a": 3}, 7),
    ("10 - -a", {"a": 3}, 13),
    ("1 - 1 // (a + 1)", {"a": 0}, 0),   # logits="last": min(seq, 1)
    ("1 - 1 // (a + 1)", {"a": 4}, 1),
    ("(0 - a) // 4 * -1", {"a": 5}, 2),  # floor division, as Python's: ceil(a / 4)
    ("((((a))))", {"a": 3}, 3),
    ("batch_size * seq_len", {"batch_size": 3, "seq_len": 4}, 12),
])
def test_arithmetic_of_input_extents(make_artifact, name, inputs, expected):
    entry = _entry(make_artifact, name, inputs)
    arrays = [np.ones((n, 2), np.float32) for n in inputs.values()]
    assert entry.output_shapes(*arrays) == [(expected, 2)]


@pytest.mark.parametrize("name", [
    "a // (b - b)",                  # division by zero
    "a + c",                         # c names no input extent
    "c",
    "a +",                           # not an expression
    "a b",
    "(a + b",
    "a - b",                         # negative
    "9223372036854775807 + a",       # overflow
    "a * 99999999999999999999",
    "(" * 100 + "a" + ")" * 100,     # nested past the evaluator's bound
    "a ** 2",
    "a / 2",
])
def test_names_the_runtime_cannot_evaluate(make_artifact, name):
    entry = _entry(make_artifact, name, {"a": 1, "b": 2})
    with pytest.raises(runtime.SignatureError, match="no input determines dimension 0"):
        entry.output_shapes(np.ones((1, 2), np.float32), np.ones((2, 2), np.float32))


def test_preallocated_output_of_another_extent_is_refused(make_artifact):
    entry = _entry(make_artifact, "a + b", {"a": 1, "b": 2})
    x, y = np.ones((1, 2), np.float32), np.ones((2, 2), np.float32)
    with pytest.raises(runtime.SignatureError, match=r"\('a \+ b'\) must be 3"):
        entry.run_into([np.empty((4, 2), np.float32)], x, y)
