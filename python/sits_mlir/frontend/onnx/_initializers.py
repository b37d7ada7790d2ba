"""Initializer data: the arrays of a model's tensors, with its external data
files mapped copy-on-write rather than read (`ExternalData`)."""

from __future__ import annotations

import os
from typing import Optional

import ml_dtypes
import numpy as np
import onnx
from onnx import numpy_helper

from ...errors import CompileError, Diagnostic


def _fail(summary: str, detail: str = "") -> CompileError:
    return CompileError(summary, [Diagnostic(detail)] if detail else [])


def initializer_array(t: onnx.TensorProto, external: Optional["ExternalData"] = None
                      ) -> np.ndarray:
    if t.data_location == onnx.TensorProto.EXTERNAL and external is not None:
        return external.array(t)
    try:
        return numpy_helper.to_array(t)
    except Exception as e:
        raise _fail(f"cannot read initializer '{t.name}': {e}") from None


# Element types whose bytes on disk are the array's bytes (little-endian, one
# element per item): these are mapped; others (bits, strings) are read.
_MAPPABLE = {
    onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.INT8: np.int8,
    onnx.TensorProto.INT16: np.int16, onnx.TensorProto.INT32: np.int32,
    onnx.TensorProto.INT64: np.int64, onnx.TensorProto.UINT8: np.uint8,
    onnx.TensorProto.UINT16: np.uint16, onnx.TensorProto.UINT32: np.uint32,
    onnx.TensorProto.UINT64: np.uint64, onnx.TensorProto.BFLOAT16: ml_dtypes.bfloat16,
    onnx.TensorProto.FLOAT8E4M3FN: ml_dtypes.float8_e4m3fn,
    onnx.TensorProto.FLOAT8E5M2: ml_dtypes.float8_e5m2,
}


class ExternalData:
    """The external data files of a model, mapped copy-on-write: an
    initializer is a view of its file's pages, not bytes read into the
    ModelProto and then copied to an array (two copies of every weight,
    held for the whole compile). Paths go through ONNX's own checks (no
    `..`, absolute paths or symlinks out of the model's folder)."""

    def __init__(self, base: str, model_path: str):
        self.base = base
        self.model_path = model_path
        self._maps: dict = {}

    def _error(self, t, e) -> CompileError:
        return _fail(f"cannot load the external data of '{self.model_path}'",
                     f"initializer '{t.name}': {e}")

    def _locate(self, t: onnx.TensorProto) -> tuple:
        """(mapping, dtype or None, element count, offset, length)."""
        import mmap

        from onnx import external_data_helper as edh

        try:
            info = edh.ExternalDataInfo(t)
        except Exception as e:
            raise self._error(t, e) from None
        m = self._maps.get(info.location)
        if m is None:
            try:
                fd = edh._open_external_data_fd(self.base, info.location, t.name, True)
            except Exception as e:
                raise self._error(t, e) from None
            try:
                size = os.fstat(fd).st_size
                m = mmap.mmap(fd, size, access=mmap.ACCESS_COPY) if size else b""
            except (OSError, ValueError) as e:
                raise self._error(t, e) from None
            finally:
                os.close(fd)
            self._maps[info.location] = m
        dtype = _MAPPABLE.get(t.data_type)
        count = 1
        for d in t.dims:
            count *= int(d)
        nbytes = count * np.dtype(dtype).itemsize if dtype is not None else None
        offset = int(info.offset or 0)
        length = int(info.length) if info.length else (
            nbytes if nbytes is not None else len(m) - offset)
        if nbytes is not None and length != nbytes:
            raise self._error(t, f"its length is {length} bytes; its type and shape "
                                 f"need {nbytes}")
        if offset < 0 or length < 0 or offset + length > len(m):
            raise self._error(t, f"bytes {offset} to {offset + length} lie outside "
                                 f"'{info.location}' ({len(m)} bytes)")
        return m, dtype, count, offset, length

    def check(self, t: onnx.TensorProto) -> None:
        """Refuses a missing, escaping or short external data file now."""
        self._locate(t)

    def inline(self, t: onnx.TensorProto) -> None:
        """Makes `t` hold its data itself, as a model without external data
        does."""
        m, _, _, offset, length = self._locate(t)
        t.raw_data = bytes(memoryview(m)[offset:offset + length])
        t.data_location = onnx.TensorProto.DEFAULT
        del t.external_data[:]

    def array(self, t: onnx.TensorProto) -> np.ndarray:
        m, dtype, count, offset, length = self._locate(t)
        if dtype is None:  # bits, strings: decoded by ONNX from a copy
            copy = onnx.TensorProto()
            copy.CopyFrom(t)
            self.inline(copy)
            return initializer_array(copy)
        dims = tuple(int(d) for d in t.dims)
        return np.frombuffer(m, dtype=dtype, count=count, offset=offset).reshape(dims)
