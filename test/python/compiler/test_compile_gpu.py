"""GPU targets without a GPU: every benchmark model compiles for h100, a100
and v100 into one artifact (host code with the device image, and the
weights), and its PTX passes ptxas for the target's architecture; and for
mi300x, whose HSA code object (built with the AMDGPU-enabled LLVM that
tools/dev/system-packages.sh installs) is checked with that LLVM's
llvm-readelf, llvm-nm and llvm-objdump.

Running the code needs a GPU and the runtime's CUDA or HIP driver (see
passes/Codegen/GPU/README.md); these tests check what can be checked here.
"""

import hashlib
import os
import re
import subprocess
import sys

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


@pytest.mark.slow
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


@pytest.mark.slow
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


# ---------------------------------------------------------------- AMD (gfx942)

AMD_MODELS = MODELS + ["minilm"]


def _amd_toolchain_or_skip():
    toolchain = gpu.find_amd_toolchain()
    if toolchain is None:
        pytest.skip("no AMDGPU-enabled LLVM (tools/dev/system-packages.sh installs Debian's "
                    "llvm-22 and lld-22; or set SITS_AMDGPU_LLVM)")
    return toolchain


def _tool(toolchain, name: str, *args: str) -> str:
    proc = subprocess.run([toolchain.tool(name), *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _kernel_metadata(notes: str) -> dict[str, dict[str, str]]:
    """The amdhsa.kernels entries of `llvm-readelf --notes`, by kernel name:
    their scalar fields (indented four spaces under each list item)."""
    body = notes.split("amdhsa.kernels:", 1)[1].split("amdhsa.target:", 1)[0]
    kernels = {}
    for entry in re.split(r"(?m)^  - ", body)[1:]:
        fields = dict(re.findall(r"(?m)^    (\.[a-z_]+):\s+(\S+)$", "    " + entry))
        kernels[fields[".name"]] = fields
    return kernels


@pytest.mark.slow
@pytest.mark.parametrize("name", AMD_MODELS)
def test_amd_compiles_into_one_artifact(compiled, name):
    _amd_toolchain_or_skip()
    art = compiled(name, "mi300x")
    t = targets.lookup("mi300x")
    device = art.manifest["device"]
    assert (device["kind"], device["vendor"], device["abi"]) == ("hip", "amd", "mlir-gpu-runtime")
    assert (device["triple"], device["chip"], device["image_format"]) == (
        "amdgcn-amd-amdhsa", "gfx942", "hsaco")
    assert device["code_object_version"] == 5
    hsaco = art.device_code.hsaco
    assert device["images"] == [{"kind": "hsaco", "arch": "gfx942", "bytes": len(hsaco),
                                 "sha256": hashlib.sha256(hsaco).hexdigest()}]
    assert art.manifest["target"]["triple"] == targets.lookup("cpu").triple
    # The host code embeds exactly this code object and loads it through the
    # same runtime ABI as NVIDIA code.
    info = runtime.read_artifact(art.path)
    offset, size = info.sections["code.mi300x"]
    with open(art.path, "rb") as f:
        f.seek(offset)
        code = f.read(size)
    assert hsaco in code
    for symbol in (b"sits_entry_main", b"mgpuModuleLoad", b"mgpuLaunchKernel",
                   b"mgpuStreamSynchronize"):
        assert symbol in code
    # Kernels tiled for a wavefront of 64: blocks of whole wavefronts.
    kernels = device["kernels"]
    assert kernels and max(k["block"][0] for k in kernels) >= t.simd_width
    for k in kernels:
        assert 1 <= k["block"][0] <= 1024 and k["block"][1:] == [1, 1], k
        assert k["grid"][0] >= 1, k


@pytest.mark.parametrize("name", AMD_MODELS)
def test_amd_code_object_is_valid_for_gfx942(compiled, name, tmp_path):
    toolchain = _amd_toolchain_or_skip()
    art = compiled(name, "mi300x")
    path = tmp_path / f"{name}.hsaco"
    path.write_bytes(art.device_code.hsaco)

    header = _tool(toolchain, "llvm-readelf", "--file-header", str(path))
    assert re.search(r"OS/ABI:\s+AMDGPU - HSA", header)
    assert re.search(r"ABI Version:\s+3", header)  # code object v5
    assert re.search(r"Type:\s+DYN", header)
    assert re.search(r"Machine:\s+EM_AMDGPU", header)
    assert re.search(r"Flags:\s+0x[0-9a-f]+, gfx942", header)

    # Every launched kernel is there, with its kernel descriptor; nothing is
    # left for the loader to resolve.
    symbols = _tool(toolchain, "llvm-readelf", "--dyn-symbols", str(path))
    launched = {k["name"] for k in art.manifest["device"]["kernels"]}
    for kernel in launched:
        name = re.escape(kernel)
        assert re.search(rf"FUNC\s+GLOBAL\s+PROTECTED\s+\d+\s+{name}$", symbols, re.M), kernel
        assert re.search(rf"OBJECT\s+GLOBAL\s+\w+\s+\d+\s+{name}\.kd$", symbols, re.M), kernel
    assert _tool(toolchain, "llvm-nm", "--undefined-only", str(path)).strip() == ""

    # The code object's metadata agrees with the launches: wave64, the
    # workgroup sizes launched are allowed, LDS within a CU's.
    notes = _tool(toolchain, "llvm-readelf", "--notes", str(path))
    assert "amdhsa.target:   amdgcn-amd-amdhsa--gfx942" in notes
    metadata = _kernel_metadata(notes)
    lds = int(targets.lookup("mi300x").shared_memory_per_unit_kb * 1024)
    for k in art.manifest["device"]["kernels"]:
        entry = metadata[k["name"]]
        assert entry[".symbol"] == k["name"] + ".kd"
        assert entry[".wavefront_size"] == "64"
        assert k["block"][0] <= int(entry[".max_flat_workgroup_size"]), (k, entry)
        assert int(entry[".group_segment_fixed_size"]) <= lds

    # It disassembles for gfx942: each kernel ends its program.
    disassembly = _tool(toolchain, "llvm-objdump", "--disassemble", "--mcpu=gfx942", str(path))
    assert disassembly.count("s_endpgm") >= len(launched)


def test_amd_matmul_tiles_are_staged_in_lds(compiled):
    # As on NVIDIA: GEMM operand tiles are loaded 16 bytes at a time into LDS
    # between barriers, and the register tiles use packed FMAs.
    toolchain = _amd_toolchain_or_skip()
    art = compiled("gpt_prefill", "mi300x")
    path = os.path.join(os.path.dirname(art.path), "gpt_prefill.staged.hsaco")
    with open(path, "wb") as f:
        f.write(art.device_code.hsaco)
    disassembly = _tool(toolchain, "llvm-objdump", "--disassemble", "--mcpu=gfx942", path)
    for instruction in ("global_load_dwordx4", "ds_read_b128", "s_barrier", "v_pk_fma_f32"):
        assert re.search(rf"^\s+{instruction}\b", disassembly, re.M), instruction


def test_amd_math_links_the_device_libraries(compiled, tmp_path):
    # GELU's erf comes from ocml, linked into the code object with the
    # control constants it reads: no symbol is left undefined, and the code
    # object exports its kernels only.
    toolchain = _amd_toolchain_or_skip()
    if gpu.find_device_libraries() is None:
        pytest.skip("ROCm device libraries not found (Debian: rocm-device-libs)")
    art = compiled("mlp", "mi300x")
    code = art.device_code
    assert code.device_libraries == art.manifest["device"]["device_libraries"] == ["ocml", "ockl"]
    assert b"__ocml_" in code.bitcode
    path = tmp_path / "mlp.hsaco"
    path.write_bytes(code.hsaco)
    assert _tool(toolchain, "llvm-nm", "--undefined-only", str(path)).strip() == ""
    exported = re.findall(r"^\S+ [TR] (\S+)$", _tool(toolchain, "llvm-nm", str(path)), re.M)
    launched = {k["name"] for k in art.manifest["device"]["kernels"]}
    assert set(exported) == launched | {f"{k}.kd" for k in launched}


def _wheel_llc() -> str | None:
    for site in sys.path:
        llc = os.path.join(site, "llvm", "bin", "llc")
        if os.path.isfile(llc):
            return llc
    return None


def test_amd_without_an_amdgpu_llvm_is_refused_clearly(tmp_path, monkeypatch):
    # A toolchain directory whose llc has no AMDGPU back end (the LLVM wheels'
    # llc): compiling for mi300x is a CompileError saying what to install and
    # why the directory was not used.
    llc = _wheel_llc()
    if llc is None:
        pytest.skip("the LLVM tools wheel's llc was not found")
    for tool in ("llvm-link", "opt", "llc", "ld.lld"):
        os.symlink(llc, tmp_path / tool)
    monkeypatch.setenv("SITS_AMDGPU_LLVM", str(tmp_path))
    assert gpu.find_amd_toolchain() is None
    with pytest.raises(sits_mlir.CompileError,
                       match="no AMDGPU-enabled LLVM toolchain found") as err:
        gpu.check_supported(targets.lookup("mi300x"))
    message = str(err.value)
    assert "llvm-22 lld-22 rocm-device-libs" in message
    assert f"{tmp_path}: llc " in message and "has no AMDGPU back end" in message


# A paged decoder on GPUs: the pool is an input the code writes in place
# (slot writes as a kernel, the gather through the block tables, attention
# over the gathered context; test_paged_attention.py runs these tilings on
# the CPU against a reference).

@pytest.fixture(scope="module")
def paged_decoder(tmp_path_factory):
    """`paged_decoder(target)` -> Artifact of a 2-layer GQA decoder compiled
    with kv_cache="paged", each target once."""
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "llm"))
    import gqa_decoder

    out = tmp_path_factory.mktemp("paged_gpu")
    model = gqa_decoder.build(str(out / "gqa.onnx"))
    cache = {}

    def get(target):
        if target not in cache:
            cache[target] = sits_mlir.compile(model, target=target, kv_cache="paged",
                                              output=out / f"gqa.{target}.sitsm")
        return cache[target]
    return get


def _check_paged_signature(art):
    args = {a["name"]: a for a in art.manifest["entry_points"][0]["args"]}
    pool = args["kv_pool"]
    assert pool["role"] == "input" and pool.get("updated_in_place") is True
    assert [n for n in ("block_tables", "slot_mapping", "context_lens") if n in args] == \
        ["block_tables", "slot_mapping", "context_lens"]
    assert not any(a["role"] == "output" and a["name"] == "kv_pool" for a in args.values())


@pytest.mark.parametrize("target", TARGETS)
def test_paged_decoder_compiles_and_passes_ptxas(paged_decoder, target, tmp_path):
    art = paged_decoder(target)
    _check_paged_signature(art)
    assert art.manifest["device"]["kernels"]
    ptxas = _ptxas_or_skip()
    path = tmp_path / "gqa.ptx"
    path.write_text(art.device_code.ptx)
    arch = _validation_arch(ptxas, targets.lookup(target).chip)
    proc = subprocess.run([ptxas, f"-arch={arch}", str(path), "-o", str(tmp_path / "k.cubin")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_paged_decoder_compiles_for_amd(paged_decoder, tmp_path):
    toolchain = _amd_toolchain_or_skip()
    art = paged_decoder("mi300x")
    _check_paged_signature(art)
    path = tmp_path / "gqa.hsaco"
    path.write_bytes(art.device_code.hsaco)
    assert _tool(toolchain, "llvm-nm", "--undefined-only", str(path)).strip() == ""
    symbols = _tool(toolchain, "llvm-readelf", "--dyn-symbols", str(path))
    for k in art.manifest["device"]["kernels"]:
        assert re.search(rf"FUNC\s+GLOBAL\s+PROTECTED\s+\d+\s+{re.escape(k['name'])}$",
                         symbols, re.M), k


@pytest.mark.parametrize("kv_dtype", ["int8", "int4"])
def test_quantized_paged_pools_are_cpu_only(tmp_path, kv_dtype):
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "llm"))
    import gqa_decoder

    model = gqa_decoder.build(str(tmp_path / "gqa.onnx"), layers=1)
    with pytest.raises(sits_mlir.CompileError,
                       match=f"kv_dtype='{kv_dtype}' is compiled for CPU targets only"):
        sits_mlir.compile(model, target="h100", kv_cache="paged", kv_dtype=kv_dtype,
                          output=tmp_path / "x.sitsm")
