"""Normalization ONNX ops: BatchNormalization (inference), LayerNormalization
as `sits.layer_norm`, SimplifiedLayerNormalization and RMSNormalization as
`sits.rms_norm`, InstanceNormalization, GroupNormalization,
MeanVarianceNormalization and LpNormalization.

Moments divide by element counts that are run-time products where the
extents are dynamic (`count_splat`).
"""

from __future__ import annotations

import math as math_

import numpy as np

from ... import ir
from ...dialects import arith, linalg, math, sits, tensor
from ._builder import DYN, elem_of, shape_of
from ._graph import attributes
from ._ops_common import (cast_value, f64_attr, fail_unless, has_input, i64_attr, need_float,
                          norm_axis, pad_tensor, unused_outputs)
from ._ops_registry import converter


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


def _check_channel_norm(g, node):
    r = need_float(g, node)
    if r:
        return r
    s = g.shape(node.input[0])
    if s is None or len(s) < 2:
        return "needs an input of known rank ≥ 2"
    if node.op_type == "GroupNormalization":
        groups = attributes(node).get("num_groups")
        if not groups or groups < 0 or (s[1] is not None and s[1] % groups):
            return "num_groups must divide the channel count"
        if attributes(node).get("stash_type", 1) != 1:
            return "stash_type other than 1 (float32) is not supported"
        if s[1] is None and g.opset < 21:
            return "per-group scale and bias (opset 18) need a static channel count"
        for k in (1, 2):
            ps = g.shape(node.input[k])
            per_channel = ps == (s[1],) if s[1] is not None else ps is not None and len(ps) == 1
            if ps is None or (not per_channel and not g.is_const(node.input[k])):
                return "per-group scale and bias (opset 18) must be constants"
    elif node.op_type == "InstanceNormalization" and None in s and any(
            g.rank(node.input[k]) != 1 for k in (1, 2)):
        return "scale and bias must be 1-D"
    if node.op_type == "MeanVarianceNormalization":
        axes = attributes(node).get("axes", [0, 2, 3])
        if any(not -len(s) <= a < len(s) for a in axes):
            return "axes out of range"
    return None


def count_splat(ctx, extents, shape, elem):
    """A tensor of mixed `shape` filled with the product of the mixed
    `extents` (an element count to divide by) in float type `elem`; a
    constant when the extents are static."""
    b = ctx.b
    if all(isinstance(e, int) for e in extents):
        return b.splat(float(np.prod(extents)), shape, elem)
    n = b.index(1)
    for e in extents:
        n = arith.muli(n, b.index(e) if isinstance(e, int) else e)
    i64 = ir.IntegerType.get_signless(64)
    count = arith.sitofp(elem, arith.index_cast(i64, n))
    return b.fill(count, b.empty(shape, elem))


def moments(ctx, x, axes):
    """Mean and (biased) variance of `x` over `axes`, with the reduced axes
    kept as 1."""
    b = ctx.b
    rank = len(shape_of(x))
    full = b.mixed_shape(x)
    extents = [full[k] for k in axes]

    def mean_of(v):
        m = b.reduce(v, axes, lambda e, acc: arith.addf(acc, e), 0)
        return b.keep_dims(arith.divf(m, count_splat(ctx, extents, b.mixed_shape(m), elem_of(m))),
                           rank, axes)
    mean = mean_of(x)
    centered = arith.subf(x, b.broadcast_to(mean, b.mixed_shape(x)))
    return mean, mean_of(arith.mulf(centered, centered))


def normalize_over(ctx, x, axes, eps):
    """(x - mean) / sqrt(var + eps) over `axes`, in x's type."""
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
    if None in shape:
        return [_run_time_channel_norm(ctx, node, x, xf, eps)]
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


def _run_time_channel_norm(ctx, node, x, xf, eps):
    """Instance or group normalization (parameters per channel: opset 21)
    of `x` (and `xf`, x in float32) with dynamic extents. A channel count
    that num_groups does not divide, or parameters of the wrong length, fail
    the call; the code then reads no group (its extent is 0) and no
    parameter past its end."""
    b = ctx.b
    dt = ctx.g.dtype(node.input[0])
    f32 = np.dtype(np.float32)
    rank = len(shape_of(x))
    shape = b.mixed_shape(x)
    if node.op_type == "InstanceNormalization":
        y = cast_value(ctx, normalize_over(ctx, xf, list(range(2, rank)), eps), f32, dt)
        return _channel_params(ctx, node, y, shape[1], range(1, 3))
    groups = ctx.attrs(node)["num_groups"]
    static = shape_of(x)
    cg = static[1] // groups if static[1] is not None else None  # checked when static
    per = cg
    if cg is None:
        divides = arith.cmpi(arith.CmpIPredicate.eq,
                             arith.remsi(shape[1], b.index(groups)), b.index(0))
        fail_unless(ctx, node, divides, "num_groups does not divide the channel count")
        per = arith.select(divides, arith.divsi(shape[1], b.index(groups)), b.index(0))
    sizes = [shape[0], groups, per] + shape[2:]
    regroup = [[0], [1, 2]] + [[k + 1] for k in range(2, rank)]
    xg = b.expand_sized(xf, regroup, [static[0], groups, cg] + list(static[2:]), sizes)
    y = cast_value(ctx, normalize_over(ctx, xg, list(range(2, rank + 1)), eps), f32, dt)
    y = b.collapse(y, regroup, [static[0], None if cg is None else static[1]] +
                   list(static[2:]))
    return _channel_params(ctx, node, y, b.mixed_shape(y)[1], range(1, 3))


def _channel_params(ctx, node, y, n, inputs):
    """`y` times input `inputs[0]` plus input `inputs[1]`, per index along
    axis 1 of mixed extent `n`. Parameters whose length is not n fail the
    call and are read only within their length."""
    b, g = ctx.b, ctx.g
    shape = b.mixed_shape(y)
    others = [d for d in range(len(shape)) if d != 1]
    for k, fn in zip(inputs, (arith.mulf, arith.addf)):
        if g.is_const(node.input[k]):
            v = ctx.const_value(np.ascontiguousarray(g.const(node.input[k]).reshape(-1)),
                                node.input[k])
        else:
            v = ctx.get(node.input[k])  # 1-D: see _check_channel_norm
        v = _fit_length(ctx, node, v, n, f"input {k} does not have one entry per channel")
        v = linalg.broadcast(v, outs=[b.empty(shape, elem_of(y))], dimensions=others).results[0]
        y = fn(y, v)
    return y


def _fit_length(ctx, node, v, n, what):
    """1-D `v` with exactly the mixed length `n`: as it is when both are the
    same static extent, else padded with zeros and sliced (never reading
    past v), and the call fails unless v's length is n."""
    b = ctx.b
    have = shape_of(v)[0]
    if isinstance(n, int) and have == n:
        return v
    ix = lambda e: b.index(e) if isinstance(e, int) else e  # noqa: E731
    length = ix(b.mixed_shape(v)[0])
    fail_unless(ctx, node, arith.cmpi(arith.CmpIPredicate.eq, length, ix(n)), what)
    elem = elem_of(v)
    padded = pad_tensor(ctx, v, [0], [ix(n)], 0.0)
    size = [n] if isinstance(n, int) else [DYN]
    return tensor.extract_slice(b.tensor_type([n if isinstance(n, int) else None], elem),
                                padded, [], [] if isinstance(n, int) else [n], [],
                                [0], size, [1])


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


def _check_epsilon(node):
    """sits.layer_norm and sits.rms_norm take a finite, non-negative
    epsilon."""
    eps = attributes(node).get("epsilon", 1e-5)
    if not isinstance(eps, (int, float)) or not math_.isfinite(eps) or eps < 0:
        return f"epsilon={eps} is not supported (it must be finite and non-negative)"
    return None


def _check_layer_norm(g, node):
    r = need_float(g, node) or _check_epsilon(node)
    if r:
        return r
    if attributes(node).get("stash_type", 1) != 1:
        return "stash_type other than 1 (float32) is not supported"
    xs = g.shape(node.input[0])
    if xs is None:
        return "input rank is unknown"
    axis = norm_axis(attributes(node).get("axis", -1), len(xs))
    normalized = xs[axis:]
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
    # com.microsoft's op has no ONNX schema: onnx.checker does not know its arity.
    if len(node.input) < 2 or not all(node.input[:2]) or not node.output or not node.output[0]:
        return f"{node.op_type} takes the input and the scale, and gives output 0"
    r = need_float(g, node) or unused_outputs(1, 2, 3)(g, node) or _check_epsilon(node)
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


converter("SimplifiedLayerNormalization", check=_check_rms_norm,
          domain="com.microsoft")(_rms_norm)
