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


def _frozen(case, frozen=_FROZEN):
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    inputs, outputs = case.data_sets[0]
    feed = {}
    for inp, value in zip(list(model.graph.input), inputs):
        if inp.name in frozen:
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


def _model(node, x_shape, y_shape=None, opset=18):
    from onnx import TensorProto as TP
    from onnx import helper as h

    graph = h.make_graph([node], "t", [h.make_tensor_value_info("x", TP.FLOAT, x_shape)],
                         [h.make_tensor_value_info("y", TP.FLOAT, y_shape)])
    return h.make_model(graph, opset_imports=[h.make_opsetid("", opset)], ir_version=8)


@pytest.mark.parametrize("p", [1, 2, 3])
def test_global_lp_pool_compiled(p):
    from onnx import helper as h

    from sits_mlir.testing.onnx_backend import SitsBackend

    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    model = _model(h.make_node("GlobalLpPool", ["x"], ["y"], p=p), x.shape, [2, 3, 1, 1])
    (y,) = SitsBackend.prepare(model).run([x])
    want = (np.abs(x.astype(np.float64)) ** p).sum(axis=(2, 3), keepdims=True) ** (1.0 / p)
    np.testing.assert_allclose(y, want, rtol=1e-5)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_pool_3d_dynamic_batch(op):
    """3-D pools (linalg.generic windows) with a run-time batch extent."""
    from onnx import helper as h
    from onnx.reference import ReferenceEvaluator

    from sits_mlir.testing.onnx_backend import SitsBackend

    node = h.make_node(op, ["x"], ["y"], kernel_shape=[2, 3, 2], strides=[1, 2, 1],
                       pads=[0, 1, 1, 1, 0, 0])
    model = _model(node, ["n", 2, 4, 5, 3], ["n", 2, 4, 2, 3])
    rep = SitsBackend.prepare(model)
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 2, 4, 5, 3)).astype(np.float32)
        (want,) = ReferenceEvaluator(model).run(None, {"x": x})
        # The output's batch extent is passed in: preallocated outputs.
        (y,) = rep._model.run_into([np.empty(want.shape, np.float32)], x)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


CONVT = _cases(r"^test_convtranspose")


@pytest.mark.parametrize("frozen_w", [False, True], ids=["runtime_w", "constant_w"])
@pytest.mark.parametrize("case", CONVT, ids=[c.name for c in CONVT])
def test_conv_transpose_backend_case(case, frozen_w):
    """The filter as a run-time input (transposed and flipped by a gather
    generic) and as an initializer (transposed and flipped at import)."""
    model, feed, expected = _frozen(case, _FROZEN | {"W"} if frozen_w else _FROZEN)
    got = evaluate(import_model(model), feed)
    got = list(got.values()) if isinstance(got, dict) else list(got)
    np.testing.assert_allclose(got[0], expected[0], rtol=case.rtol, atol=case.atol)


@pytest.mark.parametrize("attrs,x_shape,const_w", [
    (dict(strides=[2], pads=[3, 2]), [2, 4, 7], True),  # pads > K-1: cropping
    (dict(strides=[2, 3], pads=[2, 0, 3, 1], group=2, output_padding=[1, 1]), [1, 4, 5, 4], False),
    (dict(strides=[2, 3], pads=[2, 0, 3, 1], group=2, dilations=[2, 1]), [3, 4, 5, 4], True),
    (dict(strides=[2, 2, 1], auto_pad="SAME_LOWER"), [1, 2, 3, 4, 2], False),
])
def test_conv_transpose_compiled_vs_onnxruntime(attrs, x_shape, const_w):
    from onnx import TensorProto as TP
    from onnx import helper as h

    from sits_mlir.testing.onnx_backend import SitsBackend

    ort = pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(0)
    k = len(x_shape) - 2
    w = rng.standard_normal([x_shape[1], 3] + [3] * k).astype(np.float32)
    bias = rng.standard_normal(3 * attrs.get("group", 1)).astype(np.float32)
    inits = [numpy_helper.from_array(bias, "b")]
    inputs = [h.make_tensor_value_info("x", TP.FLOAT, ["n"] + x_shape[1:])]
    if const_w:
        inits.append(numpy_helper.from_array(w, "w"))
    else:
        inputs.append(h.make_tensor_value_info("w", TP.FLOAT, w.shape))
    node = h.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs)
    model = onnx.shape_inference.infer_shapes(h.make_model(
        h.make_graph([node], "t", inputs, [h.make_empty_tensor_value_info("y")],
                     initializer=inits),
        opset_imports=[h.make_opsetid("", 17)], ir_version=8))
    x = rng.standard_normal(x_shape).astype(np.float32)
    feed = {"x": x} if const_w else {"x": x, "w": w}
    (want,) = ort.InferenceSession(model.SerializeToString()).run(None, feed)
    rep = SitsBackend.prepare(model)
    (got,) = rep._model.run_into([np.empty(want.shape, np.float32)], *feed.values())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample(mode, padding, align, tmp_path):
    """Compiled GridSample against onnx.reference, with sample points
    inside, on and beyond the image borders."""
    import sits_mlir
    from onnx import TensorProto as TP
    from onnx import helper as h
    from onnx.reference import ReferenceEvaluator

    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 6)).astype(np.float32)
    grid = rng.uniform(-1.4, 1.4, (2, 4, 7, 2)).astype(np.float32)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [0, 0]]
    node = h.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=padding,
                       align_corners=align)
    graph = h.make_graph([node], "gs", [h.make_tensor_value_info("x", TP.FLOAT, x.shape),
                                        h.make_tensor_value_info("grid", TP.FLOAT, grid.shape)],
                         [h.make_tensor_value_info("y", TP.FLOAT, (2, 3, 4, 7))])
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 20)])
    got = sits_mlir.compile(model, output=tmp_path / "m.sitsm").load()(x, grid)
    want = ReferenceEvaluator(model).run(None, {"x": x, "grid": grid})[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
