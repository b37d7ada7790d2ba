"""Writing artifacts, and every kind of damaged or mismatched artifact being
refused with its typed error, before any code in it runs."""

import os

import numpy as np
import pytest

from sits_mlir import runtime
from runtime_helpers import ADD_ENTRY, decode, encode, host_triple, manifest, patch_manifest


@pytest.fixture
def good(make_artifact):
    """An artifact whose code has an ELF constructor that creates
    $SITS_TEST_MARKER when the dynamic loader runs it."""
    return make_artifact("constructor", [ADD_ENTRY]).read_bytes()


@pytest.fixture
def marker(tmp_path, monkeypatch):
    path = tmp_path / "loaded.marker"
    monkeypatch.setenv("SITS_TEST_MARKER", str(path))
    return path


def refuse(data: bytes, error, match, marker):
    with pytest.raises(error, match=match) as e:
        runtime.load_bytes(data)
    assert not marker.exists(), "code from a refused artifact ran"
    return e.value


def test_marker_shows_when_code_runs(good, marker):
    m = runtime.load_bytes(good)
    assert marker.exists()
    np.testing.assert_array_equal(m([[1, 2, 3, 4]], [[1, 1, 1, 1]]), [[2, 3, 4, 5]])


def test_write_and_read_round_trip(tmp_path, kernels):
    weights = bytes(range(256)) * 10
    path = tmp_path / "model.sitsm"
    info = runtime.write_artifact(
        path, manifest=manifest([ADD_ENTRY], compiler={"pipeline": "x"}),
        code=kernels("add"), weights=weights, target="cpu",
        sections={"device.sm_90": b"// ptx"})
    assert info.path == str(path)
    assert info.file_size == path.stat().st_size
    assert list(info.sections) == ["manifest", "code.cpu", "device.sm_90", "weights"]
    assert all(off % 64 == 0 for off, _ in info.sections.values())
    back = runtime.read_artifact(path)
    assert back.content_hash == info.content_hash == back.manifest["content_hash"]
    assert back.format_version == runtime.FORMAT_VERSION
    m = back.manifest
    assert m["sits_version"] == runtime._native().version()
    assert m["llvm_version"] == runtime._native().llvm_version()
    assert m["target"]["name"] == "cpu"
    assert m["compiler"] == {"pipeline": "x"}, "extra keys are kept"
    data = path.read_bytes()
    off, size = back.sections["weights"]
    assert data[off:off + size] == weights
    assert runtime.read_artifact(data).content_hash == info.content_hash
    assert runtime.read_manifest(path) == back.manifest
    assert runtime.serialize_artifact(
        manifest=manifest([ADD_ENTRY], compiler={"pipeline": "x"}), code=kernels("add"),
        weights=weights, target="cpu", sections={"device.sm_90": b"// ptx"}) == data
    # The test's own encoder (from ARTIFACT.md) reproduces the bytes.
    assert encode(*decode(data)) == data


def test_writer_rejects_bad_manifests(tmp_path, kernels):
    code = kernels("add")
    cases = [
        (manifest([{"name": "main", "args": [{"role": "input", "name": "x",
                                              "dtype": "f99", "shape": [1]}]}]),
         "unknown element type"),
        (manifest([dict(ADD_ENTRY, symbol="not_exported")]),
         "does not export a function named 'not_exported'"),
        ({"entry_points": [ADD_ENTRY]}, "target"),
        (manifest([ADD_ENTRY], triple="aarch64-unknown-linux-gnu")
         if host_triple().startswith("x86_64") else manifest([ADD_ENTRY], triple="x86_64-pc-linux-gnu"),
         "code but the target triple is"),
    ]
    for m, message in cases:
        with pytest.raises(runtime.RuntimeCoreError, match=message) as e:
            runtime.write_artifact(tmp_path / "bad.sitsm", manifest=m, code=code, target="cpu")
        assert isinstance(e.value, ValueError) is False  # a SitsError, not a builtin
    assert not (tmp_path / "bad.sitsm").exists()
    with pytest.raises(runtime.RuntimeCoreError, match="no weights section"):
        runtime.write_artifact(tmp_path / "w.sitsm", manifest=manifest([{
            "name": "main", "args": [{"role": "weights", "name": "w", "dtype": "i8",
                                      "shape": [-1]}]}]), code=code, target="cpu")


def test_every_flipped_byte_is_refused(good, marker):
    step = 37
    for i in range(0, len(good), step):
        bad = bytearray(good)
        bad[i] ^= 0x10
        with pytest.raises(runtime.ArtifactError) as e:
            runtime.read_artifact(bytes(bad))
        expected = ((runtime.UnsupportedFormatError, runtime.CorruptArtifactError)
                    if 8 <= i < 12 else runtime.CorruptArtifactError)
        assert isinstance(e.value, expected), (i, e.value)
    bad = bytearray(good)
    bad[len(good) // 2] ^= 1
    err = refuse(bytes(bad), runtime.CorruptArtifactError, "content hash mismatch", marker)
    assert err.subject == "content_hash"


def test_truncated(good, marker):
    refuse(good[:-1], runtime.CorruptArtifactError, r"\(truncated\)", marker)
    refuse(good[:40], runtime.CorruptArtifactError, "too small", marker)
    refuse(good[:len(good) // 2], runtime.CorruptArtifactError, "truncated", marker)


def test_bad_magic(good, marker):
    err = refuse(b"PK\x03\x04" + good[4:], runtime.CorruptArtifactError, "bad magic", marker)
    assert err.subject == "magic" and err.index == 0


def test_newer_format_version(good, marker):
    version, sections = decode(good)
    err = refuse(encode(runtime.FORMAT_VERSION + 1, sections), runtime.UnsupportedFormatError,
                 "newer than this runtime reads", marker)
    assert (err.expected, err.given) == (str(runtime.FORMAT_VERSION),
                                         str(runtime.FORMAT_VERSION + 1))


def test_section_out_of_bounds(good, marker):
    bad = bytearray(good)
    bad[64 + 64 + 40:64 + 64 + 48] = (len(good) // 64 * 64 + 128).to_bytes(8, "little")
    refuse(bytes(bad), runtime.CorruptArtifactError, "lies outside the file", marker)


def test_wrong_architecture(good, marker):
    other = "aarch64" if host_triple().startswith("x86_64") else "x86_64"
    err = refuse(patch_manifest(good, host_triple(), f"{other}-unknown-linux-gnu"),
                 runtime.IncompatibleArtifactError, f"artifact was built for {other}", marker)
    assert err.expected == other


def test_missing_cpu_feature(kernels, tmp_path, marker):
    host = runtime.host_cpu()
    absent = sorted(set(host["known_features"]) - set(host["features"]))
    if not absent:
        pytest.skip("this CPU has every feature the runtime knows")
    path = tmp_path / "f.sitsm"
    runtime.write_artifact(path, manifest=manifest([ADD_ENTRY], features=["+sse2", f"+{absent[0]}"]),
                           code=kernels("constructor"), target="cpu")
    err = refuse(path.read_bytes(), runtime.IncompatibleArtifactError,
                 f"with \\+{absent[0]}, which this CPU lacks", marker)
    assert err.missing_features == (f"+{absent[0]}",)
    with pytest.raises(runtime.IncompatibleArtifactError):
        runtime.load(path)


def test_host_cpu_vendor():
    """x86-64: the vendor cpuid names, as /proc/cpuinfo's vendor_id shows it
    (kernels tune for it); empty elsewhere."""
    host = runtime.host_cpu()
    if host["arch"] != "x86_64":
        assert host["vendor"] == ""
        return
    with open("/proc/cpuinfo") as f:
        ids = {line.split(":", 1)[1].strip() for line in f if line.startswith("vendor_id")}
    assert len(host["vendor"]) == 12 and host["vendor"] in ids


def test_missing_symbol(good, marker):
    err = refuse(patch_manifest(good, '"sits_entry_main"', '"sits_entry_gone"'),
                 runtime.MissingSymbolError, "sits_entry_gone", marker)
    assert err.subject == "sits_entry_gone"


def test_manifest_schema_violation(good, marker):
    err = refuse(patch_manifest(good, '"role": "input"', '"role": "inout"'),
                 runtime.CorruptArtifactError, "must be \"weights\", \"input\", \"output\" or \"status\"", marker)
    assert err.subject == "entry_points[0].args[0].role"


def test_code_the_loader_refuses(make_artifact, marker):
    path = make_artifact("undefined", [ADD_ENTRY])
    with pytest.raises(runtime.CodeLoadError, match="sits_test_function_nobody_defines"):
        runtime.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(runtime.ArtifactNotFoundError, match="nope.sitsm") as e:
        runtime.load(tmp_path / "nope.sitsm")
    assert isinstance(e.value, FileNotFoundError)
    with pytest.raises(runtime.RuntimeCoreError, match="not a regular file"):
        runtime.load(tmp_path)


def test_file_truncated_after_loading_is_an_error_not_sigbus(make_artifact, tmp_path):
    """The artifact stays mapped; truncating its file would leave pages
    that raise SIGBUS when read. Every call checks the file first."""
    path = make_artifact("add", [ADD_ENTRY])
    model = runtime.load(path)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(model(x, x), 2 * x)
    original = path.read_bytes()
    size = len(original)
    os.truncate(path, size // 2)
    with pytest.raises(runtime.RuntimeCoreError, match=r"was truncated after it was loaded "
                                                rf"\({size // 2} of {size} bytes left\)"):
        model(x, x)
    with open(path, "r+b") as f:  # restored in place: calls work again
        f.write(original)
    np.testing.assert_array_equal(model(x, x), 2 * x)
