"""Fixtures of the runtime tests: C kernels compiled into shared objects
(the same sources as the C++ tests, test/unit/runtime/core/kernels), and
artifacts built from them with sits_mlir.runtime.write_artifact."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from runtime_helpers import KERNELS, manifest


@pytest.fixture(scope="session")
def kernels(tmp_path_factory):
    """kernels(name) -> bytes of kernels/<name>.c compiled with `cc -shared`."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler to build the test kernels")
    out_dir = tmp_path_factory.mktemp("kernels")
    cache: dict[str, bytes] = {}

    def build(name: str) -> bytes:
        if name not in cache:
            so = out_dir / f"{name}.so"
            subprocess.run([cc, "-shared", "-fPIC", "-O2", "-pthread", "-o", str(so),
                            str(KERNELS / f"{name}.c")], check=True)
            cache[name] = so.read_bytes()
        return cache[name]

    return build


@pytest.fixture
def make_artifact(tmp_path, kernels):
    """make_artifact(kernel, entries, weights=None, **manifest_kwargs) -> path."""
    from sits_mlir import runtime

    counter = [0]

    def make(kernel, entries, weights=None, **kw):
        counter[0] += 1
        path = tmp_path / f"{kernel}-{counter[0]}.sitsm"
        runtime.write_artifact(path, manifest=manifest(entries, **kw),
                               code=kernels(kernel), weights=weights, target="cpu")
        return path

    return make
