"""Typed exceptions of the SITS Python API.

Every error a user can cause is one of these, carrying structured details
rather than only a message: `CompileError.diagnostics` holds each problem
found (every unsupported ONNX node of a model at once, or the MLIR
diagnostics of a failed pass, each with its location).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

__all__ = ["SitsError", "CompileError", "CompileOutOfMemoryError", "Diagnostic",
           "UnsupportedNode"]


class SitsError(Exception):
    """Base class of every exception SITS raises on purpose."""


@dataclass(frozen=True)
class Diagnostic:
    """One problem: what is wrong and where (an MLIR location such as
    ``loc("/layers.0/fc1/MatMul")`` or ``model.mlir:3:7``, or empty)."""

    message: str
    location: str = ""
    severity: str = "error"
    notes: tuple[str, ...] = ()

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        text = f"{where}{self.severity}: {self.message}"
        return "\n".join([text, *(f"  note: {n}" for n in self.notes)])

    @classmethod
    def from_mlir(cls, diag) -> "Diagnostic":
        """Converts an MLIR DiagnosticInfo (from ir.MLIRError)."""
        return cls(
            message=diag.message,
            location=str(diag.location),
            severity=str(diag.severity).rsplit(".", 1)[-1].lower(),
            notes=tuple(n.message for n in getattr(diag, "notes", ())),
        )


@dataclass(frozen=True)
class UnsupportedNode(Diagnostic):
    """A node of an input model that SITS cannot compile, and why."""

    op_type: str = ""
    node_name: str = ""
    domain: str = ""
    opset: int = 0

    def __str__(self) -> str:
        domain = f"{self.domain}." if self.domain not in ("", "ai.onnx") else ""
        return (f"node '{self.node_name}' ({domain}{self.op_type}, opset {self.opset}): "
                f"{self.message}")


class CompileError(SitsError):
    """Compilation failed; `diagnostics` lists every problem found."""

    def __init__(self, summary: str, diagnostics: Iterable[Diagnostic] = ()):
        self.summary = summary
        self.diagnostics: Sequence[Diagnostic] = tuple(diagnostics)
        lines = [summary, *(f"  {d}" for d in self.diagnostics)]
        super().__init__("\n".join(lines))

    @classmethod
    def from_mlir_error(cls, summary: str, error) -> "CompileError":
        """Wraps an ir.MLIRError, keeping each diagnostic and its location."""
        diags = [Diagnostic.from_mlir(d) for d in getattr(error, "error_diagnostics", ())]
        if not diags:
            diags = [Diagnostic(message=str(error))]
        return cls(summary, diags)


class CompileOutOfMemoryError(CompileError, MemoryError):
    """The compiler ran out of memory in a stage (the summary names it);
    also a MemoryError."""
