"""Site initializer found by sits_mlir._mlir_libs: registers the SITS dialect
and passes with the registry every sits_mlir context is created from."""

from ._sits import register_dialects

__all__ = ["register_dialects"]
