"""The SITS runtime: load compiled models (.sitsm artifacts) and run them.

    from sits_mlir import runtime

    model = runtime.load("model.sitsm")          # verified before any code runs
    y = model(x)                                 # numpy / DLPack in, numpy out
    gpu = runtime.load("m.h100.sitsm", device="cuda:0")  # GPU artifacts
    model.inputs, model.outputs, model.manifest  # what it takes and gives
    runtime.set_num_threads(4)                   # threads compiled code computes on

The work happens in the C++ runtime core (runtime/, `libSitsRuntime.so`),
reached through the `sits_mlir._sits_runtime` extension; this package needs
neither MLIR nor LLVM at run time. Failures raise the typed exceptions of
`sits_mlir.runtime.errors` (all `sits_mlir.errors.SitsError`s):
`ArtifactError` and its subclasses for files that cannot be used,
`SignatureError` for inputs that do not fit, `DeviceError` for devices
(`GpuDriverError` when a CUDA/HIP driver call fails).

The compiler writes artifacts with `write_artifact` (and reads them back with
`read_artifact` / `read_manifest`); weights it packs go straight to their
place in a `placed_weights_file`, which `write_artifact(..., placed=)`
completes.

The paged KV-cache allocator for decoder models is `sits_mlir.runtime.kv`
(`from sits_mlir.runtime import kv; kv.KVAllocator(...)`); its errors are the
`KVError` subclasses of `sits_mlir.runtime.errors`.

Text in and out (the tokenizer, chat template and EOS ids bundled with a
decoder) is `TextCodec` (`sits_mlir.runtime.text`).
"""

from __future__ import annotations

from .artifact import (ArtifactInfo, placed_weights_file, read_artifact, read_manifest,
                       serialize_artifact, write_artifact)
from .errors import (
    ArtifactError,
    ArtifactNotFoundError,
    CodeLoadError,
    CorruptArtifactError,
    DeviceError,
    DeviceOutOfMemoryError,
    GpuDriverError,
    IncompatibleArtifactError,
    InputOutOfRangeError,
    MissingSymbolError,
    RuntimeCoreError,
    RuntimeOutOfMemoryError,
    SignatureError,
    UnsupportedFormatError,
    UntrustedArtifactError,
)
from .model import CompiledModel, EntryPoint, TensorSpec, load, load_bytes, numpy_dtype
from .text import IncrementalDecoder, TextCodec
from . import signing

__all__ = [
    "ArtifactError",
    "ArtifactInfo",
    "ArtifactNotFoundError",
    "CodeLoadError",
    "CompiledModel",
    "CorruptArtifactError",
    "DeviceError",
    "DeviceOutOfMemoryError",
    "EntryPoint",
    "FORMAT_VERSION",
    "GpuDriverError",
    "IncompatibleArtifactError",
    "IncrementalDecoder",
    "InputOutOfRangeError",
    "MissingSymbolError",
    "RuntimeCoreError",
    "RuntimeOutOfMemoryError",
    "SignatureError",
    "TensorSpec",
    "TextCodec",
    "UnsupportedFormatError",
    "UntrustedArtifactError",
    "default_num_threads",
    "devices",
    "host_cpu",
    "load",
    "load_bytes",
    "num_threads",
    "numpy_dtype",
    "open_device",
    "placed_weights_file",
    "read_artifact",
    "read_manifest",
    "serialize_artifact",
    "set_num_threads",
    "signing",
    "write_artifact",
]


def _native():
    from .. import _sits_runtime

    return _sits_runtime


def __getattr__(name):
    if name == "FORMAT_VERSION":
        return _native().FORMAT_VERSION
    raise AttributeError(f"module 'sits_mlir.runtime' has no attribute {name!r}")


def set_num_threads(n: int) -> None:
    """Sets the number of threads compiled code computes on (0: the
    default, i.e. $SITS_NUM_THREADS or the number of CPUs): the calling
    thread, which runs parallel work while it waits for it, and n - 1 pool
    workers (one worker when n is 1). Takes effect at once, also while
    models run."""
    _native().set_num_threads(int(n))


def num_threads() -> int:
    """The number of threads compiled code computes on (see
    set_num_threads)."""
    return _native().num_threads()


def default_num_threads() -> int:
    """$SITS_NUM_THREADS when set to a positive integer, else the number of
    CPUs this process may use."""
    return _native().default_num_threads()


def host_cpu() -> dict:
    """This machine as the runtime sees it: arch, os, model_name, vendor
    (x86-64: "GenuineIntel", "AuthenticAMD", ...; else ""), features (LLVM
    names) and known_features."""
    return _native().host_cpu()


def devices() -> list[dict]:
    """Every device the registered drivers find: [{uri, name, kind}], with
    `arch` ("sm_90") for GPUs whose driver reports it. $SITS_CUDA_DRIVER /
    $SITS_HIP_DRIVER name the driver library to use instead of the vendor's
    (read once per process)."""
    return _native().devices()


def open_device(uri: str) -> tuple[str, str]:
    """Checks that device `uri` can run code: returns (canonical uri,
    description) or raises DeviceError saying why not."""
    return _native().open_device(uri)
