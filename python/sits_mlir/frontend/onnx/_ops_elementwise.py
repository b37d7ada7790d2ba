"""Elementwise ONNX ops: arithmetic, comparisons and logic (ONNX
broadcasting), Pow, Mod, the variadic Max/Min/Sum/Mean, unary math, Not,
the bitwise ops, IsInf, Sign, BitCast, Clip, Where, Cast/CastLike, Identity
and Dropout (inference).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ... import ir
from ...dialects import arith, math
from . import _types
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import _dt, cast_value, has_input, need_float
from ._ops_registry import converter


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
