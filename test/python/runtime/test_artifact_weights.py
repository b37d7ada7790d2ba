"""The weights section of format version 2: its own XXH3-128 digest,
damage there refused, version 1 files still read, weights written from a
file or from chunks (byte-identical to bytes), and loading that maps the
file instead of copying it."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xxhash

from sits_mlir import runtime
from runtime_helpers import WEIGHTS_ENTRY, arg, decode, encode, manifest, patch_manifest


def pattern(n: int, seed: int = 0) -> bytes:
    return np.random.default_rng(seed).integers(0, 256, n, dtype=np.uint8).tobytes()


FOUR_FLOATS = np.array([1, 2, 3, 4], np.float32).tobytes()


@pytest.fixture
def weights():
    # (The weights kernel runs only with its 16 bytes: FOUR_FLOATS.)
    return FOUR_FLOATS + pattern(20000)


@pytest.fixture
def write(tmp_path, kernels):
    def write(name, weights, **kw):
        path = tmp_path / name
        info = runtime.write_artifact(path, manifest=manifest([WEIGHTS_ENTRY]),
                                      code=kernels("weights"), weights=weights,
                                      target="cpu", **kw)
        return path, info
    return write


def test_weights_digest_is_xxh3_of_the_section(write, weights):
    path, info = write("a.sitsm", weights)
    assert info.manifest["weights_digest"] == {
        "algorithm": "xxh3-128", "hex": xxhash.xxh3_128_hexdigest(weights)}
    back = runtime.read_artifact(path)
    assert back.format_version == runtime.FORMAT_VERSION == 2
    assert back.weights_verified
    data = path.read_bytes()
    assert encode(*decode(data)) == data, "the independent encoder agrees"
    # The code receives the weights (y = x * w + w over their four floats).
    small, _ = write("small.sitsm", FOUR_FLOATS)
    np.testing.assert_array_equal(runtime.load(small)(np.ones(4, np.float32)), [2, 4, 6, 8])


def test_damaged_weights_are_refused(write, weights, tmp_path):
    path, info = write("a.sitsm", weights)
    off, size = info.sections["weights"]
    data = path.read_bytes()
    for i in (off, off + 1, off + size // 2, off + size - 1):
        bad = bytearray(data)
        bad[i] ^= 0x01
        with pytest.raises(runtime.CorruptArtifactError, match="weights digest mismatch") as e:
            runtime.read_artifact(bytes(bad))
        assert (e.value.subject, e.value.index) == ("weights", off)
        with pytest.raises(runtime.CorruptArtifactError):
            runtime.load_bytes(bytes(bad))
    bad = bytearray(data)
    bad[off + 7] ^= 0x40
    bad_path = tmp_path / "bad.sitsm"
    bad_path.write_bytes(bytes(bad))
    with pytest.raises(runtime.CorruptArtifactError, match="weights digest mismatch"):
        runtime.load(bad_path)
    # verify="metadata" skips that check only.
    assert not runtime.read_artifact(bad_path, verify="metadata").weights_verified
    runtime.load(bad_path, verify="metadata")
    bad[100] ^= 1  # in the section table: still refused
    bad_path.write_bytes(bytes(bad))
    with pytest.raises(runtime.CorruptArtifactError):
        runtime.load(bad_path, verify="metadata")
    with pytest.raises(ValueError, match="verify must be"):
        runtime.load(path, verify="some")


def test_version_1_files_still_read(write):
    path, _ = write("a.sitsm", FOUR_FLOATS)
    version, sections = decode(path.read_bytes())
    assert version == 2
    v2 = encode(version, sections)
    text = next(b for n, b in sections if n == "manifest").decode()
    start = text.index('"weights_digest"')
    text = text[:start] + text[text.index("},", start) + 2:].lstrip()
    text = text.replace('"format_version": 2', '"format_version": 1')
    v1 = encode(1, [(n, text.encode() if n == "manifest" else b) for n, b in sections])
    assert v1 != v2
    info = runtime.read_artifact(v1)
    assert info.format_version == 1 and info.weights_verified
    m = runtime.load_bytes(v1)
    np.testing.assert_array_equal(m(np.ones(4, np.float32)), [2, 4, 6, 8])
    # Version 1's hash covers the weights.
    bad = bytearray(v1)
    bad[-1] ^= 1
    with pytest.raises(runtime.CorruptArtifactError, match="content hash mismatch"):
        runtime.read_artifact(bytes(bad))


def test_digest_rules(write, weights):
    path, _ = write("a.sitsm", weights)
    data = path.read_bytes()
    with pytest.raises(runtime.CorruptArtifactError) as e:
        runtime.read_artifact(patch_manifest(data, '"xxh3-128"', '"xxh3-64"'))
    assert e.value.subject == "weights_digest.algorithm"


def test_streamed_weights_are_byte_identical(write, weights, tmp_path, kernels):
    reference, _ = write("bytes.sitsm", weights)
    expected = reference.read_bytes()
    raw = tmp_path / "weights.bin"
    raw.write_bytes(weights)
    chunks = [weights[i:i + 999] for i in range(0, len(weights), 999)]
    arrays = [np.frombuffer(c, np.uint8) for c in chunks]
    pieces = iter(chunks)
    sources = {
        "path": raw,
        "str": str(raw),
        "memoryview": memoryview(weights),
        "numpy": np.frombuffer(weights, np.uint8),
        "list of chunks": chunks,
        "generator of arrays": (a for a in arrays),
        "callable": lambda: next(pieces, None),
    }
    for name, source in sources.items():
        path, info = write(f"{name.replace(' ', '_')}.sitsm", source)
        assert path.read_bytes() == expected, name
        assert info.file_size == len(expected)
    # With the size announced, and through serialize_artifact.
    path, _ = write("sized.sitsm", iter(chunks), weights_size=len(weights))
    assert path.read_bytes() == expected
    assert runtime.serialize_artifact(
        manifest=manifest([WEIGHTS_ENTRY]), code=kernels("weights"), weights=raw,
        target="cpu") == expected


def test_streamed_weights_errors(write, weights, tmp_path):
    with pytest.raises(runtime.RuntimeCoreError, match="announced"):
        write("a.sitsm", [weights], weights_size=len(weights) - 1)

    def failing():
        yield weights[:100]
        raise KeyError("the weights went missing")

    with pytest.raises(KeyError, match="the weights went missing"):
        write("b.sitsm", failing())
    with pytest.raises(TypeError):
        write("c.sitsm", [weights[:10], 42])
    with pytest.raises(TypeError, match="bytes-like object, a path"):
        write("d.sitsm", 3.5)
    with pytest.raises(runtime.ArtifactNotFoundError):
        write("e.sitsm", tmp_path / "missing.bin")
    assert not any(p.name.startswith(("a.", "b.", "c.", "d.", "e.")) for p in tmp_path.iterdir())


# -- memory: the weights are mapped, not copied ------------------------------

MEASURE = textwrap.dedent("""
    import sys
    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    from sits_mlir import runtime
    mode, path, source, code = sys.argv[1:5]
    if mode == "write":
        from runtime_helpers import arg, manifest
        entry = {"name": "main", "args": [arg("weights", "weights", "i8", [-1]),
                 arg("input", "x", "f32", [4]), arg("output", "y", "f32", [4])]}
        peak = status("VmHWM")
        runtime.write_artifact(path, manifest=manifest([entry]), code=open(code, "rb").read(),
                               weights=source, target="cpu")
        print(status("VmHWM") - peak)
    else:
        anon = status("RssAnon")
        m = runtime.load(path)
        print(status("RssAnon") - anon)
""")


def test_big_weights_are_streamed_in_and_mapped_out(tmp_path, kernels):
    """256 MiB of weights: writing them from a file holds one chunk at a
    time, and loading maps the file (the page cache holds the weights,
    RssFile), adding far less anonymous memory than their size."""
    size = 256 << 20
    raw = tmp_path / "weights.bin"
    with open(raw, "wb") as f:
        f.write(FOUR_FLOATS)
        block = pattern(1 << 20, seed=1)
        for _ in range(size // len(block)):
            f.write(block)
    code = tmp_path / "weights.so"
    code.write_bytes(kernels("weights"))
    path = tmp_path / "big.sitsm"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(__file__), os.environ.get("PYTHONPATH", "")]))

    def run(mode):
        out = subprocess.run([sys.executable, "-c", MEASURE, mode, str(path), str(raw), str(code)],
                             capture_output=True, text=True, env=env, check=True)
        return int(out.stdout.split()[-1])

    try:
        grew = run("write")
        assert grew < size // 2, f"the writer's peak RSS grew by {grew >> 20} MiB"
        assert runtime.read_artifact(path).sections["weights"][1] == size + 16
        grew = run("load")
        assert grew < size // 4, f"RssAnon grew by {grew >> 20} MiB on load"
    finally:
        raw.unlink(missing_ok=True)
        path.unlink(missing_ok=True)
