"""The known-target table: hardware facts for every target SITS compiles for.

The table itself lives in C++ (dialects/Target/KnownTargets.cpp), where the
compiler's passes read it; this module is a typed view of the same entries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ._mlir_libs import _sits

__all__ = ["Target", "UnknownTargetError", "known_targets", "lookup", "names"]


class UnknownTargetError(ValueError):
    """Raised for a target name that is neither a known name nor an alias."""


@dataclass(frozen=True)
class Target:
    name: str
    aliases: tuple[str, ...]
    vendor: str
    architecture: str
    triple: str
    chip: str
    features: str
    compute_units: int
    simd_width: int
    memory_gb: float
    memory_bandwidth_gbs: float
    last_level_cache_mb: float
    shared_memory_per_unit_kb: float
    peak_tflops: Mapping[str, float] = field(hash=False)
    fp8_formats: tuple[str, ...]
    interconnect_gbs: float
    min_ptx_version: int

    @classmethod
    def _from_dict(cls, d: dict) -> "Target":
        d = dict(d)
        d["aliases"] = tuple(d["aliases"])
        d["fp8_formats"] = tuple(d["fp8_formats"])
        return cls(**d)

    @property
    def is_gpu(self) -> bool:
        return self.vendor in ("nvidia", "amd")


def known_targets() -> list[Target]:
    """Every known target, GPUs first, the detected host CPU last."""
    return [Target._from_dict(d) for d in _sits.known_targets()]


def names() -> list[str]:
    """Canonical names of the known targets."""
    return [t.name for t in known_targets()]


def lookup(name: str) -> Target:
    """The target called `name` (a canonical name or an alias, any case)."""
    d = _sits.lookup_target(name)
    if d is None:
        raise UnknownTargetError(
            f"unknown target {name!r}; known targets: {', '.join(names())}"
        )
    return Target._from_dict(d)
