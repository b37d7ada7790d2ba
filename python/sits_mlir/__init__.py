"""SITS: Scalable Inference Tensor Scheduling.

An MLIR-based compiler and runtime for neural-network inference:

    import sits_mlir
    art = sits_mlir.compile("model.onnx", target="cpu")   # one .sitsm file
    model = art.load()                                    # sits_mlir.runtime
    outputs = model(inputs)                               # numpy in, numpy out

This package also carries MLIR's Python API re-rooted under ``sits_mlir`` (``sits_mlir.ir``,
``sits_mlir.passmanager``, ``sits_mlir.dialects.*``), the SITS dialect
(``sits_mlir.dialects.sits``) and the known-target table
(``sits_mlir.targets``). Every context created through ``sits_mlir.ir`` has
the SITS dialect loaded and the SITS passes registered.
"""

__all__ = ["__version__", "llvm_version", "check", "compile", "CompileError"]


def __getattr__(name):
    # Resolved lazily so `import sits_mlir` stays cheap until MLIR is used.
    if name == "__version__":
        from ._mlir_libs import _sits

        return _sits.version()
    if name == "CompileError":
        from .errors import CompileError

        return CompileError
    raise AttributeError(f"module 'sits_mlir' has no attribute {name!r}")


def check(model, target: str = "cpu", **kwargs):
    """Pre-flight check of an ONNX model for `target`: the list of
    `sits_mlir.errors.UnsupportedNode`s SITS cannot compile (empty when it
    can compile them all). Raises `sits_mlir.errors.CompileError` when the
    model cannot be read. See `sits_mlir.frontend.onnx.check`."""
    from .frontend.onnx import check as _check

    return _check(model, target, **kwargs)


def compile(model, target: str = "cpu", output=None, **options):
    """Compiles an ONNX model (path, bytes or ModelProto), an .mlir file or
    an ir.Module for `target` into one .sitsm artifact; returns a
    `sits_mlir.compiler.Artifact` (`.path`, `.manifest`, `.load()`).
    See `sits_mlir.compiler.compile` for the options."""
    from .compiler import compile as _compile

    return _compile(model, target, output, **options)


def llvm_version() -> str:
    """Version of the LLVM/MLIR that SITS was built against."""
    from ._mlir_libs import _sits

    return _sits.llvm_version()
