"""The Reduce* ONNX ops (Sum, Mean, Max, Min, Prod, SumSquare, L1, L2,
LogSum, LogSumExp) as `linalg.reduce`.

Their axes are an attribute up to an opset version and input 1 from it on
(`AXES_INPUT_SINCE`): each op has a converter for either signature,
registered since version 1 and since that version.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ...dialects import arith, math
from . import _types
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import has_input, norm_axis
from ._ops_registry import converter


#: The opset version from which each Reduce* op takes its axes as input 1
#: (before it, as the `axes` attribute).
AXES_INPUT_SINCE = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18,
                    "ReduceProd": 18, "ReduceSumSquare": 18, "ReduceL1": 18, "ReduceL2": 18,
                    "ReduceLogSum": 18, "ReduceLogSumExp": 18}


def reduce_axes(g, node, axes_input=None):
    """Sorted non-negative axes of a Reduce* node, [] for 'no reduction'
    (noop_with_empty_axes), or a str reason. `axes_input` says whether the
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
                return "input 'axes' must be known at import time"
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
        s = g.shape(node.input[0])
        if any(s[x] is None for x in axes):
            return f"{node.op_type} needs static extents along the reduced axes"
    return None


def _reduce(ctx, node, axes_input=None):
    b, g = ctx.b, ctx.g
    x = ctx.get(node.input[0])
    dt = g.dtype(node.input[0])
    axes = reduce_axes(g, node, axes_input)
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


# Each op twice: with the axes attribute since version 1, with the axes
# input since AXES_INPUT_SINCE.
for _op, _since in AXES_INPUT_SINCE.items():
    converter(_op, check=partial(_check_reduce, axes_input=False))(
        partial(_reduce, axes_input=False))
    converter(_op, check=partial(_check_reduce, axes_input=True), since=_since)(
        partial(_reduce, axes_input=True))
