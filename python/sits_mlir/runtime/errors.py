"""Typed exceptions of the SITS runtime.

Every failure of the runtime core (C++) arrives as one of these, with the
structured details of its status: ``code`` (the C++ status name, e.g.
``"CorruptArtifact"``), ``subject`` (the argument, section, manifest field,
symbol, path or device it is about), ``expected``/``given`` and ``index``.

    SitsError
    ├── ArtifactError                  the file cannot be used
    │   ├── CorruptArtifactError       damaged / not an artifact / bad manifest
    │   ├── UnsupportedFormatError     written by a newer SITS
    │   ├── IncompatibleArtifactError  built for another CPU (``missing_features``)
    │   ├── MissingSymbolError         an entry point the code does not export
    │   ├── CodeLoadError              the dynamic loader refused the code
    │   └── ArtifactNotFoundError      (also a FileNotFoundError)
    ├── SignatureError                 wrong inputs (also TypeError and ValueError)
    ├── DeviceError                    no such device / driver, or not runnable
    └── RuntimeCoreError               anything else (bad argument, I/O, internal)
"""

from __future__ import annotations

from typing import Sequence

from ..errors import SitsError

__all__ = [
    "ArtifactError",
    "ArtifactNotFoundError",
    "CodeLoadError",
    "CorruptArtifactError",
    "DeviceError",
    "IncompatibleArtifactError",
    "MissingSymbolError",
    "RuntimeCoreError",
    "SignatureError",
    "UnsupportedFormatError",
]


class _Details:
    """The fields every runtime exception carries."""

    code: str = ""
    subject: str = ""
    expected: str = ""
    given: str = ""
    index: int | None = None

    def _set_details(self, code="", subject="", expected="", given="", index=-1):
        self.code = code
        self.subject = subject
        self.expected = expected
        self.given = given
        self.index = None if index is None or index < 0 else index


class ArtifactError(_Details, SitsError):
    """A .sitsm artifact cannot be used: damaged, from a newer format, built
    for another machine, or its code cannot be loaded."""


class CorruptArtifactError(ArtifactError):
    """Not an artifact, or damaged: bad magic, sections out of bounds, a hash
    mismatch, a manifest that breaks the schema. ``index`` is a byte offset
    when one applies."""


class UnsupportedFormatError(ArtifactError):
    """The artifact's format version is newer than this runtime reads."""


class IncompatibleArtifactError(ArtifactError):
    """The artifact was built for another architecture or OS, or for CPU
    features this machine lacks (listed in ``missing_features``)."""

    missing_features: tuple[str, ...] = ()


class MissingSymbolError(ArtifactError):
    """An entry point's function is not exported by the artifact's code."""


class CodeLoadError(ArtifactError):
    """The dynamic loader refused the artifact's code (e.g. it needs a
    symbol nothing provides)."""


class ArtifactNotFoundError(ArtifactError, FileNotFoundError):
    """The artifact file does not exist."""


class SignatureError(_Details, SitsError, TypeError, ValueError):
    """Arguments that do not match an entry point: wrong count, dtype, rank
    or shape. ``subject`` names the argument, ``index`` its position, and
    ``expected``/``given`` say what was wanted and what was passed."""


class DeviceError(_Details, SitsError):
    """The requested device is not available (no driver, no such device), or
    cannot run compiled code yet."""


class RuntimeCoreError(_Details, SitsError):
    """Any other failure of the runtime core: an invalid argument (e.g. an
    unknown entry point or a manifest the writer rejects), an I/O error, an
    allocation failure, or an internal error."""


_BY_CODE = {
    "CorruptArtifact": CorruptArtifactError,
    "UnsupportedVersion": UnsupportedFormatError,
    "IncompatibleTarget": IncompatibleArtifactError,
    "MissingSymbol": MissingSymbolError,
    "LoadFailed": CodeLoadError,
    "NotFound": ArtifactNotFoundError,
    "SignatureMismatch": SignatureError,
    "DeviceUnavailable": DeviceError,
}


def _from_status(
    code: str,
    message: str,
    subject: str = "",
    expected: str = "",
    given: str = "",
    index: int = -1,
    missing: Sequence[str] = (),
) -> SitsError:
    """Builds the exception for a failed C++ Status (called by the
    extension module)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        if code == "Unimplemented" and subject.split(":")[0] in ("cuda", "hip"):
            cls = DeviceError
        else:
            cls = RuntimeCoreError
    exc = cls(message)
    if isinstance(exc, OSError):
        import errno

        exc.errno = errno.ENOENT  # str(exc) stays the message, which names the path
    exc._set_details(code, subject, expected, given, index)
    if isinstance(exc, IncompatibleArtifactError):
        exc.missing_features = tuple(missing)
    return exc
