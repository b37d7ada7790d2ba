"""Typed exceptions of the SITS runtime.

Every failure of the runtime (C++) arrives as one of these, built from the
runtime's one ``Status`` (runtime/include/sits/runtime/status.h): ``code``
(the C++ status name, e.g. ``"CorruptArtifact"`` or ``"OutOfBlocks"``) and
the structured payload of that code as attributes.

Runtime core (artifacts, models, devices): ``subject`` (the argument,
section, manifest field, symbol, path or device it is about),
``expected``/``given`` and ``index``.

    SitsError
    ├── ArtifactError                  the file cannot be used
    │   ├── CorruptArtifactError       damaged / not an artifact / bad manifest
    │   ├── UnsupportedFormatError     written by a newer SITS
    │   ├── IncompatibleArtifactError  built for another CPU (``missing_features``)
    │   ├── MissingSymbolError         an entry point the code does not export
    │   ├── CodeLoadError              the dynamic loader refused the code
    │   ├── ArtifactNotFoundError      (also a FileNotFoundError)
    │   └── UntrustedArtifactError     trusted keys required, no valid signature by one
    ├── SignatureError                 wrong inputs (also TypeError and ValueError)
    ├── InputOutOfRangeError           input values the model refuses: an index past
    │                                  its axis (also IndexError and ValueError)
    ├── DeviceError                    no such device / driver, or not runnable
    │   └── GpuDriverError             a CUDA / HIP driver call failed: ``function``,
    │       │                          ``error_name``, ``error_code``
    │       └── DeviceOutOfMemoryError device memory exhausted (also MemoryError)
    ├── RuntimeCoreError               anything else (bad argument, I/O, internal)
    │   └── RuntimeOutOfMemoryError    a buffer larger than memory (also MemoryError)
    └── KVError                        the KV-cache allocator (sits_mlir.runtime.kv),
        │                              one class per code of spec §4.9:
        ├── KVInvalidArgument          InvalidArgument (also ValueError): ``field``, ``value``
        ├── KVOutOfBlocks              OutOfBlocks, retryable: ``needed``, ``available``,
        │                              ``evictable``, ``evicting``
        ├── KVCapacityError            CapacityExceeded, permanent: ``limit_name``,
        │                              ``requested``, ``limit``
        ├── UnknownSequence            UnknownSequence (also KeyError): ``seq_id``
        ├── SequenceExists             SequenceExists: ``seq_id``
        ├── InvalidState               InvalidState: ``state``, ``seq_id``
        ├── HostTierFull               HostTierFull: ``needed``, ``available``
        ├── DoubleFree                 DoubleFree: ``block_id``
        ├── KVInternalError            Internal (pool poisoned): ``invariant``
        └── KVOutOfMemory              OutOfMemory (also MemoryError): ``requested``, ``field``

Every KV exception's ``str()`` is the C++ message, which includes the
payload (``needed = 5, available = 3, evictable = 0, evicting = 0``), and
names the failing item of a batch call (``batch_index``).
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
    "DeviceOutOfMemoryError",
    "DoubleFree",
    "GpuDriverError",
    "HostTierFull",
    "IncompatibleArtifactError",
    "InputOutOfRangeError",
    "InvalidState",
    "KVCapacityError",
    "KVError",
    "KVInternalError",
    "KVInvalidArgument",
    "KVOutOfBlocks",
    "KVOutOfMemory",
    "MissingSymbolError",
    "RuntimeCoreError",
    "RuntimeOutOfMemoryError",
    "SequenceExists",
    "SignatureError",
    "UnknownSequence",
    "UnsupportedFormatError",
    "UntrustedArtifactError",
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


class UntrustedArtifactError(ArtifactError):
    """Loading with trusted keys (sits_mlir.runtime.signing), the artifact
    has no signature, a malformed one, one by a key that is not trusted, or
    one that does not match its bytes. ``subject`` is the signature file."""


class SignatureError(_Details, SitsError, TypeError, ValueError):
    """Arguments that do not match an entry point: wrong count, dtype, rank
    or shape. ``subject`` names the argument, ``index`` its position, and
    ``expected``/``given`` say what was wanted and what was passed."""


class InputOutOfRangeError(_Details, SitsError, IndexError, ValueError):
    """The values of the inputs are outside what the model accepts: an
    index past the extent it indexes (ONNX Gather, GatherElements,
    ScatterElements, ScatterND), found by the compiled code. The message
    names the node; ``subject`` is the entry point. The outputs of such a
    call are not defined."""


class DeviceError(_Details, SitsError):
    """The requested device is not available (no driver, no such device), or
    cannot run compiled code yet."""


class GpuDriverError(DeviceError):
    """A call of the GPU driver library (libcuda / libamdhip64) failed while
    loading or running a model. ``subject`` is the device ("cuda:0"),
    ``function`` the driver function ("cuLaunchKernel"), ``error_name`` and
    ``error_code`` the driver's error ("CUDA_ERROR_LAUNCH_FAILED", 719); the
    message says all of it."""

    function: str = ""
    error_name: str = ""
    error_code: int = 0


class DeviceOutOfMemoryError(GpuDriverError, MemoryError):
    """The device ran out of memory (CUDA_ERROR_OUT_OF_MEMORY,
    hipErrorOutOfMemory)."""


#: The error code both CUDA and HIP use for an exhausted device memory.
_DRIVER_OUT_OF_MEMORY = 2


class RuntimeCoreError(_Details, SitsError):
    """Any other failure of the runtime core: an invalid argument (e.g. an
    unknown entry point or a manifest the writer rejects), an I/O error, an
    allocation failure, or an internal error."""


class RuntimeOutOfMemoryError(RuntimeCoreError, MemoryError):
    """A buffer of a call (an output, a staged input) is larger than the
    memory the system can give; refused before it is allocated."""


#: Payload defaults (an ErrorInfo field that does not apply keeps these).
_DEFAULTS = {"subject": "", "value": 0, "limit": 0, "needed": 0, "available": 0,
             "evictable": 0, "evicting": 0, "seq_id": None, "block_id": -1,
             "invariant": 0, "state": ""}


class KVError(SitsError):
    """A failed call of the KV-cache allocator (sits_mlir.runtime.kv). Every
    error leaves the allocator's state unchanged (spec §4.3); batch calls
    are all-or-nothing and ``batch_index`` names the item that failed."""

    code: str = ""
    #: The C++ message, which includes the payload.
    message: str = ""
    #: Index of the failing item of a batch call, None for single calls.
    batch_index: int | None = None

    def _set_payload(self, p: dict) -> None:
        """Keeps the payload fields this class documents."""

    def __str__(self) -> str:
        text = self.message
        if self.batch_index is not None:
            text += f" (batch item {self.batch_index})"
        return text


class KVInvalidArgument(KVError, ValueError):
    """A bad argument: a config field, a negative count, a position out of
    range, an output buffer too small. ``field`` names it, ``value`` is the
    offending value."""

    field: str = ""
    value: int = 0

    def _set_payload(self, p):
        self.field, self.value = p["subject"], p["value"]


class KVOutOfBlocks(KVError):
    """Not enough free blocks now (retryable: free, evict or wait and try
    again). ``needed`` blocks were asked, ``available`` could be taken
    (free + evictable, minus the watermark for admissions), ``evictable`` of
    them are cached, ``evicting`` wait for ``complete(epoch)`` (ASYNC copy
    mode)."""

    retryable = True
    needed: int = 0
    available: int = 0
    evictable: int = 0
    evicting: int = 0

    def _set_payload(self, p):
        self.needed, self.available = p["needed"], p["available"]
        self.evictable, self.evicting = p["evictable"], p["evicting"]


class KVCapacityError(KVError):
    """The request can never fit (not retryable): ``requested`` exceeds
    ``limit``, the limit named ``limit_name`` (``max_seq_len``,
    ``usable_blocks``)."""

    retryable = False
    limit_name: str = ""
    requested: int = 0
    limit: int = 0

    def _set_payload(self, p):
        self.limit_name, self.requested, self.limit = p["subject"], p["value"], p["limit"]


class UnknownSequence(KVError, KeyError):
    """A call named a sequence that is not live (never added, or already
    freed). ``seq_id`` is the id."""

    seq_id: int | None = None

    def _set_payload(self, p):
        self.seq_id = p["seq_id"]

    __str__ = KVError.__str__  # not KeyError's repr-quoting


class SequenceExists(KVError):
    """``add_sequence`` or ``fork`` into an id that is live. ``seq_id``."""

    seq_id: int | None = None

    def _set_payload(self, p):
        self.seq_id = p["seq_id"]


class InvalidState(KVError):
    """The call is not allowed in the current state: ``state`` is the state
    that forbids it (``"SWAPPED"``, ``"ACTIVE"``, ``"NO_HOST_TIER"``,
    ``"SHARED_BLOCK"``, ``"CLOSED"``, ...), ``seq_id`` the sequence when one
    is concerned."""

    state: str = ""
    seq_id: int | None = None

    def _set_payload(self, p):
        self.state, self.seq_id = p["state"], p["seq_id"]


class HostTierFull(KVError):
    """``swap_out`` needs ``needed`` host blocks, only ``available`` are
    free."""

    needed: int = 0
    available: int = 0

    def _set_payload(self, p):
        self.needed, self.available = p["needed"], p["available"]


class DoubleFree(KVError):
    """A block-level unref of block ``block_id``, whose reference count is
    already 0."""

    block_id: int = -1

    def _set_payload(self, p):
        self.block_id = p["block_id"]


class KVInternalError(KVError):
    """The allocator found an impossible state and is poisoned: every later
    call raises this too. ``invariant`` is the violated invariant (1..10 for
    I1..I10 of the spec, 0 for another impossible state)."""

    invariant: int = 0

    def _set_payload(self, p):
        self.invariant = p["invariant"]


class KVOutOfMemory(KVError, MemoryError):
    """The allocator's metadata or the KV memory (``KVMemory``, one tier:
    ``field`` is "device_tier" or "host_tier") could not be allocated:
    ``requested`` bytes."""

    requested: int = 0
    field: str = ""

    def _set_payload(self, p):
        self.requested, self.field = p["value"], p["subject"]


_BY_CODE = {
    "CorruptArtifact": CorruptArtifactError,
    "UnsupportedVersion": UnsupportedFormatError,
    "IncompatibleTarget": IncompatibleArtifactError,
    "MissingSymbol": MissingSymbolError,
    "LoadFailed": CodeLoadError,
    "NotFound": ArtifactNotFoundError,
    "SignatureMismatch": SignatureError,
    "OutOfRange": InputOutOfRangeError,
    "OutOfMemory": RuntimeOutOfMemoryError,
    "DeviceUnavailable": DeviceError,
}

#: KV codes (spec §4.9) → exception class.
_KV_BY_CODE = {
    "InvalidArgument": KVInvalidArgument,
    "OutOfBlocks": KVOutOfBlocks,
    "CapacityExceeded": KVCapacityError,
    "UnknownSequence": UnknownSequence,
    "SequenceExists": SequenceExists,
    "InvalidState": InvalidState,
    "HostTierFull": HostTierFull,
    "DoubleFree": DoubleFree,
    "Internal": KVInternalError,
    "OutOfMemory": KVOutOfMemory,
}


def _from_status(
    code: str,
    message: str,
    subject: str = "",
    expected: str = "",
    given: str = "",
    index: int = -1,
    missing: Sequence[str] = (),
    *,
    payload: dict | None = None,
    kv: bool = False,
) -> SitsError:
    """Builds the exception for a failed C++ Status. The extension module
    passes the whole ErrorInfo as `payload` and `kv` when the status comes
    from the KV allocator; Python callers pass the core's fields directly."""
    if payload is None:
        payload = {"subject": subject, "expected": expected, "given": given,
                   "index": index, "missing": missing}
    if kv:
        exc = _KV_BY_CODE.get(code, KVInternalError)(message)
        exc.code, exc.message = code, message
        batch_index = payload.get("batch_index", -1)
        exc.batch_index = None if batch_index is None or batch_index < 0 else batch_index
        exc._set_payload({**_DEFAULTS, **payload})
        return exc
    subject = payload.get("subject", "")
    if code == "DriverError":
        cls = (DeviceOutOfMemoryError if payload.get("value") == _DRIVER_OUT_OF_MEMORY
               else GpuDriverError)
        exc = cls(message)
        exc._set_details(code, subject, payload.get("expected", ""),
                         payload.get("given", ""), payload.get("index", -1))
        exc.function, exc.error_name = exc.expected, exc.given
        exc.error_code = int(payload.get("value", 0))
        return exc
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
    exc._set_details(code, subject, payload.get("expected", ""), payload.get("given", ""),
                     payload.get("index", -1))
    if isinstance(exc, IncompatibleArtifactError):
        exc.missing_features = tuple(payload.get("missing", ()))
    return exc
