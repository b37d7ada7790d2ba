"""SITS as an `onnx.backend.base.Backend`.

The adapter that ONNX's own backend tests (and any harness written against
that interface) drive: `prepare` compiles a model to a .sitsm artifact for
the CPU and loads it; `run` takes and returns NumPy arrays in graph order.

    from sits_mlir.testing.onnx_backend import SitsBackend
    rep = SitsBackend.prepare(model)          # onnx.ModelProto
    outputs = rep.run([x, y])

`prepare(model, dynamic=True)` first marks every input dimension dynamic
(as onnx-mlir's dynamic mode does), so the compiled code must take the
extents at run time. `cache_dir=` keeps compiled artifacts (and compile
errors) keyed by the model, the mode and the compiler's own binaries, so a
rerun with an unchanged compiler skips compilation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import shutil
import tempfile
import weakref
from typing import Any, Sequence

import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep

from ..errors import CompileError, Diagnostic, UnsupportedNode

__all__ = ["SitsBackend", "SitsBackendRep", "make_dynamic", "compiler_fingerprint"]


def make_dynamic(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of `model` whose graph inputs have only symbolic dimensions
    (`<input>_d<k>`); initializers are untouched; output extents and
    value_info are cleared so that inference recomputes them."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    g = model.graph
    initializers = {t.name for t in g.initializer}
    for inp in g.input:
        if inp.name in initializers or not inp.type.HasField("tensor_type"):
            continue
        shape = inp.type.tensor_type.shape
        for k, d in enumerate(shape.dim):
            d.Clear()
            d.dim_param = f"{inp.name}_d{k}"
    for out in g.output:  # unknown extents: shape inference names them
        if out.type.HasField("tensor_type") and out.type.tensor_type.HasField("shape"):
            for d in out.type.tensor_type.shape.dim:
                d.Clear()
    del g.value_info[:]
    return model


_FINGERPRINT: str | None = None


def compiler_fingerprint() -> str:
    """A hash of the compiler's native libraries and Python sources: cached
    artifacts are valid exactly as long as it is unchanged."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        # The package as imported (not symlinks resolved): a build tree
        # links the Python sources next to the native libraries.
        root = pathlib.Path(os.path.abspath(__file__)).parents[1]
        h = hashlib.sha256()
        files = sorted(p for p in root.rglob("*")
                       if p.is_file() and (p.suffix in (".py", ".so") or ".so." in p.name))
        for p in files:
            h.update(str(p.relative_to(root)).encode())
            with open(p, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        _FINGERPRINT = h.hexdigest()[:32]
    return _FINGERPRINT


def _error_to_json(e: CompileError) -> dict:
    return {"summary": e.summary,
            "diagnostics": [dict(dataclasses.asdict(d), unsupported=isinstance(d, UnsupportedNode))
                            for d in e.diagnostics]}


def _error_from_json(data: dict) -> CompileError:
    diags = []
    for d in data["diagnostics"]:
        cls = UnsupportedNode if d.pop("unsupported") else Diagnostic
        d["notes"] = tuple(d.get("notes", ()))
        diags.append(cls(**d))
    return CompileError(data["summary"], diags)


class SitsBackendRep(BackendRep):
    """A compiled model: `run(inputs)` returns its outputs in graph order."""

    def __init__(self, model, input_names: Sequence[str], artifact: str):
        self._model = model
        self.input_names = list(input_names)
        self.artifact = artifact

    def run(self, inputs: Any, **kwargs) -> tuple[np.ndarray, ...]:
        if isinstance(inputs, dict):
            inputs = [inputs[n] for n in self.input_names]
        elif isinstance(inputs, np.ndarray):
            inputs = [inputs]
        outputs = self._model(*[np.asarray(x) for x in inputs])
        if not isinstance(outputs, (list, tuple)):
            outputs = (outputs,)
        return tuple(outputs)


class SitsBackend(Backend):
    """Compiles with `sits_mlir.compile(model, target="cpu")`."""

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", *,
                dynamic: bool = False, cache_dir: str | os.PathLike | None = None,
                **kwargs) -> SitsBackendRep:
        if not cls.supports_device(device):
            raise CompileError(f"the SITS ONNX backend runs on CPU, not {device!r}")
        from .. import runtime
        from ..compiler import compile as sits_compile

        if dynamic:
            model = make_dynamic(model)
        initializers = {t.name for t in model.graph.initializer}
        input_names = [i.name for i in model.graph.input if i.name not in initializers]

        if cache_dir is None:
            # The artifact lives as long as its rep: the directory goes with
            # the rep (or at once when the compile or load fails), so a run
            # of many cases leaves nothing behind.
            directory = tempfile.mkdtemp(prefix="sits-backend-")
            path = os.path.join(directory, "model.sitsm")
            try:
                sits_compile(model, target="cpu", output=path, **kwargs)
                rep = SitsBackendRep(runtime.load(path), input_names, path)
            except BaseException:
                shutil.rmtree(directory, ignore_errors=True)
                raise
            weakref.finalize(rep, shutil.rmtree, directory, True)
            return rep

        key = hashlib.sha256(model.SerializeToString(deterministic=True))
        key.update(json.dumps([compiler_fingerprint(), dynamic, sorted(kwargs.items())],
                              default=str).encode())
        stem = os.path.join(os.fspath(cache_dir), key.hexdigest()[:40])
        os.makedirs(os.fspath(cache_dir), exist_ok=True)
        if os.path.exists(stem + ".error"):  # the same compiler failed on it before
            with open(stem + ".error") as f:
                raise _error_from_json(json.load(f))
        if not os.path.exists(stem + ".sitsm"):
            tmp = f"{stem}.{os.getpid()}.tmp"
            try:
                sits_compile(model, target="cpu", output=tmp, **kwargs)
            except CompileError as e:
                with open(f"{tmp}.error", "w") as f:
                    json.dump(_error_to_json(e), f)
                os.replace(f"{tmp}.error", stem + ".error")
                raise
            os.replace(tmp, stem + ".sitsm")
        return SitsBackendRep(runtime.load(stem + ".sitsm"), input_names, stem + ".sitsm")

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)
