"""GPU targets in the compiler driver: the pipeline string, device code
assembly (NVIDIA: PTX -> cubin -> fatbin with NVIDIA's tools when present;
AMD: LLVM bitcode -> HSA code object with an AMDGPU-enabled LLVM) and the
manifest's `device` entry.

The contract between the artifact and a runtime is in
passes/Codegen/GPU/README.md. In short: `code.<target>` is a host shared
object exporting `sits_entry_<name>(void **args)` as for the CPU, with
descriptors of device buffers; it embeds the device image and calls MLIR's
GPU runtime ABI (`mgpuModuleLoad`, `mgpuLaunchKernel`, `mgpuMemAlloc`, ...),
which the runtime's CUDA and HIP drivers provide.
"""

from __future__ import annotations

import functools
import glob
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from .. import ir
from ..errors import CompileError, Diagnostic

__all__ = ["AmdToolchain", "DeviceCode", "assemble", "check_supported", "find_amd_toolchain",
           "find_device_libraries", "find_ptxas", "generic_cpu", "manifest_entry", "pipeline",
           "ptxas_architectures", "ptxas_supports"]

#: What the Debian/Ubuntu packages and ROCm give: an AMDGPU-enabled llc and
#: ld.lld, and the device libraries.
AMD_TOOLCHAIN_HINT = (
    "the LLVM these wheels ship has no AMDGPU back end: install an AMDGPU-enabled "
    "LLVM toolchain (Debian/Ubuntu: 'apt-get install llvm-22 lld-22 rocm-device-libs', "
    "or ROCm, which provides llc, ld.lld and the device libraries), or point "
    "SITS_AMDGPU_LLVM at the directory holding its llvm-link, opt, llc and ld.lld")

#: The LLVM tools that finish AMD kernels, by their unversioned names.
_AMD_TOOLS = ("llvm-link", "opt", "llc", "ld.lld")


@dataclass
class DeviceCode:
    """The device code of a compiled model, as the driver assembled it."""

    #: PTX text of all kernels (one module).
    ptx: str
    #: cubin for the target's exact architecture, or None when ptxas was not
    #: available (or cannot compile for it).
    cubin: bytes | None
    #: What the host code embeds and loads: "fatbin" (cubin + PTX), "bin"
    #: (cubin only) or "ptx" (compiled by the driver's JIT at load time).
    image_format: str
    #: Why there is no cubin, when there is none.
    note: str = ""
    #: ptxas's version string, when it ran.
    ptxas_version: str = ""
    kernels: list[dict] = field(default_factory=list)
    #: AMD: the HSA code object (an ELF shared object for the chip) that the
    #: host code loads, and the kernels' LLVM bitcode it was built from
    #: (before the device libraries were linked).
    hsaco: bytes | None = None
    bitcode: bytes | None = None
    #: AMD: the device libraries linked in ("ocml", "ockl"), the version of
    #: the LLVM that built the code object, and its code object version.
    device_libraries: list[str] = field(default_factory=list)
    llvm_version: str = ""
    code_object_version: int = 0


@dataclass(frozen=True)
class AmdToolchain:
    """An AMDGPU-enabled LLVM: the directory of its tools, and its version."""

    bin_dir: str
    version: str

    def tool(self, name: str) -> str:
        return os.path.join(self.bin_dir, name)


def check_supported(t) -> None:
    """Raises CompileError for GPU targets this machine cannot generate code
    for (AMD without an AMDGPU-enabled LLVM), saying what to install."""
    if t.vendor == "amd":
        toolchain, rejected = _amd_toolchain_search()
        if toolchain is None:
            raise CompileError(
                f"target '{t.name}' ({t.chip}): no AMDGPU-enabled LLVM toolchain found",
                [Diagnostic(message=AMD_TOOLCHAIN_HINT)] +
                [Diagnostic(message=reason) for reason in rejected])
        return
    if t.vendor != "nvidia":
        raise CompileError(f"target '{t.name}' is not a GPU")


def pipeline(t, opt_level: int, graph_options: str = "") -> str:
    """The pass pipeline sits_mlir.compile runs for GPU target `t`: to the
    LLVM dialect with the kernels in a gpu.binary, as PTX (NVIDIA) or LLVM
    bitcode (AMD; finished by `assemble`). `graph_options` are the graph
    passes' (driver._graph_options)."""
    fmt = "llvm" if t.vendor == "amd" else "isa"
    return (f"builtin.module(sits-gpu-pipeline{{target={t.name} format={fmt} "
            f"opt-level={opt_level} {graph_options}".rstrip() + "})")


def _llvm_major() -> int:
    from .._mlir_libs import _sits

    return int(_sits.llvm_version().split(".")[0])


@functools.lru_cache(maxsize=None)
def _llc_info(llc: str) -> tuple[str, bool]:
    """(LLVM version, whether it has the AMDGPU back end) of `llc`."""
    try:
        out = subprocess.run([llc, "--version"], capture_output=True, text=True).stdout
    except OSError:
        return "", False
    m = re.search(r"LLVM version (\d+\.\d+\.\d+)", out)
    return (m.group(1) if m else ""), bool(re.search(r"^\s*amdgcn\s", out, re.M))


def _amd_candidates(override: str) -> list[str]:
    """Directories that may hold an AMDGPU-enabled LLVM, best first:
    `override` ($SITS_AMDGPU_LLVM) alone when set; else the distribution's
    versioned LLVM (llc-22, ... on PATH, /usr/lib/llvm-22/bin) of this
    compiler's LLVM version or newer, then ROCm's."""
    if override:
        return [override]
    major = _llvm_major()
    dirs = []
    for version in range(major, major + 4):
        versioned = shutil.which(f"llc-{version}")
        if versioned:
            dirs.append(os.path.dirname(os.path.realpath(versioned)))
        dirs.append(f"/usr/lib/llvm-{version}/bin")
    for root in (os.environ.get("ROCM_PATH"), "/opt/rocm"):
        if root:
            dirs.append(os.path.join(root, "llvm", "bin"))
    return list(dict.fromkeys(dirs))


def _amd_toolchain_search() -> tuple[AmdToolchain | None, tuple[str, ...]]:
    """(the first usable toolchain, why each directory looked at was not)."""
    return _amd_toolchain_search_in(os.environ.get("SITS_AMDGPU_LLVM", ""), os.environ.get("PATH"))


@functools.lru_cache(maxsize=None)
def _amd_toolchain_search_in(override: str, path: str | None):
    # `path` ($PATH, where llc-22 is looked for) is part of the cache key.
    major = _llvm_major()
    rejected = []
    for bin_dir in _amd_candidates(override):
        missing = [t for t in _AMD_TOOLS if not os.access(os.path.join(bin_dir, t), os.X_OK)]
        if missing:
            if os.path.isdir(bin_dir) or override:
                rejected.append(f"{bin_dir}: no {', '.join(missing)}")
            continue
        version, amdgpu = _llc_info(os.path.join(bin_dir, "llc"))
        if not amdgpu:
            rejected.append(f"{bin_dir}: llc {version} has no AMDGPU back end")
        elif not version or int(version.split(".")[0]) < major:
            # Bitcode is read by the LLVM that wrote it or a newer one.
            rejected.append(f"{bin_dir}: LLVM {version or '(unknown version)'} is older than "
                            f"this compiler's LLVM {major} and cannot read its bitcode")
        else:
            return AmdToolchain(bin_dir, version), tuple(rejected)
    return None, tuple(rejected)


def find_amd_toolchain() -> AmdToolchain | None:
    """The AMDGPU-enabled LLVM that finishes AMD kernels: the directory
    $SITS_AMDGPU_LLVM when set, else the first of the distribution's LLVM
    (llc-22, ...) and ROCm's (/opt/rocm/llvm/bin) whose llc has the AMDGPU
    back end and is at least this compiler's LLVM version."""
    return _amd_toolchain_search()[0]


def find_device_libraries() -> str | None:
    """The directory of the ROCm device libraries' bitcode (ocml.bc,
    ockl.bc): $SITS_ROCM_DEVICE_LIBS when set, else ROCm's or the
    distribution's (Debian's rocm-device-libs)."""
    override = os.environ.get("SITS_ROCM_DEVICE_LIBS")
    if override:
        candidates = [override]
    else:
        candidates = [os.path.join(root, "amdgcn", "bitcode")
                      for root in (os.environ.get("ROCM_PATH"), "/opt/rocm") if root]
        candidates += sorted(glob.glob("/opt/rocm/lib/llvm/lib/clang/*/lib/amdgcn/bitcode"))
        candidates += sorted(glob.glob("/usr/lib/*/amdgcn/bitcode")) + ["/usr/lib/amdgcn/bitcode"]
    for directory in candidates:
        if all(os.path.isfile(os.path.join(directory, f"{lib}.bc")) for lib in ("ocml", "ockl")):
            return directory
    return None


@functools.lru_cache(maxsize=None)
def find_ptxas() -> str | None:
    """ptxas from $SITS_PTXAS, else PATH, else /usr/local/cuda/bin."""
    override = os.environ.get("SITS_PTXAS")
    if override:
        return shutil.which(override)
    return shutil.which("ptxas") or shutil.which("ptxas", path="/usr/local/cuda/bin")


@functools.lru_cache(maxsize=None)
def _ptxas_info(ptxas: str) -> tuple[str, frozenset]:
    """(version, architectures ptxas can compile for)."""
    version = ""
    try:
        out = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"V(\d+\.\d+\.\d+)", out)
        version = m.group(1) if m else out.strip().splitlines()[-1]
        text = subprocess.run([ptxas, "--help"], capture_output=True, text=True).stdout
    except OSError:
        return version, frozenset()
    return version, frozenset(re.findall(r"'(sm_\d+[a-z]?)'", text))


def ptxas_architectures(ptxas: str | None) -> list[str]:
    """The `sm_XX` architectures `ptxas` can compile for, oldest first."""
    if not ptxas:
        return []
    return sorted(_ptxas_info(ptxas)[1], key=lambda a: (int(re.sub(r"\D", "", a)), a))


def ptxas_supports(ptxas: str | None, chip: str) -> bool:
    """Whether `ptxas` can produce a cubin for `chip` (CUDA 13 dropped
    sm_70 and older, for instance)."""
    return bool(ptxas) and chip in _ptxas_info(ptxas)[1]


def _run(cmd: list[str], what: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"{what} failed", [Diagnostic(
            message=f"{' '.join(cmd)}: {(proc.stderr or proc.stdout).strip()}")])


def _binaries(module: ir.Module):
    return [op for op in module.body.operations if op.operation.name == "gpu.binary"]


def _kernels(module: ir.Module) -> list[dict]:
    """Each launch in the host code: kernel, grid and block sizes (-1 where
    not a constant)."""
    def const(value) -> int:
        owner = value.owner
        try:
            if owner.name in ("llvm.mlir.constant", "arith.constant"):
                return int(ir.IntegerAttr(owner.attributes["value"]).value)
        except (ValueError, KeyError, AttributeError):
            pass
        return -1

    kernels = []

    def visit(op):
        for region in op.regions:
            for block in region.blocks:
                for inner in block.operations:
                    if inner.operation.name == "gpu.launch_func":
                        operands = list(inner.operation.operands)
                        # Segments: async dependencies, then one operand each
                        # for grid x, y, z and block x, y, z.
                        segments = list(ir.DenseI32ArrayAttr(
                            inner.operation.attributes["operandSegmentSizes"]))
                        start = segments[0]
                        ref = str(inner.operation.attributes["kernel"])
                        kernels.append({
                            "name": ref.rsplit("::@", 1)[-1],
                            "grid": [const(v) for v in operands[start:start + 3]],
                            "block": [const(v) for v in operands[start + 3:start + 6]]})
                    visit(inner.operation)

    visit(module.operation)
    return kernels


def _single_object(module: ir.Module):
    from ..dialects import gpu

    binaries = _binaries(module)
    if len(binaries) != 1:
        raise CompileError(f"expected one GPU module after lowering, found {len(binaries)}")
    binary = binaries[0]
    return binary, gpu.ObjectAttr(list(binary.attributes["objects"])[0])


def assemble(module: ir.Module, t, opt_level: int = 3) -> DeviceCode:
    """Assembles the device code that the pipeline left in `module`'s
    gpu.binary into the image the host code loads, and puts that back into
    the gpu.binary. NVIDIA: PTX -> cubin with ptxas and a fatbin (cubin +
    PTX) with fatbinary, when they can (format fatbin, bin or assembly).
    AMD: LLVM bitcode -> HSA code object (format bin), see `_assemble_amd`."""
    if t.vendor == "amd":
        return _assemble_amd(module, t, opt_level)
    from ..dialects import gpu

    binary, obj = _single_object(module)
    if obj.format != gpu.CompilationTarget.Assembly:
        raise CompileError("the GPU pipeline did not produce PTX (format=isa)")
    ptx = obj.object.decode()
    code = DeviceCode(ptx=ptx, cubin=None, image_format="ptx", kernels=_kernels(module))

    ptxas = find_ptxas()
    if ptxas is None:
        code.note = "ptxas not found (set SITS_PTXAS or add CUDA's bin to PATH): PTX only"
    elif not ptxas_supports(ptxas, t.chip):
        code.ptxas_version = _ptxas_info(ptxas)[0]
        code.note = (f"ptxas {code.ptxas_version} cannot compile for {t.chip}: PTX only, "
                     "compiled by the CUDA driver when the model is loaded")
    else:
        code.ptxas_version = _ptxas_info(ptxas)[0]
        with tempfile.TemporaryDirectory(prefix="sits-ptx-") as tmp:
            ptx_path = os.path.join(tmp, "kernels.ptx")
            cubin_path = os.path.join(tmp, "kernels.cubin")
            with open(ptx_path, "w") as f:
                f.write(ptx)
            _run([ptxas, f"-arch={t.chip}", "-O3", ptx_path, "-o", cubin_path],
                 f"ptxas -arch={t.chip}")
            with open(cubin_path, "rb") as f:
                code.cubin = f.read()
            fatbinary = shutil.which("fatbinary", path=os.path.dirname(ptxas)) or \
                shutil.which("fatbinary")
            if fatbinary:
                sm = t.chip.split("_", 1)[1]
                fatbin_path = os.path.join(tmp, "kernels.fatbin")
                _run([fatbinary, "-64", f"--image3=kind=elf,sm={sm},file={cubin_path}",
                      f"--image3=kind=ptx,sm={sm},file={ptx_path}",
                      f"--create={fatbin_path}"], "fatbinary")
                with open(fatbin_path, "rb") as f:
                    image = f.read()
                code.image_format = "fatbin"
                fmt = gpu.CompilationTarget.Fatbin
            else:
                code.note = "fatbinary not found: the cubin alone is embedded (no PTX fallback)"
                image, code.image_format = code.cubin, "bin"
                fmt = gpu.CompilationTarget.Binary
            with module.context:
                new = gpu.ObjectAttr.get(obj.target, int(fmt), image, obj.properties,
                                         obj.kernels)
                binary.attributes["objects"] = ir.ArrayAttr.get([new])
    return code


def _code_object_version(elf: bytes) -> int:
    """The code object version of an AMDGPU ELF, from its ABI version byte
    (ELFABIVERSION_AMDGPU_HSA_V4 = 2, V5 = 3, V6 = 4)."""
    return elf[8] + 2 if len(elf) > 8 and elf[:4] == b"\x7fELF" else 0


def _assemble_amd(module: ir.Module, t, opt_level: int) -> DeviceCode:
    """Finishes the kernels' LLVM bitcode into an HSA code object with an
    AMDGPU-enabled LLVM, as ROCm's compiler does: llvm-link (the ROCm device
    libraries the kernels call, only what they use), opt, llc for the chip,
    ld.lld -shared. The code object replaces the bitcode in the gpu.binary
    (format bin), which the host code loads with mgpuModuleLoad."""
    from ..dialects import gpu

    binary, obj = _single_object(module)
    if obj.format != gpu.CompilationTarget.Offload:
        raise CompileError("the GPU pipeline did not produce LLVM bitcode (format=llvm)")
    toolchain = find_amd_toolchain()
    if toolchain is None:
        check_supported(t)  # raises, saying what to install
    bitcode = obj.object
    libraries = []
    if obj.properties is not None and "device_libraries" in obj.properties:
        libraries = [ir.StringAttr(a).value
                     for a in ir.ArrayAttr(obj.properties["device_libraries"])]
    code = DeviceCode(ptx="", cubin=None, image_format="hsaco", kernels=_kernels(module),
                      bitcode=bitcode, device_libraries=libraries,
                      llvm_version=toolchain.version)
    target_flags = [f"-mtriple={t.triple}", f"-mcpu={t.chip}"]
    if t.features:
        target_flags.append(f"-mattr={t.features}")
    level = max(0, min(int(opt_level), 3))
    with tempfile.TemporaryDirectory(prefix="sits-amdgpu-") as tmp:
        def path(name: str) -> str:
            return os.path.join(tmp, name)

        with open(path("kernels.bc"), "wb") as f:
            f.write(bitcode)
        linked = path("kernels.bc")
        if libraries:
            libdir = find_device_libraries()
            if libdir is None:
                raise CompileError(
                    f"target '{t.name}': the kernels call the ROCm device libraries "
                    f"({', '.join(libraries)}), which were not found",
                    [Diagnostic(message="install them (Debian/Ubuntu: 'apt-get install "
                                "rocm-device-libs', or ROCm), or point SITS_ROCM_DEVICE_LIBS "
                                "at the directory holding ocml.bc and ockl.bc")])
            # Flags apply to the files after the first: only what the
            # kernels use is linked, and made internal to the code object.
            _run([toolchain.tool("llvm-link"), linked, "--only-needed", "--internalize",
                  *[os.path.join(libdir, f"{lib}.bc") for lib in libraries],
                  "-o", path("linked.bc")], "llvm-link (device libraries)")
            linked = path("linked.bc")
        # Only kernels stay visible: device functions and the libraries'
        # control constants are internal, folded into their users, removed.
        _run([toolchain.tool("opt"), *target_flags, "-amdgpu-internalize-symbols",
              f"-passes=default<O{level}>", linked, "-o", path("opt.bc")], "opt")
        _run([toolchain.tool("llc"), *target_flags, f"-O{level}", "-filetype=obj",
              path("opt.bc"), "-o", path("kernels.o")], f"llc -mcpu={t.chip}")
        # A symbol left undefined would fail only when the runtime loads it.
        _run([toolchain.tool("ld.lld"), "-shared", "--no-undefined", path("kernels.o"), "-o",
              path("kernels.hsaco")], "ld.lld")
        with open(path("kernels.hsaco"), "rb") as f:
            code.hsaco = f.read()
    code.code_object_version = _code_object_version(code.hsaco)
    with module.context:
        new = gpu.ObjectAttr.get(obj.target, int(gpu.CompilationTarget.Binary), code.hsaco,
                                 obj.properties, obj.kernels)
        binary.attributes["objects"] = ir.ArrayAttr.get([new])
    return code


def generic_cpu(triple: str) -> str:
    """The LLVM CPU name for portable host code on `triple`'s architecture."""
    arch = triple.split("-", 1)[0]
    return {"x86_64": "x86-64", "aarch64": "generic", "arm64": "generic"}.get(arch, "generic")


def manifest_entry(t, code: DeviceCode) -> dict:
    """The manifest's `device` object (see passes/Codegen/GPU/README.md)."""
    if t.vendor == "amd":
        return {
            "kind": "hip",
            "vendor": "amd",
            "abi": "mlir-gpu-runtime",
            "triple": t.triple,
            "chip": t.chip,
            "features": [f for f in t.features.split(",") if f],
            "image_format": "hsaco",
            "images": [{"kind": "hsaco", "arch": t.chip, "bytes": len(code.hsaco),
                        "sha256": hashlib.sha256(code.hsaco).hexdigest()}],
            "code_object_version": code.code_object_version,
            "device_libraries": code.device_libraries,
            "llvm_version": code.llvm_version,
            "kernels": code.kernels,
        }
    images = [{"kind": "ptx", "arch": t.chip, "bytes": len(code.ptx.encode()),
               "sha256": hashlib.sha256(code.ptx.encode()).hexdigest()}]
    if code.cubin is not None:
        images.insert(0, {"kind": "cubin", "arch": t.chip, "bytes": len(code.cubin),
                          "sha256": hashlib.sha256(code.cubin).hexdigest()})
    entry = {
        "kind": "cuda",
        "vendor": "nvidia",
        "abi": "mlir-gpu-runtime",
        "triple": t.triple,
        "chip": t.chip,
        "features": [f for f in t.features.split(",") if f],
        "image_format": code.image_format,
        "images": images,
        "kernels": code.kernels,
    }
    if code.ptxas_version:
        entry["ptxas_version"] = code.ptxas_version
    if code.note:
        entry["note"] = code.note
    return entry
