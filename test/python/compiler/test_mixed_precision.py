"""sits-mixed-precision on the benchmark models: INT8 and INT4 weights shrink
the artifact's weights by the expected factor and keep the outputs close to
fp32 (cosine >= 0.999 for INT8, >= 0.99 for INT4 on gpt_prefill); `auto`
keeps every weight's estimated error within its budget; calibration
statistics reach the pass; Python and sits-opt give the same IR. INT8
convolution filters (sits.qconv) compute what they stand for, shrink the
ResNet-18's weights 4x within cosine 0.999, and take the GPU pipeline too."""

import io
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

import sits_mlir  # noqa: E402
from sits_mlir import ir, passmanager  # noqa: E402
from sits_mlir.frontend.onnx import import_model  # noqa: E402

pytestmark = [pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.filterwarnings("ignore:Converting a tensor to a Python boolean")]


def _compile_run(path, inputs, tmp_path, **options):
    name = "-".join(f"{k}{v}" for k, v in sorted(options.items()) if k != "calibration")
    artifact = sits_mlir.compile(path, "cpu", tmp_path / f"model-{name}.sitsm", threads=2,
                                 **options)
    return artifact, artifact.load().run(**inputs)


def _weight_bytes(artifact) -> int:
    args = artifact.manifest["entry_points"][0]["args"]
    return next(a["shape"][0] for a in args if a["role"] == "weights")


def _cosine(a, b) -> float:
    a = np.asarray(a, np.float64).ravel()
    b = np.asarray(b, np.float64).ravel()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def _report(model, pipeline):
    """The sits.report.precision entries after `pipeline` on `model`."""
    with ir.Context() as context:
        module = import_model(model, context=context).module
        passmanager.PassManager.parse(pipeline).run(module.operation)
        entries = []
        for entry in ir.ArrayAttr(module.operation.attributes["sits.report.precision"]):
            entry = ir.DictAttr(entry)
            kind = ir.StringAttr(entry["kind"]).value
            if kind != "quantized":
                continue
            entries.append({
                "op": ir.StringAttr(entry["op"]).value,
                "format": [ir.StringAttr(f).value for f in ir.ArrayAttr(entry["format"])],
                "est_error": ir.FloatAttr(entry["est_error"]).value,
                "bytes": ir.IntegerAttr(entry["bytes"]).value,
                "fp32_bytes": ir.IntegerAttr(entry["fp32_bytes"]).value,
                "input_stats": ir.StringAttr(entry["input_stats"]).value,
            })
        return entries


@pytest.mark.slow
def test_gpt_prefill_int8_int4(model_path, tmp_path):
    path, inputs = model_path("gpt_prefill")
    fp32, (ref, *_) = _compile_run(path, inputs, tmp_path)
    int8, (y8, *_) = _compile_run(path, inputs, tmp_path, precision="int8")
    int4, (y4, *_) = _compile_run(path, inputs, tmp_path, precision="int4")
    # Weight matrices are ~all of the bytes: 1/4 (+ scales) and 1/8 (+ one
    # scale per 64 rows).
    assert _weight_bytes(int8) < 0.27 * _weight_bytes(fp32)
    assert _weight_bytes(int4) < 0.16 * _weight_bytes(fp32)
    assert _weight_bytes(int4) < 0.6 * _weight_bytes(int8)
    assert _cosine(y8, ref) >= 0.999
    assert _cosine(y4, ref) >= 0.99
    # INT8 is the more accurate of the two.
    assert np.linalg.norm(y8 - ref) < np.linalg.norm(y4 - ref)
    assert "precision=int4" in int4.pipeline and "group-size=64" in int4.pipeline


def test_auto_stays_within_budget(model_path):
    path, _ = model_path("gpt_prefill")
    model = onnx.load(path)
    budget = 0.02
    entries = _report(model, f"builtin.module(sits-graph-pipeline{{precision=auto "
                             f"error-budget={budget}}})")
    assert len(entries) == 2 * 4  # qkv, proj, fc_in, fc_out per block
    for e in entries:
        assert e["est_error"] <= budget * (1 + 1e-9), e
        assert e["bytes"] < e["fp32_bytes"] / 3
    formats = {f for e in entries for f in e["format"]}
    # The host has no FP8; some blocks are cheap enough in INT4, others not.
    assert "fp8" not in formats and {"int4", "int8"} <= formats
    # A looser budget never costs more bytes.
    loose = _report(model, "builtin.module(sits-graph-pipeline{precision=auto error-budget=0.1})")
    assert sum(e["bytes"] for e in loose) < sum(e["bytes"] for e in entries)
    # Layer norm outputs feed qkv and fc_in: their statistics come from it.
    assert {e["input_stats"] for e in entries} == {"layer_norm", "default"}


@pytest.mark.slow
def test_auto_output_error(model_path, tmp_path):
    """The end-to-end error with `auto` stays near the per-weight budget
    (errors of independent weights add up, roughly in quadrature)."""
    path, inputs = model_path("mlp")
    _, (ref,) = _compile_run(path, inputs, tmp_path)
    artifact, (y,) = _compile_run(path, inputs, tmp_path, precision="auto", error_budget=0.02)
    rel = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert rel < 0.05
    assert _cosine(y, ref) >= 0.999


@pytest.mark.slow
def test_calibration(model_path, tmp_path):
    """Measured input statistics reach the pass (the report says so) and
    the result stays as accurate as with estimated statistics."""
    path, inputs = model_path("mlp")
    _, (ref,) = _compile_run(path, inputs, tmp_path)
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal(inputs["x"].shape).astype(np.float32)}
               for _ in range(2)]
    artifact, (y,) = _compile_run(path, inputs, tmp_path, precision="int4", calibration=samples)
    assert _cosine(y, ref) >= 0.99

    from sits_mlir.compiler.calibration import attach_input_stats
    with ir.Context() as context:
        module = import_model(onnx.load(path), context=context).module
        assert attach_input_stats(module, samples) == 3
        text = str(module)
        assert text.count("sits.input_stats") == 3
        passmanager.PassManager.parse(
            "builtin.module(sits-mixed-precision{precision=int8})").run(module.operation)
        stats = {ir.StringAttr(ir.DictAttr(e)["input_stats"]).value
                 for e in ir.ArrayAttr(module.operation.attributes["sits.report.precision"])}
        assert stats == {"calibration"}


def test_options_are_checked():
    from sits_mlir.compiler.driver import CompileOptions, _cpu_pipeline

    text = _cpu_pipeline(CompileOptions(precision="auto", error_budget=0.05, group_size=32))
    assert "precision=auto error-budget=0.05 group-size=32" in text
    with pytest.raises(ValueError, match="precision"):
        _cpu_pipeline(CompileOptions(precision="int3"))
    with pytest.raises(ValueError, match="error_budget"):
        _cpu_pipeline(CompileOptions(error_budget=-1))
    with pytest.raises(ValueError, match="group_size"):
        _cpu_pipeline(CompileOptions(group_size=48))
    with pytest.raises(ValueError, match="calibration"):
        from sits_mlir.compiler.calibration import calibration_samples
        calibration_samples([])


def test_fp8_needs_a_target_that_has_it(tmp_path):
    source = tmp_path / "m.mlir"
    source.write_text("""
func.func @main(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %y = sits.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}""")
    with pytest.raises(sits_mlir.CompileError, match="FP8 E4M3"):
        sits_mlir.compile(str(source), "cpu", tmp_path / "m.sitsm", precision="fp8")


def test_sits_opt_reproduces_python(tmp_path):
    """The graph pipeline with `auto` gives the same IR from Python and from
    sits-opt, through the named pipeline and through the pass itself."""
    sits_opt = shutil.which("sits-opt")
    if sits_opt is None:
        pytest.skip("sits-opt not on PATH")
    torch = pytest.importorskip("torch")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "bench"))
    from benchmark_models import Block

    torch.manual_seed(0)
    block = Block(d=64, h=4, ff=256).eval()
    buffer = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(block, (torch.randn(1, 16, 64),), buffer, input_names=["x"],
                          opset_version=17, dynamo=False, do_constant_folding=True)
    options = "precision=auto error-budget=0.02 group-size=32"
    pipelines = [f"builtin.module(sits-graph-pipeline{{{options}}})",
                 f"builtin.module(sits-mixed-precision{{{options}}})"]
    for pipeline in pipelines:
        with ir.Context() as context:
            module = import_model(onnx.load_from_string(buffer.getvalue()),
                                  context=context).module
            source = tmp_path / "model.mlir"
            source.write_text(module.operation.get_asm(enable_debug_info=True))
            passmanager.PassManager.parse(pipeline).run(module.operation)
            from_python = str(module)
        assert "sits.qmatmul" in from_python and "sits.report.precision" in from_python
        from_tool = subprocess.run([sits_opt, str(source), f"--pass-pipeline={pipeline}"],
                                   capture_output=True, text=True, check=True).stdout
        assert from_tool.strip() == from_python.strip()


def test_sits_compile_flags(tmp_path):
    from sits_mlir import runtime
    from sits_mlir.tools.compile import main

    source = tmp_path / "m.mlir"
    w = np.arange(-64, 64, dtype=np.float32).reshape(64, 2) / 8
    rows = ", ".join("[" + ", ".join(repr(float(v)) for v in r) + "]" for r in w)
    source.write_text(f"""
func.func @main(%x: tensor<4x64xf32>) -> tensor<4x2xf32> {{
  %w = arith.constant dense<[{rows}]> : tensor<64x2xf32>
  %y = sits.matmul %x, %w : (tensor<4x64xf32>, tensor<64x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}}""")
    out = tmp_path / "m.sitsm"
    assert main([str(source), "-o", str(out), "-q", "--precision", "int4",
                 "--group-size", "32"]) == 0
    assert "precision=int4" in runtime.read_manifest(str(out))["pipeline"]
    x = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    y = runtime.load(str(out))(x)
    assert _cosine(y, x @ w) >= 0.99


def _conv_reference(x, w, bias, stride, pad, groups):
    """NumPy convolution (N, C, D...) x (O, C/G, K...), channels first."""
    k = w.ndim - 2
    x = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    windows = np.lib.stride_tricks.sliding_window_view(x, w.shape[2:], axis=tuple(range(2, 2 + k)))
    windows = windows[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)]
    cg, og = w.shape[1], w.shape[0] // groups
    spatial = "defg"[:k]
    window = "wxyz"[:k]
    out = [np.einsum(f"nc{spatial}{window},oc{window}->no{spatial}",
                     windows[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og])
           for g in range(groups)]
    y = np.concatenate(out, axis=1)
    return y + bias.reshape((1, -1) + (1,) * k)


def test_qconv_matches_numpy(tmp_path):
    """sits.qconv computes the convolution by codes x scale: 2-D (32
    channels: the CPU's panel GEMM; grouped and strided: the grouped
    convolution) and 1-D (grouped generic), with bias and ReLU; so does the
    reference interpreter."""
    from sits_mlir.testing.reference import evaluate

    rng = np.random.default_rng(0)
    x2 = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
    x1 = rng.standard_normal((2, 4, 10)).astype(np.float32)
    cases = {  # name: (input, filter shape, stride, pad, groups)
        "panel": (x2, (32, 4, 3, 3), (1, 1), (1, 1), 1),
        "grouped": (x2, (6, 2, 3, 3), (2, 2), (1, 1), 2),
        "conv1d": (x1, (4, 2, 3), (2,), (0,), 2),
    }
    def literal(a):
        return np.array2string(a, separator=", ", threshold=1 << 30, max_line_width=1 << 30,
                               floatmode="unique")
    for name, (x, shape, stride, pad, groups) in cases.items():
        codes = rng.integers(-127, 128, size=shape).astype(np.int8)
        scale = rng.uniform(0.001, 0.01, size=shape[0]).astype(np.float32)
        bias = rng.standard_normal(shape[0]).astype(np.float32)
        w = codes * scale.astype(np.float64).reshape((-1,) + (1,) * (codes.ndim - 1))
        ref = np.maximum(_conv_reference(x.astype(np.float64), w, bias, stride, pad, groups), 0)
        t = lambda s, e="f32": f"tensor<{'x'.join(map(str, s))}x{e}>"
        source = tmp_path / f"{name}.mlir"
        source.write_text(f"""
func.func @main(%x: {t(x.shape)}) -> {t(ref.shape)} {{
  %w = arith.constant dense<{literal(codes)}> : {t(shape, "i8")}
  %s = arith.constant dense<{literal(scale)}> : {t(scale.shape)}
  %b = arith.constant dense<{literal(bias)}> : {t(bias.shape)}
  %y = sits.qconv %x, %w, %s bias(%b) {{strides = array<i64: {", ".join(map(str, stride))}>,
      padding = array<i64: {", ".join(map(str, pad + pad))}>, groups = {groups} : i64,
      activation = #sits.activation<relu>}}
      : ({t(x.shape)}, {t(shape, "i8")}, {t(scale.shape)}, {t(bias.shape)}) -> {t(ref.shape)}
  return %y : {t(ref.shape)}
}}""")
        model = sits_mlir.compile(str(source), "cpu", tmp_path / f"{name}.sitsm", threads=2).load()
        y = model.run(x)
        y = y[0] if isinstance(y, (list, tuple)) else y
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4, err_msg=name)
        # The reference interpreter agrees.
        with ir.Context():
            (z,) = evaluate(ir.Module.parse(source.read_text()), [x])
        np.testing.assert_allclose(z, ref, rtol=1e-4, atol=1e-4, err_msg=name)


@pytest.mark.slow
def test_cnn_int8_convolutions(model_path, tmp_path):
    """ResNet-18: every convolution's filter becomes INT8 per output channel
    (with the classifier's matmul), a quarter of the weight bytes, and the
    logits stay within cosine 0.999 of fp32."""
    path, inputs = model_path("cnn")
    fp32, (ref,) = _compile_run(path, inputs, tmp_path)
    int8, (y,) = _compile_run(path, inputs, tmp_path, precision="int8")
    assert _weight_bytes(int8) < 0.3 * _weight_bytes(fp32)
    assert _cosine(y, ref) >= 0.999
    entries = int8.reports["precision"]
    convs = [e for e in entries if len(e["shape"]) == 4]
    assert len(convs) == 20 and all(e["kind"] == "quantized" for e in entries)
    assert all(e["format"] == ["int8"] and e["est_error"] < 0.01 for e in convs)

    # Calibration measures each convolution's input per channel; its mean
    # corrects the biases (ReLU outputs are far from zero-mean).
    rng = np.random.default_rng(0)
    samples = [{"x": rng.standard_normal(inputs["x"].shape).astype(np.float32)}]
    calibrated, (yc,) = _compile_run(path, inputs, tmp_path, precision="int8",
                                     calibration=samples)
    entries = calibrated.reports["precision"]
    assert {e["input_stats"] for e in entries} == {"calibration"}
    assert sum(e["bias_correction"] > 0 for e in entries if len(e["shape"]) == 4) >= 10
    assert _cosine(yc, ref) >= 0.999


@pytest.mark.slow
def test_cnn_int8_on_gpu_targets(model_path, tmp_path):
    """GPU targets take the INT8 convolutions too: the GPU pipeline's
    tensor-level tiling of the quantized ResNet-18 (convolutions as GEMMs on
    the INT8 codes), lowered for the CPU, matches the CPU compile, and the
    h100 compile keeps the 8-bit weights."""
    from sits_mlir.dialects import sits

    path, inputs = model_path("cnn")
    _, (cpu,) = _compile_run(path, inputs, tmp_path, precision="int8")
    tiling = ("builtin.module("
              "sits-graph-pipeline{precision=int8},sits-fold-weight-transposes,"
              "sits-convert-to-linalg,canonicalize,cse,"
              "func.func(convert-elementwise-to-linalg,sits-gpu-conv-to-gemm,"
              "sits-gpu-materialize-copies,sits-cpu-fuse-elementwise),canonicalize,cse,"
              "func.func(sits-gpu-tile-and-fuse,"
              "sits-gpu-promote-operands{workgroup-memory=false}),canonicalize,cse,"
              "func.func(sits-gpu-vectorize),canonicalize,cse)")
    with ir.Context() as context:
        module = import_model(onnx.load(path), context=context).module
        module.operation.attributes["sits.target"] = sits.TargetAttr.get("h100")
        passmanager.PassManager.parse(tiling).run(module.operation)
        assert "xi8>" in str(module)
        artifact = sits_mlir.compile(module, target="cpu", output=tmp_path / "tiled.sitsm",
                                     threads=2)
    (y,) = artifact.load().run(*inputs.values())
    assert _cosine(y, cpu) >= 0.99999

    fp32 = sits_mlir.compile(path, target="h100", output=tmp_path / "fp32.h100.sitsm")
    int8 = sits_mlir.compile(path, target="h100", output=tmp_path / "int8.h100.sitsm",
                             precision="int8")
    assert _weight_bytes(int8) < 0.3 * _weight_bytes(fp32)


def _int4_dequantized(w: np.ndarray, group: int = 64) -> np.ndarray:
    """sits-mixed-precision's INT4 weights: per group of `group` rows and
    per column, scale = max|w| / 7 and codes rounded half to even."""
    k, n = w.shape
    out = np.empty_like(w)
    for g in range(0, k, group):
        block = w[g:g + group].astype(np.float64)
        amax = np.abs(w[g:g + group]).max(axis=0).astype(np.float64)
        scale = np.where(amax > 0, amax / 7.0, 1.0).astype(np.float32).astype(np.float64)
        codes = np.clip(np.rint(block / scale), -7, 7)
        out[g:g + group] = (codes * scale).astype(np.float32)
    return out


def _int8_rows(x: np.ndarray, group: int) -> np.ndarray:
    """`x` as the integer dot products see it: per row and group of `group`
    elements, codes round(x * 127 / amax) times amax / 127."""
    xg = x.reshape(*x.shape[:-1], -1, group).astype(np.float32)
    amax = np.abs(xg).max(-1, keepdims=True)
    inverse = np.where(amax > 0, np.float32(127) / np.where(amax > 0, amax, 1), 0)
    codes = np.clip(np.rint(xg * inverse.astype(np.float32)), -127, 127)
    return (codes * (amax / np.float32(127))).reshape(x.shape)


def test_int4_matmul_over_two_runtime_leading_extents(tmp_path):
    """A decoder's projections see [batch, tokens, K] with both extents known
    at run time only: the INT4 weight stays packed and is dequantized per
    group inside the contraction, and every shape computes x @ dequant(W)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = rng.standard_normal((128, 48)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "int4",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "tokens", 128])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "tokens", 48])],
        [numpy_helper.from_array(w, "w")])
    path = tmp_path / "int4.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    # Weight-only (f32 activations), and the default integer dot products,
    # which also round each row's group of 64 inputs to INT8.
    weight_only = sits_mlir.compile(path, "cpu", tmp_path / "int4.sitsm", threads=2,
                                    precision="int4", int8_activations=False).load()
    integer = sits_mlir.compile(path, "cpu", tmp_path / "int4-dot.sitsm", threads=2,
                                precision="int4").load()
    reference = _int4_dequantized(w).astype(np.float64)
    for batch, tokens in ((1, 1), (3, 5), (2, 17)):
        x = rng.standard_normal((batch, tokens, 128)).astype(np.float32)
        for model, inputs in ((weight_only, x), (integer, _int8_rows(x, 64))):
            (y,) = model.run(x=x)
            expected = inputs.astype(np.float64) @ reference
            assert y.shape == (batch, tokens, 48)
            np.testing.assert_allclose(y, expected, rtol=1e-4,
                                       atol=1e-4 * np.abs(expected).max())
