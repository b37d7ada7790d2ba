"""Writing and inspecting .sitsm artifacts.

The format has one implementation, the runtime core's (C++, see
runtime/src/core/ARTIFACT.md); these functions call it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["ArtifactInfo", "read_artifact", "read_manifest", "serialize_artifact",
           "write_artifact"]


def _native():
    from .. import _sits_runtime

    return _sits_runtime


@dataclass(frozen=True)
class ArtifactInfo:
    """What an artifact holds (after its integrity was verified)."""

    content_hash: str
    file_size: int
    #: name -> (offset, size), in file order.
    sections: Mapping[str, tuple[int, int]]
    manifest: dict = field(hash=False)
    format_version: int = 0
    path: str | None = None

    @classmethod
    def _from_native(cls, d: Mapping[str, Any], path: str | None = None) -> "ArtifactInfo":
        return cls(
            content_hash=d["content_hash"],
            file_size=d["file_size"],
            sections={name: (off, size) for name, off, size in d["sections"]},
            manifest=json.loads(d["manifest_json"]),
            format_version=d.get("format_version", _native().FORMAT_VERSION),
            path=path,
        )


def _sections(code, weights, target: str, sections: Mapping[str, Any] | None):
    out = [(f"code.{target}", code)]
    for name, data in (sections or {}).items():
        out.append((name, data))
    if weights is not None:
        out.append(("weights", weights))
    return out


def _manifest_json(manifest: Mapping[str, Any], target: str) -> str:
    m = dict(manifest)
    t = dict(m.get("target") or {})
    t.setdefault("name", target)
    m["target"] = t
    return json.dumps(m)


def write_artifact(
    path: str | os.PathLike,
    *,
    manifest: Mapping[str, Any],
    code: Any,
    weights: Any = None,
    target: str,
    sections: Mapping[str, Any] | None = None,
) -> ArtifactInfo:
    """Writes a .sitsm artifact (atomically: a temporary file renamed over
    `path`).

    manifest: the JSON object of ARTIFACT.md without the fields the writer
        owns: ``format_version`` and ``content_hash`` are set here,
        ``sits_version``/``llvm_version`` default to this build's, and
        ``target.name`` to `target`, entry ``symbol``s to
        ``"sits_entry_<name>"``. Needs ``target`` {triple, cpu, features}
        and ``entry_points``.
    code: the shared object (bytes or any buffer) for section
        ``code.<target>``; it must export every entry symbol.
    weights: raw bytes (bytes, memoryview, a C-contiguous numpy array, ...)
        passed to entry points whose first argument has role "weights".
    sections: further sections, e.g. {"device.sm_90": cubin}.

    Raises RuntimeCoreError (a ValueError-like SitsError) when the manifest
    breaks the schema or does not match the code.
    """
    path = os.fspath(path)
    info = _native().write_artifact(path, _manifest_json(manifest, target),
                                    _sections(code, weights, target, sections))
    return ArtifactInfo._from_native(info, path)


def serialize_artifact(
    *,
    manifest: Mapping[str, Any],
    code: Any,
    weights: Any = None,
    target: str,
    sections: Mapping[str, Any] | None = None,
) -> bytes:
    """The bytes write_artifact() would write."""
    return _native().serialize_artifact(_manifest_json(manifest, target),
                                        _sections(code, weights, target, sections))


def read_artifact(source: str | os.PathLike | bytes | bytearray | memoryview) -> ArtifactInfo:
    """Verifies an artifact's integrity (nothing in it runs) and describes
    it; raises an ArtifactError subclass when it is damaged."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return ArtifactInfo._from_native(_native().read_artifact_bytes(source))
    path = os.fspath(source)
    return ArtifactInfo._from_native(_native().read_artifact(path), path)


def read_manifest(source: str | os.PathLike | bytes | bytearray | memoryview) -> dict:
    """The verified manifest of an artifact (see read_artifact)."""
    return read_artifact(source).manifest
