"""Resize, the pools beyond 2-D and ConvTranspose: the ONNX backend node
cases of these ops, imported and run by the NumPy reference interpreter,
must match the cases' expected outputs. Resize's scales/sizes/roi are graph
inputs there; they are frozen into initializers (SITS needs them at import
time, as the result shape depends on them)."""

import re
import warnings

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from sits_mlir.frontend.onnx import check, import_model
from sits_mlir.testing.reference import evaluate

_FROZEN = {"roi", "scales", "sizes"}


def _cases(pattern):
    from onnx.backend.test.loader import load_model_tests

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sorted((c for c in load_model_tests(kind="node") if re.search(pattern, c.name)),
                      key=lambda c: c.name)


def _frozen(case):
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    feed = {}
    for inp, value in zip(list(model.graph.input), inputs):
        if inp.name in _FROZEN:
            model.graph.initializer.append(numpy_helper.from_array(np.asarray(value), inp.name))
            model.graph.input.remove(inp)
        else:
            feed[inp.name] = value
    return model, feed, outputs


RESIZE = _cases(r"^test_resize_")


@pytest.mark.parametrize("case", RESIZE, ids=[c.name for c in RESIZE])
def test_resize_backend_case(case):
    model, feed, expected = _frozen(case)
    got = evaluate(import_model(model), feed)
    got = list(got.values()) if isinstance(got, dict) else list(got)
    for want, have in zip(expected, got):
        assert have.shape == want.shape and have.dtype == want.dtype
        np.testing.assert_allclose(have, want, rtol=case.rtol, atol=case.atol)


def test_resize_runtime_scales_are_reported():
    case = next(c for c in RESIZE if c.name == "test_resize_upsample_scales_linear")
    problems = check(case.model)
    assert len(problems) == 1 and "must be known at import time" in problems[0].message


# Compiled for the CPU and run: the kernels, not only the IR.
COMPILED = ["test_resize_upsample_scales_nearest", "test_resize_upsample_scales_linear",
            "test_resize_downsample_scales_cubic_antialias", "test_resize_tf_crop_and_resize"]


@pytest.mark.parametrize("name", COMPILED)
def test_resize_compiled(name):
    from sits_mlir.testing.onnx_backend import SitsBackend

    case = next(c for c in RESIZE if c.name == name)
    model, feed, expected = _frozen(case)
    got = SitsBackend.prepare(model).run(feed)
    for want, have in zip(expected, got):
        np.testing.assert_allclose(have, want, rtol=case.rtol, atol=case.atol)
