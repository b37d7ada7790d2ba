"""Ed25519 signatures of .sitsm artifacts.

An artifact is native code: loading it is like loading a shared library.
Its digests (ARTIFACT.md) catch damage, not a malicious writer. A signature
says who built it:

    from sits_mlir.runtime import signing
    signing.generate_key("release.key")              # + release.key.pub
    signing.sign("model.sitsm", "release.key")       # writes model.sitsm.sig
    runtime.load("model.sitsm", trusted_keys=["release.key.pub"])

The signature is a small JSON file next to the artifact (``<artifact>.sig``)
that signs, with Ed25519, the artifact's SHA-256 content hash together with
a SHA-256 of its weights section. The content hash covers every byte outside
the weights; the weights' own XXH3 digest is fast but not collision-resistant,
so a signature covers them with SHA-256 as well.

With trusted keys (``load(..., trusted_keys=...)``, or the environment
variable ``SITS_TRUSTED_KEYS``, a list of public-key files separated by
``os.pathsep``), loading refuses an artifact without a valid signature by one
of them, with ``UntrustedArtifactError``. The runtime maps and verifies the
file, this module checks the signature against the mapped bytes, and only
then is the code loaded: nothing in the file runs before the check.

Keys are PEM files (PKCS#8 private keys, SubjectPublicKeyInfo public keys),
the format ``openssl genpkey -algorithm ed25519`` writes too. A private key
may be encrypted; its passphrase comes from ``SITS_SIGNING_KEY_PASSWORD``.
Signing needs the ``cryptography`` package (``pip install 'sits-mlir[sign]'``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
from typing import Any, Iterable, Sequence

from .errors import UntrustedArtifactError

__all__ = ["SIGNATURE_SUFFIX", "UntrustedArtifactError", "generate_key", "public_key_of",
           "sign", "signature_path", "trusted_keys_from_env", "verify"]

SIGNATURE_SUFFIX = ".sig"
_FORMAT = "sits-signature-1"
_DOMAIN = b"SITS artifact signature v1\n"
# A signature file is a few hundred bytes; anything much larger is not one.
_MAX_SIGNATURE_BYTES = 64 * 1024
_ENV_TRUSTED = "SITS_TRUSTED_KEYS"
_ENV_PASSWORD = "SITS_SIGNING_KEY_PASSWORD"


def _crypto():
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise ImportError("artifact signatures need the 'cryptography' package: "
                          "pip install 'sits-mlir[sign]'") from e
    return ed25519, serialization, InvalidSignature


def _untrusted(message: str, subject: str = "") -> UntrustedArtifactError:
    e = UntrustedArtifactError(message)
    e._set_details(code="Untrusted", subject=subject)
    return e


def signature_path(artifact: str | os.PathLike) -> str:
    """Where the signature of `artifact` lives: ``<artifact>.sig``."""
    return os.fspath(artifact) + SIGNATURE_SUFFIX


def _payload(content_hash: str, weights_sha256: str | None) -> bytes:
    return _DOMAIN + f"{content_hash}\n{weights_sha256 or '-'}\n".encode("ascii")


def _weights_sha256(weights) -> str | None:
    return None if weights is None else hashlib.sha256(weights).hexdigest()


def _raw_public(key) -> bytes:
    _, serialization, _ = _crypto()
    return key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def _key_id(public_key) -> str:
    return hashlib.sha256(_raw_public(public_key)).hexdigest()[:16]


def _read(path: str | os.PathLike, what: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_SIGNATURE_BYTES + 1)
    except OSError as e:
        raise ValueError(f"cannot read the {what} {os.fspath(path)!r}: {e.strerror}") from None
    if len(data) > _MAX_SIGNATURE_BYTES:
        raise ValueError(f"{os.fspath(path)!r} is too large to be a {what}")
    return data


def load_private_key(key: Any):
    """An Ed25519 private key from a PEM file path, PEM bytes, or a key."""
    ed25519, serialization, _ = _crypto()
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key
    data = key if isinstance(key, bytes) else _read(key, "private key")
    password = os.environ.get(_ENV_PASSWORD)
    try:
        k = serialization.load_pem_private_key(
            data, password.encode() if password else None)
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a usable PEM private key: {e}") from None
    if not isinstance(k, ed25519.Ed25519PrivateKey):
        raise ValueError(f"signing keys are Ed25519, not {type(k).__name__}")
    return k


def load_public_key(key: Any):
    """An Ed25519 public key from a PEM file path, PEM bytes, 32 raw bytes,
    a public key, or a private key (its public half)."""
    ed25519, serialization, _ = _crypto()
    if isinstance(key, ed25519.Ed25519PublicKey):
        return key
    if isinstance(key, ed25519.Ed25519PrivateKey):
        return key.public_key()
    if isinstance(key, bytes) and len(key) == 32:
        return ed25519.Ed25519PublicKey.from_public_bytes(key)
    data = key if isinstance(key, bytes) else _read(key, "public key")
    try:
        k = serialization.load_pem_public_key(data)
    except (ValueError, TypeError) as e:
        raise ValueError(f"not a usable PEM public key: {e}") from None
    if not isinstance(k, ed25519.Ed25519PublicKey):
        raise ValueError(f"trusted keys are Ed25519, not {type(k).__name__}")
    return k


def public_key_of(key: Any) -> bytes:
    """The PEM public key of a private key (path, PEM bytes or key)."""
    _, serialization, _ = _crypto()
    return load_private_key(key).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def generate_key(path: str | os.PathLike) -> tuple[str, str]:
    """Writes a new Ed25519 private key to `path` (mode 0600, unencrypted)
    and its public key to ``<path>.pub``; returns both paths. Refuses to
    overwrite an existing file."""
    ed25519, serialization, _ = _crypto()
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    path = os.fspath(path)
    public_path = path + ".pub"
    for p in (path, public_path):
        if os.path.exists(p):
            raise FileExistsError(f"{p!r} exists; not overwriting a key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(private)
    with open(public_path, "wb") as f:
        f.write(public_key_of(key))
    return path, public_path


def sign(artifact: str | os.PathLike, key: Any, output: str | os.PathLike | None = None) -> str:
    """Signs `artifact` with the Ed25519 private `key` (PEM path, PEM bytes
    or key); writes the signature to `output` (default ``<artifact>.sig``)
    and returns its path. The artifact is verified in full first."""
    from .model import _native

    private = load_private_key(key)
    path = os.fspath(artifact)
    seen: dict = {}

    def record(content_hash: str, weights) -> None:
        seen["hash"] = content_hash
        seen["weights"] = _weights_sha256(weights)
        # Stop before the code is loaded: signing never runs the artifact.
        raise _StopLoad

    try:
        _native().Module.load(path, "cpu", "full", record)
    except _StopLoad:
        pass
    except ArtifactError:
        raise
    signature = private.sign(_payload(seen["hash"], seen["weights"]))
    document = {
        "format": _FORMAT,
        "algorithm": "ed25519",
        "key_id": _key_id(private.public_key()),
        "content_hash": seen["hash"],
        "weights_sha256": seen["weights"],
        "signature": base64.b64encode(signature).decode("ascii"),
    }
    out = os.fspath(output) if output is not None else signature_path(path)
    tmp = out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(document, f, indent=2)
        f.write("\n")
    os.replace(tmp, out)
    return out


class _StopLoad(Exception):
    pass


def trusted_keys_from_env() -> list[str] | None:
    """The public-key files of ``SITS_TRUSTED_KEYS`` (None when unset)."""
    value = os.environ.get(_ENV_TRUSTED)
    if not value:
        return None
    return [p for p in value.split(os.pathsep) if p]


def _document(signature) -> dict:
    """The parsed signature document of `signature`: a file path, or the
    file's bytes (None: there is none)."""
    if signature is None:
        raise _untrusted("the artifact is not signed (trusted keys are required): give "
                         "its signature", "")
    if isinstance(signature, (bytes, bytearray, memoryview)):
        sig_path = "<signature bytes>"
        data = bytes(signature[:_MAX_SIGNATURE_BYTES + 1])
        if len(data) > _MAX_SIGNATURE_BYTES:
            raise _untrusted("the signature is too large to be one", sig_path)
    else:
        sig_path = os.fspath(signature)
        try:
            data = _read(sig_path, "signature")
        except ValueError as e:
            if not os.path.exists(sig_path):
                raise _untrusted(f"the artifact is not signed: no signature file {sig_path!r} "
                                 f"(trusted keys are required)", sig_path) from None
            raise _untrusted(str(e), sig_path) from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise _untrusted(f"{sig_path!r} is not a signature (not JSON)", sig_path) from None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise _untrusted(f"{sig_path!r} is not a SITS signature (format must be "
                         f"{_FORMAT!r})", sig_path)
    if doc.get("algorithm") != "ed25519":
        raise _untrusted(f"{sig_path!r}: unsupported algorithm "
                         f"{str(doc.get('algorithm'))[:40]!r} (expected 'ed25519')", sig_path)
    for field in ("content_hash", "signature", "key_id"):
        if not isinstance(doc.get(field), str):
            raise _untrusted(f"{sig_path!r}: '{field}' must be a string", sig_path)
    if not (doc.get("weights_sha256") is None or isinstance(doc["weights_sha256"], str)):
        raise _untrusted(f"{sig_path!r}: 'weights_sha256' must be a string or null", sig_path)
    return doc


def verifier(trusted_keys: Iterable[Any], signature):
    """The check `load` runs between verifying the file and loading its
    code: (content_hash, weights) -> None, raising UntrustedArtifactError.
    `signature` is the signature file's path or bytes."""
    keys = [load_public_key(k) for k in trusted_keys]
    if not keys:
        raise ValueError("trusted_keys is empty: give at least one public key")
    _, _, InvalidSignature = _crypto()

    sig_path = ("<signature bytes>" if isinstance(signature, (bytes, bytearray, memoryview))
                else "" if signature is None else os.fspath(signature))

    def check(content_hash: str, weights) -> None:
        doc = _document(signature)
        if doc["content_hash"] != content_hash:
            raise _untrusted(f"the signature {sig_path!r} is for another artifact (content "
                             f"hash {doc['content_hash'][:16]}..., the file's is "
                             f"{content_hash[:16]}...)", sig_path)
        weights_sha = _weights_sha256(weights)
        if doc["weights_sha256"] != weights_sha:
            raise _untrusted(f"the artifact's weights do not match its signature {sig_path!r}",
                             sig_path)
        try:
            raw = base64.b64decode(doc["signature"], validate=True)
        except (binascii.Error, ValueError):
            raise _untrusted(f"{sig_path!r}: 'signature' is not base64", sig_path) from None
        payload = _payload(content_hash, weights_sha)
        # Try the key the signature names first; any trusted key may match.
        ordered = sorted(keys, key=lambda k: _key_id(k) != doc["key_id"])
        for k in ordered:
            try:
                k.verify(raw, payload)
                return
            except InvalidSignature:
                continue
        raise _untrusted(f"the signature {sig_path!r} is not by a trusted key (or does not "
                         f"match the artifact); key id {doc['key_id'][:16]!r}", sig_path)

    return check


def verify(artifact: str | os.PathLike, trusted_keys: Sequence[Any],
           signature: str | os.PathLike | None = None) -> str:
    """Checks `artifact`'s signature against `trusted_keys` without loading
    its code; returns the signing key's id. Raises UntrustedArtifactError
    (or an ArtifactError for a damaged file)."""
    from .model import _native

    path = os.fspath(artifact)
    sig = os.fspath(signature) if signature is not None else signature_path(path)
    check = verifier(trusted_keys, sig)

    def run(content_hash: str, weights) -> None:
        check(content_hash, weights)
        raise _StopLoad

    try:
        _native().Module.load(path, "cpu", "metadata", run)
    except _StopLoad:
        pass
    return _document(sig)["key_id"]
