"""The benchmark models on a real GPU, against onnxruntime on the CPU.

Each model is compiled for the target that matches the GPU present
(`gpu_target`), loaded with device="cuda:0" (or "hip:0" for an AMD GPU) and
run from numpy inputs; the outputs must match onnxruntime's (relative error
below 1e-3, and elementwise within rtol 1e-3 of the largest magnitude).
Without a GPU (no driver, or one that lists no device) every test skips and
says why; tools/dev/gpu_check.sh runs them on an NVIDIA GPU machine.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

import sits_mlir
from sits_mlir import runtime, targets
from bench_models import relative_error, run_onnxruntime

pytestmark = pytest.mark.gpu

MODELS = ["mlp", "gpt_prefill", "gpt_decode", "cnn"]
#: NVIDIA targets, newest architecture first.
NVIDIA_TARGETS = ["h100", "a100", "v100"]
AMD_TARGETS = ["mi300x"]


def gpu_device(kind: str = "cuda") -> dict:
    """The first `kind` device the runtime lists, or a skip saying why not."""
    override = f"SITS_{kind.upper()}_DRIVER"
    if os.environ.get(override):
        pytest.skip(f"{override} points the runtime at another driver "
                    f"({os.environ[override]}): not a real GPU")
    listed = [d for d in runtime.devices() if d["kind"] == kind]
    if not listed:
        try:
            runtime.open_device(f"{kind}:0")
            why = f"the runtime lists no {kind} device"
        except runtime.DeviceError as e:
            why = str(e)
        pytest.skip(f"no {'NVIDIA' if kind == 'cuda' else 'AMD'} GPU: {why}")
    return listed[0]


def cuda_device() -> dict:
    return gpu_device("cuda")


def gpu_target(device: dict) -> str:
    """The SITS target for `device`: named after it when it is one of the
    targets (an H200 is h200, an MI300X mi300x), else the newest NVIDIA
    target whose architecture the device runs (its PTX is JIT-compiled on
    newer GPUs)."""
    name = device["name"].lower().replace(" ", "")
    for t in ["h200", *NVIDIA_TARGETS, *AMD_TARGETS]:
        if t in name:
            return t
    if device["kind"] != "cuda":
        pytest.skip(f"{device['name']}: no SITS target for this {device['kind']} device")
    arch = device.get("arch", "")
    if not arch.startswith("sm_"):
        pytest.skip(f"{device['name']}: the driver reports no compute capability")
    have = int(arch[3:])
    for t in NVIDIA_TARGETS:
        if int(targets.lookup(t).chip[3:]) <= have:
            return t
    pytest.skip(f"{device['name']} ({arch}) is older than every SITS target")


@pytest.fixture(scope="module", params=["cuda", "hip"])
def gpu(request):
    """(device, target, uri) of the GPU present, per kind."""
    device = gpu_device(request.param)
    return device, gpu_target(device), device["uri"]


@pytest.fixture(scope="module")
def compiled(model_path, tmp_path_factory, gpu):
    out = tmp_path_factory.mktemp("gpu_exec")
    cache = {}

    def get(name):
        if name not in cache:
            path, _ = model_path(name)
            try:
                cache[name] = sits_mlir.compile(path, target=gpu[1],
                                                output=out / f"{name}.{gpu[1]}.sitsm")
            except sits_mlir.CompileError as e:
                if gpu[0]["kind"] == "cuda":
                    raise
                # AMD code needs an AMDGPU-enabled LLVM: the error names it.
                pytest.skip(f"cannot compile for {gpu[1]}: {e}")
        return cache[name]
    return get


def check_outputs(name, outputs, expected):
    if not isinstance(outputs, (list, tuple)):
        outputs = [outputs]
    assert len(outputs) == len(expected)
    for actual, reference in zip(outputs, expected):
        assert actual.shape == reference.shape
        assert np.isfinite(actual).all(), f"{name}: non-finite outputs"
        err = relative_error(actual, reference)
        assert err < 1e-3, f"{name}: differs from onnxruntime by {err:.2e} (relative)"
        scale = float(np.abs(reference).max()) or 1.0
        np.testing.assert_allclose(actual, reference, rtol=1e-3, atol=1e-3 * scale)


@pytest.mark.parametrize("name", MODELS)
def test_model_on_gpu_matches_onnxruntime(model_path, compiled, gpu, name):
    path, inputs = model_path(name)
    model = runtime.load(compiled(name).path, device=gpu[2])
    assert model.device == gpu[2]
    expected = run_onnxruntime(path, inputs)
    check_outputs(name, model.run(*inputs.values()), expected)
    # A second call on the same loaded model (weights stay on the device).
    check_outputs(name, model.run(*inputs.values()), expected)


def test_calls_from_threads_share_the_model(model_path, compiled, gpu):
    from concurrent.futures import ThreadPoolExecutor

    path, inputs = model_path("mlp")
    model = runtime.load(compiled("mlp").path, device=gpu[2])
    expected = run_onnxruntime(path, inputs)
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda _: model.run(*inputs.values()), range(16)))
    for outputs in results:
        check_outputs("mlp", outputs, expected)


def test_cpu_artifact_is_refused_on_the_gpu(model_path, tmp_path, gpu):
    path, _ = model_path("mlp")
    art = sits_mlir.compile(path, target="cpu", output=tmp_path / "mlp.cpu.sitsm")
    with pytest.raises(runtime.IncompatibleArtifactError, match="compiled for the CPU"):
        runtime.load(art.path, device=gpu[2])
