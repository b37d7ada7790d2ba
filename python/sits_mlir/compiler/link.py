"""Linking compiled objects into a shared object the runtime can load.

LLVM emits a relocatable object; turning it into a shared object needs a
linker. SITS uses the first one available: $SITS_LINKER, then a C compiler
driver (cc, gcc, clang), then ld.lld or ld. Only compilation needs one; the
runtime never links.
"""

from __future__ import annotations

import os
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


def link_shared_object(objects: list[bytes]) -> bytes:
    """Links relocatable objects into a position-independent shared object
    (linked against libm, for the math functions LLVM leaves as calls)."""
    linker, is_driver = find_linker()
    with tempfile.TemporaryDirectory(prefix="sits-link-") as tmp:
        paths = []
        for i, obj in enumerate(objects):
            path = os.path.join(tmp, f"part{i}.o")
            with open(path, "wb") as f:
                f.write(obj)
            paths.append(path)
        out = os.path.join(tmp, "module.so")
        if is_driver:
            cmd = [linker, "-shared", "-o", out, *paths, "-lm"]
        else:
            cmd = [linker, "-shared", "--as-needed", "-o", out, *paths, "-lm", "-lc"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError("linking the compiled model failed",
                               [Diagnostic(message=f"{' '.join(cmd)}: {proc.stderr.strip()}")])
        with open(out, "rb") as f:
            return f.read()
