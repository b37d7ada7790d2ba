"""Element types: ONNX tensor element types, their NumPy dtypes and MLIR types.

MLIR integers are signless; whether an ONNX integer is unsigned is kept on the
ONNX side (the importer knows every value's ONNX type) and selects the
unsigned arith op variants (`divui`, `cmpi ult`, `uitofp`, ...).
"""

from __future__ import annotations

import numpy as np
import ml_dtypes
from onnx import TensorProto

from ... import ir

__all__ = ["numpy_dtype", "mlir_type", "is_float", "is_unsigned", "is_bool",
           "is_small_float", "is_byte_coded", "dtype_name",
           "SUPPORTED_ONNX_TYPES"]

# ONNX element type -> (NumPy dtype, MLIR type spelling).
_TABLE = {
    TensorProto.FLOAT: (np.dtype(np.float32), "f32"),
    TensorProto.FLOAT16: (np.dtype(np.float16), "f16"),
    TensorProto.BFLOAT16: (np.dtype(ml_dtypes.bfloat16), "bf16"),
    TensorProto.DOUBLE: (np.dtype(np.float64), "f64"),
    TensorProto.INT8: (np.dtype(np.int8), "i8"),
    TensorProto.INT16: (np.dtype(np.int16), "i16"),
    TensorProto.INT32: (np.dtype(np.int32), "i32"),
    TensorProto.INT64: (np.dtype(np.int64), "i64"),
    TensorProto.UINT8: (np.dtype(np.uint8), "i8"),
    TensorProto.UINT16: (np.dtype(np.uint16), "i16"),
    TensorProto.UINT32: (np.dtype(np.uint32), "i32"),
    TensorProto.UINT64: (np.dtype(np.uint64), "i64"),
    TensorProto.BOOL: (np.dtype(np.bool_), "i1"),
    TensorProto.FLOAT8E4M3FN: (np.dtype(ml_dtypes.float8_e4m3fn), "f8E4M3FN"),
    TensorProto.FLOAT8E5M2: (np.dtype(ml_dtypes.float8_e5m2), "f8E5M2"),
    TensorProto.FLOAT8E4M3FNUZ: (np.dtype(ml_dtypes.float8_e4m3fnuz), "f8E4M3FNUZ"),
    TensorProto.FLOAT8E5M2FNUZ: (np.dtype(ml_dtypes.float8_e5m2fnuz), "f8E5M2FNUZ"),
    TensorProto.FLOAT4E2M1: (np.dtype(ml_dtypes.float4_e2m1fn), "f4E2M1FN"),
    TensorProto.INT4: (np.dtype(ml_dtypes.int4), "i4"),
    TensorProto.UINT4: (np.dtype(ml_dtypes.uint4), "i4"),
    TensorProto.INT2: (np.dtype(ml_dtypes.int2), "i2"),
    TensorProto.UINT2: (np.dtype(ml_dtypes.uint2), "i2"),
}

SUPPORTED_ONNX_TYPES = frozenset(_TABLE)

_BY_DTYPE = {}
for _onnx, (_np, _mlir) in _TABLE.items():
    _BY_DTYPE.setdefault(_np, _mlir)

_SMALL_FLOATS = {np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2),
                 np.dtype(ml_dtypes.float8_e4m3fnuz), np.dtype(ml_dtypes.float8_e5m2fnuz),
                 np.dtype(ml_dtypes.float4_e2m1fn)}
_FLOATS = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64),
           np.dtype(ml_dtypes.bfloat16)} | _SMALL_FLOATS
_UNSIGNED_SUBBYTE = {np.dtype(ml_dtypes.uint4), np.dtype(ml_dtypes.uint2)}
_SUBBYTE_INTS = {np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.int2)} | _UNSIGNED_SUBBYTE



def numpy_dtype(onnx_type: int) -> np.dtype:
    """NumPy dtype of an ONNX element type; KeyError when SITS has none."""
    return _TABLE[onnx_type][0]


def dtype_name(onnx_type: int) -> str:
    try:
        return TensorProto.DataType.Name(onnx_type).lower()
    except ValueError:  # a number ONNX does not define
        return f"<element type {onnx_type}>"


def mlir_type(dtype) -> ir.Type:
    """MLIR element type of a NumPy dtype (in the current context)."""
    return ir.Type.parse(_BY_DTYPE[np.dtype(dtype)])


def is_float(dtype) -> bool:
    return np.dtype(dtype) in _FLOATS


def is_unsigned(dtype) -> bool:
    return np.dtype(dtype).kind == "u" or np.dtype(dtype) in _UNSIGNED_SUBBYTE


def is_small_float(dtype) -> bool:
    """An 8- or 4-bit float: computed in f32, converted in software."""
    return np.dtype(dtype) in _SMALL_FLOATS


def is_byte_coded(dtype) -> bool:
    """Stored and passed one element per byte, as ml_dtypes stores it (value
    in the low bits): the small floats and the sub-byte integers. Inside the
    code they have their MLIR type; at the model boundary and in constants
    they are i8 holding those bits."""
    return np.dtype(dtype) in _SMALL_FLOATS or np.dtype(dtype) in _SUBBYTE_INTS


#: Float types every value of which the wider type holds exactly.
_EXACT_WIDENING = {
    (np.dtype(np.float16), np.dtype(np.float32)), (np.dtype(np.float16), np.dtype(np.float64)),
    (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float32)),
    (np.dtype(ml_dtypes.bfloat16), np.dtype(np.float64)),
    (np.dtype(np.float32), np.dtype(np.float64))}


def widens_exactly(src, dst) -> bool:
    """True when converting float dtype `src` to `dst` loses nothing (so a
    cast back restores every value)."""
    return (np.dtype(src), np.dtype(dst)) in _EXACT_WIDENING


def masks_out(value, dtype) -> bool:
    """Whether additive mask `value` of float `dtype` removes its key from a
    softmax: at most -1e30, or the lowest finite value of a type that has no
    -1e30 (the `finfo(dtype).min` fill `transformers` uses, -65504 in f16)."""
    if value is None:
        return False
    return float(value) <= max(-1e30, float(np.finfo(np.dtype(dtype)).min))


def is_bool(dtype) -> bool:
    return np.dtype(dtype) == np.bool_
