"""NVIDIA targets without a GPU: every benchmark model compiles for h100,
a100 and v100 into one artifact (host code with the device image, and the
weights), and its PTX passes ptxas for the target's architecture.

Running the code needs a GPU and the runtime's CUDA driver (see
passes/Codegen/GPU/README.md); these tests check what can be checked here.
"""

import re
import subprocess

import pytest

import sits_mlir
from sits_mlir import runtime, targets
from sits_mlir.compiler import gpu

MODELS = ["mlp", "gpt_prefill", "gpt_decode", "cnn"]
TARGETS = ["h100", "a100", "v100"]


@pytest.fixture(scope="module")
def compiled(model_path, tmp_path_factory):
    """`compiled(name, target)` -> Artifact, each compiled once."""
    out = tmp_path_factory.mktemp("gpu_artifacts")
    cache = {}

    def get(name, target):
        if (name, target) not in cache:
            path, _ = model_path(name)
            cache[name, target] = sits_mlir.compile(
                path, target=target, output=out / f"{name}.{target}.sitsm")
        return cache[name, target]
    return get


def _ptxas_or_skip():
    ptxas = gpu.find_ptxas()
    if ptxas is None:
        pytest.skip("ptxas not found: install the CUDA toolkit (or set SITS_PTXAS) to "
                    "validate PTX")
    return ptxas


def _validation_arch(ptxas: str, chip: str) -> str:
    """`chip` when ptxas can compile for it, else the oldest architecture it
    supports that runs `chip`'s PTX (CUDA 13 dropped sm_70: its PTX is
    checked by compiling it for sm_75)."""
    if gpu.ptxas_supports(ptxas, chip):
        return chip
    want = int(chip.split("_")[1])
    newer = [a for a in gpu.ptxas_architectures(ptxas)
             if re.fullmatch(r"sm_\d+", a) and int(a[3:]) >= want]
    if not newer:
        pytest.skip(f"ptxas supports no architecture that runs {chip} code")
    return newer[0]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", MODELS)
def test_compiles_into_one_artifact(compiled, name, target):
    art = compiled(name, target)
    t = targets.lookup(target)
    manifest = art.manifest
    device = manifest["device"]
    assert (device["kind"], device["abi"], device["chip"]) == ("cuda", "mlir-gpu-runtime", t.chip)
    assert device["features"] == [f for f in t.features.split(",") if f]
    # The host code is for this machine's CPU family and assumes no feature.
    host = targets.lookup("cpu")
    assert manifest["target"]["name"] == target
    assert manifest["target"]["triple"] == host.triple
    assert manifest["target"]["features"] == []
    # Host code (with the device image inside) and weights, in one file.
    info = runtime.read_artifact(art.path)
    code_offset, code_size = info.sections[f"code.{target}"]
    assert "weights" in info.sections
    with open(art.path, "rb") as f:
        f.seek(code_offset)
        code = f.read(code_size)
    assert code[:4] == b"\x7fELF"
    for symbol in (b"sits_entry_main", b"mgpuLaunchKernel", b"mgpuStreamSynchronize"):
        assert symbol in code
    # Kernels: real grids and blocks, no kernel of a single thread.
    kernels = device["kernels"]
    assert kernels
    for k in kernels:
        assert 1 <= k["block"][0] <= 1024 and k["block"][1:] == [1, 1], k
        assert k["grid"][0] >= 1, k
    assert max(k["block"][0] for k in kernels) >= 64
    # The image the host code loads: a fatbin (cubin + PTX) where ptxas can
    # compile for the chip, else PTX for the driver to compile.
    ptxas = gpu.find_ptxas()
    code_obj = art.device_code
    if gpu.ptxas_supports(ptxas, t.chip):
        assert device["image_format"] in ("fatbin", "bin")
        assert code_obj.cubin is not None and code_obj.cubin[:4] == b"\x7fELF"
        assert device["images"][0]["kind"] == "cubin"
    else:
        assert device["image_format"] == "ptx"
        assert "note" in device


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", MODELS)
def test_ptx_passes_ptxas(compiled, name, target, tmp_path):
    ptxas = _ptxas_or_skip()
    art = compiled(name, target)
    chip = targets.lookup(target).chip
    ptx = art.device_code.ptx
    assert f".target {chip}" in ptx
    # Every launch in the manifest has its kernel in the PTX.
    for k in art.manifest["device"]["kernels"]:
        assert f".entry {k['name']}(" in ptx
    path = tmp_path / f"{name}.ptx"
    path.write_text(ptx)
    arch = _validation_arch(ptxas, chip)
    proc = subprocess.run([ptxas, f"-arch={arch}", str(path), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_minilm_compiles(compiled):
    # Integer inputs, embedding gathers, a boolean attention mask.
    art = compiled("minilm", "h100")
    assert art.manifest["device"]["image_format"] in ("fatbin", "bin", "ptx")
    assert len(art.manifest["device"]["kernels"]) > 50


def test_matmul_tiles_are_staged_in_shared_memory(compiled):
    # The GEMMs read their operand tiles from shared memory, 16 bytes at a
    # time, between barriers; weights come in with 16-byte global loads.
    ptx = compiled("gpt_prefill", "h100").device_code.ptx
    assert re.search(r"\.shared \.align 16 \.b8 __wg_", ptx)
    assert "st.shared.v4" in ptx and "ld.global.v4" in ptx
    assert "bar.sync" in ptx and "fma.rn.f32" in ptx


def test_gpu_artifacts_are_refused_on_the_cpu(compiled):
    # The host code loads its device image when it is loaded: on the CPU the
    # runtime refuses the artifact before any of its code runs.
    art = compiled("mlp", "h100")
    with pytest.raises(runtime.IncompatibleArtifactError, match='on a cuda device'):
        runtime.load(art.path)
