"""A NumPy reference interpreter for modules the ONNX frontend emits.

`evaluate(module_or_imported, inputs)` runs `func.func @main` op by op with
NumPy and returns its results. It is the oracle of the frontend's tests (and
of lowering work): every op is implemented directly from its documented
semantics (SitsOps.td for `sits.*`, upstream docs for `arith`, `math`,
`tensor` and `linalg`), computing in the op's own element type (16-bit and
fp8 floats through float32).

Supported ops: the `sits` dialect; `arith` and `math` elementwise ops on
tensors or scalars; `tensor.{empty, dim, cast, collapse_shape, expand_shape,
reshape, concat, extract_slice, extract, from_elements, pad}`;
`linalg.{fill, broadcast, transpose, reduce, generic, pooling_nchw_max,
pooling_nchw_sum}` (the region of `linalg.generic` is interpreted
vectorised, over the whole iteration space at once); `scf.{if, for,
index_switch}` (what run-time axes and shapes branch and loop on);
`func.return`.

`dense_resource` constants are read from `ImportedModel.weights`, from the
`weights` argument, or else from the module's own resource section.
"""

from __future__ import annotations

import math as pymath
import re
from typing import Mapping, Optional, Sequence, Union

import ml_dtypes
import numpy as np

from .. import ir

__all__ = ["evaluate", "ReferenceError"]

DYN = ir.ShapedType.get_dynamic_size()


class ReferenceError(RuntimeError):
    """The module uses an op or form the reference interpreter lacks."""


_ELEM = {
    "f32": np.float32, "f64": np.float64, "f16": np.float16,
    "bf16": ml_dtypes.bfloat16, "f8E4M3FN": ml_dtypes.float8_e4m3fn,
    "f8E5M2": ml_dtypes.float8_e5m2,
    "i1": np.bool_, "i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64,
    "ui8": np.uint8, "ui16": np.uint16, "ui32": np.uint32, "ui64": np.uint64,
    "si8": np.int8, "si16": np.int16, "si32": np.int32, "si64": np.int64,
    "i2": np.int8, "i4": np.int8, "ui2": np.uint8, "ui4": np.uint8,
    "index": np.int64,
}
_NARROW_FLOATS = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16),
                  np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e5m2))


def _np_dtype(t: ir.Type) -> np.dtype:
    if isinstance(t, ir.ShapedType):
        t = t.element_type
    s = str(t)
    if s not in _ELEM:
        raise ReferenceError(f"element type {s} is not supported")
    return np.dtype(_ELEM[s])


def _shape(t) -> list:
    return list(ir.RankedTensorType(t).shape)


def _unsigned(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.bool_:
        return a
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize])


def _signed(a: np.ndarray) -> np.ndarray:
    if a.dtype == np.bool_:
        return a
    return a.view({1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}[a.dtype.itemsize])


def _f(fn):
    """A float op computed in the operands' type (narrow floats via f32)."""
    def run(*args):
        args = [np.asarray(a) for a in args]
        dt = args[0].dtype
        if dt in _NARROW_FLOATS:
            return np.asarray(fn(*[a.astype(np.float32) for a in args])).astype(dt)
        with np.errstate(all="ignore"):
            return np.asarray(fn(*args)).astype(dt, copy=False)
    return run


try:  # SciPy's erf is exact to the ulp; math.erf, vectorised, is the fallback.
    from scipy.special import erf as _erf_impl
except Exception:  # pragma: no cover
    _erf_impl = np.vectorize(pymath.erf, otypes=[np.float64])


def _erf(x):
    return _erf_impl(x.astype(np.float64)).astype(x.dtype)


def _gelu(x):
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + _erf_impl(x64 / np.sqrt(2.0)))).astype(x.dtype)


def _gelu_tanh(x):
    x64 = x.astype(np.float64)
    return (0.5 * x64 * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x64 + 0.044715 * x64 ** 3)))).astype(x.dtype)


def _sigmoid(x):
    x64 = x.astype(np.float64)
    return (1.0 / (1.0 + np.exp(-x64))).astype(x.dtype)


_ACT = {
    "none": lambda x: x,
    "relu": lambda x: np.maximum(x, np.zeros((), x.dtype)),
    "gelu": _gelu,
    "gelu_tanh": _gelu_tanh,
    "silu": lambda x: (x.astype(np.float64) * _sigmoid(x).astype(np.float64)).astype(x.dtype),
    "sigmoid": _sigmoid,
    "tanh": lambda x: np.tanh(x),
}


def _trunc_div(a, b):
    with np.errstate(all="ignore"):
        q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
        return (np.where((a < 0) != (b < 0), -q, q)).astype(a.dtype)


_CMPF = {
    0: lambda a, b: np.zeros(np.broadcast(a, b).shape, bool),
    1: np.equal, 2: np.greater, 3: np.greater_equal, 4: np.less, 5: np.less_equal,
    6: lambda a, b: (a != b) & ~np.isnan(a) & ~np.isnan(b),
    7: lambda a, b: ~np.isnan(a) & ~np.isnan(b),
    8: lambda a, b: (a == b) | np.isnan(a) | np.isnan(b),
    9: lambda a, b: ~(a <= b), 10: lambda a, b: ~(a < b), 11: lambda a, b: ~(a >= b),
    12: lambda a, b: ~(a > b), 13: np.not_equal,
    14: lambda a, b: np.isnan(a) | np.isnan(b),
    15: lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
}
_CMPI = {
    0: np.equal, 1: np.not_equal, 2: np.less, 3: np.less_equal, 4: np.greater,
    5: np.greater_equal,
    6: lambda a, b: _unsigned(a) < _unsigned(b), 7: lambda a, b: _unsigned(a) <= _unsigned(b),
    8: lambda a, b: _unsigned(a) > _unsigned(b), 9: lambda a, b: _unsigned(a) >= _unsigned(b),
}

_BINARY = {
    "arith.addf": _f(np.add), "arith.subf": _f(np.subtract), "arith.mulf": _f(np.multiply),
    "arith.divf": _f(np.divide), "arith.remf": _f(np.fmod),
    "arith.maximumf": _f(np.maximum), "arith.minimumf": _f(np.minimum),
    "arith.maxnumf": _f(np.fmax), "arith.minnumf": _f(np.fmin),
    "arith.addi": lambda a, b: a + b, "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.divsi": _trunc_div,
    "arith.divui": lambda a, b: _signed(_unsigned(a) // _unsigned(b)) if a.dtype != bool else a,
    "arith.remsi": lambda a, b: np.fmod(a, b),
    "arith.remui": lambda a, b: (_unsigned(a) % _unsigned(b)).view(a.dtype),
    "arith.maxsi": np.maximum, "arith.minsi": np.minimum,
    "arith.maxui": lambda a, b: np.maximum(_unsigned(a), _unsigned(b)).view(a.dtype),
    "arith.minui": lambda a, b: np.minimum(_unsigned(a), _unsigned(b)).view(a.dtype),
    "arith.andi": np.bitwise_and, "arith.ori": np.bitwise_or, "arith.xori": np.bitwise_xor,
    "math.powf": _f(np.power), "math.atan2": _f(np.arctan2),
    "math.ipowi": lambda a, b: np.power(a, b),
}

_UNARY = {
    "arith.negf": _f(np.negative), "math.sqrt": _f(np.sqrt), "math.rsqrt": _f(lambda x: 1 / np.sqrt(x)),
    "math.exp": _f(np.exp), "math.exp2": _f(np.exp2), "math.expm1": _f(np.expm1),
    "math.log": _f(np.log), "math.log1p": _f(np.log1p), "math.log2": _f(np.log2),
    "math.erf": _f(_erf), "math.tanh": _f(np.tanh), "math.absf": _f(np.abs),
    "math.absi": np.abs, "math.floor": _f(np.floor), "math.ceil": _f(np.ceil),
    "math.roundeven": _f(np.rint), "math.round": _f(lambda x: np.sign(x) * np.floor(np.abs(x) + 0.5)),
    "math.trunc": _f(np.trunc), "math.sin": _f(np.sin), "math.cos": _f(np.cos),
    "math.tan": _f(np.tan), "math.atan": _f(np.arctan), "math.asin": _f(np.arcsin),
    "math.acos": _f(np.arccos), "math.sinh": _f(np.sinh), "math.cosh": _f(np.cosh),
}

_CASTS = ("arith.extf", "arith.truncf", "arith.sitofp", "arith.uitofp", "arith.fptosi",
          "arith.fptoui", "arith.extsi", "arith.extui", "arith.trunci", "arith.index_cast",
          "arith.index_castui")


class _Interpreter:
    def __init__(self, module: ir.Module, weights: Optional[Mapping[str, np.ndarray]]):
        self.module = module
        self.weights = dict(weights or {})
        self._resources_parsed = weights is not None

    # -- constants --------------------------------------------------------------

    def _resource(self, name: str, t) -> np.ndarray:
        if name not in self.weights and not self._resources_parsed:
            self.weights.update(_parse_resources(self.module))
            self._resources_parsed = True
        if name not in self.weights:
            raise ReferenceError(f"no data for dense_resource<{name}>")
        dt = _np_dtype(t)
        a = np.asarray(self.weights[name])
        if a.dtype != dt:
            a = a.view(dt) if a.dtype.itemsize == dt.itemsize or a.dtype == np.uint8 else a.astype(dt)
        return a.reshape(_shape(t))

    def _constant(self, op) -> np.ndarray:
        attr = op.attributes["value"]
        t = op.results[0].type
        text = str(attr) if not isinstance(attr, ir.DenseElementsAttr) else ""
        if text.startswith("dense_resource<"):
            name = text[len("dense_resource<"):text.index(">")].strip('"')
            return self._resource(name, t)
        if isinstance(attr, ir.DenseElementsAttr):
            dt = _np_dtype(t)
            shape = _shape(t)
            if attr.is_splat:
                return np.full(shape, _scalar(attr.get_splat_value(), dt), dtype=dt)
            try:
                a = np.array(attr)
            except Exception as e:
                raise ReferenceError(f"cannot read constant {attr}: {e}") from None
            return a.astype(dt, copy=False).reshape(shape)
        if isinstance(attr, (ir.FloatAttr, ir.IntegerAttr)):
            return np.asarray(_scalar(attr, _np_dtype(t)))
        if isinstance(attr, ir.BoolAttr):
            return np.asarray(attr.value)
        raise ReferenceError(f"unsupported constant {attr}")

    # -- driver -----------------------------------------------------------------

    def run_block(self, block, env: dict,
                  terminators=("func.return", "linalg.yield", "tensor.yield", "scf.yield")):
        for opview in block.operations:
            op = opview.operation
            name = op.name
            if name in terminators:
                return [env[v] for v in op.operands]
            results = self.run_op(op, env)
            for r, v in zip(op.results, results):
                env[r] = v
        raise ReferenceError("block without terminator")

    def run_op(self, op, env):
        name = op.name
        ins = [env[v] for v in op.operands] if name != "linalg.generic" else None
        if name == "arith.constant":
            return [self._constant(op)]
        if name in _BINARY:
            return [_BINARY[name](ins[0], ins[1])]
        if name in _UNARY:
            return [_UNARY[name](ins[0])]
        if name in _CASTS:
            return [_cast(name, ins[0], _np_dtype(op.results[0].type) if isinstance(
                op.results[0].type, ir.ShapedType) else _np_dtype(op.results[0].type))]
        if name == "arith.cmpf":
            a, b = ins
            if a.dtype in _NARROW_FLOATS:
                a, b = a.astype(np.float32), b.astype(np.float32)
            return [np.asarray(_CMPF[_int(op.attributes["predicate"])](a, b))]
        if name == "arith.cmpi":
            return [np.asarray(_CMPI[_int(op.attributes["predicate"])](*ins))]
        if name == "arith.select":
            return [np.where(ins[0], ins[1], ins[2]).astype(ins[1].dtype, copy=False)]
        fn = getattr(self, "op_" + name.replace(".", "_"), None)
        if fn is None:
            raise ReferenceError(f"op '{name}' is not supported by the reference interpreter")
        out = fn(op, ins, env)
        return out if isinstance(out, list) else [out]

    # -- scf ----------------------------------------------------------------------

    def op_scf_if(self, op, ins, env):
        region = op.regions[0] if bool(ins[0]) else op.regions[1]
        blocks = list(region.blocks)
        return self.run_block(blocks[0], env) if blocks else []

    def op_scf_for(self, op, ins, env):
        lower, upper, step, carried = int(ins[0]), int(ins[1]), int(ins[2]), list(ins[3:])
        body = op.regions[0].blocks[0]
        for i in range(lower, upper, step):
            env[body.arguments[0]] = np.asarray(i, np.int64)
            for arg, v in zip(list(body.arguments)[1:], carried):
                env[arg] = v
            carried = self.run_block(body, env)
        return carried

    def op_scf_index_switch(self, op, ins, env):
        cases = [int(c) for c in op.attributes["cases"]]
        value = int(ins[0])
        region = op.regions[cases.index(value) + 1] if value in cases else op.regions[0]
        return self.run_block(region.blocks[0], env)

    # -- tensor -------------------------------------------------------------------

    def _result_shape(self, op, dyn_values):
        it = iter(int(v) for v in dyn_values)
        return [next(it) if d == DYN else d for d in _shape(op.results[0].type)]

    def op_tensor_empty(self, op, ins, env):
        return np.zeros(self._result_shape(op, ins), _np_dtype(op.results[0].type))

    def op_tensor_dim(self, op, ins, env):
        return np.asarray(ins[0].shape[int(ins[1])], np.int64)

    def op_tensor_cast(self, op, ins, env):
        return ins[0]

    def op_tensor_collapse_shape(self, op, ins, env):
        x = ins[0]
        groups = _reassociation(op.attributes["reassociation"])
        return x.reshape([int(np.prod([x.shape[i] for i in g])) for g in groups])

    def op_tensor_expand_shape(self, op, ins, env):
        static = list(op.attributes["static_output_shape"])
        it = iter(int(v) for v in ins[1:])
        return ins[0].reshape([next(it) if d == DYN else d for d in static])

    def op_tensor_reshape(self, op, ins, env):
        return ins[0].reshape([int(v) for v in ins[1]])

    def op_tensor_concat(self, op, ins, env):
        return np.concatenate(ins, axis=_int(op.attributes["dim"]))

    def op_tensor_from_elements(self, op, ins, env):
        t = op.results[0].type
        return np.array([np.asarray(v).item() for v in ins], _np_dtype(t)).reshape(_shape(t))

    def op_tensor_extract(self, op, ins, env):
        return np.asarray(ins[0][tuple(int(i) for i in ins[1:])])

    def _mixed(self, op, ins, start):
        vals = iter(ins[start:])
        out = []
        for key in ("static_offsets", "static_sizes", "static_strides"):
            out.append([int(next(vals)) if d == DYN else d for d in op.attributes[key]])
        return out

    def op_tensor_extract_slice(self, op, ins, env):
        offsets, sizes, strides = self._mixed(op, ins, 1)
        idx = tuple(slice(o, o + (s - 1) * st + 1, st) if s > 0 else slice(o, o)
                    for o, s, st in zip(offsets, sizes, strides))
        res = ins[0][idx]
        rshape = _shape(op.results[0].type)
        if len(rshape) != res.ndim:  # rank-reducing slice
            res = res.reshape([d for d, s in zip(res.shape, sizes) if not (s == 1 and
                               len([x for x in sizes if x != 1]) < res.ndim)]
                              if DYN in rshape else rshape)
        return res

    def op_tensor_insert_slice(self, op, ins, env):
        src, dest = ins[0], ins[1].copy()
        offsets, sizes, strides = self._mixed(op, ins, 2)
        idx = tuple(slice(o, o + (s - 1) * st + 1, st) for o, s, st in zip(offsets, sizes, strides))
        dest[idx] = src.reshape(dest[idx].shape)
        return dest

    def op_tensor_pad(self, op, ins, env):
        x = ins[0]
        lows = ins[1:]
        vals = iter(lows)
        low = [int(next(vals)) if d == DYN else d for d in op.attributes["static_low"]]
        high = [int(next(vals)) if d == DYN else d for d in op.attributes["static_high"]]
        block = op.regions[0].blocks[0]
        (value,) = self.run_block(block, dict(env))
        return np.pad(x, list(zip(low, high)), constant_values=np.asarray(value).item())

    # -- linalg ---------------------------------------------------------------------

    def op_linalg_fill(self, op, ins, env):
        return np.full(ins[1].shape, np.asarray(ins[0]).item(), dtype=ins[1].dtype)

    def op_linalg_broadcast(self, op, ins, env):
        x, init = ins
        dims = sorted(int(d) for d in op.attributes["dimensions"])
        y = x
        for d in dims:
            y = np.expand_dims(y, d)
        return np.ascontiguousarray(np.broadcast_to(y, init.shape))

    def op_linalg_transpose(self, op, ins, env):
        return np.ascontiguousarray(np.transpose(ins[0], [int(p) for p in op.attributes["permutation"]]))

    def op_linalg_reduce(self, op, ins, env):
        n = len(ins) // 2
        if n != 1:
            raise ReferenceError("linalg.reduce with several inputs")
        x, init = ins
        dims = tuple(int(d) for d in op.attributes["dimensions"])
        body = [o.operation for o in op.regions[0].blocks[0].operations]
        comb = body[0].name if len(body) == 2 else None
        ufunc = {"arith.addf": np.add, "arith.addi": np.add, "arith.mulf": np.multiply,
                 "arith.muli": np.multiply, "arith.maximumf": np.maximum,
                 "arith.minimumf": np.minimum, "arith.maxsi": np.maximum,
                 "arith.minsi": np.minimum, "arith.maxnumf": np.fmax, "arith.minnumf": np.fmin,
                 "arith.ori": np.bitwise_or, "arith.andi": np.bitwise_and}.get(comb)
        if ufunc is not None:
            if x.dtype in _NARROW_FLOATS:
                r = ufunc.reduce(x.astype(np.float32), axis=dims)
                return ufunc(init.astype(np.float32), r).astype(x.dtype)
            r = ufunc.reduce(x, axis=dims)
            return ufunc(init, r).astype(x.dtype, copy=False)
        if comb in ("arith.maxui", "arith.minui"):
            f = np.maximum if comb == "arith.maxui" else np.minimum
            return f(_unsigned(init), f.reduce(_unsigned(x), axis=dims)).view(x.dtype)
        raise ReferenceError(f"linalg.reduce combiner {comb} is not supported")

    def _pool(self, op, ins, combine):
        x, window, init = ins
        kh, kw = window.shape
        strides = [int(s) for s in np.array(op.attributes["strides"]).reshape(-1)] \
            if "strides" in op.attributes else [1, 1]
        dil = [int(s) for s in np.array(op.attributes["dilations"]).reshape(-1)] \
            if "dilations" in op.attributes else [1, 1]
        oh, ow = init.shape[2:]
        out = init.copy()
        for i in range(kh):
            for j in range(kw):
                r0, c0 = i * dil[0], j * dil[1]
                tap = x[:, :, r0:r0 + (oh - 1) * strides[0] + 1:strides[0],
                        c0:c0 + (ow - 1) * strides[1] + 1:strides[1]]
                out = combine(out, tap.astype(out.dtype))
        return out

    def op_linalg_pooling_nchw_max(self, op, ins, env):
        return self._pool(op, ins, _f(np.maximum))

    def op_linalg_pooling_nchw_sum(self, op, ins, env):
        return self._pool(op, ins, _f(np.add))

    def op_linalg_generic(self, op, ins, env):
        n_in = len(op.operands) - len(op.results)
        operands = [env[v] for v in op.operands]
        maps = [ir.AffineMapAttr(a).value for a in op.attributes["indexing_maps"]]
        iters = [str(a) for a in op.attributes["iterator_types"]]
        if any("parallel" not in it for it in iters):
            raise ReferenceError("only all-parallel linalg.generic is supported")
        outs = operands[n_in:]
        n = maps[-1].n_dims
        # The iteration space is the (identity-mapped) output's shape.
        domain = [0] * n
        for a, m in zip(operands, maps):
            for r, e in enumerate(m.results):
                d = _dim_pos(e)
                if d is not None:
                    domain[d] = max(domain[d], a.shape[r])
        block = op.regions[0].blocks[0]
        local = dict(env)
        for arg, a, m in zip(block.arguments, operands, maps):
            local[arg] = _view(a, m, n)
        local["__domain__"] = domain
        results = self._run_generic_block(block, local, n)
        # (np.array, not np.ascontiguousarray: that makes a 0-D result 1-D.)
        return [np.array(np.broadcast_to(np.asarray(r).astype(o.dtype, copy=False), o.shape),
                         order="C") for r, o in zip(results, outs)]

    def _run_generic_block(self, block, env, n):
        domain = env["__domain__"]
        for opview in block.operations:
            op = opview.operation
            if op.name == "linalg.yield":
                return [env[v] for v in op.operands]
            if op.name == "linalg.index":
                d = _int(op.attributes["dim"])
                shape = [1] * n
                shape[d] = domain[d]
                env[op.results[0]] = np.arange(domain[d], dtype=np.int64).reshape(shape)
                continue
            if op.name == "tensor.extract":
                t = env[op.operands[0]]
                idx = [np.asarray(env[v]).astype(np.int64) for v in op.operands[1:]]
                env[op.results[0]] = t[tuple(idx)] if idx else t[()]
                continue
            if op.name == "arith.constant":
                env[op.results[0]] = self._constant(op)
                continue
            results = self.run_op(op, env)
            for r, v in zip(op.results, results):
                env[r] = v
        raise ReferenceError("linalg.generic body without linalg.yield")

    # -- sits ------------------------------------------------------------------------

    def op_sits_activation(self, op, ins, env):
        kind = _enum(op.attributes["kind"])
        return _ACT[kind](ins[0])

    def _epilogue(self, op, y, bias):
        if bias is not None:
            y = (y + bias).astype(y.dtype)
        kind = _enum(op.attributes["activation"]) if "activation" in op.attributes else "none"
        return _ACT[kind](y)

    def op_sits_matmul(self, op, ins, env):
        lhs, rhs = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        if "transpose_lhs" in op.attributes:
            lhs = np.swapaxes(lhs, -1, -2)
        if "transpose_rhs" in op.attributes:
            rhs = np.swapaxes(rhs, -1, -2)
        dt = lhs.dtype
        if dt in _NARROW_FLOATS:
            y = np.matmul(lhs.astype(np.float32), rhs.astype(np.float32)).astype(dt)
        else:
            y = np.matmul(lhs, rhs)
        return self._epilogue(op, y, bias)

    def op_sits_conv(self, op, ins, env):
        x, w = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        k = x.ndim - 2
        a = op.attributes
        strides = list(a["strides"]) if "strides" in a else [1] * k
        pads = list(a["padding"]) if "padding" in a else [0] * (2 * k)
        dil = list(a["dilations"]) if "dilations" in a else [1] * k
        groups = _int(a["groups"]) if "groups" in a else 1
        y = _conv(x, w, strides, pads, dil, groups)
        if bias is not None:
            y = (y + bias.reshape((-1,) + (1,) * k)).astype(y.dtype)
            bias = None
        return self._epilogue(op, y, None)

    def op_sits_qconv(self, op, ins, env):
        # conv(input, filter * scale[o]): the codes dequantized per output
        # channel, then sits.conv's semantics (the bias is operand 3).
        x, codes, scale = ins[0], ins[1], ins[2]
        w = codes.astype(np.float32) * scale.astype(np.float32).reshape(
            (-1,) + (1,) * (codes.ndim - 1))
        return self.op_sits_conv(op, [x, w.astype(x.dtype)] + list(ins[3:]), env)

    def op_sits_softmax(self, op, ins, env):
        axis = _int(op.attributes["axis"]) if "axis" in op.attributes else -1
        return _softmax(ins[0], axis)

    def op_sits_layer_norm(self, op, ins, env):
        x, scale = ins[0], ins[1]
        bias = ins[2] if len(ins) > 2 else None
        axis = _int(op.attributes["axis"]) if "axis" in op.attributes else -1
        eps = _float(op.attributes["epsilon"]) if "epsilon" in op.attributes else 1e-5
        axis = axis + x.ndim if axis < 0 else axis
        axes = tuple(range(axis, x.ndim))
        xf = x.astype(np.float32) if x.dtype in _NARROW_FLOATS else x
        mean = xf.mean(axis=axes, keepdims=True)
        d = xf - mean
        var = (d * d).mean(axis=axes, keepdims=True)
        y = d / np.sqrt(var + np.asarray(eps, xf.dtype)) * scale.astype(xf.dtype)
        if bias is not None:
            y = y + bias.astype(xf.dtype)
        return y.astype(x.dtype)

    def op_sits_rms_norm(self, op, ins, env):
        x, scale = ins
        axis = _int(op.attributes["axis"]) if "axis" in op.attributes else -1
        eps = _float(op.attributes["epsilon"]) if "epsilon" in op.attributes else 1e-5
        axis = axis + x.ndim if axis < 0 else axis
        xf = x.astype(np.float32) if x.dtype in _NARROW_FLOATS else x
        ms = (xf * xf).mean(axis=tuple(range(axis, x.ndim)), keepdims=True)
        return (xf / np.sqrt(ms + np.asarray(eps, xf.dtype)) * scale.astype(xf.dtype)).astype(x.dtype)

    def op_sits_attention(self, op, ins, env):
        q, k, v = ins[0], ins[1], ins[2]
        mask = ins[3] if len(ins) > 3 else None
        dt = q.dtype
        if dt in _NARROW_FLOATS:
            q, k, v = (t.astype(np.float32) for t in (q, k, v))
        hq, hkv = q.shape[1], k.shape[1]
        if hq != hkv:
            rep = hq // hkv
            k = np.repeat(k, rep, axis=1)
            v = np.repeat(v, rep, axis=1)
        scale = _float(op.attributes["scale"]) if "scale" in op.attributes else 1.0 / np.sqrt(q.shape[3])
        s = np.matmul(q, np.swapaxes(k, -1, -2)) * np.asarray(scale, q.dtype)
        tq, tk = q.shape[2], k.shape[2]
        if "causal" in op.attributes:
            allowed = np.arange(tk)[None, :] <= np.arange(tq)[:, None] + (tk - tq)
            s = np.where(allowed, s, np.asarray(-np.inf, s.dtype))
        if mask is not None:
            if mask.dtype == np.bool_:
                s = np.where(mask, s, np.asarray(-np.inf, s.dtype))
            else:
                s = s + mask.astype(s.dtype)
        p = _softmax(s, -1)
        return np.matmul(p, v).astype(dt)

    def _quant_scale(self, op, ins, shape):
        scale = ins[1]
        zp = ins[2] if len(ins) > 2 else None
        axis = _int(op.attributes["axis"]) if "axis" in op.attributes else None
        block = _int(op.attributes["block_size"]) if "block_size" in op.attributes else None
        rank = len(shape)

        def expand(p):
            if p is None:
                return None
            if p.ndim == 0:
                return p
            if block is not None:
                return np.repeat(p, block, axis=axis).take(np.arange(shape[axis]), axis=axis)
            sh = [1] * rank
            sh[axis] = -1
            return p.reshape(sh)
        return expand(scale), expand(zp)

    def op_sits_paged_attention(self, op, ins, env):
        q, k, v, pool, tables, slots, lens, *layer_index = ins
        # The layer is the attribute or, in a function shared by layers, an operand.
        layer = int(layer_index[0]) if layer_index else _int(op.attributes["layer"])
        pool = pool.copy()
        blocks, block = pool.shape[0], pool.shape[4]
        batch, hq, width, d = q.shape
        # An int8 or fp8 pool holds rows of codes and their f32 scale.
        quantized = pool.dtype in (np.int8, np.dtype(ml_dtypes.float8_e4m3fn))
        store = (lambda x: quantize_kv_rows(x, pool.dtype)) if quantized else (lambda x: x)
        load = dequantize_kv_rows if quantized else (lambda x: x)
        for b in range(batch):
            for s in range(width):
                slot = int(slots[b, s])
                if 0 <= slot < blocks * block:
                    pool[slot // block, layer, 0, :, slot % block] = store(k[b, :, s])
                    pool[slot // block, layer, 1, :, slot % block] = store(v[b, :, s])
        scale = _float(op.attributes["scale"]) if "scale" in op.attributes else 1.0 / np.sqrt(d)
        group = hq // k.shape[1]
        out = np.empty(q.shape, q.dtype)
        for b in range(batch):
            positions = np.arange(tables.shape[1] * block)
            ids = tables[b, positions // block].astype(np.int64)
            ids = np.where((ids >= 0) & (ids < blocks), ids, 0)
            keys = load(pool[ids, layer, 0, :, positions % block]).astype(np.float32)  # [T, Hkv, D]
            values = load(pool[ids, layer, 1, :, positions % block]).astype(np.float32)
            for s in range(width):
                last = int(lens[b]) - width + s
                for h in range(hq):
                    scores = keys[:, h // group] @ q[b, h, s].astype(np.float32) * scale
                    # Hidden keys get the lowest finite score (all hidden: the mean of V).
                    scores = np.where(positions <= last, scores, np.finfo(np.float32).min)
                    w = np.exp(scores - scores.max())
                    out[b, h, s] = (w / w.sum()) @ values[:, h // group]
        return [out, pool]

    def op_sits_dequantize(self, op, ins, env):
        q = ins[0]
        scale, zp = self._quant_scale(op, ins, q.shape)
        qi = q.astype(np.float64) if q.dtype.kind in "iub" else q.astype(np.float64)
        if zp is not None:
            qi = qi - zp.astype(np.float64)
        return (qi.astype(np.float32) * scale.astype(np.float32)).astype(scale.dtype) \
            if scale.dtype != np.float64 else qi * scale

    def op_sits_quantize(self, op, ins, env):
        x = ins[0]
        scale, zp = self._quant_scale(op, ins, x.shape)
        out_t = op.results[0].type
        dt = _np_dtype(out_t)
        y = np.rint(x.astype(np.float32) / scale.astype(np.float32))
        if dt.kind in "iu":
            bits = str(ir.RankedTensorType(out_t).element_type)
            width = int(re.sub(r"\D", "", bits))
            lo, hi = (0, 2 ** width - 1) if bits.startswith("ui") else (-(2 ** (width - 1)), 2 ** (width - 1) - 1)
            if zp is not None:
                y = y + zp.astype(np.float32)
            return np.clip(y, lo, hi).astype(dt)
        info = ml_dtypes.finfo(dt)
        return np.clip(x.astype(np.float32) / scale.astype(np.float32),
                       float(info.min), float(info.max)).astype(dt)

    def op_sits_qmatmul(self, op, ins, env):
        raise ReferenceError("sits.qmatmul is not implemented by the reference interpreter")


# -- helpers -----------------------------------------------------------------------

def _scalar(attr, dt):
    if isinstance(attr, ir.BoolAttr):
        return np.asarray(bool(attr.value)).astype(dt)
    if isinstance(attr, ir.FloatAttr):
        return np.asarray(attr.value).astype(dt)
    if isinstance(attr, ir.IntegerAttr):
        v = attr.value
        if dt == np.bool_:
            return np.bool_(v & 1)
        return np.asarray(v).astype(np.int64).astype(dt)
    raise ReferenceError(f"unsupported scalar attribute {attr}")


def _int(attr) -> int:
    return int(ir.IntegerAttr(attr).value)


def _float(attr) -> float:
    return float(ir.FloatAttr(attr).value)


def _enum(attr) -> str:
    m = re.search(r"<([a-z_]+)>", str(attr))
    if not m:
        raise ReferenceError(f"cannot read enum attribute {attr}")
    return m.group(1)


def _reassociation(attr) -> list:
    return [[int(ir.IntegerAttr(i).value) for i in ir.ArrayAttr(g)] for g in ir.ArrayAttr(attr)]


def _dim_pos(expr) -> Optional[int]:
    try:
        return ir.AffineDimExpr(expr).position
    except Exception:
        return None


def _view(a: np.ndarray, m, n: int) -> np.ndarray:
    """`a` indexed by projected-permutation map `m`, as an array broadcastable
    over the n-D iteration space."""
    dims = [_dim_pos(e) for e in m.results]
    if any(d is None for d in dims):
        raise ReferenceError(f"indexing map {m} is not a projected permutation")
    order = sorted(range(len(dims)), key=lambda r: dims[r])
    t = np.transpose(a, order) if len(dims) > 1 else a
    shape = [1] * n
    for r in order:
        shape[dims[r]] = a.shape[r]
    return t.reshape(shape)


def _cast(name, x, dt):
    x = np.asarray(x)
    if name in ("arith.uitofp", "arith.extui"):
        return _unsigned(x).astype(dt)
    if name == "arith.fptoui":
        return x.astype(np.float64).astype(np.int64).astype(np.uint64).astype(dt)
    if name in ("arith.fptosi",):
        with np.errstate(all="ignore"):
            return x.astype(np.float64).astype(dt)
    if name == "arith.trunci":
        if dt == np.bool_:
            return (x & 1).astype(bool)
        return x.astype(dt)
    return x.astype(dt)


def _softmax(x, axis):
    dt = x.dtype
    xf = x.astype(np.float32) if dt in _NARROW_FLOATS else x
    m = np.max(xf, axis=axis, keepdims=True)
    with np.errstate(invalid="ignore"):
        e = np.exp(xf - m)
        return (e / np.sum(e, axis=axis, keepdims=True)).astype(dt)


def _conv(x, w, strides, pads, dil, groups):
    from numpy.lib.stride_tricks import sliding_window_view

    dt = x.dtype
    if dt in _NARROW_FLOATS:
        x, w = x.astype(np.float32), w.astype(np.float32)
    k = x.ndim - 2
    n, c = x.shape[:2]
    o = w.shape[0]
    kern = w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[i + k]) for i in range(k)])
    ext = [d * (kk - 1) + 1 for d, kk in zip(dil, kern)]
    win = sliding_window_view(xp, ext, axis=tuple(range(2, 2 + k)))
    sl = (slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides) + \
        tuple(slice(None, None, d) for d in dil)
    win = win[sl]                                     # [N, C, O1..Ok, K1..Kk]
    out_sp = win.shape[2:2 + k]
    cg, og = c // groups, o // groups
    letters = "defghi"[:k]
    kl = "uvw"[:k]
    if groups == 1:
        spec = f"nc{letters}{kl},oc{kl}->no{letters}"
        y = np.einsum(spec, win, w, optimize=True)
    else:
        win = win.reshape((n, groups, cg) + out_sp + tuple(kern))
        wg = w.reshape((groups, og, cg) + tuple(kern))
        spec = f"ngc{letters}{kl},goc{kl}->ngo{letters}"
        y = np.einsum(spec, win, wg, optimize=True).reshape((n, o) + out_sp)
    return y.astype(dt)


def _parse_resources(module: ir.Module) -> dict:
    """Blobs from the module's `dialect_resources` section (hex, with a
    4-byte alignment prefix)."""
    text = module.operation.get_asm()
    out = {}
    sec = text.find("dialect_resources")
    if sec < 0:
        return out
    for m in re.finditer(r'^\s*("?)([^":\s]+)\1\s*:\s*"0x([0-9A-Fa-f]*)"', text[sec:], re.M):
        out[m.group(2)] = np.frombuffer(bytes.fromhex(m.group(3))[4:], dtype=np.uint8)
    return out


def _check_status(main, results: list) -> list:
    """`results` without @main's status result (`sits.status`); raises
    ReferenceError with the failed check's message when it is not 0, as the
    runtime raises InputOutOfRangeError."""
    if "res_attrs" not in main.attributes:
        return results
    attrs = [ir.DictAttr(d) for d in ir.ArrayAttr(main.attributes["res_attrs"])]
    status = [i for i, d in enumerate(attrs) if "sits.status" in d]
    if not status:
        return results
    k = int(np.asarray(results[status[0]]))
    if k:
        messages = [ir.StringAttr(m).value
                    for m in ir.ArrayAttr(attrs[status[0]]["sits.status"])]
        raise ReferenceError(messages[k - 1] if k <= len(messages) else f"check {k} failed")
    return [r for i, r in enumerate(results) if i != status[0]]


def quantize_kv_rows(x, dtype=np.int8) -> np.ndarray:
    """K/V rows `[..., D]` as a quantized KV pool's rows `[..., D + 4]` of
    `dtype` (int8, or ml_dtypes.float8_e4m3fn), the allocator's
    per_token_head quantization as compiled code writes them: codes x * (m /
    max|x|) (m = 127 or 448) rounded to nearest even (all zero for a zero
    row), then the 4 little-endian bytes of the f32 scale max|x| / m."""
    dtype = np.dtype(dtype)
    integer = dtype == np.int8
    top_code = np.float32(127 if integer else 448)
    x = np.asarray(x, np.float32)
    top = np.abs(x).max(axis=-1, keepdims=True)
    safe = np.where(top > 0, top, np.float32(1))
    inverse = np.where(top > 0, top_code / safe, np.float32(0)).astype(np.float32)
    q = (x * inverse).astype(np.float32)
    q = np.clip(np.rint(q) if integer else q, -top_code, top_code)
    codes = q.astype(dtype)
    scale = np.ascontiguousarray((top / top_code).astype("<f4"))
    return np.concatenate([codes.view(np.int8), scale.view(np.int8)], axis=-1).view(dtype)


def dequantize_kv_rows(rows) -> np.ndarray:
    """A quantized KV pool's rows `[..., D + 4]` (int8 or float8_e4m3fn) as
    f32 values `[..., D]`."""
    rows = np.asarray(rows)
    scale = np.ascontiguousarray(rows[..., -4:]).view(np.int8).view("<f4")
    return rows[..., :-4].astype(np.float32) * scale


def evaluate(module_or_imported, inputs: Union[Mapping[str, np.ndarray], Sequence[np.ndarray]],
             *, weights: Optional[Mapping[str, np.ndarray]] = None) -> list:
    """Runs `@main` of an `ImportedModel` or `ir.Module` on `inputs` (a
    dict by graph-input name, for an ImportedModel, or a list in argument
    order) and returns the results as NumPy arrays (in the graph outputs'
    dtypes for an ImportedModel)."""
    specs_in = specs_out = None
    module = module_or_imported
    if hasattr(module_or_imported, "module") and hasattr(module_or_imported, "weights"):
        module = module_or_imported.module
        weights = module_or_imported.weights if weights is None else weights
        specs_in = module_or_imported.inputs
        specs_out = module_or_imported.outputs
    with module.context:
        main = None
        for op in module.body.operations:
            if op.operation.name == "func.func" and \
                    str(op.operation.attributes["sym_name"]).strip('"') == "main":
                main = op
        if main is None:
            raise ReferenceError("the module has no func.func @main")
        block = main.regions[0].blocks[0]
        args = list(block.arguments)
        if isinstance(inputs, Mapping):
            if specs_in is None:
                raise ReferenceError("inputs by name need an ImportedModel; pass a list")
            missing = [s.name for s in specs_in if s.name not in inputs]
            if missing:
                raise ReferenceError(f"missing inputs: {', '.join(missing)}")
            arrays = [inputs[s.name] for s in specs_in]
        else:
            arrays = list(inputs)
        if len(arrays) != len(args):
            raise ReferenceError(f"@main takes {len(args)} inputs, got {len(arrays)}")
        env = {}
        for arg, a in zip(args, arrays):
            dt = _np_dtype(arg.type)
            a = np.asarray(a)
            if a.dtype != dt:
                a = a.view(dt) if a.dtype.itemsize == dt.itemsize and a.dtype.kind in "iu" \
                    and dt.kind in "iu" else a.astype(dt)
            env[arg] = a
        results = _Interpreter(module, weights).run_block(block, env)
        results = _check_status(main, results)
    out = []
    for i, r in enumerate(results):
        r = np.asarray(r)
        if specs_out is not None and specs_out[i].dtype is not None and r.dtype != specs_out[i].dtype:
            want = np.dtype(specs_out[i].dtype)
            r = r.view(want) if r.dtype.itemsize == want.itemsize and r.dtype.kind in "iu" \
                else r.astype(want)
        out.append(r)
    return out
