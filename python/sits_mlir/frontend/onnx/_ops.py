"""Converters from single ONNX ops to SITS and upstream MLIR ops.

Each converter has an `emit(ctx, node)` returning one MLIR value per ONNX
output (None for unused optional outputs), and optionally a `check(g, node)`
returning why this node cannot be imported (None when it can). The pre-flight
check calls only `check`, on the same analysed graph, so it reports exactly
what `emit` would fail on. Converters fetch every operand (`ctx.get`) before
building ops with regions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
from onnx import numpy_helper

from ... import ir
from ...dialects import arith, linalg, math, sits, tensor
from . import _types
from ._builder import DYN, elem_of, reassociation, reshape_kind, shape_of
from ._graph import attributes


@dataclass
class Converter:
    emit: Callable
    check: Optional[Callable] = None
    #: False for ops registered only to give the pre-flight check a
    #: specific reason (quantized ops, data-dependent shapes).
    supported: bool = True
    #: Indices of the inputs `emit` reads as run-time values (None: all);
    #: the others are read only as constants or not at all.
    reads: Optional[tuple] = None


#: (domain, op_type) -> Converter.
CONVERTERS: dict = {}


def converter(*op_types, check=None, domain="", reads=None):
    def deco(fn):
        for t in op_types:
            CONVERTERS[(domain, t)] = Converter(fn, check, reads=reads)
        return fn
    return deco


# -- helpers ------------------------------------------------------------------

I64 = lambda: ir.IntegerType.get_signless(64)  # noqa: E731


def i64_attr(v):
    return ir.IntegerAttr.get(I64(), int(v))


def f64_attr(v):
    return ir.FloatAttr.get_f64(float(v))


def has_input(node, k):
    return k < len(node.input) and node.input[k] != ""


def norm_axis(axis, rank):
    return axis + rank if axis < 0 else axis


def _dt(g, name):
    return g.dtype(name)


def need_float(g, node, k=0):
    dt = g.dtype(node.input[k])
    if dt is not None and not _types.is_float(dt):
        return f"needs a floating-point input, got {np.dtype(dt).name}"
    return None


def need_const(g, node, *ks, what=None):
    for k in ks:
        if has_input(node, k) and not g.is_const(node.input[k]):
            return (f"input {k} ('{node.input[k]}') must be known at import time "
                    f"(it is computed at run time{', ' + what if what else ''})")
    return None


def need_static(g, name, axes=None, what="this op"):
    s = g.shape(name)
    if s is None:
        return f"the rank of '{name}' is unknown"
    dims = range(len(s)) if axes is None else axes
    if any(s[d] is None for d in dims):
        return f"{what} needs static extents of '{name}', got {_fmt(s)}"
    return None


def _fmt(shape):
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def unused_outputs(*ks):
    def check(g, node):
        for k in ks:
            if k < len(node.output) and node.output[k] and g.uses(node.output[k]):
                return f"output {k} ('{node.output[k]}') is used; only output 0 is supported"
        return None
    return check


# -- elementwise --------------------------------------------------------------

_CMPF = {"Equal": "OEQ", "Greater": "OGT", "Less": "OLT",
         "GreaterOrEqual": "OGE", "LessOrEqual": "OLE"}
_CMPI_S = {"Equal": "eq", "Greater": "sgt", "Less": "slt",
           "GreaterOrEqual": "sge", "LessOrEqual": "sle"}
_CMPI_U = {"Equal": "eq", "Greater": "ugt", "Less": "ult",
           "GreaterOrEqual": "uge", "LessOrEqual": "ule"}


def binary_fn(op: str, dt) -> Callable:
    f, u = _types.is_float(dt), _types.is_unsigned(dt)
    table = {
        "Add": arith.addf if f else arith.addi,
        "Sub": arith.subf if f else arith.subi,
        "Mul": arith.mulf if f else arith.muli,
        "Div": arith.divf if f else (arith.divui if u else arith.divsi),
        "Max": arith.maximumf if f else (arith.maxui if u else arith.maxsi),
        "Min": arith.minimumf if f else (arith.minui if u else arith.minsi),
        "And": arith.andi, "Or": arith.ori, "Xor": arith.xori,
    }
    if op in table:
        return table[op]
    if op in _CMPF:
        if f:
            pred = getattr(arith.CmpFPredicate, _CMPF[op])
            return lambda a, b: arith.cmpf(pred, a, b)
        pred = getattr(arith.CmpIPredicate, (_CMPI_U if u else _CMPI_S)[op])
        return lambda a, b: arith.cmpi(pred, a, b)
    raise KeyError(op)


def _check_binary(g, node):
    a = _dt(g, node.input[0])
    op = node.op_type
    if op in ("And", "Or", "Xor") and a is not None and not _types.is_bool(a):
        return f"{op} on {np.dtype(a).name} tensors is not supported"
    if op in ("Add", "Sub", "Mul", "Div") and a is not None and _types.is_bool(a):
        return f"{op} on bool tensors is not supported"
    return None


@converter("Add", "Sub", "Mul", "Div", "And", "Or", "Xor", "Equal", "Greater",
           "Less", "GreaterOrEqual", "LessOrEqual", check=_check_binary)
def _binary(ctx, node):
    dt = ctx.g.dtype(node.input[0])
    return [ctx.elementwise(binary_fn(node.op_type, dt), node.input[:2], node.output[0])]


def _check_pow(g, node):
    a = _dt(g, node.input[0])
    if a is not None and _types.is_bool(a):
        return "Pow with a bool base is not supported"
    return None


@converter("Pow", check=_check_pow)
def _pow(ctx, node):
    g = ctx.g
    exp_name = node.input[1]
    if g.is_const(exp_name):
        e = g.const(exp_name)
        if e.size >= 1 and np.all(e == e.reshape(-1)[0]):
            val = float(e.reshape(-1)[0])
            x_shape = g.shape(node.input[0])
            if g.shape(node.output[0]) == x_shape and None not in (x_shape or (None,)):
                x = ctx.get(node.input[0])
                if val == 1.0:
                    return [x]
                if val == 2.0:
                    return [arith.mulf(x, x)]
                if val == 0.5:
                    return [math.sqrt(x)]
    base_dt = g.dtype(node.input[0])
    exp_dt = g.dtype(exp_name)
    if not _types.is_float(base_dt):
        # Integer bases: pow in f64, truncated back to the base's type (as
        # onnxruntime's std::pow does).
        f64 = np.dtype(np.float64)
        x = cast_value(ctx, ctx.get(node.input[0]), base_dt, f64)
        e = cast_value(ctx, ctx.get(exp_name), exp_dt, f64)
        r = ctx.b.elementwise(math.powf, [x, e], g.shape(node.output[0]))
        return [cast_value(ctx, r, f64, base_dt)]
    if exp_dt != base_dt:
        e = ctx.get(exp_name)
        e = cast_value(ctx, e, exp_dt, base_dt)
        x = ctx.get(node.input[0])
        return [ctx.b.elementwise(math.powf, [x, e], g.shape(node.output[0]))]
    return [ctx.elementwise(math.powf, node.input[:2], node.output[0])]


@converter("Mod")
def _mod(ctx, node):
    dt = ctx.g.dtype(node.input[0])
    fmod = ctx.attrs(node).get("fmod", 0)
    u = _types.is_unsigned(dt)
    if _types.is_float(dt) and fmod:
        return [ctx.elementwise(arith.remf, node.input[:2], node.output[0])]
    if _types.is_float(dt):  # opset 28: fmod=0 on floats is a - floor(a / b) * b

        def floor_mod(a, b):
            r = arith.remf(a, b)
            zero = ctx.b.splat(0.0, ctx.b.mixed_shape(r), elem_of(r))
            fix = arith.andi(arith.cmpf(arith.CmpFPredicate.ONE, r, zero),
                             arith.xori(arith.cmpf(arith.CmpFPredicate.OLT, r, zero),
                                        arith.cmpf(arith.CmpFPredicate.OLT, b, zero)))
            return arith.select(fix, arith.addf(r, b), r)
        return [ctx.elementwise(floor_mod, node.input[:2], node.output[0])]
    if fmod or u:
        return [ctx.elementwise(arith.remui if u else arith.remsi, node.input[:2], node.output[0])]

    def python_mod(a, b):
        # remsi truncates; ONNX (fmod=0) takes the divisor's sign.
        r = arith.remsi(a, b)
        zero = ctx.b.splat(0, ctx.b.mixed_shape(r), elem_of(r))
        fix = arith.andi(arith.cmpi(arith.CmpIPredicate.ne, r, zero),
                         arith.xori(arith.cmpi(arith.CmpIPredicate.slt, r, zero),
                                    arith.cmpi(arith.CmpIPredicate.slt, b, zero)))
        return arith.select(fix, arith.addi(r, b), r)
    return [ctx.elementwise(python_mod, node.input[:2], node.output[0])]


def _variadic_check(g, node):
    if node.op_type == "Mean" and not _types.is_float(_dt(g, node.input[0]) or np.float32):
        return "Mean of integer tensors is not supported"
    return None


@converter("Max", "Min", "Sum", "Mean", check=_variadic_check)
def _variadic(ctx, node):
    dt = ctx.g.dtype(node.input[0])
    op = {"Sum": "Add", "Mean": "Add"}.get(node.op_type, node.op_type)
    fn = binary_fn(op, dt)
    names = [n for n in node.input if n]
    vals = [ctx.get(n) for n in names]
    hint = ctx.g.shape(node.output[0])
    shape = ctx.b.broadcast_shape(vals, hint)
    vals = [ctx.b.broadcast_to(v, shape) for v in vals]
    acc = vals[0]
    for v in vals[1:]:
        acc = fn(acc, v)
    if node.op_type == "Mean" and len(vals) > 1:
        acc = arith.divf(acc, ctx.b.splat(len(vals), ctx.b.mixed_shape(acc), elem_of(acc)))
    return [acc]


_UNARY_F = {
    "Sqrt": math.sqrt, "Exp": math.exp, "Log": math.log, "Erf": math.erf,
    "Abs": math.absf, "Neg": arith.negf, "Floor": math.floor, "Ceil": math.ceil,
    "Round": math.roundeven, "Sin": math.sin, "Cos": math.cos, "Tan": math.tan,
    "Atan": math.atan,
}


def _check_unary(g, node):
    dt = _dt(g, node.input[0])
    if dt is None:
        return None
    if node.op_type in ("Abs", "Neg") and not _types.is_bool(dt):
        return None
    if node.op_type == "Abs" and _types.is_unsigned(dt):
        return None
    return need_float(g, node)


@converter(*_UNARY_F, "Reciprocal", "IsNaN", check=_check_unary)
def _unary(ctx, node):
    x = ctx.get(node.input[0])
    dt = ctx.g.dtype(node.input[0])
    op = node.op_type
    if not _types.is_float(dt):
        if op == "Abs":
            return [x if _types.is_unsigned(dt) else math.absi(x)]
        if op == "Neg":
            return [arith.subi(ctx.b.splat(0, ctx.b.mixed_shape(x), elem_of(x)), x)]
    if op == "Reciprocal":
        return [arith.divf(ctx.b.splat(1.0, ctx.b.mixed_shape(x), elem_of(x)), x)]
    if op == "IsNaN":
        return [arith.cmpf(arith.CmpFPredicate.UNO, x, x)]
    return [_UNARY_F[op](x)]


@converter("Not")
def _not(ctx, node):
    x = ctx.get(node.input[0])
    return [arith.xori(x, ctx.b.splat(1, ctx.b.mixed_shape(x), elem_of(x)))]


def _check_bitwise(g, node):
    dt = _dt(g, node.input[0])
    if dt is not None and (_types.is_float(dt) or _types.is_bool(dt)):
        return f"{node.op_type} needs integer tensors, got {np.dtype(dt).name}"
    if node.op_type == "BitShift" and attributes(node).get("direction") not in (b"LEFT", b"RIGHT",
                                                                                 "LEFT", "RIGHT"):
        return "direction must be LEFT or RIGHT"
    return None


def _bit_shift(ctx, left: bool, signed: bool):
    """x shifted by y, defined for every y as ONNX defines it: y is read as
    unsigned, and a shift by the width or more gives 0 (left, and right on
    unsigned types) or the sign (right on signed ones). LLVM leaves such
    shifts undefined and each ISA answers differently (AVX-512 shifts bytes
    natively, AVX2 widens them), so the amount is clamped and the result
    selected explicitly."""
    def fn(x, y):
        shape, e = ctx.b.mixed_shape(x), elem_of(x)
        width = ir.IntegerType(e).width
        too_far = arith.cmpi(arith.CmpIPredicate.uge, y, ctx.b.splat(width, shape, e))
        amount = arith.select(too_far, ctx.b.splat(width - 1, shape, e), y)
        if not left and signed:  # by width - 1: every bit a copy of the sign
            return arith.shrsi(x, amount)
        shifted = arith.shli(x, amount) if left else arith.shrui(x, amount)
        return arith.select(too_far, ctx.b.splat(0, shape, e), shifted)
    return fn


@converter("BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitShift", check=_check_bitwise)
def _bitwise(ctx, node):
    op = node.op_type
    if op == "BitShift":
        direction = ctx.attrs(node)["direction"]
        direction = direction.decode() if isinstance(direction, bytes) else direction
        # Unsigned types shift in zeros; signed ones (opset 28) keep the sign.
        signed = not _types.is_unsigned(ctx.g.dtype(node.input[0]))
        fn = _bit_shift(ctx, direction == "LEFT", signed)
    else:
        fn = {"BitwiseAnd": arith.andi, "BitwiseOr": arith.ori, "BitwiseXor": arith.xori}[op]
    return [ctx.elementwise(fn, node.input[:2], node.output[0])]


@converter("BitwiseNot", check=_check_bitwise)
def _bitwise_not(ctx, node):
    x = ctx.get(node.input[0])
    return [arith.xori(x, ctx.b.splat(-1, ctx.b.mixed_shape(x), elem_of(x)))]


@converter("IsInf", check=need_float)
def _is_inf(ctx, node):
    a = ctx.attrs(node)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)
    pos = arith.cmpf(arith.CmpFPredicate.OEQ, x, ctx.b.splat(float("inf"), shape, e))
    neg = arith.cmpf(arith.CmpFPredicate.OEQ, x, ctx.b.splat(float("-inf"), shape, e))
    detect_pos, detect_neg = a.get("detect_positive", 1), a.get("detect_negative", 1)
    if detect_pos and detect_neg:
        return [arith.ori(pos, neg)]
    if detect_pos:
        return [pos]
    if detect_neg:
        return [neg]
    return [ctx.b.splat(0, shape, ir.IntegerType.get_signless(1))]


@converter("Sign")
def _sign(ctx, node):
    x = ctx.get(node.input[0])
    dt = ctx.g.dtype(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)
    if _types.is_float(dt):
        zero, one, m1 = (ctx.b.splat(v, shape, e) for v in (0.0, 1.0, -1.0))
        pos = arith.cmpf(arith.CmpFPredicate.OGT, x, zero)
        neg = arith.cmpf(arith.CmpFPredicate.OLT, x, zero)
        # NaN and ±0 pass through unchanged.
        return [arith.select(pos, one, arith.select(neg, m1, x))]
    zero, one, m1 = (ctx.b.splat(v, shape, e) for v in (0, 1, -1))
    pos = arith.cmpi(arith.CmpIPredicate.ugt if _types.is_unsigned(dt) else
                     arith.CmpIPredicate.sgt, x, zero)
    if _types.is_unsigned(dt):
        return [arith.select(pos, one, zero)]
    neg = arith.cmpi(arith.CmpIPredicate.slt, x, zero)
    return [arith.select(pos, one, arith.select(neg, m1, zero))]


def _check_lp_norm(g, node):
    r = need_float(g, node)
    if r:
        return r
    s = g.shape(node.input[0])
    if s is None:
        return "input rank is unknown"
    if attributes(node).get("p", 2) not in (1, 2):
        return "p must be 1 or 2"
    return None


@converter("LpNormalization", check=_check_lp_norm)
def _lp_norm(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    rank = len(shape_of(x))
    axis = norm_axis(a.get("axis", -1), rank)
    p = a.get("p", 2)
    mag = math.absf(x) if p == 1 else arith.mulf(x, x)
    norm = b.reduce(mag, [axis], lambda v, acc: arith.addf(acc, v), 0)
    if p == 2:
        norm = math.sqrt(norm)
    norm = b.broadcast_to(b.keep_dims(norm, rank, [axis]), b.mixed_shape(x))
    # A zero vector stays zero (0 / 0 would be NaN).
    zero = b.splat(0.0, b.mixed_shape(x), elem_of(x))
    nonzero = arith.cmpf(arith.CmpFPredicate.ONE, norm, zero)
    return [arith.select(nonzero, arith.divf(x, norm), zero)]


def _check_bitcast(g, node):
    src, dst = g.dtype(node.input[0]), g.dtype(node.output[0])
    if src is None or dst is None:
        return "unsupported element type"
    if np.dtype(src).itemsize != np.dtype(dst).itemsize or _types.is_bool(src) or \
            _types.is_bool(dst):
        return "only bit casts between types of one width (not bool) are supported"
    return None


@converter("BitCast", check=_check_bitcast)
def _bitcast(ctx, node):
    x = ctx.get(node.input[0])
    target = ctx.b.tensor_type(shape_of(x), ctx.g.dtype(node.output[0]))
    return [arith.bitcast(target, x)]


_SMOOTH = ("Softplus", "Softsign", "Selu", "Celu", "ThresholdedRelu", "Mish", "Shrink",
           "Swish", "Sinh", "Cosh", "Asin", "Acos", "Asinh", "Acosh", "Atanh")


@converter(*_SMOOTH, check=need_float)
def _smooth(ctx, node):
    a = ctx.attrs(node)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)

    def c(v):
        return ctx.b.splat(float(v), shape, e)

    def softplus(v):  # log(1 + exp(v)) without overflow: max(v, 0) + log1p(exp(-|v|))
        return arith.addf(arith.maximumf(v, c(0)), math.log1p(math.exp(arith.negf(math.absf(v)))))

    op = node.op_type
    if op == "Softplus":
        return [softplus(x)]
    if op == "Softsign":
        return [arith.divf(x, arith.addf(c(1), math.absf(x)))]
    if op == "Mish":
        return [arith.mulf(x, math.tanh(softplus(x)))]
    if op == "Swish":
        alpha = a.get("alpha", 1.0)
        return [arith.mulf(x, sits.activation(sits.ActivationKind.Sigmoid, arith.mulf(x, c(alpha))))]
    if op in ("Selu", "Celu"):
        alpha = a.get("alpha", 1.67326319217681884765625 if op == "Selu" else 1.0)
        if op == "Selu":
            gamma = a.get("gamma", 1.05070102214813232421875)
            neg = arith.mulf(c(alpha), math.expm1(x))
            y = arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, c(0)), x, neg)
            return [arith.mulf(c(gamma), y)]
        # Celu: max(0, x) + min(0, alpha * (exp(x / alpha) - 1))
        neg = arith.mulf(c(alpha), math.expm1(arith.divf(x, c(alpha))))
        return [arith.addf(arith.maximumf(x, c(0)), arith.minimumf(neg, c(0)))]
    if op == "ThresholdedRelu":
        alpha = a.get("alpha", 1.0)
        return [arith.select(arith.cmpf(arith.CmpFPredicate.OGT, x, c(alpha)), x, c(0))]
    if op == "Shrink":
        lambd, bias = a.get("lambd", 0.5), a.get("bias", 0.0)
        lo = arith.cmpf(arith.CmpFPredicate.OLT, x, c(-lambd))
        hi = arith.cmpf(arith.CmpFPredicate.OGT, x, c(lambd))
        return [arith.select(lo, arith.addf(x, c(bias)),
                             arith.select(hi, arith.subf(x, c(bias)), c(0)))]
    fn = {"Sinh": math.sinh, "Cosh": math.cosh, "Asin": math.asin, "Acos": math.acos,
          "Asinh": math.asinh, "Acosh": math.acosh, "Atanh": math.atanh}[op]
    return [fn(x)]


_ACTIVATIONS = {"Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh"}


def _check_gelu(g, node):
    approx = attributes(node).get("approximate", "none")
    if approx not in ("none", "tanh"):
        return f"unsupported attribute value approximate='{approx}' (none or tanh)"
    return need_float(g, node)


@converter("Relu", "Sigmoid", "Tanh", check=need_float)
def _activation(ctx, node):
    kind = getattr(sits.ActivationKind, _ACTIVATIONS[node.op_type])
    return [sits.activation(kind, ctx.get(node.input[0]))]


@converter("Gelu", check=_check_gelu)
def _gelu(ctx, node):
    approx = ctx.attrs(node).get("approximate", "none")
    kind = sits.ActivationKind.GeluTanh if approx == "tanh" else sits.ActivationKind.Gelu
    return [sits.activation(kind, ctx.get(node.input[0]))]


@converter("LeakyRelu", check=need_float)
def _leaky_relu(ctx, node):
    alpha = ctx.attrs(node).get("alpha", 0.01)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)
    zero = ctx.b.splat(0.0, shape, e)
    neg = arith.mulf(x, ctx.b.splat(alpha, shape, e))
    return [arith.select(arith.cmpf(arith.CmpFPredicate.OGE, x, zero), x, neg)]


@converter("PRelu", check=need_float)
def _prelu(ctx, node):
    x = ctx.get(node.input[0])
    slope = ctx.get(node.input[1])
    shape = ctx.b.broadcast_shape([x, slope], ctx.g.shape(node.output[0]))
    x = ctx.b.broadcast_to(x, shape)
    slope = ctx.b.broadcast_to(slope, shape)
    zero = ctx.b.splat(0.0, shape, elem_of(x))
    return [arith.select(arith.cmpf(arith.CmpFPredicate.OLT, x, zero), arith.mulf(x, slope), x)]


@converter("Elu", check=need_float)
def _elu(ctx, node):
    alpha = ctx.attrs(node).get("alpha", 1.0)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)
    zero = ctx.b.splat(0.0, shape, e)
    neg = arith.mulf(ctx.b.splat(alpha, shape, e), math.expm1(x))
    return [arith.select(arith.cmpf(arith.CmpFPredicate.OGE, x, zero), x, neg)]


@converter("HardSigmoid", "HardSwish", check=need_float)
def _hard_sigmoid(ctx, node):
    a = ctx.attrs(node)
    alpha, beta = (a.get("alpha", 0.2), a.get("beta", 0.5)) if node.op_type == "HardSigmoid" \
        else (1.0 / 6.0, 0.5)
    x = ctx.get(node.input[0])
    shape, e = ctx.b.mixed_shape(x), elem_of(x)
    y = arith.addf(arith.mulf(x, ctx.b.splat(alpha, shape, e)), ctx.b.splat(beta, shape, e))
    y = arith.minimumf(arith.maximumf(y, ctx.b.splat(0.0, shape, e)), ctx.b.splat(1.0, shape, e))
    if node.op_type == "HardSwish":
        y = arith.mulf(x, y)
    return [y]


def _check_clip(g, node):
    return need_float(g, node) if g.dtype(node.input[0]) is not None and \
        _types.is_bool(g.dtype(node.input[0])) else None


@converter("Clip", check=_check_clip)
def _clip(ctx, node):
    x = ctx.get(node.input[0])
    dt = ctx.g.dtype(node.input[0])
    shape = ctx.b.mixed_shape(x)
    for k, fn in ((1, binary_fn("Max", dt)), (2, binary_fn("Min", dt))):
        if has_input(node, k):
            name = node.input[k]
            if ctx.g.is_const(name):
                bound = ctx.b.splat(ctx.g.const(name).reshape(-1)[0].item(), shape, elem_of(x))
            else:
                bound = ctx.b.broadcast_to(ctx.get(name), shape)
            x = fn(x, bound)
    return [x]


@converter("Where")
def _where(ctx, node):
    return [ctx.elementwise(arith.select, node.input[:3], node.output[0])]


def cast_value(ctx, v: ir.Value, src, dst, saturate: bool = True) -> ir.Value:
    """Converts `v` from NumPy dtype `src` to `dst` with ONNX Cast semantics.
    `saturate` (Cast's attribute) clamps values beyond an 8-bit float's range
    to its largest finite value instead of giving infinity or NaN."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return v
    b = ctx.b
    target = b.tensor_type(shape_of(v), dst)
    f32 = np.dtype(np.float32)
    if _types.is_small_float(src) and dst != f32:
        # 8- and 4-bit floats convert through f32, the only float type their
        # software conversion (sits-cpu-expand-small-floats) speaks.
        return cast_value(ctx, cast_value(ctx, v, src, f32), f32, dst, saturate)
    if _types.is_small_float(dst):
        if src != f32:
            v = cast_value(ctx, v, src, f32)
        if saturate:
            import ml_dtypes

            big = float(ml_dtypes.finfo(dst).max)
            shape = b.mixed_shape(v)
            v = arith.minimumf(arith.maximumf(v, b.splat(-big, shape, elem_of(v))),
                               b.splat(big, shape, elem_of(v)))
        return arith.truncf(target, v)
    fs, fd = _types.is_float(src), _types.is_float(dst)
    if _types.is_bool(dst):
        zero = b.splat(0, b.mixed_shape(v), elem_of(v))
        if fs:
            return arith.cmpf(arith.CmpFPredicate.UNE, v, zero)
        return arith.cmpi(arith.CmpIPredicate.ne, v, zero)
    if fs and fd:
        ws, wd = ir.FloatType(elem_of(v)).width, ir.FloatType(_types.mlir_type(dst)).width
        if ws < wd:
            return arith.extf(target, v)
        if ws > wd:
            return arith.truncf(target, v)
        mid = b.tensor_type(shape_of(v), np.float32)
        return arith.truncf(target, arith.extf(mid, v))
    if fs:
        wd = ir.IntegerType(_types.mlir_type(dst)).width
        if wd < 8:
            # As ml_dtypes (the reference) converts: toward zero, and 0 for
            # values outside the sub-byte range.
            i32 = ir.IntegerType.get_signless(32)
            shape = b.mixed_shape(v)
            whole = arith.fptosi(b.tensor_type(shape_of(v), i32), v)
            lo, hi = (0, (1 << wd) - 1) if _types.is_unsigned(dst) else \
                (-(1 << (wd - 1)), (1 << (wd - 1)) - 1)
            inside = arith.andi(
                arith.cmpi(arith.CmpIPredicate.sge, whole, b.splat(lo, shape, i32)),
                arith.cmpi(arith.CmpIPredicate.sle, whole, b.splat(hi, shape, i32)))
            whole = arith.select(inside, whole, b.splat(0, shape, i32))
            return arith.trunci(target, whole)
        return (arith.fptoui if _types.is_unsigned(dst) else arith.fptosi)(target, v)
    unsigned_src = _types.is_unsigned(src) or _types.is_bool(src)
    if fd:
        return (arith.uitofp if unsigned_src else arith.sitofp)(target, v)
    ws = ir.IntegerType(elem_of(v)).width
    wd = ir.IntegerType(_types.mlir_type(dst)).width
    if ws < wd:
        return (arith.extui if unsigned_src else arith.extsi)(target, v)
    if ws > wd:
        return arith.trunci(target, v)
    return v  # signed <-> unsigned of one width: same bits


def _check_cast(g, node):
    to = attributes(node).get("to")
    if node.op_type == "Cast" and to not in _types.SUPPORTED_ONNX_TYPES:
        return f"unsupported attribute value to={_types.dtype_name(to)}"
    return None


@converter("Cast", "CastLike", check=_check_cast, reads=(0,))  # CastLike's input 1: its type only
def _cast(ctx, node):
    return [cast_value(ctx, ctx.get(node.input[0]), ctx.g.dtype(node.input[0]),
                       ctx.g.dtype(node.output[0]),
                       saturate=bool(attributes(node).get("saturate", 1)))]


@converter("Identity")
def _identity(ctx, node):
    return [ctx.get(node.input[0])]


def _check_dropout(g, node):
    if has_input(node, 2):
        t = g.const(node.input[2]) if g.is_const(node.input[2]) else None
        if t is None or bool(np.asarray(t).reshape(-1)[0]):
            return "training_mode must be a constant false"
    return None


@converter("Dropout", check=_check_dropout)
def _dropout(ctx, node):
    x = ctx.get(node.input[0])
    outs = [x]
    if len(node.output) > 1 and node.output[1]:  # inference: nothing is dropped
        outs.append(ctx.b.splat(1, ctx.b.mixed_shape(x), ir.IntegerType.get_signless(1)))
    return outs


def _check_depth_space(g, node):
    s = g.shape(node.input[0])
    if s is None or len(s) != 4 or None in s[1:]:
        return "needs a 4-D NCHW input with static C, H and W"
    bs = attributes(node).get("blocksize")
    if not bs or bs < 1:
        return "blocksize must be a positive integer"
    if node.op_type == "DepthToSpace" and s[1] % (bs * bs):
        return "the channel count must be a multiple of blocksize²"
    if node.op_type == "SpaceToDepth" and (s[2] % bs or s[3] % bs):
        return "H and W must be multiples of blocksize"
    return None


@converter("DepthToSpace", "SpaceToDepth", check=_check_depth_space)
def _depth_space(ctx, node):
    """The ONNX definitions: a 6-D reshape, a transpose and a reshape back."""
    b = ctx.b
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    bs = a["blocksize"]
    n, c, h, w = shape_of(x)
    if node.op_type == "DepthToSpace":
        if a.get("mode", "DCR") in ("CRD", b"CRD"):
            t = b.reshape(x, (n, c // (bs * bs), bs, bs, h, w))
            perm = (0, 1, 4, 2, 5, 3)
        else:
            t = b.reshape(x, (n, bs, bs, c // (bs * bs), h, w))
            perm = (0, 3, 4, 1, 5, 2)
        out = (n, c // (bs * bs), h * bs, w * bs)
    else:
        t = b.reshape(x, (n, c, h // bs, bs, w // bs, bs))
        crd = a.get("mode", "DCR") in ("CRD", b"CRD")
        perm = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        out = (n, c * bs * bs, h // bs, w // bs)
    return [b.reshape(b.transpose(t, perm), out)]


def _check_eye_like(g, node):
    s = g.shape(node.input[0])
    if s is None or len(s) != 2 or None in s:
        return "needs a static 2-D input"
    if g.dtype(node.output[0]) is None:
        return "unsupported output element type"
    return None


@converter("EyeLike", check=_check_eye_like, reads=())
def _eye_like(ctx, node):
    n, m = ctx.g.shape(node.input[0])
    k = ctx.attrs(node).get("k", 0)
    dt = ctx.g.dtype(node.output[0])
    return [ctx.const_value(np.eye(n, m, k, dtype=dt), node.output[0])]


def _check_one_hot(g, node):
    r = need_const(g, node, 1, 2, what="depth and values")
    if r:
        return r
    s = g.shape(node.input[0])
    if s is None or None in s:
        return "needs indices of static shape"
    if g.dtype(node.input[0]) is None or _types.is_float(g.dtype(node.input[0])):
        return "needs integer indices"
    return None


@converter("OneHot", check=_check_one_hot, reads=(0,))
def _one_hot(ctx, node):
    b, g = ctx.b, ctx.g
    idx = ctx.get(node.input[0])
    depth = int(np.asarray(g.const(node.input[1])).reshape(-1)[0])
    off_on = np.asarray(g.const(node.input[2])).reshape(-1)
    rank = len(shape_of(idx))
    axis = norm_axis(ctx.attrs(node).get("axis", -1), rank + 1)
    out_shape = list(shape_of(idx))
    out_shape.insert(axis, depth)
    elem_i = elem_of(idx)
    # A negative index counts from the end of the depth axis.
    d = b.splat(depth, shape_of(idx), elem_i)
    zero = b.splat(0, shape_of(idx), elem_i)
    idx = arith.select(arith.cmpi(arith.CmpIPredicate.slt, idx, zero), arith.addi(idx, d), idx)
    unit = out_shape[:axis] + [1] + out_shape[axis + 1:]
    idx_b = b.broadcast_to(b.reshape(idx, unit), out_shape)
    iota = b.constant(np.arange(depth, dtype=np.int64).reshape(
        [depth if k == axis else 1 for k in range(rank + 1)]), name="iota")
    iota = b.broadcast_to(cast_value(ctx, iota, np.int64, g.dtype(node.input[0])), out_shape)
    hit = arith.cmpi(arith.CmpIPredicate.eq, idx_b, iota)
    dt = g.dtype(node.output[0])
    elem = _types.mlir_type(dt)
    on = b.splat(off_on[1].item(), out_shape, elem)
    off = b.splat(off_on[0].item(), out_shape, elem)
    return [arith.select(hit, on, off)]


def _check_channel_norm(g, node):
    r = need_float(g, node)
    if r:
        return r
    s = g.shape(node.input[0])
    if s is None or len(s) < 2 or None in s:
        return "needs an input of static shape, rank ≥ 2"
    if node.op_type == "GroupNormalization":
        groups = attributes(node).get("num_groups")
        if not groups or s[1] % groups:
            return "num_groups must divide the channel count"
        if attributes(node).get("stash_type", 1) != 1:
            return "stash_type other than 1 (float32) is not supported"
        for k in (1, 2):
            ps = g.shape(node.input[k])
            if ps is None or (ps != (s[1],) and not g.is_const(node.input[k])):
                return "per-group scale and bias (opset 18) must be constants"
    if node.op_type == "MeanVarianceNormalization":
        axes = attributes(node).get("axes", [0, 2, 3])
        if any(not -len(s) <= a < len(s) for a in axes):
            return "axes out of range"
    return None


def moments(ctx, x, axes):
    """Mean and (biased) variance of `x` over `axes` (static extents), with
    the reduced axes kept as 1."""
    b = ctx.b
    rank = len(shape_of(x))
    count = float(np.prod([shape_of(x)[k] for k in axes]))

    def mean_of(v):
        m = b.reduce(v, axes, lambda e, acc: arith.addf(acc, e), 0)
        return b.keep_dims(arith.divf(m, b.splat(count, b.mixed_shape(m), elem_of(m))),
                           rank, axes)
    mean = mean_of(x)
    centered = arith.subf(x, b.broadcast_to(mean, b.mixed_shape(x)))
    return mean, mean_of(arith.mulf(centered, centered))


def normalize_over(ctx, x, axes, eps):
    """(x - mean) / sqrt(var + eps) over `axes` (static), in x's type."""
    b = ctx.b
    shape = b.mixed_shape(x)
    mean, var = moments(ctx, x, axes)
    centered = arith.subf(x, b.broadcast_to(mean, shape))
    return arith.mulf(centered, math.rsqrt(arith.addf(b.broadcast_to(var, shape),
                                                      b.splat(float(eps), shape, elem_of(x)))))


@converter("InstanceNormalization", "GroupNormalization", "MeanVarianceNormalization",
           check=_check_channel_norm)
def _channel_norm(ctx, node):
    b, g = ctx.b, ctx.g
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    shape = list(shape_of(x))
    rank = len(shape)
    dt = g.dtype(node.input[0])
    if node.op_type == "MeanVarianceNormalization":
        axes = sorted(norm_axis(k, rank) for k in a.get("axes", [0, 2, 3]))
        return [normalize_over(ctx, x, axes, 1e-9)]
    eps = a.get("epsilon", 1e-5)
    f32 = np.dtype(np.float32)
    xf = cast_value(ctx, x, dt, f32)
    if node.op_type == "InstanceNormalization":
        y = normalize_over(ctx, xf, list(range(2, rank)), eps)
    else:  # per (batch, group) over the group's channels and all positions
        groups = a["num_groups"]
        grouped = [shape[0], groups, shape[1] // groups] + shape[2:]
        y = normalize_over(ctx, b.reshape(xf, grouped), list(range(2, rank + 1)), eps)
        y = b.reshape(y, shape)
    y = cast_value(ctx, y, f32, dt)
    # Per-channel scale and bias along axis 1.
    ch = [1] * rank
    ch[1] = shape[1]
    for k, fn in ((1, arith.mulf), (2, arith.addf)):
        p = g.const(node.input[k]) if g.is_const(node.input[k]) else None
        if p is not None:
            p = np.asarray(p).reshape(-1)
            if p.size != shape[1]:  # opset 18 GroupNormalization: one per group
                p = np.repeat(p, shape[1] // p.size)
            v = b.constant(np.ascontiguousarray(p.reshape(ch)), name=node.input[k])
        else:
            v = b.reshape(ctx.get(node.input[k]), ch)
        y = fn(y, b.broadcast_to(v, shape))
    return [y]


# -- contractions -------------------------------------------------------------

def _check_matmul(g, node):
    for k in (0, 1):
        r = need_float(g, node, k)
        if r:
            return "MatMul " + r
    for k in (0, 1):
        if g.rank(node.input[k]) == 0:
            return "MatMul of a 0-D operand"
    return None


def _broadcast_dynamic_batch(b, a, w):
    """sits.matmul takes dynamic batch extents as equal; where one may be 1
    at run time while the other is not, both operands are broadcast to the
    common batch shape first (the larger extent wins)."""
    sa, sw = shape_of(a), shape_of(w)
    if len(sa) < 3 or len(sw) < 3 or (None not in sa[:-2] and None not in sw[:-2]):
        return a, w
    ma, mw = b.mixed_shape(a), b.mixed_shape(w)
    n = max(len(sa), len(sw)) - 2
    pa = [1] * (n - (len(sa) - 2)) + ma[:-2]
    pw = [1] * (n - (len(sw) - 2)) + mw[:-2]
    if all(x is y or (isinstance(x, int) and x == y) for x, y in zip(pa, pw)):
        return a, w
    batch = []
    for x, y in zip(pa, pw):
        if isinstance(x, int) and isinstance(y, int):
            batch.append(max(x, y))
        elif isinstance(x, int) and x != 1:
            batch.append(x)
        elif isinstance(y, int) and y != 1:
            batch.append(y)
        elif isinstance(x, int):
            batch.append(y)
        elif isinstance(y, int):
            batch.append(x)
        else:
            batch.append(arith.maxui(x, y))
    return b.broadcast_to(a, batch + ma[-2:]), b.broadcast_to(w, batch + mw[-2:])


def emit_matmul(ctx, a_name, b_name, bias=None):
    b = ctx.b
    a, w = ctx.get(a_name), ctx.get(b_name)
    ra, rb = len(shape_of(a)), len(shape_of(w))
    if ra == 1:
        a = b.expand(a, [[0, 1]], (1,) + shape_of(a))
    if rb == 1:
        w = b.expand(w, [[0, 1]], shape_of(w) + (1,))
    a, w = _broadcast_dynamic_batch(b, a, w)
    y = sits.matmul(a, w, bias=bias)
    if ra == 1 or rb == 1:
        s = list(shape_of(y))
        drop = [len(s) - 1] if rb == 1 else []
        if ra == 1:
            drop.append(len(s) - 2)
        keep = [i for i in range(len(s)) if i not in drop]
        y = b.drop_unit_dims(y, keep)
    return y


@converter("MatMul", check=_check_matmul)
def _matmul(ctx, node):
    return [emit_matmul(ctx, node.input[0], node.input[1])]


def _check_gemm(g, node):
    for k in (0, 1):
        r = need_float(g, node, k)
        if r:
            return "Gemm " + r
    return None


@converter("Gemm", check=_check_gemm)
def _gemm(ctx, node):
    g, b = ctx.g, ctx.b
    a = ctx.attrs(node)
    alpha, beta = float(a.get("alpha", 1.0)), float(a.get("beta", 1.0))
    ta, tb = bool(a.get("transA", 0)), bool(a.get("transB", 0))
    A, B = ctx.get(node.input[0]), ctx.get(node.input[1])
    out_shape = g.shape(node.output[0])
    n = out_shape[1]
    bias = None
    c_name = node.input[2] if has_input(node, 2) else None
    c_shape = g.shape(c_name) if c_name else None
    if c_name and alpha == 1.0 and c_shape is not None and len(c_shape) >= 1 \
            and all(d == 1 for d in c_shape[:-1]) and c_shape[-1] == n and n is not None \
            and (n != 1 or len(c_shape) == 1):
        if g.is_const(c_name):
            c = g.const(c_name).reshape(-1)
            if beta != 1.0:
                c = (c * np.asarray(beta, dtype=c.dtype)).astype(c.dtype)
            bias = ctx.const_value(c, c_name)
        else:
            bias = ctx.get(c_name)
            if len(c_shape) > 1:
                bias = b.drop_unit_dims(bias, [len(c_shape) - 1])
            if beta != 1.0:
                bias = arith.mulf(bias, b.splat(beta, b.mixed_shape(bias), elem_of(bias)))
        c_name = None
    y = sits.matmul(A, B, bias=bias, transpose_lhs=ta or None, transpose_rhs=tb or None)
    elem = elem_of(y)
    if alpha != 1.0:
        y = arith.mulf(y, b.splat(alpha, b.mixed_shape(y), elem))
    if c_name and beta != 0.0:
        if g.is_const(c_name):
            c = g.const(c_name)
            if beta != 1.0:
                c = (c * np.asarray(beta, dtype=c.dtype)).astype(c.dtype)
            cv = ctx.const_value(c, c_name)
        else:
            cv = ctx.get(c_name)
            if beta != 1.0:
                cv = arith.mulf(cv, b.splat(beta, b.mixed_shape(cv), elem))
        y = arith.addf(y, b.broadcast_to(cv, b.mixed_shape(y)))
    return [y]


def conv_padding(g, node, x_shape, w_shape):
    """Explicit [begins..., ends...] padding of a Conv/Pool node, or a str
    reason when it cannot be resolved."""
    a = attributes(node)
    k = len(x_shape) - 2
    strides = list(a.get("strides", [1] * k))
    dil = list(a.get("dilations", [1] * k))
    kernel = list(a.get("kernel_shape", w_shape[2:] if w_shape else []))
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        return list(a.get("pads", [0] * (2 * k)))
    if auto_pad == "VALID":
        return [0] * (2 * k)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for i in range(k):
            d = x_shape[2 + i]
            if d is None or kernel[i] is None:
                return f"auto_pad={auto_pad} needs static spatial extents"
            out = -(-d // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - d)
            small, big = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else big)
            ends.append(big if auto_pad == "SAME_UPPER" else small)
        return begins + ends
    return f"unsupported attribute value auto_pad='{auto_pad}'"


def _check_conv(g, node):
    r = need_float(g, node) or need_float(g, node, 1)
    if r:
        return r
    xs, ws = g.shape(node.input[0]), g.shape(node.input[1])
    if xs is None or ws is None:
        return "input ranks are unknown"
    if not 3 <= len(xs) <= 5:
        return f"{len(xs) - 2}-D convolution is not supported (1-D to 3-D are)"
    pads = conv_padding(g, node, xs, ws)
    if isinstance(pads, str):
        return pads
    return None


def conv_attrs(g, node):
    a = attributes(node)
    xs, ws = g.shape(node.input[0]), g.shape(node.input[1])
    k = len(xs) - 2
    kw = {}
    strides = list(a.get("strides", [1] * k))
    dil = list(a.get("dilations", [1] * k))
    pads = conv_padding(g, node, xs, ws)
    if any(s != 1 for s in strides):
        kw["strides"] = ir.DenseI64ArrayAttr.get(strides)
    if any(p != 0 for p in pads):
        kw["padding"] = ir.DenseI64ArrayAttr.get(pads)
    if any(d != 1 for d in dil):
        kw["dilations"] = ir.DenseI64ArrayAttr.get(dil)
    if a.get("group", 1) != 1:
        kw["groups"] = i64_attr(a["group"])
    return kw


@converter("Conv", check=_check_conv)
def _conv(ctx, node):
    x, w = ctx.get(node.input[0]), ctx.get(node.input[1])
    bias = ctx.get(node.input[2]) if has_input(node, 2) else None
    return [sits.conv(x, w, bias=bias, **conv_attrs(ctx.g, node))]


# -- pooling ------------------------------------------------------------------

def _pool_geometry(g, node):
    """(kernel, strides, dilations, pads_begin, pads_end) where pads_end
    includes the extra ceil_mode padding, or a str reason."""
    xs = g.shape(node.input[0])
    ys = g.shape(node.output[0])
    a = attributes(node)
    if xs is None or len(xs) != 4:
        return "only 2-D pooling (NCHW inputs) is supported"
    if None in xs[2:] or ys is None or None in ys[2:]:
        return "pooling needs static spatial extents"
    kernel = list(a["kernel_shape"])
    strides = list(a.get("strides", [1, 1]))
    dil = list(a.get("dilations", [1, 1]))
    pads = conv_padding(g, node, xs, [None, None] + kernel)
    if isinstance(pads, str):
        return pads
    begin, end = pads[:2], pads[2:]
    for i in range(2):
        needed = (ys[2 + i] - 1) * strides[i] + dil[i] * (kernel[i] - 1) + 1
        have = xs[2 + i] + begin[i] + end[i]
        if needed > have:
            end[i] += needed - have
    return kernel, strides, dil, begin, end


def _check_pool(g, node):
    r = need_float(g, node)
    if r:
        return r
    a = attributes(node)
    if a.get("storage_order", 0) != 0:
        return "unsupported attribute value storage_order=1"
    r = unused_outputs(1)(g, node)
    if r:
        return r
    geo = _pool_geometry(g, node)
    return geo if isinstance(geo, str) else None


def pad_tensor(ctx, x, begin, end, value):
    """`tensor.pad` of `x` with `value` (low `begin`, high `end`)."""
    b = ctx.b
    if not any(begin) and not any(end):
        return x
    elem = elem_of(x)
    s = shape_of(x)
    out = [None if d is None else d + lo + hi for d, lo, hi in zip(s, begin, end)]
    pad_value = value if isinstance(value, ir.Value) else b.scalar(value, elem)
    op = tensor.PadOp(b.tensor_type(out, elem), x, [], [], list(begin), list(end))
    block = op.regions[0].blocks.append(*([ir.IndexType.get()] * len(s)))
    with ir.InsertionPoint(block):
        tensor.YieldOp(pad_value)
    return op.result


@converter("MaxPool", "AveragePool", check=_check_pool)
def _pool(ctx, node):
    b, g = ctx.b, ctx.g
    x = ctx.get(node.input[0])
    elem = elem_of(x)
    kernel, strides, dil, begin, end = _pool_geometry(g, node)
    ys = g.shape(node.output[0])
    is_max = node.op_type == "MaxPool"
    fill_value = float("-inf") if is_max else 0.0
    pad_value = b.scalar(fill_value, elem)
    xp = pad_tensor(ctx, x, [0, 0] + begin, [0, 0] + end, pad_value)
    out_shape = b.mixed_shape(x)[:2] + list(ys[2:])
    init = b.fill(b.scalar(fill_value, elem), b.empty(out_shape, elem))
    window = b.empty(kernel, elem)
    pool = linalg.pooling_nchw_max if is_max else linalg.pooling_nchw_sum
    y = pool(xp, window, outs=[init], strides=strides, dilations=dil)
    if is_max:
        return [y]
    counts = _avg_counts(g, node, kernel, strides, dil, begin, end)
    if np.all(counts == counts.flat[0]):
        div = b.splat(float(counts.flat[0]), b.mixed_shape(y), elem)
    else:
        c = ctx.const_value(counts.astype(g.dtype(node.input[0])), "pool_counts")
        div = b.broadcast_to(c, b.mixed_shape(y))
    return [arith.divf(y, div)]


def _avg_counts(g, node, kernel, strides, dil, begin, end):
    """Divisor of each AveragePool output position (ONNX semantics)."""
    xs = g.shape(node.input[0])
    ys = g.shape(node.output[0])
    a = attributes(node)
    include_pad = a.get("count_include_pad", 0)
    explicit = conv_padding(g, node, xs, [None, None] + kernel)
    counts = np.ones(ys[2:], dtype=np.float64)
    for i in range(2):
        d = xs[2 + i]
        lo = begin[i]
        valid_lo, valid_hi = (0, d) if not include_pad else (-explicit[i], d + explicit[2 + i])
        per = np.zeros(ys[2 + i])
        for o in range(ys[2 + i]):
            taps = o * strides[i] - lo + dil[i] * np.arange(kernel[i])
            per[o] = np.count_nonzero((taps >= valid_lo) & (taps < valid_hi))
        counts = counts * (per.reshape(-1, 1) if i == 0 else per.reshape(1, -1))
    return counts


def _check_global_pool(g, node):
    r = need_float(g, node)
    if r:
        return r
    xs = g.shape(node.input[0])
    if xs is None or len(xs) < 3:
        return "needs an [N, C, ...] input"
    if node.op_type == "GlobalAveragePool" and None in xs[2:]:
        return "GlobalAveragePool needs static spatial extents"
    return None


@converter("GlobalAveragePool", "GlobalMaxPool", check=_check_global_pool)
def _global_pool(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    axes = list(range(2, rank))
    if node.op_type == "GlobalMaxPool":
        y = b.reduce(x, axes, arith.maximumf, float("-inf"))
        return [b.keep_dims(y, rank, axes)]
    y = b.reduce(x, axes, lambda v, acc: arith.addf(acc, v), 0.0)
    count = int(np.prod(shape_of(x)[2:]))
    y = arith.divf(y, b.splat(float(count), b.mixed_shape(y), elem_of(y)))
    return [b.keep_dims(y, rank, axes)]


# -- normalization ------------------------------------------------------------

def _check_bn(g, node):
    a = attributes(node)
    if a.get("training_mode", 0):
        return "training_mode=1 is not supported (inference only)"
    r = need_float(g, node) or unused_outputs(1, 2)(g, node)
    if r:
        return r
    xs = g.shape(node.input[0])
    if xs is None or len(xs) < 2:
        return "needs an [N, C, ...] input"
    return None


def bn_affine(g, node):
    """(a, b) with BatchNormalization(x) = x * a + b per channel, from
    constant parameters (computed like onnxruntime), or None."""
    names = node.input[1:5]
    if not all(g.is_const(n) for n in names):
        return None
    scale, bias, mean, var = (g.const(n).astype(np.float64) for n in names)
    eps = attributes(node).get("epsilon", 1e-5)
    a = scale / np.sqrt(var + np.float32(eps))
    return a, bias - mean * a


@converter("BatchNormalization", check=_check_bn)
def _batch_norm(ctx, node):
    g, b = ctx.g, ctx.b
    x = ctx.get(node.input[0])
    dt = g.dtype(node.input[0])
    rank = len(shape_of(x))
    shape = b.mixed_shape(x)
    channel_shape = [shape_of(x)[1]] + [1] * (rank - 2)
    ab = bn_affine(g, node)
    if ab is not None:
        av = ctx.const_value(ab[0].astype(dt).reshape(channel_shape), node.input[1] + "_bn_scale")
        bv = ctx.const_value(ab[1].astype(dt).reshape(channel_shape), node.input[2] + "_bn_bias")
    else:
        scale, bias, mean, var = (ctx.get(n) for n in node.input[1:5])
        elem = elem_of(x)
        eps = ctx.attrs(node).get("epsilon", 1e-5)
        cs = b.mixed_shape(var)
        av = arith.divf(scale, math.sqrt(arith.addf(var, b.splat(eps, cs, elem))))
        bv = arith.subf(bias, arith.mulf(mean, av))
        av = b.reshape(av, channel_shape)
        bv = b.reshape(bv, channel_shape)
    y = arith.mulf(x, b.broadcast_to(av, shape))
    return [arith.addf(y, b.broadcast_to(bv, shape)), None, None][:len(node.output)]


def _check_layer_norm(g, node):
    r = need_float(g, node)
    if r:
        return r
    if attributes(node).get("stash_type", 1) != 1:
        return "stash_type other than 1 (float32) is not supported"
    xs = g.shape(node.input[0])
    if xs is None:
        return "input rank is unknown"
    axis = norm_axis(attributes(node).get("axis", -1), len(xs))
    normalized = xs[axis:]
    if None in normalized and any(k < len(node.output) and node.output[k] and
                                  g.uses(node.output[k]) for k in (1, 2)):
        return "the Mean and InvStdDev outputs need static normalized extents"
    for k in (1, 2):
        if has_input(node, k):
            s = g.shape(node.input[k])
            if s is None:
                return f"the rank of input {k} is unknown"
            core = s[max(0, len(s) - len(normalized)):]
            if any(d != 1 for d in s[:len(s) - len(core)]):
                return f"input {k} does not broadcast to the normalized shape"
            if tuple(core) != tuple(normalized) and None in normalized:
                return f"input {k} must have the normalized shape when it is dynamic"
    return None


def norm_param(ctx, name, normalized):
    """A LayerNorm/RMSNorm scale or bias at exactly the normalized shape."""
    g, b = ctx.g, ctx.b
    normalized = tuple(normalized)
    if g.is_const(name) and None not in normalized:
        c = g.const(name)
        if c.ndim > len(normalized):
            c = c.reshape(c.shape[c.ndim - len(normalized):])
        if tuple(c.shape) != normalized:
            c = np.ascontiguousarray(np.broadcast_to(c, normalized))
        return ctx.const_value(c, name)
    v = ctx.get(name)
    s = shape_of(v)
    if len(s) > len(normalized):
        v = b.drop_unit_dims(v, list(range(len(s) - len(normalized), len(s))))
    if shape_of(v) != normalized:
        v = b.broadcast_to(v, list(normalized))  # static: see _check_layer_norm
    return v


@converter("LayerNormalization", check=_check_layer_norm)
def _layer_norm(ctx, node):
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    rank = len(shape_of(x))
    axis = norm_axis(a.get("axis", -1), rank)
    normalized = shape_of(x)[axis:]
    scale = norm_param(ctx, node.input[1], normalized)
    bias = norm_param(ctx, node.input[2], normalized) if has_input(node, 2) else None
    eps = a.get("epsilon", 1e-5)
    y = sits.layer_norm(x, scale, bias=bias, axis=i64_attr(a.get("axis", -1)),
                        epsilon=f64_attr(eps))
    stats = [None, None]
    if any(k < len(node.output) and node.output[k] and ctx.g.uses(node.output[k])
           for k in (1, 2)):
        stats = _layer_norm_stats(ctx, x, ctx.g.dtype(node.input[0]), axis, eps)
    return ([y] + stats)[:len(node.output)]


def _layer_norm_stats(ctx, x, dt, axis, eps):
    """LayerNormalization's optional Mean and InvStdDev outputs, computed in
    float32 (stash_type 1) with the reduced axes kept as 1."""
    b = ctx.b
    x = cast_value(ctx, x, dt, np.dtype(np.float32))
    mean, var = moments(ctx, x, list(range(axis, len(shape_of(x)))))
    inv_std = math.rsqrt(arith.addf(var, b.splat(float(eps), b.mixed_shape(var), elem_of(var))))
    return [mean, inv_std]


def _check_rms_norm(g, node):
    r = need_float(g, node) or unused_outputs(1, 2, 3)(g, node)
    if r:
        return r
    if node.op_type == "SimplifiedLayerNormalization" and len(node.input) > 2:
        return "a bias input is not supported"
    return None


@converter("SimplifiedLayerNormalization", "RMSNormalization", check=_check_rms_norm)
def _rms_norm(ctx, node):
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    rank = len(shape_of(x))
    axis = norm_axis(a.get("axis", -1), rank)
    scale = norm_param(ctx, node.input[1], shape_of(x)[axis:])
    y = sits.rms_norm(x, scale, axis=i64_attr(a.get("axis", -1)),
                      epsilon=f64_attr(a.get("epsilon", 1e-5)))
    return [y] + [None] * (len(node.output) - 1)


CONVERTERS[("com.microsoft", "SimplifiedLayerNormalization")] = Converter(_rms_norm, _check_rms_norm)


@converter("Softmax", check=need_float)
def _softmax(ctx, node):
    axis = ctx.attrs(node).get("axis", -1)
    return [sits.softmax(ctx.get(node.input[0]), axis=i64_attr(axis))]


@converter("LogSoftmax", check=need_float)
def _log_softmax(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    axis = norm_axis(ctx.attrs(node).get("axis", -1), rank)
    shape = b.mixed_shape(x)
    m = b.keep_dims(b.reduce(x, [axis], arith.maximumf, float("-inf")), rank, [axis])
    s = arith.subf(x, b.broadcast_to(m, shape))
    z = b.reduce(math.exp(s), [axis], lambda v, acc: arith.addf(acc, v), 0.0)
    lz = b.keep_dims(math.log(z), rank, [axis])
    return [arith.subf(s, b.broadcast_to(lz, shape))]


# -- reductions ---------------------------------------------------------------

_REDUCE_INPUT_AXES_SINCE = {"ReduceSum": 13}


def reduce_axes(g, node):
    """Sorted non-negative axes of a Reduce* node, [] for 'no reduction'
    (noop_with_empty_axes), or a str reason."""
    a = attributes(node)
    rank = g.rank(node.input[0])
    if rank is None:
        return "input rank is unknown"
    since = _REDUCE_INPUT_AXES_SINCE.get(node.op_type, 18)
    axes = None
    if g.opset >= since:
        if has_input(node, 1):
            if not g.is_const(node.input[1]):
                return "input 'axes' must be known at import time"
            axes = [int(v) for v in g.const(node.input[1]).reshape(-1)]
    else:
        axes = a.get("axes")
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return []
        axes = list(range(rank))
    return sorted({norm_axis(int(x), rank) for x in axes})


def _check_reduce(g, node):
    dt = g.dtype(node.input[0])
    axes = reduce_axes(g, node)
    if isinstance(axes, str):
        return axes
    if dt is not None and _types.is_bool(dt) and node.op_type not in ("ReduceMax", "ReduceMin"):
        return f"{node.op_type} of bool tensors is not supported"
    if node.op_type in ("ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"):
        if dt is not None and not _types.is_float(dt):
            return f"{node.op_type} of integer tensors is not supported"
        s = g.shape(node.input[0])
        if any(s[x] is None for x in axes):
            return f"{node.op_type} needs static extents along the reduced axes"
    return None


@converter("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
           "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
           check=_check_reduce)
def _reduce(ctx, node):
    b, g = ctx.b, ctx.g
    x = ctx.get(node.input[0])
    dt = g.dtype(node.input[0])
    axes = reduce_axes(g, node)
    if not axes:
        return [x]
    rank = len(shape_of(x))
    op = node.op_type
    f, u = _types.is_float(dt), _types.is_unsigned(dt)
    shift = None
    if op == "ReduceSumSquare" or op == "ReduceL2":
        x = (arith.mulf if f else arith.muli)(x, x)
    elif op == "ReduceLogSumExp":
        # log(sum(exp(x - m))) + m with m the max over the axes, so exp
        # never overflows; an all -inf slice keeps m finite (0).
        m = b.reduce(x, axes, lambda v, acc: arith.maximumf(acc, v), float("-inf"))
        finite = arith.cmpf(arith.CmpFPredicate.ONE, m,
                            b.splat(float("-inf"), b.mixed_shape(m), elem_of(m)))
        shift = arith.select(finite, m, b.splat(0.0, b.mixed_shape(m), elem_of(m)))
        x = math.exp(arith.subf(x, b.broadcast_to(b.keep_dims(shift, rank, axes),
                                                  b.mixed_shape(x))))
    elif op == "ReduceL1":
        x = math.absf(x) if f else (x if u else math.absi(x))
    add = (lambda v, acc: arith.addf(acc, v)) if f else (lambda v, acc: arith.addi(acc, v))
    if op in ("ReduceMax", "ReduceMin"):
        is_max = op == "ReduceMax"
        if f:
            combine = (lambda v, acc: arith.maximumf(acc, v)) if is_max else \
                (lambda v, acc: arith.minimumf(acc, v))
            init = float("-inf") if is_max else float("inf")
        elif _types.is_bool(dt):  # any / all
            combine = (lambda v, acc: arith.ori(acc, v)) if is_max else \
                (lambda v, acc: arith.andi(acc, v))
            init = 0 if is_max else 1
        else:
            info = np.iinfo(dt)
            combine = {(True, False): lambda v, acc: arith.maxsi(acc, v),
                       (True, True): lambda v, acc: arith.maxui(acc, v),
                       (False, False): lambda v, acc: arith.minsi(acc, v),
                       (False, True): lambda v, acc: arith.minui(acc, v)}[(is_max, u)]
            init = int(info.min if is_max else info.max)
    elif op == "ReduceProd":
        combine = (lambda v, acc: arith.mulf(acc, v)) if f else (lambda v, acc: arith.muli(acc, v))
        init = 1
    else:
        combine, init = add, 0
    y = b.reduce(x, axes, combine, init)
    if op == "ReduceMean":
        count = int(np.prod([shape_of(x)[a] for a in axes]))
        y = arith.divf(y, b.splat(float(count), b.mixed_shape(y), elem_of(y)))
    elif op == "ReduceL2":
        y = math.sqrt(y)
    elif op == "ReduceLogSum":
        y = math.log(y)
    elif op == "ReduceLogSumExp":
        y = arith.addf(math.log(y), shift)
    if ctx.attrs(node).get("keepdims", 1):
        y = b.keep_dims(y, rank, axes)
    return [y]


# -- shapes -------------------------------------------------------------------

def _check_reshape_to_inferred(g, node, what):
    src = g.shape(node.input[0])
    dst = g.shape(node.output[0])
    if src is None or dst is None:
        return f"the {what} result shape could not be inferred"
    if reshape_kind(src, dst) is None and not symbolic_reshape_ok(g, node.input[0], node.output[0]):
        return (f"{what} from {_fmt(src)} to {_fmt(dst)} is neither a collapse nor an "
                f"expansion and has dynamic extents")
    return None


def symbolic_reshape_ok(g, src_name, dst_name) -> bool:
    """Whether ONNX's symbolic shapes prove that reshaping `src_name` to
    `dst_name` is a collapse or an expansion whose dynamic extents are
    products of named ones (`batch*seq` from `batch` and `seq`)."""
    src, dst = g.sym_shape(src_name), g.sym_shape(dst_name)
    return _same_symbolic(src, dst) or symbolic_groups(src, dst) is not None


def _same_symbolic(src, dst) -> bool:
    """Whether two symbolic shapes are provably equal (every extent known)."""
    return (src is not None and dst is not None and len(src) == len(dst) and
            all(a is not None and a == b for a, b in zip(src, dst)))


def symbolic_groups(src, dst):
    """The reassociation of a collapse or expansion between symbolic shapes
    `src` and `dst` (ints, symbol names and `a*b` products), as groups of
    the larger shape's dims; None when none is provable."""
    if src is None or dst is None or len(src) == len(dst):
        return None
    big, small = (src, dst) if len(src) > len(dst) else (dst, src)
    factors = [_product_of(d) for d in big]
    if any(f is None for f in factors):
        return None
    groups, i = [], 0
    for d in small:
        want = _product_of(d)
        if want is None:
            return None
        start, coefficient, symbols = i, 1, []
        while i < len(big):
            c, syms = factors[i]
            coefficient *= c
            symbols += syms
            i += 1
            if (coefficient, tuple(sorted(symbols))) == want:
                break
        else:
            return None
        groups.append(list(range(start, i)))
    # Trailing unit dims join the last group.
    while i < len(big) and factors[i] == (1, ()):
        if not groups:
            return None
        groups[-1].append(i)
        i += 1
    return groups if i == len(big) else None


def _product_of(dim):
    """A static or symbolic extent as (coefficient, sorted symbol factors),
    or None when it is unknown or not a plain product."""
    if isinstance(dim, (int, np.integer)):
        return int(dim), ()
    if not isinstance(dim, str):
        return None
    coefficient, symbols = 1, []
    depth, start, terms = 0, 0, []
    for i, ch in enumerate(dim):  # factors of the top-level product
        depth += (ch == "(") - (ch == ")")
        if ch == "*" and depth == 0:
            terms.append(dim[start:i])
            start = i + 1
    terms.append(dim[start:])
    for term in terms:
        term = term.replace(" ", "")
        while term.startswith("(") and term.endswith(")"):
            term = term[1:-1]
        if not term:
            return None
        if term.isdigit():
            coefficient *= int(term)
        else:  # a name, or a sum such as `past+seq`, taken whole
            symbols.append(term)
    return coefficient, tuple(sorted(symbols))


def _check_reshape(g, node):
    if not g.is_const(node.input[1]):
        if symbolic_reshape_ok(g, node.input[0], node.output[0]):
            return None
        from ._load import symbolic_inference_available

        hint = "" if symbolic_inference_available() else \
            "; installing onnxruntime lets its symbolic shape inference try"
        return need_const(g, node, 1, what="and ONNX cannot prove the result shape" + hint)
    return _check_reshape_to_inferred(g, node, "Reshape")


def _reshape_to_inferred(ctx, node):
    g, b = ctx.g, ctx.b
    x = ctx.get(node.input[0])
    shape = g.shape(node.output[0])
    groups = symbolic_groups(g.sym_shape(node.input[0]), g.sym_shape(node.output[0]))
    if groups is None:
        return [b.reshape(x, shape)]
    if len(shape) < len(shape_of(x)):
        return [b.collapse(x, groups, shape)]
    # An expansion: every dynamic extent comes from the symbols it names.
    sizes = [None if d is not None else ctx.symbolic_size(s)
             for d, s in zip(shape, g.sym_shape(node.output[0]))]
    return [b.expand_sized(x, groups, shape, sizes)]


# The result shape is ONNX's inferred one: the shape input is never read.
converter("Reshape", check=_check_reshape, reads=(0,))(_reshape_to_inferred)
converter("Flatten", check=lambda g, n: _check_reshape_to_inferred(g, n, "Flatten"))(
    _reshape_to_inferred)


def _check_squeeze(g, node):
    if g.opset >= 13:
        r = need_const(g, node, 1)
        if r:
            return r
    return _check_reshape_to_inferred(g, node, node.op_type)


converter("Squeeze", "Unsqueeze", check=_check_squeeze)(_reshape_to_inferred)


@converter("Transpose")
def _transpose(ctx, node):
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    perm = ctx.attrs(node).get("perm", list(range(rank))[::-1])
    return [ctx.transpose(x, node.input[0], perm)]


@converter("Concat")
def _concat(ctx, node):
    vals = [ctx.get(n) for n in node.input if n]
    shapes = [shape_of(v) for v in vals]
    rank = len(shapes[0])
    axis = norm_axis(ctx.attrs(node)["axis"], rank)
    vals = [v for v, s in zip(vals, shapes) if s[axis] != 0] or vals[:1]
    if len(vals) == 1:
        return [vals[0]]
    shapes = [shape_of(v) for v in vals]
    inferred = ctx.g.shape(node.output[0]) or (None,) * rank
    out = []
    for d in range(rank):
        col = [s[d] for s in shapes]
        if inferred[d] is not None:
            out.append(inferred[d])
        elif d == axis:
            out.append(None if None in col else sum(col))
        else:
            known = [c for c in col if c is not None]
            out.append(known[0] if known else None)
    return [tensor.concat(ctx.b.tensor_type(out, elem_of(vals[0])), axis, vals)]


def slice_params(g, node):
    """Per-axis (start, size, step) of a Slice node, or a str reason."""
    r = need_const(g, node, 1, 2, 3, 4)
    if r:
        return r
    xs = g.shape(node.input[0])
    if xs is None:
        return "input rank is unknown"
    starts = g.const(node.input[1]).reshape(-1).astype(np.int64)
    ends = g.const(node.input[2]).reshape(-1).astype(np.int64)
    rank = len(xs)
    axes = g.const(node.input[3]).reshape(-1) if has_input(node, 3) else np.arange(len(starts))
    steps = g.const(node.input[4]).reshape(-1) if has_input(node, 4) else np.ones(len(starts), np.int64)
    params = {}
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        ax = norm_axis(int(ax), rank)
        st, en, sp = int(st), int(en), int(sp)
        d = xs[ax]
        if sp <= 0:
            return "Slice with a negative step is not supported"
        if d is None:
            if st == 0 and en >= (1 << 62):
                continue
            return f"Slice along axis {ax}, whose extent is dynamic, is not supported"
        st = min(max(st + d if st < 0 else st, 0), d)
        en = min(max(en + d if en < 0 else en, 0), d)
        size = max(0, -(-(en - st) // sp))
        params[ax] = (st, size, sp)
    return params


def _check_slice(g, node):
    p = slice_params(g, node)
    return p if isinstance(p, str) else None


def extract_slice(ctx, x, params):
    """`tensor.extract_slice` with per-axis (start, size, step); other axes whole."""
    b = ctx.b
    s = shape_of(x)
    offsets, sizes, strides, dyn_sizes = [], [], [], []
    out = []
    for d in range(len(s)):
        if d in params:
            st, size, sp = params[d]
            offsets.append(st)
            sizes.append(size)
            strides.append(sp)
            out.append(size)
        else:
            offsets.append(0)
            strides.append(1)
            if s[d] is None:
                sizes.append(DYN)
                dyn_sizes.append(b.dim(x, d))
            else:
                sizes.append(s[d])
            out.append(s[d])
    if all(o == 0 for o in offsets) and all(st == 1 for st in strides) and tuple(out) == s:
        return x
    return tensor.extract_slice(b.tensor_type(out, elem_of(x)), x, [], dyn_sizes, [],
                                offsets, sizes, strides)


@converter("Slice", check=_check_slice)
def _slice(ctx, node):
    return [extract_slice(ctx, ctx.get(node.input[0]), slice_params(ctx.g, node))]


def _check_split(g, node):
    r = need_const(g, node, 1)
    if r:
        return r
    xs = g.shape(node.input[0])
    if xs is None:
        return "input rank is unknown"
    axis = norm_axis(attributes(node).get("axis", 0), len(xs))
    for o in node.output:
        s = g.shape(o) if o else ()
        if s is None or (o and s[axis] is None):
            return "Split needs static output extents along the split axis"
    return None


@converter("Split", check=_check_split)
def _split(ctx, node):
    g = ctx.g
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    axis = norm_axis(ctx.attrs(node).get("axis", 0), rank)
    outs, offset = [], 0
    for o in node.output:
        size = g.shape(o)[axis]
        outs.append(extract_slice(ctx, x, {axis: (offset, size, 1)}) if o else None)
        offset += size
    return outs


def _check_gather(g, node):
    xs, is_ = g.shape(node.input[0]), g.shape(node.input[1])
    if xs is None or is_ is None:
        return "input ranks are unknown"
    axis = norm_axis(attributes(node).get("axis", 0), len(xs))
    if xs[axis] is None and not g.is_const(node.input[1]):
        return "Gather along a dynamic axis is not supported"
    return None


@converter("Gather", check=_check_gather)
def _gather(ctx, node):
    g, b = ctx.g, ctx.b
    data = ctx.get(node.input[0])
    ds = shape_of(data)
    axis = norm_axis(ctx.attrs(node).get("axis", 0), len(ds))
    idx_name = node.input[1]
    if g.is_const(idx_name):
        idx = g.const(idx_name)
        if ds[axis] is not None:
            idx = np.where(idx < 0, idx + ds[axis], idx)
        if idx.ndim == 0:
            # One index: a slice that drops the axis.
            sl = extract_slice(ctx, data, {axis: (int(idx), 1, 1)})
            return [b.drop_unit_dims(sl, [d for d in range(len(ds)) if d != axis])]
        flat = idx.reshape(-1)
        if flat.size > 0 and np.all(np.diff(flat) == 1):
            sl = extract_slice(ctx, data, {axis: (int(flat[0]), int(flat.size), 1)})
            out = list(ds[:axis]) + list(idx.shape) + list(ds[axis + 1:])
            return [b.reshape(sl, out)]
    indices = ctx.get(idx_name)
    return [gather_generic(ctx, data, indices, axis)]


def gather_generic(ctx, data, indices, axis):
    """`linalg.generic` reading `data` at `indices` along `axis` with
    `tensor.extract` (negative indices count from the end)."""
    b = ctx.b
    ds, is_ = shape_of(data), shape_of(indices)
    q = len(is_)
    dmix, imix = b.mixed_shape(data), b.mixed_shape(indices)
    out_mixed = dmix[:axis] + imix + dmix[axis + 1:]
    n = len(out_mixed)
    elem = elem_of(data)
    init = b.empty(out_mixed, elem)
    ielem = elem_of(indices)
    extent = b.dim(data, axis) if ds[axis] is None else None
    idx_map = ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(axis + j) for j in range(q)])
    op = linalg.GenericOp([init.type], [indices], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(idx_map),
                                            ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))]),
                          ir.ArrayAttr.get([_PARALLEL()] * n))
    block = op.regions[0].blocks.append(ielem, elem)
    with ir.InsertionPoint(block):
        i = arith.index_cast(ir.IndexType.get(), block.arguments[0])
        size = extent if extent is not None else arith.constant(ir.IndexType.get(), ds[axis])
        zero = arith.constant(ir.IndexType.get(), 0)
        neg = arith.cmpi(arith.CmpIPredicate.slt, i, zero)
        i = arith.select(neg, arith.addi(i, size), i)
        coords = [linalg.IndexOp(d).result for d in range(axis)] + [i] + \
                 [linalg.IndexOp(axis + q + d).result for d in range(len(ds) - axis - 1)]
        linalg.YieldOp([tensor.extract(data, coords)])
    return op.results[0]


def _PARALLEL():
    return ir.Attribute.parse("#linalg.iterator_type<parallel>")


def _check_expand(g, node):
    # A shape computed at run time is fine when symbolic inference names
    # every result extent in terms of the graph inputs' dimensions.
    out = g.sym_shape(node.output[0])
    if not g.is_const(node.input[1]) and out is not None and all(map(g.evaluable, out)):
        return None
    r = need_const(g, node, 1, what="so the result shape is data-dependent")
    if r:
        return r
    if g.shape(node.output[0]) is None:
        return "the result shape could not be inferred"
    return None


@converter("Expand", check=_check_expand)
def _expand(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    out = ctx.g.shape(node.output[0])
    sym_out = ctx.g.sym_shape(node.output[0])
    sym_in = ctx.g.sym_shape(node.input[0]) or ()
    xs = shape_of(x)
    off = len(out) - len(xs)
    mixed = []
    for o, d in enumerate(out):
        if d is not None:
            mixed.append(d)
        elif o >= off and (ctx.g.is_const(node.input[1]) or sym_in[o - off] == sym_out[o]):
            mixed.append(b.dim(x, o - off))
        else:
            mixed.append(ctx.symbolic_size(sym_out[o]))
    return [b.broadcast_to(x, mixed)]


def _check_tile(g, node):
    return need_const(g, node, 1) or need_static(g, node.input[0], what="Tile")


@converter("Tile", check=_check_tile)
def _tile(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    xs = shape_of(x)
    reps = [int(r) for r in ctx.g.const(node.input[1]).reshape(-1)]
    if all(r == 1 for r in reps):
        return [x]
    out = [d * r for d, r in zip(xs, reps)]
    n = len(xs)
    elem = elem_of(x)
    init = b.empty(out, elem)
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))]),
                          ir.ArrayAttr.get([_PARALLEL()] * n))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        coords = []
        for d in range(n):
            i = linalg.IndexOp(d).result
            if reps[d] != 1:
                i = arith.remui(i, arith.constant(ir.IndexType.get(), xs[d]))
            coords.append(i)
        linalg.YieldOp([tensor.extract(x, coords)])
    return [op.results[0]]


def _check_pad(g, node):
    mode = attributes(node).get("mode", "constant")
    if mode != "constant":
        return f"unsupported attribute value mode='{mode}' (only constant padding)"
    r = need_const(g, node, 1, 2, 3)
    if r:
        return r
    pads = g.const(node.input[1]).reshape(-1)
    if np.any(pads < 0):
        return "negative pads are not supported"
    return None


@converter("Pad", check=_check_pad)
def _pad(ctx, node):
    g = ctx.g
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    pads = [int(p) for p in g.const(node.input[1]).reshape(-1)]
    axes = [norm_axis(int(a), rank) for a in g.const(node.input[3]).reshape(-1)] \
        if has_input(node, 3) else list(range(rank))
    begin, end = [0] * rank, [0] * rank
    for j, ax in enumerate(axes):
        begin[ax], end[ax] = pads[j], pads[j + len(axes)]
    value = 0
    if has_input(node, 2):
        value = g.const(node.input[2]).reshape(-1)[0].item()
    return [pad_tensor(ctx, x, begin, end, value)]


def _check_trilu(g, node):
    r = need_const(g, node, 1)
    if r:
        return r
    s = g.shape(node.input[0])
    if s is None or len(s) < 2:
        return "Trilu needs a tensor of rank >= 2"
    return None


@converter("Trilu", check=_check_trilu)
def _trilu(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    k = int(ctx.g.const(node.input[1]).reshape(-1)[0]) if has_input(node, 1) else 0
    upper = ctx.attrs(node).get("upper", 1)
    n = len(shape_of(x))
    elem = elem_of(x)
    zero = b.scalar(0, elem)
    init = b.empty(b.mixed_shape(x), elem)
    ident = ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))
    op = linalg.GenericOp([init.type], [x], [init], ir.ArrayAttr.get([ident, ident]),
                          ir.ArrayAttr.get([_PARALLEL()] * n))
    block = op.regions[0].blocks.append(elem, elem)
    with ir.InsertionPoint(block):
        i64 = I64()
        row = arith.index_cast(i64, linalg.IndexOp(n - 2).result)
        col = arith.index_cast(i64, linalg.IndexOp(n - 1).result)
        diff = arith.subi(col, row)
        kk = arith.constant(i64, k)
        keep = arith.cmpi(arith.CmpIPredicate.sge if upper else arith.CmpIPredicate.sle, diff, kk)
        linalg.YieldOp([arith.select(keep, block.arguments[0], zero)])
    return [op.results[0]]


@converter("Shape")
def _shape(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    s = shape_of(x)
    a = ctx.attrs(node)
    r = len(s)
    start = min(max(a.get("start", 0) + (r if a.get("start", 0) < 0 else 0), 0), r)
    end = a.get("end", r)
    end = min(max(end + r if end < 0 else end, 0), r)
    i64 = I64()
    elems = []
    for d in range(start, end):
        if s[d] is None:
            elems.append(arith.index_cast(i64, b.dim(x, d)))
        else:
            elems.append(arith.constant(i64, s[d]))
    return [tensor.from_elements(b.tensor_type([len(elems)], np.int64), elems)]


def _data_dependent(g, node):
    return "the result shape depends on run-time data"


def _check_constant_of_shape(g, node):
    out = g.sym_shape(node.output[0])
    if out is None or any(d is None for d in out):
        return _data_dependent(g, node)
    return None


@converter("ConstantOfShape", check=_check_constant_of_shape)
def _constant_of_shape(ctx, node):
    """A run-time shape (folded ones never get here): extents ONNX knows
    only symbolically are read from the shape tensor."""
    b = ctx.b
    shape_v = ctx.get(node.input[0])
    out = ctx.g.shape(node.output[0])
    value = ctx.attrs(node).get("value")
    arr = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    dims = []
    for i, d in enumerate(out):
        if d is not None:
            dims.append(d)
        else:
            e = tensor.extract(shape_v, [b.index(i)])
            dims.append(arith.index_cast(ir.IndexType.get(), e))
    return [b.splat(arr[0].item(), dims, _types.mlir_type(arr.dtype))]


# Folded at import time when their inputs are constants; otherwise the
# result shape is data-dependent.
for _op in ("NonZero", "Unique", "NonMaxSuppression", "Compress"):
    CONVERTERS[("", _op)] = Converter(lambda ctx, node: None, _data_dependent, supported=False)


def _check_range(g, node):
    for x in node.input:
        s = g.shape(x)
        if s is None or int(np.prod(s, dtype=np.int64)) != 1 or len(s) > 1:
            return "start, limit and delta must be scalars"
    dt = g.dtype(node.input[0])
    if dt is None or _types.is_bool(dt) or _types.is_byte_coded(dt):
        return "needs numeric inputs"
    return None


@converter("Range", check=_check_range)
def _range(ctx, node):
    """start + i * delta for i < max(ceil((limit - start) / delta), 0): the
    length is computed at run time (constant inputs fold at import)."""
    b = ctx.b
    start, limit, delta = (b.collapse(v, [], ()) if shape_of(v) else v
                           for v in (ctx.get(x) for x in node.input))
    elem = elem_of(start)
    is_float = isinstance(elem, ir.FloatType)
    index, f64 = ir.IndexType.get(), ir.F64Type.get()
    scalars = [tensor.extract(v, []) for v in (start, limit, delta)]

    def wide(v):
        if not is_float:
            return arith.sitofp(f64, v)
        return v if ir.FloatType(elem).width == 64 else arith.extf(f64, v)

    s, l, d = (wide(v) for v in scalars)
    count = math.ceil(arith.divf(arith.subf(l, s), d))
    count = arith.maximumf(count, arith.constant(f64, 0.0))
    n = arith.index_cast(index, arith.fptosi(ir.IntegerType.get_signless(64), count))
    init = b.empty([n], elem)
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))]),
                          ir.ArrayAttr.get([_PARALLEL()]))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        i = arith.index_cast(ir.IntegerType.get_signless(64), linalg.IndexOp(0).result)
        if is_float:
            step = arith.mulf(arith.sitofp(elem, i), scalars[2])
            v = arith.addf(scalars[0], step)
        else:
            width = ir.IntegerType(elem).width
            i = i if width == 64 else arith.trunci(elem, i)
            v = arith.addi(scalars[0], arith.muli(i, scalars[2]))
        linalg.YieldOp([v])
    return [op.results[0]]


def _check_window(g, node):
    s = g.shape(node.input[0])
    if s is None or len(s) > 1 or int(np.prod(s, dtype=np.int64)) != 1:
        return "size must be a scalar"
    to = attributes(node).get("output_datatype", 1)
    if to not in _types.SUPPORTED_ONNX_TYPES or _types.is_byte_coded(_types.numpy_dtype(to)):
        return f"unsupported attribute value output_datatype={_types.dtype_name(to)}"
    return None


# cos(k * 2*pi*n / N) coefficients of each window, as onnx.reference has them.
_WINDOWS = {"HannWindow": (0.5, -0.5, 0.0), "HammingWindow": (25 / 46, -21 / 46, 0.0),
            "BlackmanWindow": (0.42, -0.5, 0.08)}


@converter("HannWindow", "HammingWindow", "BlackmanWindow", check=_check_window)
def _window(ctx, node):
    """a0 + a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n < size, N = size
    (periodic) or size - 1 (symmetric), computed in f64 like the reference."""
    b = ctx.b
    a = attributes(node)
    size = ctx.get(node.input[0])
    size = tensor.extract(b.collapse(size, [], ()) if shape_of(size) else size, [])
    dt = _types.numpy_dtype(a.get("output_datatype", 1))
    elem = _types.mlir_type(dt)
    f64, i64, index = ir.F64Type.get(), ir.IntegerType.get_signless(64), ir.IndexType.get()
    if ir.IntegerType(size.type).width != 64:
        size = arith.extsi(i64, size)
    period = size if a.get("periodic", 1) else arith.subi(size, arith.constant(i64, 1))
    period = arith.sitofp(f64, period)
    a0, a1, a2 = _WINDOWS[node.op_type]
    init = b.empty([arith.index_cast(index, size)], elem)
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))]),
                          ir.ArrayAttr.get([_PARALLEL()]))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        n = arith.sitofp(f64, arith.index_cast(i64, linalg.IndexOp(0).result))
        phase = arith.divf(arith.mulf(n, arith.constant(f64, 2 * np.pi)), period)
        w = arith.addf(arith.constant(f64, a0),
                       arith.mulf(arith.constant(f64, a1), math.cos(phase)))
        if a2:
            w = arith.addf(w, arith.mulf(arith.constant(f64, a2),
                                         math.cos(arith.mulf(phase, arith.constant(f64, 2.0)))))
        if _types.is_float(dt):
            w = w if ir.FloatType(elem).width == 64 else arith.truncf(elem, w)
        else:  # truncated, as astype does
            w = (arith.fptoui if _types.is_unsigned(dt) else arith.fptosi)(elem, w)
        linalg.YieldOp([w])
    return [op.results[0]]


# -- quantization -------------------------------------------------------------



def _quant_params(g, node, quantized_name):
    """(scale name, zero point name or None, axis or None, block_size or
    None), or a str reason. A one-element scale is per tensor."""
    a = attributes(node)
    qs = g.shape(quantized_name)
    ss = g.shape(node.input[1])
    if qs is None or ss is None:
        return "input ranks are unknown"
    axis = block = None
    if a.get("block_size", 0):
        block = int(a["block_size"])
        axis = norm_axis(a.get("axis", 1), len(qs))
    elif len(ss) == 0 or (len(ss) == 1 and ss[0] == 1):
        pass
    elif len(ss) == 1:
        axis = norm_axis(a.get("axis", 1), len(qs))
    else:
        return f"a scale of shape {_fmt(ss)} needs block_size"
    zp = node.input[2] if has_input(node, 2) else None
    return node.input[1], zp, axis, block


_FP8 = ("float8_e4m3fn", "float8_e5m2")


_QUANT_INTS = {np.dtype(d) for d in (np.int8, np.int16, np.uint8, np.uint16)}


def _check_q(g, node):
    if node.op_type == "DequantizeLinear":
        qname, fname = node.input[0], node.output[0]
    else:
        qname, fname = node.output[0], node.input[0]
    qt, ft = g.dtype(qname), g.dtype(fname)
    if ft is None or not _types.is_float(ft) or _types.is_small_float(ft):
        return "needs a floating-point scale and dequantized type"
    if qt is None:
        return "unsupported quantized element type"
    sub_byte = _types.is_byte_coded(qt) and not _types.is_small_float(qt)
    if np.dtype(qt) not in _QUANT_INTS and not sub_byte and str(qt) not in _FP8:
        return f"quantized element type {np.dtype(qt).name} is not supported"
    if g.dtype(node.input[1]) != ft:
        return "the scale's element type must be the dequantized type"
    if node.op_type == "QuantizeLinear" and attributes(node).get("precision", 0):
        return "the precision attribute (opset 24) is not supported yet"
    p = _quant_params(g, node, qname)
    return p if isinstance(p, str) else None


def _quant_type(g, name, shape):
    """(MLIR element type, tensor type) of quantized value `name` as the
    SITS quantization ops take it: unsigned integers as `ui<N>`."""
    dt = np.dtype(g.dtype(name))
    elem = _types.mlir_type(dt)
    if _types.is_unsigned(dt):
        elem = ir.IntegerType.get_unsigned(ir.IntegerType(elem).width)
    return elem, ir.RankedTensorType.get([DYN if d is None else d for d in shape], elem)


def _as_quantized(ctx, v: ir.Value, elem: ir.Type) -> ir.Value:
    """`v` (signless, as the importer holds integers) as `elem`'s signedness."""
    if elem_of(v) == elem:
        return v
    return tensor.bitcast(ctx.b.tensor_type(shape_of(v), elem), v)


def _quant_input(ctx, name: str, elem: ir.Type) -> ir.Value:
    """Quantized data or zero point `name` as an operand of `elem`."""
    g = ctx.g
    if g.is_const(name) and not _types.is_byte_coded(g.dtype(name)):
        return ctx.const_value(g.const(name), name, elem=elem)
    return _as_quantized(ctx, ctx.get(name), elem)


def _scale_value(ctx, name, axis, block):
    g, b = ctx.g, ctx.b
    s = g.shape(name)
    v = ctx.get(name)
    if axis is None and len(s) == 1:
        v = b.collapse(v, [], ())
    return v


def _zero_point_value(ctx, name, elem, axis, shape):
    g = ctx.g
    if name is None or isinstance(elem, ir.FloatType):
        return None  # fp8 zero points are zero by definition
    if g.is_const(name) and not _types.is_byte_coded(g.dtype(name)):
        z = g.const(name)
        if axis is None:
            z = z.reshape(())
        return ctx.const_value(z, name, elem=elem)
    v = _quant_input(ctx, name, elem)
    if axis is None and len(shape_of(v)) == 1:
        v = ctx.b.collapse(v, [], ())
    return v


@converter("DequantizeLinear", check=_check_q)
def _dequantize(ctx, node):
    g = ctx.g
    scale_name, zp_name, axis, block = _quant_params(g, node, node.input[0])
    elem, qtype = _quant_type(g, node.input[0], g.shape(node.input[0]))
    q = _quant_input(ctx, node.input[0], elem)
    scale = _scale_value(ctx, scale_name, axis, block)
    zp = _zero_point_value(ctx, zp_name, elem, axis, shape_of(q))
    out = ctx.b.tensor_type(shape_of(q), elem_of(scale))
    kw = {}
    if axis is not None:
        kw["axis"] = i64_attr(axis)
    if block is not None:
        kw["block_size"] = i64_attr(block)
    return [sits.dequantize(out, q, scale, zero_point=zp, **kw)]


@converter("QuantizeLinear", check=_check_q)
def _quantize(ctx, node):
    g = ctx.g
    x = ctx.get(node.input[0])
    scale_name, zp_name, axis, block = _quant_params(g, node, node.output[0])
    elem, qtype = _quant_type(g, node.output[0], shape_of(x))
    scale = _scale_value(ctx, scale_name, axis, block)
    zp = _zero_point_value(ctx, zp_name, elem, axis, shape_of(x))
    kw = {}
    if axis is not None:
        kw["axis"] = i64_attr(axis)
    if block is not None:
        kw["block_size"] = i64_attr(block)
    q = sits.quantize(qtype, x, scale, zero_point=zp, **kw)
    # The importer holds integers signless.
    signless = _types.mlir_type(g.dtype(node.output[0]))
    return [q if signless == elem else tensor.bitcast(ctx.b.tensor_type(shape_of(q), signless), q)]


def _check_dynamic_quantize(g, node):
    if g.dtype(node.input[0]) != np.float32:
        return "the input must be float32"
    return None


@converter("DynamicQuantizeLinear", check=_check_dynamic_quantize)
def _dynamic_quantize(ctx, node):
    """uint8 quantization with a scale and zero point that make the range
    [min(x, 0), max(x, 0)] fit [0, 255], computed at run time."""
    b = ctx.b
    x = ctx.get(node.input[0])
    f32, u8, i8 = ir.F32Type.get(), ir.IntegerType.get_unsigned(8), ir.IntegerType.get_signless(8)
    axes = list(range(len(shape_of(x))))

    def scalar(value):
        return b.splat(value, [], f32)

    hi = arith.maximumf(b.reduce(x, axes, lambda v, acc: arith.maximumf(acc, v), float("-inf")),
                        scalar(0.0))
    lo = arith.minimumf(b.reduce(x, axes, lambda v, acc: arith.minimumf(acc, v), float("inf")),
                        scalar(0.0))
    width = arith.subf(hi, lo)
    # A constant input (max == min) gets scale 1/255, as the reference.
    width = arith.select(arith.cmpf(arith.CmpFPredicate.OEQ, hi, lo), scalar(1.0), width)
    y_scale = arith.divf(width, scalar(255.0))
    zp = arith.subf(scalar(0.0), arith.divf(lo, y_scale))
    zp = math.roundeven(arith.minimumf(arith.maximumf(zp, scalar(0.0)), scalar(255.0)))
    y_zp = arith.fptoui(b.tensor_type([], i8), zp)
    y = sits.quantize(b.tensor_type(shape_of(x), u8), x, y_scale,
                      zero_point=_as_quantized(ctx, y_zp, u8))
    return [tensor.bitcast(b.tensor_type(shape_of(x), i8), y), y_scale, y_zp]


# -- com.microsoft MatMulNBits -------------------------------------------------

def _check_matmul_nbits(g, node):
    a = attributes(node)
    r = need_float(g, node)
    if r:
        return r
    if a.get("bits", 4) not in (4, 8):
        return f"bits={a.get('bits')} is not supported (4 or 8)"
    for key in ("K", "N", "block_size"):
        if not a.get(key) or a[key] < 1:
            return f"attribute {key} must be a positive integer"
    if a["block_size"] < 16 or a["block_size"] & (a["block_size"] - 1):
        return "block_size must be a power of two of at least 16"
    r = need_const(g, node, 1, 2, 3, 4, 5, what="the weights and their quantization")
    if r:
        return r
    if has_input(node, 4):
        return "g_idx (act-order) is not supported"
    if g.dtype(node.input[2]) != g.dtype(node.input[0]):
        return "the scales' element type must be the input's"
    return None


def _nbits_unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """Low-bit values packed into bytes, lowest bits first, per row."""
    b = packed.reshape(packed.shape[0], -1).astype(np.uint8)
    if bits == 8:
        return b[:, :count]
    return np.stack([b & 0x0F, b >> 4], axis=-1).reshape(b.shape[0], -1)[:, :count]


@converter("MatMulNBits", check=_check_matmul_nbits, domain="com.microsoft", reads=(0,))
def _matmul_nbits(ctx, node):
    """onnxruntime's block-quantized weights: B is [N, K/bs, bs·bits/8] bytes,
    scales [N, K/bs], zero points packed like B (default 2^(bits-1)) or as
    floats. The weights become a sits.qmatmul over [N, K] int8 values with
    the zero point folded in, one scale per block along K."""
    g, b = ctx.g, ctx.b
    a = ctx.attrs(node)
    bits, bs, k, n = a.get("bits", 4), a["block_size"], a["K"], a["N"]
    blocks = -(-k // bs)
    q = _nbits_unpack(np.asarray(g.const(node.input[1])), bits, blocks * bs).astype(np.int16)
    scales = np.asarray(g.const(node.input[2])).reshape(n, blocks)
    offset = 1 << (bits - 1)
    if has_input(node, 3):
        zp = np.asarray(g.const(node.input[3]))
        if _types.is_float(zp.dtype):  # float zero points: w = (q - zp) * s = q*s - zp*s
            w = (q.reshape(n, blocks, bs).astype(np.float32)
                 - zp.reshape(n, blocks, 1).astype(np.float32)) * \
                scales.reshape(n, blocks, 1).astype(np.float32)
            w = w.reshape(n, -1)[:, :k].T.astype(scales.dtype)
            y = emit_matmul_const(ctx, node.input[0], np.ascontiguousarray(w), node.output[0])
            return [y]
        zp = _nbits_unpack(zp.reshape(n, -1), bits, blocks).astype(np.int16)
    else:
        zp = np.full((n, blocks), offset, np.int16)
    scale = b.constant(np.ascontiguousarray(scales), name=node.input[2])
    zero_point = None
    if bits == 4:  # q - zp fits int8: no zero point left in the inner loop
        centered = (q.reshape(n, blocks, bs) - zp[:, :, None]).reshape(n, -1)[:, :k]
        weight = b.constant(np.ascontiguousarray(centered.astype(np.int8)), name=node.input[1])
    else:  # 8-bit: unsigned weights and zero points as they are
        ui8 = ir.IntegerType.get_unsigned(8)
        weight = b.constant(np.ascontiguousarray(q[:, :k].astype(np.uint8)), name=node.input[1],
                            elem=ui8)
        zero_point = b.constant(np.ascontiguousarray(zp.astype(np.uint8)), name="zero_point",
                                elem=ui8)
    x = ctx.get(node.input[0])
    bias = None
    if has_input(node, 5):
        bias = b.constant(np.asarray(g.const(node.input[5])).reshape(n), name=node.input[5])
    return [sits.qmatmul(x, weight, scale, zero_point=zero_point, bias=bias, axis=i64_attr(1),
                         block_size=i64_attr(bs), transpose_weight=True)]


def emit_matmul_const(ctx, x_name, w: np.ndarray, out_name):
    """x @ w for a constant [K, N] weight."""
    b = ctx.b
    x = ctx.get(x_name)
    return sits.matmul(x, b.constant(w, name=out_name + "_weight"))


# -- integer matmuls: MatMulInteger, QLinearMatMul ------------------------------

_INT8 = (np.dtype(np.int8), np.dtype(np.uint8))


def _scalar_input(g, node, k):
    s = g.shape(node.input[k]) if has_input(node, k) else ()
    return s is not None and int(np.prod([d or 0 for d in s], dtype=np.int64)) <= 1 and \
        None not in s


def _check_int_matmul(g, node):
    a_name, b_name = (node.input[0], node.input[1]) if node.op_type == "MatMulInteger" else \
        (node.input[0], node.input[3])
    for name in (a_name, b_name):
        if g.dtype(name) not in _INT8:
            return "needs int8 or uint8 operands"
    sa, sb = g.shape(a_name), g.shape(b_name)
    if sa is None or sb is None or len(sa) != len(sb) or len(sa) not in (2, 3):
        return "needs operands of one rank, 2 or 3"
    if len(sa) == 3 and (sa[0] != sb[0] or sa[0] is None):
        return "batched operands need one static batch extent"
    params = range(2, 4) if node.op_type == "MatMulInteger" else (1, 2, 4, 5, 6, 7)
    for k in params:
        if has_input(node, k) and not _scalar_input(g, node, k):
            return f"input {k} ('{node.input[k]}') must be a scalar (per-row/column not supported)"
    return None


def _int32_operand(ctx, name, zp_name, axis=None):
    """`name` widened to i32 with its zero point subtracted: a scalar, or
    one per index of `axis` (a filter's output channels)."""
    g, b = ctx.g, ctx.b
    i32 = np.dtype(np.int32)
    v = cast_value(ctx, ctx.get(name), g.dtype(name), i32)
    if zp_name:
        zp = cast_value(ctx, ctx.get(zp_name), g.dtype(zp_name), i32)
        rank = len(shape_of(v))
        if axis is not None and int(np.prod(shape_of(zp))) > 1:
            zp = b.reshape(zp, tuple(shape_of(v)[axis] if d == axis else 1 for d in range(rank)))
        else:
            zp = b.reshape(zp, ())
        v = arith.subi(v, b.broadcast_to(zp, b.mixed_shape(v)))
    return v


def _int_matmul(ctx, a, b_):
    """a @ b_ on i32 tensors of rank 2 or 3 (linalg.matmul / batch_matmul)."""
    b = ctx.b
    sa, sb = shape_of(a), shape_of(b_)
    shape = list(sa[:-1]) + [sb[-1]]
    i32 = elem_of(a)
    init = linalg.fill(b.scalar(0, i32), outs=[b.empty(shape, i32)])
    op = linalg.matmul if len(sa) == 2 else linalg.batch_matmul
    return op(a, b_, outs=[init])


def _opt(node, k):
    return node.input[k] if has_input(node, k) else None


@converter("MatMulInteger", check=_check_int_matmul)
def _matmul_integer(ctx, node):
    a = _int32_operand(ctx, node.input[0], _opt(node, 2))
    b_ = _int32_operand(ctx, node.input[1], _opt(node, 3))
    return [_int_matmul(ctx, a, b_)]


@converter("QLinearMatMul", check=_check_int_matmul)
def _qlinear_matmul(ctx, node):
    """The i32 product of the zero-point-free operands, requantized as
    onnxruntime does: round-half-even(acc * a_scale * b_scale / y_scale)
    + y_zero_point, saturated to the output type."""
    acc = _int_matmul(ctx, _int32_operand(ctx, node.input[0], node.input[2]),
                      _int32_operand(ctx, node.input[3], node.input[5]))
    return [_requantize(ctx, node, acc)]


def _requantize(ctx, node, acc):
    """QLinear* output: round-half-even(acc * s1 * s4 / s6) + zp7 (inputs
    1, 4, 6 and 7 of QLinearMatMul and QLinearConv), saturated to the
    output type."""
    g, b = ctx.g, ctx.b
    shape = b.mixed_shape(acc)
    f32 = np.dtype(np.float32)

    def scalar_f32(k):
        v = cast_value(ctx, ctx.get(node.input[k]), g.dtype(node.input[k]), f32)
        return b.broadcast_to(b.reshape(v, ()), shape)
    scale = arith.divf(arith.mulf(scalar_f32(1), scalar_f32(4)), scalar_f32(6))
    y = math.roundeven(arith.mulf(cast_value(ctx, acc, np.dtype(np.int32), f32), scale))
    if has_input(node, 7):
        y = arith.addf(y, scalar_f32(7))
    out_dt = g.dtype(node.output[0])
    info = np.iinfo(out_dt)
    e = elem_of(y)
    y = arith.minimumf(arith.maximumf(y, b.splat(float(info.min), shape, e)),
                       b.splat(float(info.max), shape, e))
    return cast_value(ctx, y, f32, out_dt)


# -- integer convolutions: ConvInteger, QLinearConv -----------------------------

def _check_int_conv(g, node):
    x_name, w_name = (node.input[0], node.input[1]) if node.op_type == "ConvInteger" else \
        (node.input[0], node.input[3])
    for name in (x_name, w_name):
        if g.dtype(name) not in _INT8:
            return "needs int8 or uint8 operands"
    xs, ws = g.shape(x_name), g.shape(w_name)
    if xs is None or ws is None or len(xs) != 4 or None in xs or None in ws:
        return "needs static 2-D NCHW operands"
    if attributes(node).get("group", 1) != 1:
        return "grouped integer convolutions are not supported"
    pads = conv_padding(g, node, xs, ws)
    if isinstance(pads, str):
        return pads
    params = (2,) if node.op_type == "ConvInteger" else (1, 2, 4, 5, 6, 7)
    for k in params:
        if has_input(node, k) and not _scalar_input(g, node, k):
            return f"input {k} ('{node.input[k]}') must be a scalar (per-channel not supported)"
    if node.op_type == "ConvInteger" and has_input(node, 3) and not _scalar_input(g, node, 3) \
            and g.shape(node.input[3]) != (ws[0],):
        return "the filter's zero point must be a scalar or one per output channel"
    if node.op_type == "QLinearConv" and has_input(node, 8) and g.dtype(node.input[8]) != np.int32:
        return "the bias must be int32"
    return None


def _int_conv(ctx, node, x, w):
    """Conv of i32 operands (zero points already subtracted, so padding is
    0) as linalg.conv_2d_nchw_fchw."""
    b, g = ctx.b, ctx.g
    a = ctx.attrs(node)
    pads = conv_padding(g, node, shape_of(x), shape_of(w))
    x = pad_tensor(ctx, x, [0, 0] + pads[:2], [0, 0] + pads[2:], 0)
    shape = list(g.shape(node.output[0]))
    i32 = elem_of(x)
    init = linalg.fill(b.scalar(0, i32), outs=[b.empty(shape, i32)])
    return linalg.conv_2d_nchw_fchw(x, w, outs=[init], strides=list(a.get("strides", [1, 1])),
                                    dilations=list(a.get("dilations", [1, 1])))


@converter("ConvInteger", check=_check_int_conv)
def _conv_integer(ctx, node):
    x = _int32_operand(ctx, node.input[0], _opt(node, 2))
    w = _int32_operand(ctx, node.input[1], _opt(node, 3), axis=0)
    return [_int_conv(ctx, node, x, w)]


@converter("QLinearConv", check=_check_int_conv)
def _qlinear_conv(ctx, node):
    """The i32 convolution (+ the i32 bias) requantized like QLinearMatMul."""
    b = ctx.b
    acc = _int_conv(ctx, node, _int32_operand(ctx, node.input[0], node.input[2]),
                    _int32_operand(ctx, node.input[3], node.input[5]))
    shape = b.mixed_shape(acc)
    if has_input(node, 8):
        bias = b.reshape(ctx.get(node.input[8]), (1, shape[1], 1, 1))
        acc = arith.addi(acc, b.broadcast_to(bias, shape))
    return [_requantize(ctx, node, acc)]
