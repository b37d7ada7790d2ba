"""Ed25519 signatures of artifacts (sits_mlir.runtime.signing): signing,
the trusted-keys loader mode that refuses unsigned, foreign or mismatched
artifacts before any of their code runs, and the command-line tools."""

import base64
import json
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("cryptography")

from sits_mlir import runtime  # noqa: E402
from sits_mlir.runtime import signing  # noqa: E402
from runtime_helpers import ADD_ENTRY, WEIGHTS_ENTRY, decode, encode, manifest  # noqa: E402

FOUR_FLOATS = np.array([1, 2, 3, 4], np.float32).tobytes()


@pytest.fixture
def keys(tmp_path):
    good = signing.generate_key(tmp_path / "release.key")
    other = signing.generate_key(tmp_path / "other.key")
    return {"private": good[0], "public": good[1], "other_private": other[0],
            "other_public": other[1]}


@pytest.fixture
def marker(tmp_path, monkeypatch):
    """$SITS_TEST_MARKER: the constructor kernel creates it when its code is
    loaded, so a test can tell that refused code never ran."""
    path = tmp_path / "loaded.marker"
    monkeypatch.setenv("SITS_TEST_MARKER", str(path))
    monkeypatch.delenv("SITS_TRUSTED_KEYS", raising=False)
    return path


@pytest.fixture
def signed(make_artifact, keys, marker):
    """An artifact with an ELF constructor (see marker), signed."""
    path = make_artifact("constructor", [ADD_ENTRY])
    signing.sign(path, keys["private"])
    return path


@pytest.fixture
def weighted(tmp_path, kernels, keys):
    path = tmp_path / "weights.sitsm"
    runtime.write_artifact(path, manifest=manifest([WEIGHTS_ENTRY]), code=kernels("weights"),
                           weights=FOUR_FLOATS, target="cpu")  # the kernel takes 16 bytes
    signing.sign(path, keys["private"])
    return path


def refused(path, marker, match, **kw):
    with pytest.raises(runtime.UntrustedArtifactError, match=match) as e:
        runtime.load(path, **kw)
    assert not marker.exists(), "code of a refused artifact ran"
    return e.value


def test_generate_key_writes_private_and_public_pem(keys):
    assert oct(os.stat(keys["private"]).st_mode & 0o777) == "0o600"
    with open(keys["private"], "rb") as f:
        assert f.read().startswith(b"-----BEGIN PRIVATE KEY-----")
    with open(keys["public"], "rb") as f:
        assert f.read().startswith(b"-----BEGIN PUBLIC KEY-----")
    with pytest.raises(FileExistsError):
        signing.generate_key(keys["private"])


def test_signed_artifact_loads_with_its_key(signed, keys, marker):
    sig = json.loads(open(signing.signature_path(signed)).read())
    assert sig["format"] == "sits-signature-1" and sig["algorithm"] == "ed25519"
    assert sig["content_hash"] == runtime.read_artifact(signed).content_hash
    assert sig["weights_sha256"] is None  # no weights section
    m = runtime.load(signed, trusted_keys=[keys["public"]])
    assert marker.exists()
    np.testing.assert_array_equal(m([[1, 2, 3, 4]], [[1, 1, 1, 1]]), [[2, 3, 4, 5]])
    assert signing.verify(signed, [keys["other_public"], keys["public"]]) == sig["key_id"]


def test_weights_are_covered_by_sha256(weighted, keys):
    sig = json.loads(open(signing.signature_path(weighted)).read())
    assert len(sig["weights_sha256"]) == 64
    m = runtime.load(weighted, trusted_keys=[keys["public"]])
    np.testing.assert_allclose(m(np.ones(4, np.float32)), [2, 4, 6, 8])


def test_unsigned_artifact_is_refused_before_its_code_runs(make_artifact, keys, marker):
    path = make_artifact("constructor", [ADD_ENTRY])
    refused(path, marker, "not signed", trusted_keys=[keys["public"]])
    runtime.load(path)  # without trusted keys it loads
    assert marker.exists()


def test_untrusted_key_is_refused(signed, keys, marker):
    err = refused(signed, marker, "not by a trusted key", trusted_keys=[keys["other_public"]])
    assert err.subject == signing.signature_path(signed)
    with pytest.raises(runtime.UntrustedArtifactError):
        signing.verify(signed, [keys["other_public"]])


def test_signature_of_another_artifact_is_refused(signed, make_artifact, keys, marker):
    other = make_artifact("add", [ADD_ENTRY])
    refused(other, marker, "for another artifact", trusted_keys=[keys["public"]],
            signature=signing.signature_path(signed))


def test_resealed_tampered_artifact_is_refused(signed, keys, marker):
    """Someone who can write the file can recompute its hashes: the
    signature is what catches that, before the code runs."""
    version, sections = decode(signed.read_bytes())
    sections = [(n, b.replace(b'"cpu": "generic"', b'"cpu": "tampered"'))
                if n == "manifest" else (n, b) for n, b in sections]
    signed.write_bytes(encode(version, sections))
    runtime.read_artifact(signed)  # a valid artifact by its hashes
    refused(signed, marker, "for another artifact", trusted_keys=[keys["public"]])


def test_weights_that_differ_from_the_signature_are_refused(weighted, keys, marker):
    sig_path = signing.signature_path(weighted)
    doc = json.loads(open(sig_path).read())
    doc["weights_sha256"] = "0" * 64
    with open(sig_path, "w") as f:
        json.dump(doc, f)
    refused(weighted, marker, "weights do not match", trusted_keys=[keys["public"]])


@pytest.mark.parametrize("content, match", [
    (b"", "not a signature"),
    (b"\xff\xfe", "not a signature"),
    (b"[1, 2]", "not a SITS signature"),
    (b'{"format": "sits-signature-1", "algorithm": "rsa"}', "unsupported algorithm"),
    (b'{"format": "sits-signature-1", "algorithm": "ed25519", "content_hash": 1}',
     "must be a string"),
    (b"x" * (65 * 1024), "too large"),
])
def test_malformed_signature_files_are_refused(signed, keys, marker, content, match):
    with open(signing.signature_path(signed), "wb") as f:
        f.write(content)
    refused(signed, marker, match, trusted_keys=[keys["public"]])


def test_forged_signature_bytes_are_refused(signed, keys, marker):
    sig_path = signing.signature_path(signed)
    doc = json.loads(open(sig_path).read())
    raw = bytearray(base64.b64decode(doc["signature"]))
    raw[0] ^= 1
    doc["signature"] = base64.b64encode(bytes(raw)).decode()
    with open(sig_path, "w") as f:
        json.dump(doc, f)
    refused(signed, marker, "not by a trusted key", trusted_keys=[keys["public"]])
    doc["signature"] = "not base64!"
    with open(sig_path, "w") as f:
        json.dump(doc, f)
    refused(signed, marker, "not base64", trusted_keys=[keys["public"]])


def test_environment_turns_on_the_trusted_mode(signed, make_artifact, keys, marker,
                                               monkeypatch):
    unsigned = make_artifact("add", [ADD_ENTRY])
    monkeypatch.setenv("SITS_TRUSTED_KEYS", os.pathsep.join([keys["other_public"],
                                                             keys["public"]]))
    refused(unsigned, marker, "not signed")
    runtime.load(signed)
    assert marker.exists()


def test_load_bytes_takes_the_signature_bytes(signed, keys, marker):
    data = signed.read_bytes()
    sig = open(signing.signature_path(signed), "rb").read()
    with pytest.raises(runtime.UntrustedArtifactError, match="not signed"):
        runtime.load_bytes(data, trusted_keys=[keys["public"]])
    assert not marker.exists()
    runtime.load_bytes(data, trusted_keys=[keys["public"]], signature=sig)
    assert marker.exists()


def test_bad_trusted_keys_are_value_errors(signed, keys, tmp_path):
    with pytest.raises(ValueError, match="empty"):
        runtime.load(signed, trusted_keys=[])
    junk = tmp_path / "junk.pub"
    junk.write_bytes(b"not a key")
    with pytest.raises(ValueError, match="PEM public key"):
        runtime.load(signed, trusted_keys=[junk])
    with pytest.raises(ValueError, match="cannot read"):
        runtime.load(signed, trusted_keys=[tmp_path / "missing.pub"])
    with pytest.raises(ValueError, match="PEM private key"):
        signing.sign(signed, keys["public"])


def test_encrypted_private_key_uses_the_password_variable(signed, keys, tmp_path, monkeypatch):
    from cryptography.hazmat.primitives import serialization

    key = signing.load_private_key(keys["private"])
    enc = tmp_path / "enc.key"
    enc.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"s3cret")))
    with pytest.raises(ValueError, match="PEM private key"):
        signing.sign(signed, enc)
    monkeypatch.setenv("SITS_SIGNING_KEY_PASSWORD", "s3cret")
    signing.sign(signed, enc)
    runtime.load(signed, trusted_keys=[keys["public"]])


def _tool(name, *args, env=None):
    return subprocess.run([sys.executable, "-m", f"sits_mlir.tools.{name}", *map(str, args)],
                          capture_output=True, text=True, env=env)


def test_command_line_sign_and_verify(make_artifact, tmp_path, marker):
    key = tmp_path / "cli.key"
    r = _tool("sign", "keygen", key)
    assert r.returncode == 0, r.stderr
    path = make_artifact("constructor", [ADD_ENTRY])
    r = _tool("sign", "verify", path, "--trusted-key", f"{key}.pub")
    assert r.returncode == 1 and "not signed" in r.stderr
    r = _tool("sign", "sign", path, "--key", key)
    assert r.returncode == 0 and r.stdout.strip() == f"wrote {path}.sig", r.stderr
    r = _tool("sign", "verify", path, "--trusted-key", f"{key}.pub")
    assert r.returncode == 0 and "signed by trusted key" in r.stdout, r.stderr
    assert not marker.exists(), "verify loaded the code"
    # sits-run in the trusted mode: refused without the key's signature.
    other = tmp_path / "other.key"
    _tool("sign", "keygen", other)
    r = _tool("run", path, "--info", "--trusted-key", f"{other}.pub")
    assert r.returncode == 1 and "not by a trusted key" in r.stderr
    assert not marker.exists()
    r = _tool("run", path, "--info", "--trusted-key", f"{key}.pub")
    assert r.returncode == 0, r.stderr


@pytest.mark.slow
def test_sits_compile_signs_what_it_writes(tmp_path, keys):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), model)
    out = tmp_path / "relu.sitsm"
    r = _tool("compile", model, "-o", out, "--sign", keys["private"], "-q")
    assert r.returncode == 0, r.stderr
    m = runtime.load(out, trusted_keys=[keys["public"]])
    np.testing.assert_array_equal(m(np.full((2, 3), -1, np.float32)), np.zeros((2, 3)))
    r = _tool("compile", model, "-o", tmp_path / "x.sitsm", "--sign", keys["public"], "-q")
    assert r.returncode == 2 and "PEM private key" in r.stderr
    assert not (tmp_path / "x.sitsm").exists(), "a bad key is refused before compiling"
