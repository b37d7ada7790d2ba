"""The SITS compiler driver (`sits_mlir.compile`)."""

from .driver import Artifact, CompileOptions, compile, lower

__all__ = ["Artifact", "CompileOptions", "compile", "lower"]
