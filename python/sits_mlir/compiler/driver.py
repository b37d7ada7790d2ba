"""The compiler driver: model in, one-file artifact out.

Every stage is reachable three ways that agree: this Python API, the
`sits-opt` tool with the same named pipeline (`Artifact.pipeline` says which),
and lit tests of the passes it runs.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .. import ir, passmanager, targets
from ..errors import CompileError, Diagnostic
from .link import link_shared_object

__all__ = ["Artifact", "CompileOptions", "compile", "lower"]


@dataclass
class CompileOptions:
    """How to compile. Every field has a sensible default for the target."""

    #: Threads the code is tiled for (0: the target's core count).
    threads: int = 0
    #: LLVM optimization level (0-3).
    opt_level: int = 3
    #: Vectorize tiled ops (off only to debug numerics).
    vectorize: bool = True
    #: Print one line per stage with its duration to stderr.
    progress: bool = False


@dataclass
class Artifact:
    """A compiled model written to `path` (one .sitsm file)."""

    path: str
    manifest: dict
    pipeline: str
    timings: dict[str, float] = field(default_factory=dict)

    def load(self, device: str = "cpu"):
        """Loads the artifact with the runtime (see sits_mlir.runtime.load)."""
        from .. import runtime

        return runtime.load(self.path, device=device)


class _Progress:
    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.timings: dict[str, float] = {}

    @contextlib.contextmanager
    def stage(self, name: str):
        start = time.perf_counter()
        yield
        elapsed = time.perf_counter() - start
        self.timings[name] = elapsed
        if self.enabled:
            print(f"[sits] {name:<10s} {elapsed * 1e3:8.1f} ms", file=sys.stderr, flush=True)


def _cpu_pipeline(options: CompileOptions) -> str:
    return ("builtin.module(sits-cpu-pipeline{"
            f"num-threads={options.threads} "
            f"vectorize={'true' if options.vectorize else 'false'}"
            "})")


def _run_pipeline(module: ir.Module, pipeline: str) -> None:
    try:
        passmanager.PassManager.parse(pipeline).run(module.operation)
    except ir.MLIRError as error:
        raise CompileError.from_mlir_error("compilation failed", error) from None


def _emit_object(module: ir.Module, target: targets.Target, opt_level: int) -> bytes:
    from .._mlir_libs import _sits

    ok, data, diagnostics = _sits.emit_object(
        module.operation, target.triple, target.chip, target.features, opt_level)
    if not ok:
        raise CompileError("code emission failed", [
            Diagnostic(message=m, location=loc, severity=sev) for sev, loc, m in diagnostics])
    return data


def _spec(name: str, type_: ir.Type) -> dict:
    shaped = ir.RankedTensorType(type_)
    dims = [-1 if shaped.is_dynamic_dim(i) else shaped.get_dim_size(i) for i in range(shaped.rank)]
    return {"name": name, "shape": dims, "dtype": _dtype_name(shaped.element_type)}


def _dtype_name(t: ir.Type) -> str:
    text = str(t)
    names = {"f32": "f32", "f16": "f16", "bf16": "bf16", "f64": "f64", "i64": "i64", "i32": "i32",
             "i16": "i16", "i8": "i8", "ui8": "u8", "i1": "bool"}
    if text not in names:
        raise CompileError(f"element type {text} is not supported at the model boundary")
    return names[text]


def _entry_signature(module: ir.Module, input_names, output_names) -> dict:
    """The public @main's arguments, read before lowering rewrites them."""
    main = None
    for op in module.body.operations:
        if op.operation.name == "func.func" and ir.StringAttr(op.attributes["sym_name"]).value == "main":
            main = op
    if main is None:
        raise CompileError("the model has no public function @main")
    ftype = ir.FunctionType(ir.TypeAttr(main.attributes["function_type"]).value)
    ins = [_spec(n, t) for n, t in zip(input_names or [f"input_{i}" for i in range(len(ftype.inputs))],
                                       ftype.inputs)]
    outs = [_spec(n, t) for n, t in zip(output_names or [f"output_{i}" for i in range(len(ftype.results))],
                                        ftype.results)]
    args = ([{"role": "input", **s} for s in ins] + [{"role": "output", **s} for s in outs])
    return {"name": "main", "symbol": "sits_entry_main", "args": args}


def lower(module: ir.Module, target: str = "cpu", options: CompileOptions | None = None) -> str:
    """Runs the target's pipeline on `module` in place; returns the pipeline
    string, which `sits-opt --pass-pipeline=...` reproduces."""
    options = options or CompileOptions()
    t = targets.lookup(target)
    if t.is_gpu:
        raise CompileError(f"target '{t.name}': GPU code generation is not available yet; "
                           "compile for target='cpu'")
    from ..dialects import sits

    module.operation.attributes["sits.target"] = sits.TargetAttr.get(t.name)
    pipeline = _cpu_pipeline(options)
    _run_pipeline(module, pipeline)
    return pipeline


def compile(model: Any, target: str = "cpu", output: str | os.PathLike | None = None, *,
            options: CompileOptions | None = None) -> Artifact:
    """Compiles `model` for `target` into one .sitsm artifact file.

    `model` is an ONNX file path or `onnx.ModelProto`, an `.mlir` file path,
    or an `ir.Module` (SITS/linalg IR with a public `@main`). `output`
    defaults to the model path with the `.sitsm` suffix (or a temporary
    file for in-memory models).
    """
    options = options or CompileOptions()
    progress = _Progress(options.progress)
    t = targets.lookup(target)

    with progress.stage("import"):
        module, input_names, output_names, weights, source = _import(model)
    signature = _entry_signature(module, input_names, output_names)
    with progress.stage("lower"):
        pipeline = lower(module, t.name, options)
    with progress.stage("codegen"):
        obj = _emit_object(module, t, options.opt_level)
    with progress.stage("link"):
        shared_object = link_shared_object([obj])

    if output is None:
        output = _default_output(source)
    manifest = {
        "target": {"name": t.name, "triple": t.triple, "cpu": t.chip,
                   "features": [f for f in t.features.split(",") if f]},
        "entry_points": [signature],
        "pipeline": pipeline,
    }
    with progress.stage("write"):
        from .. import runtime

        runtime.write_artifact(os.fspath(output), manifest=manifest, code=shared_object,
                               weights=None, target=t.name)
        manifest = runtime.read_manifest(os.fspath(output))
    return Artifact(os.fspath(output), manifest, pipeline, progress.timings)


def _default_output(source: str | None) -> str:
    if source:
        root, _ = os.path.splitext(source)
        return root + ".sitsm"
    import tempfile

    fd, path = tempfile.mkstemp(suffix=".sitsm", prefix="sits-")
    os.close(fd)
    return path


def _import(model: Any):
    """(module, input names, output names, weights keep-alive, source path)."""
    if isinstance(model, ir.Module):
        return model, None, None, None, None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise CompileError(f"model file not found: {path}")
        if path.endswith(".mlir"):
            with open(path) as f:
                text = f.read()
            try:
                return ir.Module.parse(text, context=ir.Context.current), None, None, None, path
            except ir.MLIRError as error:
                raise CompileError.from_mlir_error(f"cannot parse {path}", error) from None
    from ..frontend.onnx import import_model

    imported = import_model(model)
    source = os.fspath(model) if isinstance(model, (str, os.PathLike)) else None
    return (imported.module, [s.name for s in imported.inputs], [s.name for s in imported.outputs],
            imported.weights, source)
