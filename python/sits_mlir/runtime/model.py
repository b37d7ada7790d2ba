"""Compiled models: loading an artifact and calling its entry points."""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from . import signing
from .errors import SignatureError, _from_status

#: The largest tensor SITS compiles or a call allocates, in bytes (1 TiB: a
#: 70 B model's largest weight is a few GB). The compiler refuses shapes
#: past it before inference or IR sees them (their element counts overflow
#: 64-bit arithmetic in MLIR); the runtime refuses shape-function results
#: past it.
MAX_TENSOR_BYTES = 1 << 40

__all__ = ["CompiledModel", "EntryPoint", "TensorSpec", "load", "load_bytes"]


def _native():
    from .. import _sits_runtime

    return _sits_runtime


_NUMPY_DTYPES = {
    "f64": np.float64,
    "f32": np.float32,
    "f16": np.float16,
    "i64": np.int64,
    "i32": np.int32,
    "i16": np.int16,
    "i8": np.int8,
    "u64": np.uint64,
    "u32": np.uint32,
    "u16": np.uint16,
    "u8": np.uint8,
    "bool": np.bool_,
}


# Types NumPy lacks: ml_dtypes names them; arrays of them cross into the
# runtime as their bits (one element per byte, bf16 as uint16).
_ML_DTYPES = {
    "bf16": "bfloat16",
    "i4": "int4", "u4": "uint4", "i2": "int2", "u2": "uint2",
    "f8e4m3fn": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
    "f8e4m3fnuz": "float8_e4m3fnuz", "f8e5m2fnuz": "float8_e5m2fnuz",
    "f8e8m0fnu": "float8_e8m0fnu", "f4e2m1fn": "float4_e2m1fn",
}
_BITS_OF = {name: np.dtype(np.uint16 if name == "bfloat16" else np.uint8)
            for name in _ML_DTYPES.values()}


def numpy_dtype(dtype: str) -> np.dtype:
    """The numpy dtype for a manifest dtype: an ml_dtypes type for bf16, fp8,
    int4 and the like (the integer type holding their bits when ml_dtypes is
    not installed)."""
    if dtype in _ML_DTYPES:
        try:
            import ml_dtypes

            return np.dtype(getattr(ml_dtypes, _ML_DTYPES[dtype]))
        except (ImportError, AttributeError):  # pragma: no cover - environment
            return _BITS_OF[_ML_DTYPES[dtype]]
    return np.dtype(_NUMPY_DTYPES[dtype])


def special_dtype_name(dtype) -> str | None:
    """The manifest name of an ml_dtypes dtype ("f8e4m3fn" for
    float8_e4m3fn), None for NumPy's own dtypes."""
    name = np.dtype(dtype).name
    for manifest, ml in _ML_DTYPES.items():
        if ml == name:
            return manifest
    return None


#: DLPack device types of GPU memory (kDLCUDA, kDLROCm).
_GPU_DLPACK_DEVICES = (2, 10)


def _on_gpu(value: Any) -> bool:
    """Whether `value` is a DLPack tensor in GPU memory (CuPy, PyTorch CUDA
    or ROCm tensors), which a GPU model reads and writes in place."""
    device = getattr(value, "__dlpack_device__", None)
    if device is None or isinstance(value, np.ndarray):
        return False
    try:
        return int(device()[0]) in _GPU_DLPACK_DEVICES
    except Exception:  # noqa: BLE001 -- not a usable DLPack tensor
        return False


def _bits(array: np.ndarray) -> np.ndarray:
    """`array` itself, or its bits when its dtype is one NumPy lacks."""
    bits = _BITS_OF.get(array.dtype.name)
    return array if bits is None else array.view(bits)


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of an entry point."""

    name: str
    dtype: str
    #: Extents; None where dynamic.
    shape: tuple[int | None, ...]
    #: Symbolic names tying dynamic extents together ("batch"), or None.
    dim_names: tuple[str | None, ...] = ()

    @property
    def numpy_dtype(self) -> np.dtype:
        return numpy_dtype(self.dtype)

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype}[{dims}]"

    @classmethod
    def _from_arg(cls, arg: Mapping[str, Any]) -> "TensorSpec":
        return cls(
            name=arg["name"],
            dtype=arg["dtype"],
            shape=tuple(None if d < 0 else int(d) for d in arg["shape"]),
            dim_names=tuple(arg.get("dim_names", ())),
        )


def _is_array(value: Any) -> bool:
    return isinstance(value, np.ndarray) or hasattr(value, "__dlpack__")


class EntryPoint:
    """A callable entry point of a compiled model.

    ``ep(*arrays, **named)`` returns the output array, or a tuple of them
    when there are several; ``ep.run(...)`` always returns a tuple;
    ``ep.run_into(outputs, ...)`` writes into caller-provided arrays.
    Inputs may be numpy arrays, any DLPack tensor on the CPU (PyTorch, JAX,
    ...), or nested lists / scalars (converted to the input's dtype). Outputs
    are new 64-byte-aligned numpy arrays. The GIL is released while the
    compiled code runs.
    """

    def __init__(self, model: "CompiledModel", signature: Mapping[str, Any]):
        self._model = model
        self._module = model._module
        self.name: str = signature["name"]
        self.symbol: str = signature["symbol"]
        args = signature["args"]
        self.has_weights: bool = any(a["role"] == "weights" for a in args)
        self.inputs: tuple[TensorSpec, ...] = tuple(
            TensorSpec._from_arg(a) for a in args if a["role"] == "input")
        self.outputs: tuple[TensorSpec, ...] = tuple(
            TensorSpec._from_arg(a) for a in args if a["role"] == "output")
        manifest_entry = next((e for e in model.manifest.get("entry_points", ())
                               if e.get("name") == self.name), {})
        #: The entry point computing the extents of outputs that no input
        #: extent determines (models whose output shapes follow the data).
        self.shape_function: str | None = manifest_entry.get("shape_function")
        #: Inputs the code updates in place (a paged KV pool): they must be
        #: writable, C-contiguous numpy arrays of exactly the input's dtype,
        #: never a converted copy that would take the update away.
        self._warned_unaligned: set[str] = set()
        self.updated_inputs: frozenset[str] = frozenset(
            a["name"] for a in manifest_entry.get("args", ())
            if a.get("role") == "input" and a.get("updated_in_place"))

    def __repr__(self) -> str:
        ins = ", ".join(map(str, self.inputs))
        outs = ", ".join(map(str, self.outputs))
        return f"<EntryPoint {self.name}({ins}) -> ({outs})>"

    # -- argument binding ----------------------------------------------------

    def _bind(self, arrays: Sequence[Any], named: Mapping[str, Any]) -> list[Any]:
        specs = self.inputs
        names = [s.name for s in specs]
        listing = ", ".join(names) if names else "none"
        if len(arrays) > len(specs):
            raise self._error(
                f"entry point '{self.name}' takes {len(specs)} input"
                f"{'' if len(specs) == 1 else 's'} ({listing}), got {len(arrays)}",
                subject="input", expected=str(len(specs)), given=str(len(arrays)))
        bound: list[Any] = list(arrays) + [_MISSING] * (len(specs) - len(arrays))
        for key, value in named.items():
            if key not in names:
                raise self._error(
                    f"entry point '{self.name}' has no input named '{key}' "
                    f"(inputs: {listing})", subject=key, expected=listing, given=key)
            i = names.index(key)
            if bound[i] is not _MISSING:
                raise self._error(
                    f"input '{key}' of entry point '{self.name}' was given twice "
                    "(by position and by name)", subject=key, index=i)
            bound[i] = value
        missing = [n for n, v in zip(names, bound) if v is _MISSING]
        if missing:
            raise self._error(
                f"entry point '{self.name}' is missing input"
                f"{'' if len(missing) == 1 else 's'} {', '.join(repr(m) for m in missing)} "
                f"(inputs: {listing})",
                subject=missing[0], index=names.index(missing[0]),
                expected=str(len(specs)), given=str(len(specs) - len(missing)))
        return [self._convert(v, s, i) for i, (v, s) in enumerate(zip(bound, specs))]

    def _convert(self, value: Any, spec: TensorSpec, index: int) -> Any:
        label = f"input '{spec.name}' (#{index}) of entry point '{self.name}'"
        if spec.name in self.updated_inputs:
            if _on_gpu(value):  # a GPU model's own memory: used in place
                return value
            if not (isinstance(value, np.ndarray) and value.dtype == spec.numpy_dtype
                    and value.flags.c_contiguous and value.flags.writeable):
                raise self._error(
                    f"{label} is updated in place: it must be a writable, C-contiguous "
                    f"numpy array of dtype {spec.dtype}, got "
                    + (f"{value.dtype} (contiguous: {value.flags.c_contiguous}, "
                       f"writable: {value.flags.writeable})"
                       if isinstance(value, np.ndarray) else type(value).__name__),
                    subject=spec.name, index=index, expected=spec.dtype,
                    given=str(getattr(value, "dtype", type(value).__name__)))
            if value.ctypes.data % value.itemsize and value.nbytes >= 1 << 20 and \
                    spec.name not in self._warned_unaligned:
                # Correct, but the runtime stages it: a copy in and out per call.
                self._warned_unaligned.add(spec.name)
                warnings.warn(
                    f"{label} is updated in place but not aligned to its "
                    f"{value.itemsize}-byte elements: the runtime copies its "
                    f"{value.nbytes >> 20} MiB in and out on every call. Allocate it "
                    "aligned (a KV pool's KVMemory.device is).",
                    ResourceWarning, stacklevel=4)
            # A bf16/fp8 pool crosses as a view of its bits: updates still
            # land in the caller's array.
            return _bits(value)
        if isinstance(value, np.ndarray):
            if value.dtype.name in _BITS_OF:  # ml_dtypes: pass the bits
                if value.dtype != spec.numpy_dtype:
                    raise self._error(
                        f"{label} has dtype {value.dtype}, expected {spec.dtype}",
                        subject=spec.name, index=index, expected=spec.dtype,
                        given=str(value.dtype))
                return _bits(value)
            if value.dtype.kind not in "biufc":
                raise self._error(
                    f"{label} has dtype {value.dtype}, expected {spec.dtype}",
                    subject=spec.name, index=index, expected=spec.dtype,
                    given=str(value.dtype))
            return value
        if hasattr(value, "__dlpack__"):
            return value
        if hasattr(value, "__array__") or hasattr(value, "__array_interface__"):
            return self._convert(np.asarray(value), spec, index)
        # Nested lists and scalars have no dtype of their own: they take the
        # input's, unless that would change their kind (1.5 into an i32).
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as e:
            array, error = None, e
        if array is None or array.dtype.kind not in "biuf":
            raise self._error(
                f"{label} must be an array (numpy, or any DLPack tensor on the "
                f"CPU), not {type(value).__name__}"
                + (f": {error}" if array is None else ""),
                subject=spec.name, index=index, expected="array",
                given=type(value).__name__)
        target = spec.numpy_dtype
        if not np.can_cast(array.dtype, target, casting="same_kind"):
            raise self._error(
                f"{label} holds {array.dtype} values that do not convert to "
                f"{spec.dtype} without changing their kind",
                subject=spec.name, index=index, expected=spec.dtype,
                given=str(array.dtype))
        return _bits(array.astype(target))

    def _error(self, message, subject="", expected="", given="", index=-1):
        return _from_status("SignatureMismatch", message, subject, expected, given,
                            index if index is not None else -1)

    def _finish(self, arrays: list[np.ndarray]) -> tuple[np.ndarray, ...]:
        out = []
        for a, spec in zip(arrays, self.outputs):
            if spec.dtype in _ML_DTYPES and a.dtype != spec.numpy_dtype:
                a = a.view(spec.numpy_dtype)
            out.append(a)
        return tuple(out)

    # -- calling -------------------------------------------------------------

    def run(self, *arrays: Any, **named: Any) -> tuple[np.ndarray, ...]:
        """Runs the entry point; returns a tuple with one array per output."""
        inputs = self._bind(arrays, named)
        if self.shape_function is None:
            return self._finish(self._module.run(self.name, inputs))
        outs = [np.empty(shape, _bits(np.empty(0, spec.numpy_dtype)).dtype)
                for shape, spec in zip(self._computed_shapes(inputs), self.outputs)]
        self._module.run(self.name, inputs, outs)
        return self._finish(outs)

    def _computed_shapes(self, inputs: list[Any]) -> list[tuple[int, ...]]:
        """Output shapes from the shape function: its i64 extents fill the
        dynamic dimensions, in output order."""
        (extents,) = self._module.run(self.shape_function, inputs)
        it = iter(int(e) for e in extents)
        shapes = [tuple(next(it) if d is None else d for d in spec.shape) for spec in self.outputs]
        # The shape function computes from the data: extents no buffer can
        # have are refused here, before anything is allocated or written.
        for spec, shape in zip(self.outputs, shapes):
            size = np.dtype(spec.numpy_dtype).itemsize * int(np.prod(shape, dtype=object))
            if min(shape, default=0) < 0 or size > MAX_TENSOR_BYTES:
                error = SignatureError(f"these inputs give output '{spec.name}' of entry point "
                                       f"'{self.name}' the shape {list(shape)}, which no buffer "
                                       "can have")
                error._set_details("signature_mismatch", spec.name, "extents >= 0 and at most "
                                   f"{MAX_TENSOR_BYTES} bytes", str(list(shape)))
                raise error
        return shapes

    def __call__(self, *arrays: Any, **named: Any):
        """Like run(), but a single output is returned as it is."""
        out = self.run(*arrays, **named)
        return out[0] if len(out) == 1 else out

    def run_into(self, outputs: Sequence[Any], *arrays: Any, **named: Any):
        """Runs the entry point writing into `outputs` (writable arrays of
        the output shapes and dtypes, in order); returns them as a tuple."""
        inputs = self._bind(arrays, named)
        outs = [_bits(o) if isinstance(o, np.ndarray) else o for o in outputs]
        self._module.run(self.name, inputs, outs)
        return tuple(outputs)

    def output_shapes(self, *arrays: Any, **named: Any) -> list[tuple[int, ...]]:
        """The output shapes these inputs give (raises SignatureError when a
        dynamic output extent is not determined by the inputs)."""
        inputs = self._bind(arrays, named)
        if self.shape_function is not None:
            return self._computed_shapes(inputs)
        return self._module.output_shapes(self.name, inputs)


_MISSING = object()


class CompiledModel:
    """A loaded .sitsm artifact.

    Calling the model calls its default entry point ("main", or the only
    one); ``model.entry("name")`` reaches the others.
    """

    def __init__(self, module, path: str | None = None):
        self._module = module
        self.path = path
        self.device: str = module.device
        self.content_hash: str = module.content_hash
        self.manifest: dict = json.loads(module.manifest_json)
        self.entry_points: dict[str, EntryPoint] = {
            name: EntryPoint(self, module.signature(name)) for name in module.entry_points}

    def entry(self, name: str) -> EntryPoint:
        try:
            return self.entry_points[name]
        except KeyError:
            raise _from_status(
                "InvalidArgument",
                f"no entry point named '{name}'; the model has: "
                f"{', '.join(self.entry_points)}", subject=name) from None

    @property
    def default_entry(self) -> EntryPoint:
        if "main" in self.entry_points:
            return self.entry_points["main"]
        if len(self.entry_points) == 1:
            return next(iter(self.entry_points.values()))
        raise _from_status(
            "InvalidArgument",
            "this model has several entry points and none is called 'main': use "
            f"model.entry(name) with one of {', '.join(self.entry_points)}")

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.default_entry.inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.default_entry.outputs

    def __call__(self, *arrays: Any, **named: Any):
        return self.default_entry(*arrays, **named)

    def run(self, *arrays: Any, **named: Any) -> tuple[np.ndarray, ...]:
        return self.default_entry.run(*arrays, **named)

    def run_into(self, outputs: Sequence[Any], *arrays: Any, **named: Any):
        return self.default_entry.run_into(outputs, *arrays, **named)

    def gpu_stats(self) -> dict[str, int | float]:
        """What the calls so far cost on a GPU (zeros for a CPU model):
        ``calls``; ``recordings`` made of calls whose input signature (shapes,
        and the addresses of inputs already on the device) repeated, and
        ``replays`` of them; ``record_failures`` (those calls launched their
        kernels); ``kernels`` run; ``launches`` into the driver (one per
        kernel of a plain call, one per replay); ``host_seconds`` spent
        issuing the work, the waits for the device excluded."""
        return self._module.gpu_stats()

    def __repr__(self) -> str:
        where = f" from {self.path!r}" if self.path else ""
        target = self.manifest.get("target", {})
        return (f"<CompiledModel{where} target={target.get('name')!r} "
                f"({target.get('triple')}) device={self.device!r} "
                f"entry points: {', '.join(self.entry_points)}>")


def load(path: str | os.PathLike, device: str = "cpu", verify: str = "full", *,
         trusted_keys: Sequence[Any] | None = None,
         signature: str | os.PathLike | None = None,
         gpu_graphs: bool = True) -> CompiledModel:
    """Verifies and loads a .sitsm artifact.

    Checks integrity (magic, format version, section bounds, content hash,
    manifest schema, weights digest) and compatibility (architecture, CPU
    features, entry symbols) before any of its code runs; raises an
    ArtifactError subclass otherwise, or DeviceError for an unavailable
    `device` ("cpu", "cuda:0", "hip:0").

    The file is mapped, not read: the compiled code reads the weights from
    the mapping (page cache), so loading adds next to no anonymous memory.
    verify="metadata" skips the weights digest (everything else is still
    checked): for a file verified before, on storage you trust.

    Artifacts compiled for a GPU target (h100, a100, ...) run on a device of
    their kind: `load(path, device="cuda:0")` uploads the weights once; each
    call copies the inputs (numpy or DLPack arrays in host memory) to the
    device and returns the outputs as numpy arrays. CPU artifacts on a GPU
    and GPU artifacts on the CPU raise IncompatibleArtifactError; a failed
    driver call raises GpuDriverError (DeviceOutOfMemoryError when the
    device's memory runs out). A call whose input signature repeats (a
    decode step) is recorded once as a CUDA / HIP graph and replayed from
    then on, one launch instead of one per kernel; `gpu_graphs=False` turns
    that off (see CompiledModel.gpu_stats).

    An artifact is native code, trusted like a shared library. With
    `trusted_keys` (public-key files, PEM bytes or keys; by default the
    files listed in the environment variable SITS_TRUSTED_KEYS), loading
    requires a valid Ed25519 signature by one of them (`signature`, by
    default ``<path>.sig``; see sits_mlir.runtime.signing) and raises
    UntrustedArtifactError otherwise; the signature is checked against the
    verified, mapped bytes before any code is loaded.
    """
    path = os.fspath(path)
    if trusted_keys is None:
        trusted_keys = signing.trusted_keys_from_env()
    if trusted_keys is None:
        return CompiledModel(
            _native().Module.load(path, device, verify, gpu_graphs=gpu_graphs), path)
    sig = os.fspath(signature) if signature is not None else signing.signature_path(path)
    check = signing.verifier(trusted_keys, sig)
    return CompiledModel(
        _native().Module.load(path, device, verify, check, gpu_graphs=gpu_graphs), path)


def load_bytes(data: bytes | bytearray | memoryview, device: str = "cpu", *,
               trusted_keys: Sequence[Any] | None = None,
               signature: str | os.PathLike | bytes | None = None,
               gpu_graphs: bool = True) -> CompiledModel:
    """Like load(), for an artifact held in memory. With trusted keys (the
    argument or SITS_TRUSTED_KEYS) its `signature` (a signature file's path
    or bytes) is required."""
    if trusted_keys is None:
        trusted_keys = signing.trusted_keys_from_env()
    if trusted_keys is None:
        return CompiledModel(_native().Module.load_bytes(data, device, gpu_graphs=gpu_graphs))
    check = signing.verifier(trusted_keys, signature)
    return CompiledModel(
        _native().Module.load_bytes(data, device, check, gpu_graphs=gpu_graphs))


def _load_own(path: str | os.PathLike) -> CompiledModel:
    """Loads an artifact this process has just written (the compiler's
    calibration probe): no signature is asked for, whatever the policy."""
    path = os.fspath(path)
    return CompiledModel(_native().Module.load(path, "cpu", "metadata"), path)
