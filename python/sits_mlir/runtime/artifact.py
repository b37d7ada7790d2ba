"""Writing and inspecting .sitsm artifacts.

The format has one implementation, the runtime core's (C++, see
runtime/src/core/ARTIFACT.md); these functions call it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping

__all__ = ["ArtifactInfo", "placed_weights_file", "read_artifact", "read_manifest",
           "serialize_artifact", "write_artifact"]


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
    #: Whether the weights section's bytes were checked (False with
    #: verify="metadata" on a version 2 file, and when there are no weights).
    weights_verified: bool = False

    @classmethod
    def _from_native(cls, d: Mapping[str, Any], path: str | None = None) -> "ArtifactInfo":
        return cls(
            content_hash=d["content_hash"],
            file_size=d["file_size"],
            sections={name: (off, size) for name, off, size in d["sections"]},
            manifest=json.loads(d["manifest_json"]),
            format_version=d.get("format_version", _native().FORMAT_VERSION),
            path=path,
            weights_verified=d.get("weights_verified", False),
        )


def _chunks_of_calls(produce: Callable[[], Any]) -> Iterator[Any]:
    """The chunks a callable returns, until it returns None or an empty
    chunk."""
    while True:
        chunk = produce()
        if chunk is None or memoryview(chunk).nbytes == 0:
            return
        yield chunk


def _source(name: str, data: Any, size: int | None):
    """The native writer's section tuple for `data`: a bytes-like object
    (referenced, not copied), a path (copied from the file in chunks), or an
    iterable / callable producing bytes-like chunks (pulled while written)."""
    if isinstance(data, (str, os.PathLike)):
        return (name, "file", os.fspath(data))
    try:
        memoryview(data).release()
        return (name, data)
    except TypeError:
        pass
    if callable(data):
        data = _chunks_of_calls(data)
    try:
        chunks = iter(data)
    except TypeError:
        raise TypeError(f"section {name!r}: expected a bytes-like object, a path, "
                        f"or an iterable or callable producing bytes-like chunks, "
                        f"not {type(data).__name__}") from None
    return (name, "chunks", chunks, -1 if size is None else int(size))


def _sections(code, weights, target: str, sections: Mapping[str, Any] | None,
              weights_size: int | None = None):
    out = [(f"code.{target}", code)]
    for name, data in (sections or {}).items():
        out.append(_source(name, data, None) if isinstance(data, (str, os.PathLike))
                   else (name, data))
    if weights is not None:
        out.append(_source("weights", weights, weights_size))
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
    weights_size: int | None = None,
    placed: tuple[Any, int] | None = None,
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
    weights: the raw bytes passed to entry points whose first argument has
        role "weights", as one of
        * a bytes-like object (bytes, memoryview, a C-contiguous numpy
          array, ...): written from where it is, not copied;
        * a path (str or os.PathLike) to a file holding exactly those
          bytes: copied into the artifact in 64 MiB chunks;
        * an iterable of bytes-like chunks (a generator, a list of numpy
          arrays, ...) or a callable returning the next chunk (None or an
          empty chunk at the end): pulled one chunk at a time.
        With a path or chunks the weights are never held in memory whole;
        in every case they are digested while they are copied (one pass),
        and nothing else is hashed twice.
    sections: further sections, e.g. {"device.sm_90": cubin} (bytes-like,
        or a path to a file).
    weights_size: with chunks, their total size in bytes when known: a
        mismatch is an error. Without it any size is accepted (and checked
        against the entry points' declared weights size once written).
    placed: (file, n) where `file` is a placed_weights_file() whose first
        `n` bytes of weights are already at file.weights_offset: the
        artifact is completed in that file (its weights section is those
        bytes, then `weights`, which then needs a known size) and the file
        is named `path`. The placed bytes are read once, to digest them.

    Raises RuntimeCoreError (a ValueError-like SitsError) when the manifest
    breaks the schema or does not match the code.
    """
    path = os.fspath(path)
    parts = _sections(code, weights, target, sections, weights_size)
    if placed is not None:
        file, count = placed
        info = _native().write_artifact_around(path, _manifest_json(manifest, target),
                                               parts, file, int(count))
    else:
        info = _native().write_artifact(path, _manifest_json(manifest, target), parts)
    return ArtifactInfo._from_native(info, path)


def placed_weights_file(directory: str | os.PathLike):
    """A new unnamed file in `directory` (on the file system of the
    artifact's path) for write_artifact(..., placed=): a compiler writes the
    weights it re-lays out at their place in it (from file.weights_offset,
    through file.fd) as it produces them, so that no byte of them is written
    twice. It disappears when closed or collected unless written."""
    return _native().PlacedWeightsFile.create(os.fspath(directory))


def serialize_artifact(
    *,
    manifest: Mapping[str, Any],
    code: Any,
    weights: Any = None,
    target: str,
    sections: Mapping[str, Any] | None = None,
    weights_size: int | None = None,
) -> bytes:
    """The bytes write_artifact() would write (the arguments are the same)."""
    return _native().serialize_artifact(_manifest_json(manifest, target),
                                        _sections(code, weights, target, sections,
                                                  weights_size))


def read_artifact(source: str | os.PathLike | bytes | bytearray | memoryview,
                  verify: str = "full") -> ArtifactInfo:
    """Verifies an artifact's integrity (nothing in it runs) and describes
    it; raises an ArtifactError subclass when it is damaged.

    verify: "full" (the default) checks every byte; "metadata" skips the
        weights section's digest (everything else is still checked) for a
        file verified before, on storage you trust. Files only.
    """
    if isinstance(source, (bytes, bytearray, memoryview)):
        return ArtifactInfo._from_native(_native().read_artifact_bytes(source))
    path = os.fspath(source)
    return ArtifactInfo._from_native(_native().read_artifact(path, verify), path)


def read_manifest(source: str | os.PathLike | bytes | bytearray | memoryview) -> dict:
    """The verified manifest of an artifact (see read_artifact)."""
    return read_artifact(source).manifest
