"""Host code compiled for mi300x against the runtime's HIP driver, without a
GPU: the fake driver of test_gpu_driver.py under HIP's names
($SITS_HIP_DRIVER) loads the model's HSA code object and records the
launches, which must be the manifest's. The kernels themselves need an AMD
GPU (test_compile_gpu.py checks the code object).
"""

from __future__ import annotations

import numpy as np
import pytest

from test_gpu_driver import fake_cuda, run_fake  # noqa: F401 (fixture)


@pytest.fixture(scope="module")
def compiled_mlp_mi300x(model_path, tmp_path_factory):
    import sits_mlir
    from sits_mlir.compiler import gpu

    if gpu.find_amd_toolchain() is None:
        pytest.skip("no AMDGPU-enabled LLVM (tools/dev/system-packages.sh installs it)")
    path, inputs = model_path("mlp")
    out = tmp_path_factory.mktemp("hip_fake") / "mlp.mi300x.sitsm"
    return sits_mlir.compile(path, target="mi300x", output=out), inputs


@pytest.mark.slow
def test_mi300x_model_loads_its_code_object_and_launches_its_kernels(
        fake_cuda, compiled_mlp_mi300x, tmp_path):  # noqa: F811
    art, inputs = compiled_mlp_mi300x
    device = art.manifest["device"]
    np.savez(tmp_path / "inputs.npz", **inputs)
    out = run_fake(fake_cuda, f"""
        model = runtime.load({str(art.path)!r}, device="hip:0")
        loaded = stats("cuModuleLoadData")
        fake.sitsFakeCudaReset()
        y = model(**dict(np.load({str(tmp_path / "inputs.npz")!r})))
        result = {{"loaded": loaded, "ran": stats(), "launches": launches(),
                  "shape": list(y.shape)}}
        del model; gc.collect()
        result["after"] = stats()
        print(json.dumps(result))
    """, SITS_HIP_DRIVER=fake_cuda)
    # The code object was loaded once, through hipModuleLoadData.
    assert out["loaded"]["modules"] == 1 and out["loaded"]["calls"] == 1
    # Every launch of the manifest, in order, with its grid and block.
    launched = [(l["name"], l["grid"], l["block"]) for l in out["launches"]]
    assert launched == [(k["name"], k["grid"], k["block"]) for k in device["kernels"]]
    # Inputs in, the output out, everything released.
    assert out["ran"]["to_device"] == sum(a.nbytes for a in inputs.values())
    assert out["ran"]["to_host"] == int(np.prod(out["shape"])) * 4
    assert {k: out["after"][k] for k in ("buffers", "modules", "streams", "contexts")} == \
        {"buffers": 0, "modules": 0, "streams": 0, "contexts": 0}
