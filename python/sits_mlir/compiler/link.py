"""Linking compiled objects into a shared object the runtime can load.

LLVM emits a relocatable object; turning it into a shared object needs a
linker. SITS uses the first one available: $SITS_LINKER, then a C compiler
driver (cc, gcc, clang), then ld.lld or ld. Code for another architecture
(an `aarch64` artifact built on x86-64) is linked by ld.lld, which links
every architecture, without this machine's C library: its math calls bind
when the runtime loads it. Only compilation needs a linker; the runtime
never links.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile

from ..errors import CompileError, Diagnostic

__all__ = ["find_linker", "link_shared_object"]

_DRIVERS = ("cc", "gcc", "clang")
_LINKERS = ("ld.lld", "ld")


def find_linker() -> tuple[str, bool]:
    """(path, is_compiler_driver) of the linker to use."""
    override = os.environ.get("SITS_LINKER")
    if override:
        path = shutil.which(override)
        if path is None:
            raise CompileError(f"SITS_LINKER={override!r} is not an executable on PATH")
        return path, os.path.basename(path) in _DRIVERS
    for name in _DRIVERS:
        path = shutil.which(name)
        if path:
            return path, True
    for name in _LINKERS:
        path = shutil.which(name)
        if path:
            return path, False
    raise CompileError(
        "no linker found to build the compiled model: install a C toolchain "
        "(e.g. 'apt-get install gcc' or 'apt-get install lld') or set SITS_LINKER")


_ARCH_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}


def _arch(name: str) -> str:
    name = name.lower()
    return _ARCH_ALIASES.get(name, name)


def _cross_linker() -> str:
    for name in (os.environ.get("SITS_LINKER"), "ld.lld", "ld.lld-22"):
        path = shutil.which(name) if name else None
        if path and "lld" in os.path.basename(path):
            return path
    raise CompileError(
        "linking code for another architecture needs ld.lld: install it "
        "(e.g. 'apt-get install lld') or set SITS_LINKER to an ld.lld")


def link_shared_object(objects: list[bytes], triple: str | None = None) -> bytes:
    """Links relocatable objects for `triple` (default: this machine) into a
    position-independent shared object, linked against libm for the math
    functions LLVM leaves as calls when the code is for this machine."""
    if triple and _arch(triple.split("-")[0]) != _arch(platform.machine()):
        linker, is_driver, libraries = _cross_linker(), False, []
    else:
        linker, is_driver = find_linker()
        libraries = ["-lm"] if is_driver else ["-lm", "-lc"]
    with tempfile.TemporaryDirectory(prefix="sits-link-") as tmp:
        paths = []
        for i, obj in enumerate(objects):
            path = os.path.join(tmp, f"part{i}.o")
            with open(path, "wb") as f:
                f.write(obj)
            paths.append(path)
        out = os.path.join(tmp, "module.so")
        if is_driver:
            cmd = [linker, "-shared", "-o", out, *paths, *libraries]
        else:
            cmd = [linker, "-shared", "--as-needed", "-o", out, *paths, *libraries]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError("linking the compiled model failed",
                               [Diagnostic(message=f"{' '.join(cmd)}: {proc.stderr.strip()}")])
        with open(out, "rb") as f:
            return f.read()
