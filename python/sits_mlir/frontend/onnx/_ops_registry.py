"""The converter registry: which converter imports an ONNX node.

Each converter has an `emit(ctx, node)` returning one MLIR value per ONNX
output (None for unused optional outputs), and optionally a `check(g, node)`
returning why this node cannot be imported (None when it can). The pre-flight
check calls only `check`, on the same analysed graph, so it reports exactly
what `emit` would fail on. Converters fetch every operand (`ctx.get`) before
building ops with regions.

Converters are registered under (domain, op_type, since_version), ONNX's own
versioning: one registered since version N imports the op from opset N of
its domain on, until the next version registered for that op. For a model
importing the domain at opset M, `CONVERTERS.lookup(domain, op_type, M)`
picks the converter with the highest since_version <= M. Most ops have one
converter, since version 1, for every opset SITS reads; an op gets another
only where its ONNX signature changed in a way the converter must follow
(Reduce* axes moved from an attribute to an input, in opset 13 for ReduceSum
and 18 for the others; Squeeze/Unsqueeze axes in opset 13).

Family modules (`_ops_elementwise.py`, ...) register with the `converter`
decorator when imported; `_ops.py` imports them all, in a fixed order.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Callable, Optional


@dataclass
class Converter:
    emit: Callable
    check: Optional[Callable] = None
    #: False for ops registered only to give the pre-flight check a
    #: specific reason (quantized ops, data-dependent shapes).
    supported: bool = True
    #: Indices of the inputs `emit` reads as run-time values (None: all),
    #: or a function (graph, node) giving them; the others are read only as
    #: constants or not at all, and their producers need not be imported.
    reads: Optional[tuple | Callable] = None

    def read_inputs(self, g, node) -> Optional[tuple]:
        """The indices of `node`'s inputs `emit` reads at run time (None: all)."""
        return tuple(self.reads(g, node)) if callable(self.reads) else self.reads
    #: The first opset version (of the op's domain) this converter imports.
    since: int = 1


class Registry(Mapping):
    """(domain, op_type, since_version) -> Converter.

    `lookup` is the importer's query. As a Mapping the registry is keyed by
    (domain, op_type) and gives the op's newest converter: `SUPPORTED_OPS`
    and the choice of ops imported through their ONNX function body read it
    so (every converter of one op is supported or none is).
    """

    def __init__(self):
        self._versions: dict = {}  # (domain, op_type) -> {since: Converter}

    def register(self, domain: str, op_type: str, conv: Converter, *,
                 replace: bool = False) -> None:
        """Adds `conv` for (domain, op_type, conv.since). Registering a
        version twice is an error unless `replace` says the new converter
        deliberately supersedes the earlier one."""
        versions = self._versions.setdefault((domain, op_type), {})
        if conv.since in versions and not replace:
            raise ValueError(f"a converter for {domain or 'ai.onnx'}::{op_type} since "
                             f"version {conv.since} is already registered")
        versions[conv.since] = conv

    def lookup(self, domain: str, op_type: str,
               opset: Optional[int] = None) -> Optional[Converter]:
        """The converter for `op_type` of `domain` in a model importing that
        domain at `opset`: the one with the highest since_version <= opset
        (None when there is none). A domain the model imports without a
        version (None, or 0, which ONNX does not define) gets the newest."""
        versions = self._versions.get((domain, op_type))
        if not versions:
            return None
        if not opset:
            return versions[max(versions)]
        eligible = [v for v in versions if v <= opset]
        return versions[max(eligible)] if eligible else None

    def versions(self, domain: str, op_type: str) -> list:
        """The since_versions registered for (domain, op_type), ascending."""
        return sorted(self._versions.get((domain, op_type), ()))

    # -- Mapping: (domain, op_type) -> the newest converter ------------------

    def __getitem__(self, key) -> Converter:
        conv = self.lookup(*key)
        if conv is None:
            raise KeyError(key)
        return conv

    def __iter__(self) -> Iterator:
        return iter(list(self._versions))

    def __len__(self) -> int:
        return len(self._versions)


#: Every converter, filled by the family modules as they are imported.
CONVERTERS = Registry()


def converter(*op_types, check=None, domain="", reads=None, since=1, supported=True):
    """Registers the decorated `emit` for each of `op_types` of `domain`,
    from opset `since` on; an op registered twice for one version is an
    error (`Registry.register`)."""
    def deco(fn):
        for t in op_types:
            CONVERTERS.register(domain, t, Converter(fn, check, supported=supported,
                                                     reads=reads, since=since))
        return fn
    return deco

