"""The Reduce* ONNX ops (Sum, Mean, Max, Min, Prod, SumSquare, L1, L2,
LogSum, LogSumExp) as `linalg.reduce`.

Their axes are an attribute up to an opset version and input 1 from it on
(`AXES_INPUT_SINCE`): each op has a converter for either signature,
registered since version 1 and since that version. Axes computed at run
time reduce one axis at a time (`_reduce_runtime_axes`): which extents
become 1 is then only known at run time, and the shape function sizes the
output from the axes' values.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ... import ir
from ...dialects import arith, math, scf
from . import _types
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import axis_masks, check_indices, checked_reshape, has_input, norm_axis, unmasked_extents
from ._ops_registry import converter


#: The opset version from which each Reduce* op takes its axes as input 1
#: (before it, as the `axes` attribute).
AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18,
                    "ReduceProd": 18, "ReduceSumSquare": 18, "ReduceL1": 18, "ReduceL2": 18,
                    "ReduceLogSum": 18, "ReduceLogSumExp": 18}


def reduce_axes(g, node, axes_input=None):
    """Sorted non-negative axes of a Reduce* node, [] for 'no reduction'
    (noop_with_empty_axes), None for axes computed at run time, or a str
    reason. `axes_input` says whether the
    axes are input 1 (True) or the `axes` attribute (False); None: as the
    model's opset has them (`AXES_INPUT_SINCE`)."""
    a = attributes(node)
    rank = g.rank(node.input[0])
    if rank is None:
        return "input rank is unknown"
    if axes_input is None:
        axes_input = g.opset >= AXES_INPUT_SINCE.get(node.op_type, 18)
    axes = None
    if axes_input:
        if has_input(node, 1):
            if not g.is_const(node.input[1]):
                return None  # run-time axes
            axes = [int(v) for v in g.const(node.input[1]).reshape(-1)]
    else:
        axes = a.get("axes")
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return []
        axes = list(range(rank))
    bad = [int(x) for x in axes if not -rank <= int(x) < rank]
    if bad:
        return f"axis {bad[0]} is out of range for rank {rank}"
    return sorted({norm_axis(int(x), rank) for x in axes})


def _check_reduce(g, node, axes_input=None):
    dt = g.dtype(node.input[0])
    axes = reduce_axes(g, node, axes_input)
    if isinstance(axes, str):
        return axes
    if dt is not None and _types.is_bool(dt) and node.op_type not in ("ReduceMax", "ReduceMin"):
        return f"{node.op_type} of bool tensors is not supported"
    if node.op_type in ("ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"):
        if dt is not None and not _types.is_float(dt):
            return f"{node.op_type} of integer tensors is not supported"
    if axes is None:
        s = g.shape(node.input[1])
        if g.dtype(node.input[1]) != np.int64 or s is None or len(s) != 1:
            return "input 'axes' must be a 1-D int64 tensor"
        if not attributes(node).get("keepdims", 1) and s[0] is None and \
                g.rank(node.output[0]) is None:
            return ("keepdims=0 with axes computed at run time needs their number "
                    "(the output's rank) known at import time")
    return None


def _reduce(ctx, node, axes_input=None):
    g = ctx.g
    x = ctx.get(node.input[0])
    dt = g.dtype(node.input[0])
    axes = reduce_axes(g, node, axes_input)
    keepdims = bool(ctx.attrs(node).get("keepdims", 1))
    if axes is None:
        return [_reduce_runtime_axes(ctx, node, x, dt, keepdims)]
    if not axes:  # noop_with_empty_axes: no reduction, the elementwise ops still
        return [_reduce_nothing(x, dt, node.op_type)]
    return [reduce_value(ctx.b, x, dt, node.op_type, axes, keepdims)]


def _element_count(b, x, axes, elem):
    """The number of elements over `axes` of `x`, as a scalar of `elem`."""
    shape = shape_of(x)
    if all(shape[a] is not None for a in axes):
        return b.scalar(float(np.prod([shape[a] for a in axes])), elem)
    count = b.index(1)
    for a in axes:
        count = arith.muli(count, b.dim(x, a))
    i64 = ir.IntegerType.get_signless(64)
    return arith.uitofp(elem, arith.index_cast(i64, count))


def reduce_value(b, x, dt, op, axes, keepdims):
    """`op` (a Reduce* op type) of `x` (of ONNX dtype `dt`) over the sorted
    static `axes`."""
    rank = len(shape_of(x))
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
        count = _element_count(b, x, axes, elem_of(y))
        y = arith.divf(y, b.fill(count, b.empty(b.mixed_shape(y), elem_of(y))))
    elif op == "ReduceL2":
        y = math.sqrt(y)
    elif op == "ReduceLogSum":
        y = math.log(y)
    elif op == "ReduceLogSumExp":
        y = arith.addf(math.log(y), shift)
    if keepdims:
        y = b.keep_dims(y, rank, axes)
    return y


#: A Reduce* over run-time axes, one axis at a time: (the op reduced per
#: axis, the elementwise op before, the one after). Each per-axis op
#: composes over axes (a sum of sums, a mean of equal-sized means, a
#: log-sum-exp of log-sum-exps) and is the identity over an extent of 1.
_PER_AXIS = {
    "ReduceSum": ("ReduceSum", None, None), "ReduceMax": ("ReduceMax", None, None),
    "ReduceMin": ("ReduceMin", None, None), "ReduceProd": ("ReduceProd", None, None),
    "ReduceMean": ("ReduceMean", None, None),
    "ReduceLogSumExp": ("ReduceLogSumExp", None, None),
    "ReduceSumSquare": ("ReduceSum", "square", None), "ReduceL1": ("ReduceSum", "abs", None),
    "ReduceL2": ("ReduceSum", "square", "sqrt"), "ReduceLogSum": ("ReduceSum", None, "log"),
}


def _elementwise(kind, x, dt):
    f = _types.is_float(dt)
    if kind == "square":
        return (arith.mulf if f else arith.muli)(x, x)
    if kind == "abs":
        return math.absf(x) if f else (x if _types.is_unsigned(dt) else math.absi(x))
    if kind == "sqrt":
        return math.sqrt(x)
    return math.log(x)


def _reduce_nothing(x, dt, op):
    """A Reduce* over no axis (noop_with_empty_axes): ONNX's reference and
    onnxruntime still apply its elementwise ops (ReduceL2 gives |x|)."""
    _, before, after = _PER_AXIS[op]
    x = _elementwise(before, x, dt) if before else x
    return _elementwise(after, x, dt) if after else x


def _reduce_runtime_axes(ctx, node, x, dt, keepdims):
    """A Reduce* whose axes are computed at run time: per dimension, an
    `scf.if` on whether the axes name it reduces it (to an extent of 1) or
    passes the tensor on. Axes out of range fail the call."""
    b = ctx.b
    rank = len(shape_of(x))
    axes = ctx.get(node.input[1])
    check_indices(ctx, node, axes, rank, "axes")
    masks, n = axis_masks(ctx, axes, rank)
    noop = bool(ctx.attrs(node).get("noop_with_empty_axes", 0))
    if not noop:  # no axes: every axis (with noop: none, every mask false)
        no_axes = arith.cmpi(arith.CmpIPredicate.eq, n, b.index(0))
        masks = [arith.ori(m, no_axes) for m in masks]
    per_axis, before, after = _PER_AXIS[node.op_type]
    y = _elementwise(before, x, dt) if before else x
    for d in range(rank):
        if shape_of(y)[d] == 1:
            continue  # the identity
        shape = list(shape_of(y))
        shape[d] = None
        branch = scf.IfOp(masks[d], [b.tensor_type(shape, elem_of(y))], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([b.cast_to(reduce_value(b, y, dt, per_axis, [d], True), shape)])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([b.cast_to(y, shape)])
        y = branch.results[0]
    y = _elementwise(after, y, dt) if after else y
    if keepdims:
        return y
    # The output drops the dimensions the axes name: an axis named twice
    # would leave one too many.
    out_rank = ctx.g.rank(node.output[0])
    if out_rank is None:
        out_rank = rank - shape_of(axes)[0]
    extents, kept = unmasked_extents(masks, b.mixed_shape(y), out_rank)
    once = arith.cmpi(arith.CmpIPredicate.eq, kept, b.index(out_rank))
    return checked_reshape(ctx, node, y, extents, once, "axes name an axis twice")


# Each op twice: with the axes attribute since version 1, with the axes
# input since AXES_INPUT_SINCE.
for _op, _since in AXES_INPUT_SINCE.items():
    converter(_op, check=partial(_check_reduce, axes_input=False))(
        partial(_reduce, axes_input=False))
    converter(_op, check=partial(_check_reduce, axes_input=True), since=_since)(
        partial(_reduce, axes_input=True))
