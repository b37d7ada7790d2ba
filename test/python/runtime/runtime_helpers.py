"""Helpers of the runtime tests: manifests for the test kernels and an
independent encoder of the .sitsm layout (written from ARTIFACT.md, with
hashlib and the xxhash package), for crafting inconsistent artifacts that
still carry a valid content hash and weights digest."""

from __future__ import annotations

import hashlib
import pathlib
import struct

import xxhash

ROOT = pathlib.Path(__file__).resolve().parents[3]
KERNELS = ROOT / "test" / "unit" / "runtime" / "core" / "kernels"


def host_triple() -> str:
    from sits_mlir import runtime

    return f"{runtime.host_cpu()['arch']}-unknown-linux-gnu"


def arg(role, name, dtype, shape, dim_names=None):
    a = {"role": role, "name": name, "dtype": dtype, "shape": list(shape)}
    if dim_names is not None:
        a["dim_names"] = list(dim_names)
    return a


def manifest(entries, features=("+sse2",), triple=None, **extra):
    m = {
        "target": {"triple": triple or host_triple(), "cpu": "generic",
                   "features": list(features)},
        "entry_points": entries,
    }
    m.update(extra)
    return m


ADD_ENTRY = {
    "name": "main",
    "args": [arg("input", "x", "f32", [-1, 4], ["batch", None]),
             arg("input", "y", "f32", [-1, 4], ["batch", None]),
             arg("output", "z", "f32", [-1, 4], ["batch", None])],
}

# weights.c: y = x * w + w, w the first four floats of the weights section.
WEIGHTS_ENTRY = {
    "name": "main",
    "args": [arg("weights", "weights", "i8", [-1]), arg("input", "x", "f32", [4]),
             arg("output", "y", "f32", [4])],
}


# -- an independent encoder of the layout (ARTIFACT.md), for crafting
#    inconsistent artifacts that still carry a valid hash ---------------------

def decode(data: bytes):
    version, _, count = struct.unpack_from("<III", data, 8)
    sections = []
    for i in range(count):
        e = 64 + 64 * i
        name = data[e:e + 40].rstrip(b"\0").decode()
        off, size = struct.unpack_from("<QQ", data, e + 40)
        sections.append((name, bytes(data[off:off + size])))
    return version, sections


def weights_digest_pos(manifest_bytes) -> int | None:
    """Where the 32 hex digits of the manifest's top-level weights_digest
    value start (the last "weights_digest" object), or None."""
    key = manifest_bytes.rfind(b'"weights_digest": {')
    if key < 0:
        return None
    hex_key = b'"hex": "'
    return manifest_bytes.index(hex_key, key) + len(hex_key)


def layout(version: int, sections) -> bytearray:
    """The writer's layout of `sections`, unsealed: the header (hash
    position from the manifest's last "content_hash" key, or 0), the table,
    each section on a 64-byte boundary and the weights on a 4096-byte one.
    (The fuzz target test/fuzz/artifact_fuzz.py lays out its mutants with
    it too, so names are cut to 39 bytes rather than refused.)"""
    header_size = 64 + 64 * len(sections)
    offsets, end = [], header_size
    for name, body in sections:
        align = 4096 if name == "weights" else 64
        end = (end + align - 1) // align * align
        offsets.append(end)
        end += len(body)
    out = bytearray(end)
    manifest = next((b for n, b in sections if n == "manifest"), b"")
    key = manifest.rfind(b'"content_hash": "')
    pos = key + len(b'"content_hash": "') if key >= 0 else 0
    out[0:8] = b"\x89SITSM\r\n"
    struct.pack_into("<IIIIQ", out, 8, version, header_size, len(sections), pos, end)
    for i, ((name, body), off) in enumerate(zip(sections, offsets)):
        struct.pack_into("<40sQQII", out, 64 + 64 * i, name.encode()[:39], off, len(body), 0, 0)
        out[off:off + len(body)] = body
    return out


def encode(version: int, sections) -> bytes:
    """Lays `sections` out as ARTIFACT.md says and seals them: for version 2
    and later the weights digest (when the manifest has one) goes into the
    manifest and the content hash skips the weights section; version 1
    hashes the whole file."""
    sections = [(n, bytearray(b)) for n, b in sections]
    manifest_bytes = next(b for n, b in sections if n == "manifest")
    weights = next((b for n, b in sections if n == "weights"), None)
    if version >= 2 and weights is not None:
        at = weights_digest_pos(manifest_bytes)
        if at is not None:
            manifest_bytes[at:at + 32] = xxhash.xxh3_128_hexdigest(bytes(weights)).encode()
    key = b'"content_hash": "'
    pos = manifest_bytes.rindex(key) + len(key)
    manifest_bytes[pos:pos + 64] = b"0" * 64
    out = layout(version, sections)
    offsets = [struct.unpack_from("<Q", out, 64 + 64 * i + 40)[0] for i in range(len(sections))]
    skip = (0, 0)
    for (name, body), off in zip(sections, offsets):
        if name == "weights" and version >= 2:
            skip = (off, off + len(body))
    view = memoryview(out)
    sha = hashlib.sha256(view[:skip[0]] if skip[1] else view)
    if skip[1]:
        sha.update(view[skip[1]:])
    digest = sha.digest()
    view.release()
    out[32:64] = digest
    manifest_off = offsets[[n for n, _ in sections].index("manifest")]
    out[manifest_off + pos:manifest_off + pos + 64] = digest.hex().encode()
    return bytes(out)


def patch_manifest(data: bytes, old: str, new: str) -> bytes:
    version, sections = decode(data)
    sections = [(n, b.replace(old.encode(), new.encode(), 1) if n == "manifest" else b)
                for n, b in sections]
    assert any(old.encode() in b for n, b in decode(data)[1] if n == "manifest"), old
    return encode(version, sections)
