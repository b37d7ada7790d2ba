"""GPU targets in the compiler driver: the pipeline string, device code
assembly (PTX -> cubin -> fatbin with NVIDIA's tools when present) and the
manifest's `device` entry.

The contract between the artifact and a runtime is in
passes/Codegen/GPU/README.md. In short: `code.<target>` is a host shared
object exporting `sits_entry_<name>(void **args)` as for the CPU, with
descriptors of device buffers; it embeds the device image and calls MLIR's
GPU runtime ABI (`mgpuModuleLoad`, `mgpuLaunchKernel`, `mgpuMemAlloc`, ...),
which the runtime's CUDA driver provides.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from .. import ir
from ..errors import CompileError, Diagnostic

__all__ = ["DeviceCode", "assemble", "check_supported", "find_ptxas", "generic_cpu",
           "manifest_entry", "pipeline", "ptxas_architectures", "ptxas_supports"]

#: What the Debian/Ubuntu packages and ROCm give: an AMDGPU-enabled llc and
#: ld.lld, and the device libraries.
AMD_TOOLCHAIN_HINT = (
    "the LLVM these wheels ship has no AMDGPU back end: install an AMDGPU-enabled "
    "LLVM toolchain (Debian/Ubuntu: 'apt-get install llvm-22 lld-22 rocm-device-libs', "
    "or ROCm, which provides llc, ld.lld and the device libraries)")


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


def check_supported(t) -> None:
    """Raises CompileError for GPU targets this build cannot generate code
    for (AMD), saying what to install."""
    if t.vendor == "amd":
        raise CompileError(
            f"target '{t.name}' ({t.chip}): AMD GPU code generation is not available",
            [Diagnostic(message=AMD_TOOLCHAIN_HINT)])
    if t.vendor != "nvidia":
        raise CompileError(f"target '{t.name}' is not a GPU")


def pipeline(t, opt_level: int, graph_options: str = "") -> str:
    """The pass pipeline sits_mlir.compile runs for NVIDIA target `t`: to
    the LLVM dialect with the kernels as PTX in a gpu.binary. `graph_options`
    are the graph passes' (driver._graph_options)."""
    return (f"builtin.module(sits-gpu-pipeline{{target={t.name} format=isa "
            f"opt-level={opt_level} {graph_options}".rstrip() + "})")


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


def assemble(module: ir.Module, t) -> DeviceCode:
    """Assembles the PTX that the pipeline left in `module`'s gpu.binary:
    cubin with ptxas and a fatbin (cubin + PTX) with fatbinary, when they
    can; then puts the image the host code should load back into the
    gpu.binary (an ObjectAttr of format fatbin, bin or assembly)."""
    from ..dialects import gpu

    binaries = _binaries(module)
    if len(binaries) != 1:
        raise CompileError(f"expected one GPU module after lowering, found {len(binaries)}")
    binary = binaries[0]
    objects = list(binary.attributes["objects"])
    obj = gpu.ObjectAttr(objects[0])
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


def generic_cpu(triple: str) -> str:
    """The LLVM CPU name for portable host code on `triple`'s architecture."""
    arch = triple.split("-", 1)[0]
    return {"x86_64": "x86-64", "aarch64": "generic", "arm64": "generic"}.get(arch, "generic")


def manifest_entry(t, code: DeviceCode) -> dict:
    """The manifest's `device` object (see passes/Codegen/GPU/README.md)."""
    images = [{"kind": "ptx", "arch": t.chip, "bytes": len(code.ptx.encode()),
               "sha256": hashlib.sha256(code.ptx.encode()).hexdigest()}]
    if code.cubin is not None:
        images.insert(0, {"kind": "cubin", "arch": t.chip, "bytes": len(code.cubin),
                          "sha256": hashlib.sha256(code.cubin).hexdigest()})
    entry = {
        "kind": "cuda",
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
