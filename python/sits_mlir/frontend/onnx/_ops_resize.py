"""ONNX Resize and GridSample (the pools of every rank, LpPool included, are
in `_ops_pooling.py`; ConvTranspose in `_ops_contraction.py`).

Converters register into `CONVERTERS` (`_ops_registry.py`) with the
`converter` decorator, like those of the other `_ops_*.py` families.

Resize is separable: every resized axis maps each output position to a few
input positions with weights that depend only on that axis's extents and
attributes. With static extents those per-axis index/weight tables are
computed here once (float64, following the ONNX reference) and emitted as
constants, so the kernels only gather and multiply-add:

* nearest: one `linalg.generic` over the output whose body reads the
  per-axis index tables (operands with 1-D maps) and `tensor.extract`s X;
* linear / cubic (any antialias footprint): one `linalg.generic` per
  resized axis with a tap loop unrolled in the body (indices and weights as
  1-D operands), accumulating in f32 (f64 for f64 inputs).

Where scales/sizes/roi are read at run time, or an extent to resize is
dynamic, the same kernels compute each source coordinate and weight in
their bodies instead (`_resize_at_run_time`), the result extents come from
arith on the parameters, and invalid parameters fail the call through the
model's status.
"""

from __future__ import annotations

import itertools
import math as _pymath

import numpy as np

from ... import ir
from ...dialects import arith, linalg, math, scf, tensor
from . import _types
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_attention import _generic

#: The largest extent a resize may produce (an int64 extent beyond it is
#: no tensor that fits in memory; far larger scales overflow the shape).
_MAX_EXTENT = 1 << 40
from ._ops_common import (I64, _PARALLEL, _affine, _fmt, fail_unless, has_input, need_float,
                          norm_axis, read_if)
from ._ops_registry import converter


# =============================================================================
# Resize
# =============================================================================

_CTM = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
        "asymmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
_POLICIES = ("stretch", "not_larger", "not_smaller")


def _const_or_none(g, node, k):
    """The constant input k, None when absent or empty."""
    if not has_input(node, k):
        return None
    c = g.const(node.input[k])
    if c is None or c.size == 0:
        return None
    return c


def _given(g, node, k):
    """Whether the optional input k holds entries: an absent input, or a
    constant or declared shape of 0 elements, does not."""
    if not has_input(node, k):
        return False
    if g.is_const(node.input[k]):
        return g.const(node.input[k]).size > 0
    s = g.shape(node.input[k])
    return s is None or 0 not in s


def _resize_attrs(g, node):
    """The attributes, axes and parameter inputs of a Resize, or a str
    reason: what both the constant-table and the run-time paths read."""
    a = attributes(node)
    xs = g.shape(node.input[0])
    if xs is None:
        return "the rank of the input is unknown"
    r = len(xs)
    mode = a.get("mode", "nearest")
    if mode not in ("nearest", "linear", "cubic"):
        return f"unsupported attribute value mode='{mode}'"
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    if ctm not in _CTM:
        return f"unsupported attribute value coordinate_transformation_mode='{ctm}'"
    nearest_mode = a.get("nearest_mode", "round_prefer_floor")
    if nearest_mode not in _NEAREST:
        return f"unsupported attribute value nearest_mode='{nearest_mode}'"
    policy = a.get("keep_aspect_ratio_policy", "stretch")
    if policy not in _POLICIES:
        return f"unsupported attribute value keep_aspect_ratio_policy='{policy}'"
    antialias = int(a.get("antialias", 0))
    if antialias and mode == "nearest":
        return "antialias=1 is defined only for the linear and cubic modes"
    if int(a.get("exclude_outside", 0)) and mode == "nearest":
        return "exclude_outside=1 with mode='nearest' is not supported"
    dt = g.dtype(node.input[0])
    if mode != "nearest" and dt is not None and not _types.is_float(dt):
        return f"{mode} Resize of {np.dtype(dt).name} tensors is not supported (nearest is)"
    axes = a.get("axes")
    axes = list(range(r)) if axes is None else [norm_axis(int(x), r) for x in axes]
    if len(set(axes)) != len(axes) or any(not 0 <= x < r for x in axes):
        return f"invalid axes {a.get('axes')}"
    scales, sizes = _given(g, node, 2), _given(g, node, 3)
    if scales == sizes:
        return "exactly one of scales and sizes must be given"
    # roi is read only by tf_crop_and_resize.
    params = (1,) * (ctm == "tf_crop_and_resize") + (2 if scales else 3,)
    if ctm == "tf_crop_and_resize" and not _given(g, node, 1):
        return "coordinate_transformation_mode='tf_crop_and_resize' needs a roi input"
    return {"mode": mode, "ctm": ctm, "nearest_mode": nearest_mode, "antialias": antialias,
            "A": float(a.get("cubic_coeff_a", -0.75)),
            "exclude": int(a.get("exclude_outside", 0)),
            "ev": float(a.get("extrapolation_value", 0.0)),
            "policy": policy, "axes": axes, "params": params}


def _resize_plan(g, node):
    """Everything Resize needs, or a str reason. With constant parameters
    and the extents they resize static: a dict with the output extents and,
    per resized axis, (scale, out extent, roi pair), for import-time tables;
    otherwise the attributes with "runtime" set (`_runtime_plan`)."""
    attrs = _resize_attrs(g, node)
    if isinstance(attrs, str):
        return attrs
    if all(g.is_const(node.input[k]) for k in attrs["params"]):
        plan = _static_plan(g, node, attrs)
        if plan is not None:
            return plan
    return _runtime_plan(g, node, attrs)


def _static_plan(g, node, attrs):
    """The import-time plan of `_resize_plan`, a str reason, or None when an
    extent to resize is dynamic (the run-time path then computes it)."""
    xs = g.shape(node.input[0])
    r = len(xs)
    axes, policy = attrs["axes"], attrs["policy"]
    scales, sizes = _const_or_none(g, node, 2), _const_or_none(g, node, 3)
    given = scales if scales is not None else sizes
    if given.ndim != 1 or given.size != len(axes):
        return f"{'scales' if sizes is None else 'sizes'} has {given.size} entries for {len(axes)} axes"
    roi = None
    if attrs["ctm"] == "tf_crop_and_resize":
        roi_c = _const_or_none(g, node, 1).astype(np.float64).reshape(-1)
        if roi_c.size != 2 * len(axes):
            return f"roi has {roi_c.size} entries for {len(axes)} axes"
        roi = {ax: (roi_c[i], roi_c[len(axes) + i]) for i, ax in enumerate(axes)}
    scale_of = {d: 1.0 for d in range(r)}
    out = list(xs)
    if scales is not None:
        for ax, s in zip(axes, scales.astype(np.float64)):
            if not (s > 0 and np.isfinite(s)):
                return f"scales must be positive and finite, got {scales.tolist()}"
            scale_of[ax] = float(s)
            if xs[ax] is not None:
                if s * xs[ax] > _MAX_EXTENT:
                    return (f"scale {float(s)} of axis {ax} resizes an extent of {xs[ax]} "
                            f"past 2^40")
                out[ax] = int(s * xs[ax])  # floor, as the reference
            elif s != 1.0:
                return None
    else:
        sizes = sizes.astype(np.int64)
        if np.any(sizes < 0) or np.any(sizes > _MAX_EXTENT):
            return f"sizes must be in [0, 2^40], got {sizes.tolist()}"
        if any(xs[ax] is None for ax in axes):
            return None
        if any(xs[ax] == 0 for ax in axes):
            return "Resize to or from an empty axis is not supported"
        if policy == "stretch":
            for ax, s in zip(axes, sizes):
                scale_of[ax] = float(s) / xs[ax]
                out[ax] = int(s)
        else:
            ratios = [float(s) / xs[ax] for ax, s in zip(axes, sizes)]
            sc = min(ratios) if policy == "not_larger" else max(ratios)
            for ax in axes:
                if sc * xs[ax] > _MAX_EXTENT:
                    return f"sizes {sizes.tolist()} resize an extent of {xs[ax]} past 2^40"
                scale_of[ax] = sc
                out[ax] = int(sc * xs[ax] + 0.5)  # round half up
    resized = []
    for ax in range(r):
        rp = roi.get(ax) if roi is not None else None
        identity = (_pymath.isclose(scale_of[ax], 1.0) and out[ax] == xs[ax]
                    and (rp is None or (_pymath.isclose(rp[0], 0.0) and _pymath.isclose(rp[1], 1.0))))
        if identity:
            continue
        if xs[ax] is None or out[ax] is None:
            return None
        if out[ax] == 0 or xs[ax] == 0:
            return "Resize to or from an empty axis is not supported"
        resized.append((ax, scale_of[ax], out[ax], rp))
    ys = g.shape(node.output[0])
    if ys is not None and len(ys) == r and any(
            y is not None and o is not None and y != o for y, o in zip(ys, out)):
        return f"the computed result shape {_fmt(out)} disagrees with ONNX's {_fmt(ys)}"
    return {**attrs, "out": out, "resized": resized}


def _runtime_plan(g, node, attrs):
    """The plan of a Resize whose parameters or resized extents are known
    only at run time, or a str reason: the inputs' ranks, lengths and
    element types that import time can check."""
    n = len(attrs["axes"])
    for k in attrs["params"]:
        what = ("roi", "scales", "sizes")[k - 1]
        want = 2 * n if k == 1 else n
        s = g.shape(node.input[k])
        if s is not None and (len(s) != 1 or s[0] not in (None, want)):
            return f"{what} has the shape {_fmt(s)}, {want} entries expected"
        dt = g.dtype(node.input[k])
        if dt is not None and not (np.dtype(dt) == np.int64 if k == 3 else _types.is_float(dt)):
            return f"{what} of {np.dtype(dt).name} is not supported"
    xs = g.shape(node.input[0])
    if any(xs[ax] == 0 for ax in attrs["axes"]):
        return "Resize to or from an empty axis is not supported"
    return {**attrs, "runtime": True}


def _check_resize(g, node):
    p = _resize_plan(g, node)
    return p if isinstance(p, str) else None


# -- per-axis tables (the ONNX reference's arithmetic, in float64) -------------

def _x_original(ctm, y, scale, in_w, out_w, roi):
    """Source coordinate of each output index `y`, and the tf_crop_and_resize
    extrapolation mask (None for the other modes)."""
    length = scale * in_w
    if ctm == "align_corners":
        x = np.zeros(out_w) if length == 1 else y * (in_w - 1) / (length - 1)
    elif ctm == "asymmetric":
        x = y / scale
    elif ctm == "tf_crop_and_resize":
        if length == 1:
            x = np.full(out_w, (roi[1] - roi[0]) * (in_w - 1) / 2)
        else:
            x = y * (roi[1] - roi[0]) * (in_w - 1) / (length - 1)
        x = x + roi[0] * (in_w - 1)
        return x, (x < 0) | (x > in_w - 1)
    elif ctm == "pytorch_half_pixel":
        x = np.full(out_w, -0.5) if length == 1 else (y + 0.5) / scale - 0.5
    elif ctm == "half_pixel":
        x = (y + 0.5) / scale - 0.5
    else:  # half_pixel_symmetric
        offset = in_w / 2 * (1 - out_w / length)
        x = offset + (y + 0.5) / scale - 0.5
    return x, None


def _coeffs(plan, ratio, scale):
    """Weights of the taps around one source coordinate (`ratio` in (0, 1])."""
    mode, A = plan["mode"], plan["A"]
    if mode == "nearest":
        if ratio == 1.0:
            return np.array([0.0, 1.0])
        nm = plan["nearest_mode"]
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5,
              "floor": False, "ceil": True}[nm]
        return np.array([0.0, 1.0]) if up else np.array([1.0, 0.0])
    if mode == "linear":
        if not plan["antialias"]:
            return np.array([1 - ratio, ratio])
        s = min(scale, 1.0)
        start = int(np.floor(-1 / s) + 1)
        args = (np.arange(start, 2 - start) - ratio) * s
        c = np.clip(1 - np.abs(args), 0, 1)
        return c / c.sum()
    if not plan["antialias"]:
        r = ratio
        return np.array([
            ((A * (r + 1) - 5 * A) * (r + 1) + 8 * A) * (r + 1) - 4 * A,
            ((A + 2) * r - (A + 3)) * r * r + 1,
            ((A + 2) * (1 - r) - (A + 3)) * (1 - r) * (1 - r) + 1,
            ((A * ((1 - r) + 1) - 5 * A) * ((1 - r) + 1) + 8 * A) * ((1 - r) + 1) - 4 * A])
    s = min(scale, 1.0)
    start = int(np.floor(-2 / s) + 1)
    x = np.abs(s * (np.arange(start, 2 - start) - ratio))
    c = np.where(x <= 1, (A + 2) * x ** 3 - (A + 3) * x ** 2 + 1,
                 np.where(x < 2, A * x ** 3 - 5 * A * x ** 2 + 8 * A * x - 4 * A, 0.0))
    return c / c.sum()


def _axis_tables(plan, in_w, scale, out_w, roi):
    """(indices [out, n] clamped into the input, weights [out, n],
    extrapolated [out] bool or None) of one resized axis."""
    y = np.arange(out_w, dtype=np.float64)
    x, extrap = _x_original(plan["ctm"], y, scale, in_w, out_w, roi)
    xi = np.floor(x)
    ratios = np.where(x == xi, 1.0, x - xi)
    w = np.stack([_coeffs(plan, float(rt), scale) for rt in ratios])
    n = w.shape[1]
    # The n taps nearest to x (ties to the smaller index), as the reference
    # picks them on an edge-padded axis.
    pad = int(np.ceil(n / 2))
    xp = x + pad
    p = np.floor(xp).astype(np.int64)
    frac = xp - p
    if n % 2 == 0:
        off = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        off = np.where(frac <= 0.5, -((n - 1) // 2), -((n - 1) // 2) + 1)
    taps = (p + off)[:, None] + np.arange(n)[None, :] - pad
    if plan["exclude"]:
        w = np.where((taps < 0) | (taps >= in_w), 0.0, w)
        total = w.sum(axis=1, keepdims=True)
        w = w / np.where(total == 0, 1.0, total)
    idx = np.clip(taps, 0, in_w - 1)
    if extrap is not None and not extrap.any():
        extrap = None
    return idx, w, extrap


def _resize_reads(g, node):
    """X, and the parameters the run-time path reads."""
    plan = _resize_plan(g, node)
    return (0,) + plan["params"] if isinstance(plan, dict) and plan.get("runtime") else (0,)


@converter("Resize", check=_check_resize, reads=_resize_reads)
def _resize(ctx, node):
    plan = _resize_plan(ctx.g, node)
    x = ctx.get(node.input[0])
    if plan.get("runtime"):
        return [_resize_at_run_time(ctx, node, x, plan)]
    xs = shape_of(x)
    if not plan["resized"]:
        return [x]
    tables = {ax: _axis_tables(plan, xs[ax], s, o, rp) for ax, s, o, rp in plan["resized"]}
    if plan["mode"] == "nearest":
        return [_resize_nearest(ctx, x, plan, tables)]
    # Separable passes, the axes that shrink most first (less work after).
    order = sorted(tables, key=lambda ax: plan["out"][ax] / xs[ax])
    elem = elem_of(x)
    acc = ir.F64Type.get() if isinstance(elem, ir.F64Type) else ir.F32Type.get()
    y = x
    for ax in order:
        y = _resize_axis(ctx, y, ax, tables[ax], plan["ev"], acc)
    if elem != acc:
        y = arith.truncf(ctx.b.tensor_type(shape_of(y), elem), y)
    return [y]


def _index_table(ctx, values, name):
    return ctx.b.constant(np.ascontiguousarray(values, dtype=np.int64), name=name)


def _resize_nearest(ctx, x, plan, tables):
    """One gather: out[..., o_a, ...] = x[..., idx_a[o_a], ...]; an index of
    -1 marks a tf_crop_and_resize position outside the input."""
    b = ctx.b
    xs = shape_of(x)
    r = len(xs)
    elem = elem_of(x)
    out_mixed = [plan["out"][d] if d in tables else b.mixed_shape(x)[d] for d in range(r)]
    init = b.empty(out_mixed, elem)
    axes = sorted(tables)
    operands, maps = [], []
    for ax in axes:
        idx, w, extrap = tables[ax]
        pick = idx[np.arange(idx.shape[0]), np.argmax(w, axis=1)]
        if extrap is not None:
            pick = np.where(extrap, -1, pick)
        operands.append(_index_table(ctx, pick, f"resize_index_{ax}"))
        maps.append(_affine(r, [ir.AffineDimExpr.get(ax)]))
    maps.append(ir.AffineMapAttr.get(ir.AffineMap.get_identity(r)))
    op = linalg.GenericOp([init.type], operands, [init], ir.ArrayAttr.get(maps),
                          ir.ArrayAttr.get([_PARALLEL()] * r))
    i64 = ir.IntegerType.get_signless(64)
    block = op.regions[0].blocks.append(*([i64] * len(axes)), elem)
    with ir.InsertionPoint(block):
        coords = [linalg.IndexOp(d).result for d in range(r)]
        outside = None
        for k, ax in enumerate(axes):
            i = arith.index_cast(ir.IndexType.get(), block.arguments[k])
            if tables[ax][2] is not None:
                zero = arith.constant(ir.IndexType.get(), 0)
                neg = arith.cmpi(arith.CmpIPredicate.slt, i, zero)
                outside = neg if outside is None else arith.ori(outside, neg)
                i = arith.maxsi(i, zero)
            coords[ax] = i
        v = tensor.extract(x, coords)
        if outside is not None:
            v = arith.select(outside, b.scalar(plan["ev"], elem), v)
        linalg.YieldOp([v])
    return op.results[0]


def _resize_axis(ctx, x, ax, table, ev, acc):
    """Interpolates `x` along `ax`: out[.., o, ..] = sum_t w_t[o] * x[.., i_t[o], ..]
    in `acc`, `ev` where the axis is extrapolated."""
    b = ctx.b
    idx, w, extrap = table
    xs = shape_of(x)
    r = len(xs)
    elem = elem_of(x)
    out_mixed = b.mixed_shape(x)
    out_mixed[ax] = idx.shape[0]
    init = b.empty(out_mixed, acc)
    wdt = np.float64 if isinstance(acc, ir.F64Type) else np.float32
    # Taps whose weight is zero everywhere (e.g. cubic at integer scales
    # with exclude_outside) cost nothing: drop them.
    taps = [t for t in range(idx.shape[1]) if np.any(w[:, t] != 0)] or [0]
    operands = []
    for t in taps:
        it = idx[:, t]
        if extrap is not None and t == taps[0]:
            it = np.where(extrap, -1, it)  # -1: outside the crop, yields `ev`
        operands.append(_index_table(ctx, it, f"resize_index_{ax}_{t}"))
        operands.append(b.constant(w[:, t].astype(wdt), name=f"resize_weight_{ax}_{t}"))
    row = _affine(r, [ir.AffineDimExpr.get(ax)])
    maps = [row] * len(operands) + [ir.AffineMapAttr.get(ir.AffineMap.get_identity(r))]
    op = linalg.GenericOp([init.type], operands, [init], ir.ArrayAttr.get(maps),
                          ir.ArrayAttr.get([_PARALLEL()] * r))
    i64 = ir.IntegerType.get_signless(64)
    block = op.regions[0].blocks.append(*([i64, acc] * len(taps)), acc)
    with ir.InsertionPoint(block):
        coords = [linalg.IndexOp(d).result for d in range(r)]
        total = outside = None
        for k in range(len(taps)):
            i = arith.index_cast(ir.IndexType.get(), block.arguments[2 * k])
            if k == 0 and extrap is not None:
                zero = arith.constant(ir.IndexType.get(), 0)
                outside = arith.cmpi(arith.CmpIPredicate.slt, i, zero)
                i = arith.maxsi(i, zero)
            coords[ax] = i
            v = tensor.extract(x, coords)
            if elem != acc:
                v = arith.extf(acc, v)
            term = arith.mulf(v, block.arguments[2 * k + 1])
            total = term if total is None else arith.addf(total, term)
        if outside is not None:
            total = arith.select(outside, b.scalar(ev, acc), total)
        linalg.YieldOp([total])
    return op.results[0]


# -- run-time parameters and extents ------------------------------------------
#
# The tables' arithmetic moved into the kernels' bodies: every output
# position computes its source coordinate (float64, as the reference) from
# linalg.index and its axis's run-time scale and extents. Indices are
# clamped into the input in float before the conversion, so that no value
# of the parameters reads out of bounds.

def _f64():
    return ir.F64Type.get()


def _fc(v):
    return arith.constant(_f64(), float(v))


def _to_f64(v):
    """An index, integer or float scalar as f64."""
    if isinstance(v.type, ir.IndexType):
        v = arith.index_cast(I64(), v)
    if isinstance(v.type, ir.IntegerType):
        return arith.sitofp(_f64(), v)
    return v if isinstance(v.type, ir.F64Type) else arith.extf(_f64(), v)


def _and(a, b):
    return b if a is None else arith.andi(a, b)


def _entries(ctx, t, count):
    """The first `count` entries of the 1-D run-time tensor `t` (0 past its
    end: not read), and an i1 that it has exactly `count` (None when its
    static length says so)."""
    b = ctx.b
    length = b.mixed_shape(t)[0]
    elem = elem_of(t)
    if isinstance(length, int):  # the plan checked it
        return [tensor.extract(t, [b.index(k)]) for k in range(count)], None
    out = [read_if(arith.cmpi(arith.CmpIPredicate.ult, b.index(k), length),
                   lambda k=k: tensor.extract(t, [b.index(k)]), b.scalar(0, elem))
           for k in range(count)]
    return out, arith.cmpi(arith.CmpIPredicate.eq, length, b.index(count))


def _runtime_geometry(ctx, node, x, plan):
    """(result extents, {axis: geometry}) of a run-time Resize; the
    parameters' validity goes to the model's status (fail_unless), and
    invalid ones give empty extents (or ONNX's static ones) and scale 1."""
    b = ctx.b
    F = arith.CmpFPredicate
    axes, n = plan["axes"], len(plan["axes"])
    by_scales = plan["params"][-1] == 2
    mixed = b.mixed_shape(x)
    in_i = {ax: b.index(d) if isinstance(d, int) else d for ax, d in enumerate(mixed)}
    in_f = {ax: _to_f64(in_i[ax]) for ax in axes}
    vals, ok = _entries(ctx, ctx.get(node.input[plan["params"][-1]]), n)
    vals = [_to_f64(v) for v in vals]
    if by_scales:
        scale = dict(zip(axes, vals))
        out_f = {ax: math.floor(arith.mulf(scale[ax], in_f[ax])) for ax in axes}
        for v in vals:
            ok = _and(ok, arith.cmpf(F.OGT, v, _fc(0)))  # NaN too fails
    else:
        ratio = {ax: arith.divf(v, in_f[ax]) for ax, v in zip(axes, vals)}
        for v in vals:
            ok = _and(ok, arith.cmpf(F.OGE, v, _fc(0)))
        if plan["policy"] == "stretch":
            scale, out_f = ratio, dict(zip(axes, vals))
        else:
            pick = F.OLT if plan["policy"] == "not_larger" else F.OGT
            sc = ratio[axes[0]]
            for ax in axes[1:]:
                sc = arith.select(arith.cmpf(pick, ratio[ax], sc), ratio[ax], sc)
            scale = {ax: sc for ax in axes}
            out_f = {ax: math.floor(arith.addf(arith.mulf(sc, in_f[ax]), _fc(0.5)))
                     for ax in axes}
    for ax in axes:
        # A finite extent below 2^40 (fptosi is then defined), and a
        # non-empty result only from a non-empty input.
        ok = _and(ok, arith.cmpf(F.OLE, out_f[ax], _fc(2.0 ** 40)))
        ok = _and(ok, arith.ori(arith.cmpf(F.OEQ, out_f[ax], _fc(0)),
                                arith.cmpf(F.OGT, in_f[ax], _fc(0))))
    roi = {}
    if plan["ctm"] == "tf_crop_and_resize":
        rv, rok = _entries(ctx, ctx.get(node.input[1]), 2 * n)
        ok = _and(ok, rok) if rok is not None else ok
        roi = {ax: (_to_f64(rv[i]), _to_f64(rv[n + i])) for i, ax in enumerate(axes)}
    zero_f = _fc(0)
    raw = {ax: arith.index_cast(ir.IndexType.get(), arith.fptosi(I64(), arith.select(
        arith.cmpf(F.OLE, out_f[ax], _fc(2.0 ** 40)), arith.maxnumf(out_f[ax], zero_f), zero_f)))
        for ax in axes}
    # ONNX's static result extents are the kernel's where the input's extent
    # is static too (then never empty, so the clamped reads stay inside).
    ys = ctx.g.shape(node.output[0]) or (None,) * len(mixed)
    pinned = {ax: ys[ax] for ax in axes if isinstance(ys[ax], int) and isinstance(mixed[ax], int)}
    for ax, want in pinned.items():
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, raw[ax], b.index(want)))
    what = "scales must be positive" if by_scales else "sizes must not be negative"
    roi_note = f" (and roi {2 * n})" if roi else ""
    shape_note = f", giving ONNX's result shape {_fmt(ys)}" if pinned else ""
    fail_unless(ctx, node, ok, f"{what}, {n} entries{roi_note}{shape_note}, and a non-empty "
                f"result needs a non-empty input")
    extents = list(mixed)
    geo = {}
    for ax in axes:
        extents[ax] = pinned.get(ax, arith.select(ok, raw[ax], b.index(0)))
        e = b.index(extents[ax]) if isinstance(extents[ax], int) else extents[ax]
        s = arith.select(ok, scale[ax], _fc(1))
        geo[ax] = {"scale": s, "in": in_f[ax], "in_m1": arith.subf(in_f[ax], _fc(1)),
                   "length": arith.mulf(s, in_f[ax]), "out": _to_f64(e), "roi": roi.get(ax)}
    return extents, geo


def _source(plan, geo, o):
    """The source coordinate (f64) of output index `o` along one axis, and
    an i1 for tf_crop_and_resize positions outside the input (else None),
    in the reference's order of operations."""
    F = arith.CmpFPredicate
    ctm, s, length = plan["ctm"], geo["scale"], geo["length"]
    y = _to_f64(o)
    single = arith.cmpf(F.OEQ, length, _fc(1))
    half = arith.subf(arith.divf(arith.addf(y, _fc(0.5)), s), _fc(0.5))
    if ctm == "align_corners":
        return arith.select(single, _fc(0), arith.divf(arith.mulf(y, geo["in_m1"]),
                                                       arith.subf(length, _fc(1)))), None
    if ctm == "asymmetric":
        return arith.divf(y, s), None
    if ctm == "pytorch_half_pixel":
        return arith.select(single, _fc(-0.5), half), None
    if ctm == "half_pixel":
        return half, None
    if ctm == "half_pixel_symmetric":
        offset = arith.mulf(arith.divf(geo["in"], _fc(2)),
                            arith.subf(_fc(1), arith.divf(geo["out"], length)))
        return arith.addf(offset, half), None
    lo, hi = geo["roi"]
    span = arith.subf(hi, lo)
    x = arith.select(single, arith.divf(arith.mulf(span, geo["in_m1"]), _fc(2)),
                     arith.divf(arith.mulf(arith.mulf(y, span), geo["in_m1"]),
                                arith.subf(length, _fc(1))))
    x = arith.addf(x, arith.mulf(lo, geo["in_m1"]))
    return x, arith.ori(arith.cmpf(F.OLT, x, _fc(0)), arith.cmpf(F.OGT, x, geo["in_m1"]))


def _clamped_index(v, in_m1):
    """The integral f64 `v` clamped into [0, in_m1] (NaN to 0), as an index."""
    v = arith.minnumf(arith.maxnumf(v, _fc(0)), in_m1)
    return arith.index_cast(ir.IndexType.get(), arith.fptosi(I64(), v))


def _resize_at_run_time(ctx, node, x, plan):
    """Resize with run-time parameters or extents: one gather generic
    (nearest) or one interpolating generic per axis of `axes`."""
    b = ctx.b
    extents, geo = _runtime_geometry(ctx, node, x, plan)
    elem = elem_of(x)
    r = len(extents)
    if plan["mode"] == "nearest":
        return _generic(b, [], [], extents, elem,
                        lambda _: _nearest_at_run_time(b, plan, x, geo, r))
    acc = ir.F64Type.get() if isinstance(elem, ir.F64Type) else ir.F32Type.get()
    y = x
    for ax in plan["axes"]:
        shape = b.mixed_shape(y)
        shape[ax] = extents[ax]
        y = _generic(b, [], [], shape, acc,
                     lambda _, y=y, ax=ax: _interpolate_at_run_time(b, plan, y, ax, geo[ax], acc))
    if elem != acc:
        y = arith.truncf(b.tensor_type(shape_of(y), elem), y)
    return y


def _nearest_at_run_time(b, plan, x, geo, r):
    """The body of the nearest gather: X at each axis's rounded source
    coordinate, extrapolation_value outside a tf_crop_and_resize crop."""
    F = arith.CmpFPredicate
    coords = [linalg.IndexOp(d).result for d in range(r)]
    outside = None
    for ax, gx in geo.items():
        src, out = _source(plan, gx, coords[ax])
        base = math.floor(src)
        frac = arith.subf(src, base)
        up = {"round_prefer_floor": (F.OGT, 0.5), "round_prefer_ceil": (F.OGE, 0.5),
              "ceil": (F.OGT, 0.0)}.get(plan["nearest_mode"])
        if up is not None:
            base = arith.addf(base, arith.select(arith.cmpf(up[0], frac, _fc(up[1])),
                                                 _fc(1), _fc(0)))
        coords[ax] = _clamped_index(base, gx["in_m1"])
        if out is not None:
            outside = out if outside is None else arith.ori(outside, out)
    v = tensor.extract(x, coords)
    if outside is not None:
        v = arith.select(outside, b.scalar(plan["ev"], elem_of(x)), v)
    return v


def _kernel(plan, a):
    """The interpolation weight at distance `a` (>= 0): triangle or Keys."""
    F = arith.CmpFPredicate
    if plan["mode"] == "linear":
        return arith.maxnumf(arith.subf(_fc(1), a), _fc(0))
    A = plan["A"]
    near = arith.addf(arith.mulf(arith.mulf(arith.subf(arith.mulf(_fc(A + 2), a), _fc(A + 3)),
                                            a), a), _fc(1))
    far = arith.subf(arith.mulf(arith.addf(arith.mulf(arith.subf(arith.mulf(_fc(A), a),
                                                                 _fc(5 * A)), a), _fc(8 * A)),
                                a), _fc(4 * A))
    return arith.select(arith.cmpf(F.OLE, a, _fc(1)), near,
                        arith.select(arith.cmpf(F.OLT, a, _fc(2)), far, _fc(0)))


def _interpolate_at_run_time(b, plan, x, ax, gx, acc):
    """The body of one linear/cubic pass along `ax`: the taps `_axis_tables`
    picks, weighted as `_coeffs` does (normalized with antialias or
    exclude_outside), accumulated in `acc`."""
    F = arith.CmpFPredicate
    r = len(shape_of(x))
    coords = [linalg.IndexOp(d).result for d in range(r)]
    support = 1.0 if plan["mode"] == "linear" else 2.0
    if plan["antialias"]:
        # A footprint widened by 1/scale when shrinking: a run-time tap count.
        s = arith.minimumf(gx["scale"], _fc(1))
        start = arith.addf(math.floor(arith.divf(_fc(-support), s)), _fc(1))
        taps = arith.subf(_fc(2), arith.mulf(_fc(2), start))
    else:
        s, start, taps = _fc(1), _fc(1 - support), _fc(2 * support)
    normalize = plan["antialias"] or plan["exclude"]
    src, outside = _source(plan, gx, coords[ax])
    whole = math.floor(src)
    ratio = arith.select(arith.cmpf(F.OEQ, src, whole), _fc(1), arith.subf(src, whole))
    # The taps nearest to src (ties to the smaller index), as the tables.
    pad = arith.divf(taps, _fc(2))
    xp = arith.addf(src, pad)
    p = math.floor(xp)
    first = arith.select(arith.cmpf(F.OEQ, arith.subf(xp, p), _fc(0)),
                         arith.subf(_fc(0), pad), arith.subf(_fc(1), pad))
    first = arith.subf(arith.addf(p, first), pad)

    def tap(k, num, den):
        c = _kernel(plan, math.absf(arith.mulf(arith.subf(arith.addf(start, k), ratio), s)))
        t = arith.addf(first, k)
        if plan["exclude"]:
            inside = arith.andi(arith.cmpf(F.OGE, t, _fc(0)), arith.cmpf(F.OLE, t, gx["in_m1"]))
            c = arith.select(inside, c, _fc(0))
        at = list(coords)
        at[ax] = _clamped_index(t, gx["in_m1"])
        v = tensor.extract(x, at)
        if v.type != acc:
            v = arith.extf(acc, v)
        w = c if isinstance(acc, ir.F64Type) else arith.truncf(acc, c)
        return arith.addf(num, arith.mulf(w, v)), arith.addf(den, c)

    num, den = b.scalar(0, acc), _fc(0)
    if plan["antialias"]:
        count = arith.index_cast(ir.IndexType.get(), arith.fptosi(I64(), taps))
        loop = scf.ForOp(arith.constant(ir.IndexType.get(), 0), count, arith.constant(ir.IndexType.get(), 1),
                         [num, den])
        with ir.InsertionPoint(loop.body):
            scf.YieldOp(list(tap(_to_f64(loop.induction_variable), *loop.inner_iter_args)))
        num, den = loop.results
    else:
        for k in range(int(2 * support)):
            num, den = tap(_fc(k), num, den)
    if normalize:
        den = arith.select(arith.cmpf(F.OEQ, den, _fc(0)), _fc(1), den)
        num = arith.divf(num, den if isinstance(acc, ir.F64Type) else arith.truncf(acc, den))
    if outside is not None:
        num = arith.select(outside, b.scalar(plan["ev"], acc), num)
    return num


# -- GridSample (opsets 16, 20, 22) ----------------------------------------------

_GRID_MODES = {"bilinear": "linear", "linear": "linear", "nearest": "nearest",
               "bicubic": "cubic", "cubic": "cubic"}


def _check_grid_sample(g, node):
    r = need_float(g, node)
    if r:
        return r
    a = attributes(node)
    x, grid = g.shape(node.input[0]), g.shape(node.input[1])
    if x is None or grid is None or len(x) < 3 or len(grid) != len(x):
        return "needs X [N, C, D1..Dr] and a grid [N, H1..Hr, r] of the same rank"
    if None in x[2:] or grid[-1] != len(x) - 2:
        return "needs static spatial extents and a grid of r coordinates"
    mode = a.get("mode", "linear")
    if mode not in _GRID_MODES:
        return f"unsupported attribute value mode='{mode}'"
    if a.get("padding_mode", "zeros") not in ("zeros", "border", "reflection"):
        return f"unsupported attribute value padding_mode='{a.get('padding_mode')}'"
    if g.dtype(node.input[1]) != g.dtype(node.input[0]):
        return "the grid must have X's element type"
    return None


@converter("GridSample", check=_check_grid_sample)
def _grid_sample(ctx, node):
    """Y[n, c, o...] samples X[n, c] at grid[n, o...] (x, y, z order, in
    [-1, 1]) as onnx.reference does: denormalize, round for nearest, move
    points outside the image by the padding mode, then interpolate
    separably over the 1, 2 or 4 neighbours per dim (linear: 1-t, t; cubic:
    Keys with A = -0.75), each neighbour padded again (zeros / clamped /
    reflected). One generic over Y computes every sample in f32 (f64 for
    f64 inputs)."""
    b = ctx.b
    a = attributes(node)
    x, grid = ctx.get(node.input[0]), ctx.get(node.input[1])
    mode = _GRID_MODES[a.get("mode", "linear")]
    padding = a.get("padding_mode", "zeros")
    align = bool(a.get("align_corners", 0))
    xs = shape_of(x)
    dims = [int(d) for d in xs[2:]]
    r = len(dims)
    elem = elem_of(x)
    ct = ir.F64Type.get() if ir.FloatType(elem).width == 64 else ir.F32Type.get()
    index = ir.IndexType.get()
    i32 = ir.IntegerType.get_signless(32)
    gm = b.mixed_shape(grid)
    out_shape = [b.mixed_shape(x)[0], b.mixed_shape(x)[1]] + gm[1:-1]

    def f(v):
        return arith.constant(ct, float(v))

    def ext(v):
        return v if v.type == ct else (arith.extf(ct, v) if ir.FloatType(v.type).width <
                                       ir.FloatType(ct).width else arith.truncf(ct, v))

    def reflect(v, lo, hi):
        # Folded back by the nearer border until inside [lo, hi].
        span = f(hi - lo)
        below = arith.cmpf(arith.CmpFPredicate.OLT, v, f(lo))
        above = arith.cmpf(arith.CmpFPredicate.OGT, v, f(hi))
        dx = arith.select(below, arith.subf(f(lo), v), arith.subf(v, f(hi)))
        turns = math.floor(arith.divf(dx, span))
        rem = arith.subf(dx, arith.mulf(turns, span))
        even = arith.cmpf(arith.CmpFPredicate.OEQ,
                          arith.subf(turns, arith.mulf(f(2), math.floor(arith.divf(turns, f(2))))),
                          f(0))
        from_lo, from_hi = arith.addf(f(lo), rem), arith.subf(f(hi), rem)
        low_side = arith.select(even, from_lo, from_hi)
        high_side = arith.select(even, from_hi, from_lo)
        return arith.select(below, low_side, arith.select(above, high_side, v))

    def clamp(v, lo, hi):
        return arith.minimumf(arith.maximumf(v, f(lo)), f(hi))

    def body(_args):
        at = [linalg.IndexOp(k).result for k in range(2 + r)]
        taps = []  # per spatial dim: [(index as float, weight or None)]
        for i, d in enumerate(dims):
            lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
            k = arith.constant(index, r - 1 - i)  # the grid holds x (last dim) first
            gv = ext(tensor.extract(grid, [at[0]] + at[2:] + [k]))
            v = arith.mulf(arith.divf(arith.addf(gv, f(1)), f(2)), f(d - 1)) if align else \
                arith.divf(arith.subf(arith.mulf(arith.addf(gv, f(1)), f(d)), f(1)), f(2))
            if mode == "nearest":
                v = math.roundeven(v)
            if padding == "border":  # only points beyond [lo, hi] move
                outside = arith.ori(arith.cmpf(arith.CmpFPredicate.OLT, v, f(lo)),
                                    arith.cmpf(arith.CmpFPredicate.OGT, v, f(hi)))
                v = arith.select(outside, clamp(v, 0.0, d - 1.0), v)
            elif padding == "reflection":
                v = reflect(v, lo, hi)
            if mode == "nearest":
                taps.append([(v, None)])
                continue
            base = math.floor(v)
            t = arith.subf(v, base)
            if mode == "linear":
                taps.append([(base, arith.subf(f(1), t)), (arith.addf(base, f(1)), t)])
                continue
            A = -0.75
            def keys(s):  # Keys' cubic kernel at distance s (|s| <= 2)
                s = math.absf(s)
                near = arith.addf(arith.mulf(arith.mulf(arith.subf(arith.mulf(f(A + 2), s),
                                                                   f(A + 3)), s), s), f(1))
                far = arith.subf(arith.mulf(arith.addf(arith.mulf(arith.subf(
                    arith.mulf(f(A), s), f(5 * A)), s), f(8 * A)), s), f(4 * A))
                return arith.select(arith.cmpf(arith.CmpFPredicate.OLE, s, f(1)), near, far)
            taps.append([(arith.addf(base, f(o)), keys(arith.subf(t, f(o))))
                         for o in (-1, 0, 1, 2)])

        def pixel(coords):
            valid = None
            idx = []
            for (p, _), d, i in zip(coords, dims, range(r)):
                lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
                if padding == "reflection":
                    p = reflect(p, lo, hi)
                if padding == "zeros":
                    inside = arith.andi(arith.cmpf(arith.CmpFPredicate.OGE, p, f(0)),
                                        arith.cmpf(arith.CmpFPredicate.OLE, p, f(d - 1)))
                    valid = inside if valid is None else arith.andi(valid, inside)
                # Truncated to an index, always in range (what zeros padding
                # reads out of range is discarded).
                p = clamp(p, 0.0, d - 1.0)
                idx.append(arith.index_cast(index, arith.fptosi(i32, p)))
            v = ext(tensor.extract(x, at[:2] + idx))
            return v if valid is None else arith.select(valid, v, f(0))

        total = None
        for combo in itertools.product(*taps):
            term = pixel(combo)
            for _, w in combo:
                if w is not None:
                    term = arith.mulf(term, w)
            total = term if total is None else arith.addf(total, term)
        return total if ct == elem else arith.truncf(elem, total)

    return [_generic(b, [], [], out_shape, elem, body)]
