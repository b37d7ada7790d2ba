"""The converter registry: converters keyed by (domain, op_type, since_version),
looked up by the opset a model imports the op's domain at."""

import pytest

from sits_mlir.frontend.onnx import SUPPORTED_OPS
from sits_mlir.frontend.onnx._ops import AXES_INPUT_SINCE, CONVERTERS
from sits_mlir.frontend.onnx._ops_registry import Converter, Registry


def _emit(ctx, node):
    return []


def test_lookup_picks_the_highest_since_version_not_above_the_opset():
    r = Registry()
    v1, v13, v18 = (Converter(_emit, since=s) for s in (1, 13, 18))
    for c in (v18, v1, v13):
        r.register("", "Op", c)
    assert r.versions("", "Op") == [1, 13, 18]
    assert r.lookup("", "Op", 12) is v1
    assert r.lookup("", "Op", 13) is v13
    assert r.lookup("", "Op", 17) is v13
    assert r.lookup("", "Op", 28) is v18
    # A domain imported without a version gets the newest converter.
    assert r.lookup("", "Op", None) is v18
    assert r.lookup("", "Op") is v18
    assert r.lookup("", "Other", 18) is None
    assert r.lookup("com.microsoft", "Op", 1) is None


def test_lookup_below_every_since_version_finds_nothing():
    r = Registry()
    r.register("", "Op", Converter(_emit, since=18))
    assert r.lookup("", "Op", 17) is None
    assert r.lookup("", "Op", 18) is not None


def test_mapping_view_is_keyed_by_domain_and_op_type_with_the_newest_converter():
    r = Registry()
    old, new = Converter(_emit, since=1), Converter(_emit, since=18)
    r.register("", "Op", old)
    r.register("", "Op", new)
    r.register("com.microsoft", "Op", Converter(_emit))
    assert set(r) == {("", "Op"), ("com.microsoft", "Op")}
    assert len(r) == 2
    assert r[("", "Op")] is new
    assert r.get(("", "Missing")) is None
    with pytest.raises(KeyError):
        r[("", "Missing")]


def test_registering_a_version_twice_needs_replace():
    r = Registry()
    first, second = Converter(_emit), Converter(_emit)
    r.register("", "Op", first)
    with pytest.raises(ValueError, match="already registered"):
        r.register("", "Op", second)
    assert r.lookup("", "Op", 13) is first
    r.register("", "Op", second, replace=True)
    assert r.lookup("", "Op", 13) is second


@pytest.mark.parametrize("op", sorted(AXES_INPUT_SINCE))
def test_reduce_ops_have_one_converter_per_axes_signature(op):
    since = AXES_INPUT_SINCE[op]
    assert CONVERTERS.versions("", op) == [1, since]
    before, after = CONVERTERS.lookup("", op, since - 1), CONVERTERS.lookup("", op, since)
    assert before.emit.keywords == {"axes_input": False}
    assert after.emit.keywords == {"axes_input": True}
    assert after.check.keywords == {"axes_input": True}


def test_squeeze_takes_constant_axes_input_from_opset_13():
    for op in ("Squeeze", "Unsqueeze"):
        assert CONVERTERS.versions("", op) == [1, 13]


def test_every_other_converter_covers_every_opset():
    versioned = set(AXES_INPUT_SINCE) | {"Squeeze", "Unsqueeze"}
    for domain, op in CONVERTERS:
        if op not in versioned:
            assert CONVERTERS.versions(domain, op) == [1], (domain, op)


def test_pooling_ops_have_one_converter_for_every_rank():
    from sits_mlir.frontend.onnx import _ops_pooling

    for op in ("MaxPool", "AveragePool"):
        assert CONVERTERS.versions("", op) == [1]
        conv = CONVERTERS.lookup("", op, 22)
        assert conv.emit is _ops_pooling._pool
        assert conv.check is _ops_pooling._check_pool
        assert conv.reads == (0,)


def test_supported_ops_come_from_the_registry():
    assert ("", "ReduceMean") in SUPPORTED_OPS
    assert ("com.microsoft", "SimplifiedLayerNormalization") in SUPPORTED_OPS
    assert ("com.microsoft", "MatMulNBits") in SUPPORTED_OPS
    assert ("", "NonZero") not in SUPPORTED_OPS  # registered only for its reason
    assert ("", "NonZero") in CONVERTERS
