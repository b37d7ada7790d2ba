"""The known-target table: hardware facts for every target SITS compiles for.

The table itself lives in C++ (dialects/Target/KnownTargets.cpp), where the
compiler's passes read it; this module is a typed view of the same entries.

CPU targets come in two kinds. The named instruction-set targets
(``x86-64``, ``x86-64-v2``, ``x86-64-v3`` for AVX2 + FMA, ``x86-64-v4`` for
AVX-512, ``aarch64`` for NEON) produce code that runs on every CPU of that
level, whatever machine compiles it. ``cpu`` (alias ``host``, ``native``) is
the machine compiling, with its exact features; its ``isa_level`` names the
highest named level it includes::

    >>> sits_mlir.targets.lookup("cpu").isa_level
    'x86-64-v3'
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from ._mlir_libs import _sits

__all__ = ["HostFigures", "Target", "UnknownTargetError", "known_targets", "lookup",
           "measure_host", "names"]


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
    #: SMs, CUs or cores; 0 for the named CPU instruction-set targets, whose
    #: code is tiled for the compiling machine's cores.
    compute_units: int
    #: Warp / wavefront width on GPUs; float32 SIMD lanes on CPUs.
    simd_width: int
    #: Architectural SIMD registers of a CPU core (0 on GPUs).
    vector_registers: int
    #: CPU targets: the named instruction-set level the code runs on (for
    #: ``cpu``, the highest one the host's features include); "" on GPUs.
    isa_level: str
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
    """Every known target: GPUs, the named CPU instruction-set levels, then
    the detected host CPU (``cpu``) last."""
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


@dataclass(frozen=True)
class HostFigures:
    """The host CPU's throughput, measured (the table cannot list it)."""

    #: fp32 GFLOP/s of a large sgemm through numpy's BLAS on every core.
    peak_fp32_gflops: float
    #: GB/s of a parallel read of a buffer much larger than the caches.
    bandwidth_gbs: float
    #: Where the figures come from: "measured" now, or "cache" (a file).
    source: str


def _cache_dir() -> str:
    root = os.environ.get("SITS_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "sits_mlir")
    return root


def _measure_gflops(n: int = 1536, repeats: int = 3) -> float:
    a = np.ones((n, n), np.float32)
    b = np.full((n, n), 0.5, np.float32)
    a @ b  # warm-up: threads started, pages touched
    best = min(_timed(lambda: a @ b) for _ in range(repeats))
    return 2.0 * n ** 3 / best / 1e9


def _measure_bandwidth(mib: int = 256, repeats: int = 3) -> float:
    workers = max(1, os.cpu_count() or 1)
    data = np.ones(mib * (1 << 20) // 8, np.float64)
    chunks = np.array_split(data, workers)
    with ThreadPoolExecutor(workers) as pool:  # numpy drops the GIL in sums
        def read():
            list(pool.map(np.sum, chunks))
        read()
        best = min(_timed(read) for _ in range(repeats))
    return data.nbytes / best / 1e9


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_host(*, refresh: bool = False) -> HostFigures:
    """The host CPU's fp32 peak and memory bandwidth, which the cost model
    (sits-reorder) needs and LLVM cannot report. Measured once per machine
    (about a second) and cached under `$SITS_CACHE_DIR` (default
    `~/.cache/sits_mlir`), keyed by the CPU, its features and core count, so
    that every compile on the machine schedules from the same figures.
    `refresh=True` measures again."""
    host = lookup("cpu")
    key = hashlib.sha256(f"{host.chip}|{host.features}|{host.compute_units}".encode()).hexdigest()
    path = os.path.join(_cache_dir(), f"host-{key[:16]}.json")
    if not refresh:
        try:
            with open(path) as f:
                d = json.load(f)
            return HostFigures(float(d["peak_fp32_gflops"]), float(d["bandwidth_gbs"]), "cache")
        except (OSError, ValueError, KeyError, TypeError):
            pass
    figures = HostFigures(round(_measure_gflops(), 1), round(_measure_bandwidth(), 1), "measured")
    try:  # written whole or not at all; an unwritable cache only costs time
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"peak_fp32_gflops": figures.peak_fp32_gflops,
                       "bandwidth_gbs": figures.bandwidth_gbs,
                       "chip": host.chip, "compute_units": host.compute_units}, f)
        os.replace(tmp, path)
    except OSError:
        pass
    return figures
