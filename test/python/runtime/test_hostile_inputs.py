"""Bad run-time input to compiled models: every kind is a typed error (a
SitsError, or TypeError/ValueError from argument conversion), never a crash
or another exception, and the model keeps working after it."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper as h, numpy_helper

import sits_mlir
from sits_mlir import runtime
from sits_mlir.errors import SitsError

TYPED = (SitsError, TypeError, ValueError)


class _NoArray:
    """Neither a buffer nor an array: refused by the conversion."""


def _bad_arrays(good: np.ndarray) -> dict:
    """Kinds of bad values for an argument whose good value is `good`."""
    other = np.float64 if good.dtype != np.float64 else np.float32
    return {
        "none": None,
        "string": "x",
        "bytes": b"\x00" * good.nbytes,
        "dict": {"a": 1},
        "object array": np.array([object()] * max(good.size, 1), dtype=object),
        "ragged list": [[1, 2], [3]],
        "not an array": _NoArray(),
        "complex": good.astype(np.complex64),
        "other dtype": good.astype(other),
        "bool": good.astype(bool),
        "rank + 1": good[None],
        "structured": np.zeros(good.shape, dtype=[("a", np.int32)]),
        "datetime": np.zeros(good.shape, dtype="datetime64[s]"),
        "unicode": np.full(good.shape, "a"),
        **({"rank - 1": good[0], "longer static": np.concatenate([good, good], axis=-1)}
           if good.ndim else {}),
    }


def _model(nodes, inputs, outputs, inits=()):
    graph = h.make_graph(nodes, "g", [h.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                         [h.make_tensor_value_info(n, t, s) for n, t, s in outputs], list(inits))
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """An embedding lookup and a matmul with a dynamic batch: y = table[ids]
    @ w, plus a scalar-scaled copy of x."""
    table = numpy_helper.from_array(np.arange(24, dtype=np.float32).reshape(6, 4), "table")
    w = numpy_helper.from_array(np.eye(4, dtype=np.float32), "w")
    nodes = [h.make_node("Gather", ["table", "ids"], ["e"], name="embed"),
             h.make_node("MatMul", ["e", "w"], ["y"]),
             h.make_node("Mul", ["x", "s"], ["z"])]
    m = _model(nodes, [("ids", TP.INT64, ["b", 3]), ("x", TP.FLOAT, ["b", 4]),
                       ("s", TP.FLOAT, [])],
               [("y", TP.FLOAT, ["b", 3, 4]), ("z", TP.FLOAT, ["b", 4])], [table, w])
    return sits_mlir.compile(m, output=tmp_path_factory.mktemp("m") / "m.sitsm").load()


GOOD = {"ids": np.array([[0, 5, -1]], np.int64), "x": np.ones((1, 4), np.float32),
        "s": np.array(2.0, np.float32)}


def _check_still_works(model):
    y, z = model(*GOOD.values())
    np.testing.assert_array_equal(y[0], np.arange(24, dtype=np.float32).reshape(6, 4)[[0, 5, 5]])
    np.testing.assert_array_equal(z, 2 * np.ones((1, 4)))


def _cases():
    return [pytest.param(name, bad, id=f"{name}-{kind}")
            for name, good in GOOD.items() for kind, bad in _bad_arrays(good).items()]


@pytest.mark.parametrize("name, bad", _cases())
def test_bad_value_of_an_input_is_typed(model, name, bad):
    args = dict(GOOD, **{name: bad})
    with pytest.raises(TYPED):
        model(*args.values())
    with pytest.raises(TYPED):
        model(**args)
    _check_still_works(model)


@pytest.mark.parametrize("call", [
    lambda m: m(),
    lambda m: m(*GOOD.values(), GOOD["x"]),
    lambda m: m(GOOD["ids"], GOOD["x"]),
    lambda m: m(**GOOD, extra=GOOD["x"]),
    lambda m: m(GOOD["ids"], x=GOOD["x"], ids=GOOD["ids"], s=GOOD["s"]),
    lambda m: m(GOOD["ids"], np.ones((2, 4), np.float32), GOOD["s"]),  # batch 1 vs 2
    lambda m: m(np.zeros((2, 3), np.int64), GOOD["x"], GOOD["s"]),
    lambda m: m.entry("nope"),
    lambda m: m.run_into([], *GOOD.values()),
    lambda m: m.run_into([np.zeros((1, 3, 4), np.float32)], *GOOD.values()),
    lambda m: m.run_into([np.zeros((1, 3, 4), np.float64), np.zeros((1, 4), np.float32)],
                         *GOOD.values()),
    lambda m: m.run_into([np.zeros((2, 3, 4), np.float32), np.zeros((1, 4), np.float32)],
                         *GOOD.values()),
    lambda m: m.run_into([None, None], *GOOD.values()),
    lambda m: m.run_into("xy", *GOOD.values()),
], ids=["no inputs", "extra positional", "missing input", "unknown keyword", "twice by name",
        "inconsistent batch", "static extent", "unknown entry", "no outputs",
        "too few outputs", "wrong output dtype", "wrong output batch", "None outputs",
        "string outputs"])
def test_bad_call_shape_is_typed(model, call):
    with pytest.raises(TYPED):
        call(model)
    _check_still_works(model)


@pytest.mark.parametrize("ids", [[[6, 0, 0]], [[0, 0, -7]], [[2**62, 0, 0]], [[-2**63, 0, 0]]])
def test_index_past_the_table_is_an_input_out_of_range_error(model, ids):
    with pytest.raises(runtime.InputOutOfRangeError, match="Gather node 'embed'"):
        model(np.array(ids, np.int64), GOOD["x"], GOOD["s"])
    _check_still_works(model)


def test_outputs_larger_than_memory_are_refused_before_allocation(model):
    """A zero-stride view is cheap to pass but sizes its outputs: beyond
    what the system can give, the call is refused instead of being granted
    by overcommit and killed while it writes."""
    import os

    rows = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4  # > RAM, as f32x4
    ids = np.broadcast_to(np.zeros(3, np.int64), (rows, 3))
    x = np.broadcast_to(np.ones(4, np.float32), (rows, 4))
    with pytest.raises(runtime.RuntimeOutOfMemoryError, match="bytes available") as e:
        model(ids, x, GOOD["s"])
    assert isinstance(e.value, MemoryError)
    _check_still_works(model)


def test_odd_but_valid_inputs_run(model):
    """Not errors: views, empty batches, non-finite values, aliasing."""
    ids = np.array([[0, 1, 2, 3, 4, 5]], np.int64)[:, ::2]  # strided
    x = np.asfortranarray(np.arange(8, dtype=np.float32).reshape(2, 4))[:1]
    y, z = model(ids, x, np.float32(np.nan))
    assert np.isnan(z).all() and y.shape == (1, 3, 4)
    y, z = model(np.zeros((0, 3), np.int64), np.zeros((0, 4), np.float32), GOOD["s"])
    assert y.shape == (0, 3, 4) and z.shape == (0, 4)
    x = np.full((1, 4), np.inf, np.float32)
    out = np.zeros((1, 4), np.float32)
    model.run_into([np.zeros((1, 3, 4), np.float32), x], GOOD["ids"], x, GOOD["s"])
    np.testing.assert_array_equal(x, np.inf)
    model.run_into([np.zeros((1, 3, 4), np.float32), out], GOOD["ids"], out + 1, GOOD["s"])
    np.testing.assert_array_equal(out, 2)
    _check_still_works(model)
