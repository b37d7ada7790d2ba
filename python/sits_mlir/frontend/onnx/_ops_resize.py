"""ONNX Resize, GridSample and ConvTranspose (the pools of every rank, LpPool
included, are in `_ops_pooling.py`).

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
"""

from __future__ import annotations

import itertools
import math as _pymath

import numpy as np

from ... import ir
from ...dialects import arith, linalg, math, sits, tensor
from . import _types
from ._builder import DYN, elem_of, shape_of
from ._graph import attributes
from ._ops_attention import _generic
from ._ops_common import (_PARALLEL, _affine, _fmt, extract_slice, has_input, i64_attr,
                          need_float, norm_axis)
from ._ops_registry import converter


def _idx_type():
    return ir.IndexType.get()


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


def _resize_plan(g, node):
    """Everything Resize needs, or a str reason: a dict with the output
    extents and, per resized axis, (scale, out extent, roi pair)."""
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
    for k, what in ((1, "roi"), (2, "scales"), (3, "sizes")):
        if has_input(node, k) and not g.is_const(node.input[k]):
            if k == 1 and ctm != "tf_crop_and_resize":
                continue  # roi is read only by tf_crop_and_resize
            return (f"{what} ('{node.input[k]}') must be known at import time "
                    "(otherwise the result shape depends on run-time data)")
    axes = a.get("axes")
    axes = list(range(r)) if axes is None else [norm_axis(int(x), r) for x in axes]
    if len(set(axes)) != len(axes) or any(not 0 <= x < r for x in axes):
        return f"invalid axes {a.get('axes')}"
    scales, sizes = _const_or_none(g, node, 2), _const_or_none(g, node, 3)
    if (scales is None) == (sizes is None):
        return "exactly one of scales and sizes must be given"
    given = scales if scales is not None else sizes
    if given.ndim != 1 or given.size != len(axes):
        return f"{'scales' if sizes is None else 'sizes'} has {given.size} entries for {len(axes)} axes"
    roi = None
    if ctm == "tf_crop_and_resize":
        roi_c = _const_or_none(g, node, 1)
        if roi_c is None:
            return "coordinate_transformation_mode='tf_crop_and_resize' needs a roi input"
        roi_c = roi_c.astype(np.float64).reshape(-1)
        if roi_c.size != 2 * len(axes):
            return f"roi has {roi_c.size} entries for {len(axes)} axes"
        roi = {ax: (roi_c[i], roi_c[len(axes) + i]) for i, ax in enumerate(axes)}
    scale_of = {d: 1.0 for d in range(r)}
    out = list(xs)
    if scales is not None:
        for ax, s in zip(axes, scales.astype(np.float64)):
            if not s > 0:
                return f"scales must be positive, got {scales.tolist()}"
            scale_of[ax] = float(s)
            if xs[ax] is not None:
                out[ax] = int(s * xs[ax])  # floor, as the reference
            elif s != 1.0:
                out[ax] = None
    else:
        sizes = sizes.astype(np.int64)
        if np.any(sizes < 0):
            return f"sizes must not be negative, got {sizes.tolist()}"
        for ax in axes:
            if xs[ax] is None:
                return f"Resize by sizes needs static extents of the resized axes, got {_fmt(xs)}"
        if policy == "stretch":
            for ax, s in zip(axes, sizes):
                scale_of[ax] = float(s) / xs[ax]
                out[ax] = int(s)
        else:
            ratios = [float(s) / xs[ax] for ax, s in zip(axes, sizes)]
            sc = min(ratios) if policy == "not_larger" else max(ratios)
            for ax in axes:
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
            return f"Resize needs static extents of the resized axes, got {_fmt(xs)}"
        if out[ax] == 0 or xs[ax] == 0:
            return "Resize to or from an empty axis is not supported"
        resized.append((ax, scale_of[ax], out[ax], rp))
    ys = g.shape(node.output[0])
    if ys is not None and len(ys) == r and any(
            y is not None and o is not None and y != o for y, o in zip(ys, out)):
        return f"the computed result shape {_fmt(out)} disagrees with ONNX's {_fmt(ys)}"
    return {"mode": mode, "ctm": ctm, "nearest_mode": nearest_mode, "antialias": antialias,
            "A": float(a.get("cubic_coeff_a", -0.75)),
            "exclude": int(a.get("exclude_outside", 0)),
            "ev": float(a.get("extrapolation_value", 0.0)),
            "out": out, "resized": resized}


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


@converter("Resize", check=_check_resize, reads=(0,))
def _resize(ctx, node):
    plan = _resize_plan(ctx.g, node)
    x = ctx.get(node.input[0])
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
            i = arith.index_cast(_idx_type(), block.arguments[k])
            if tables[ax][2] is not None:
                zero = arith.constant(_idx_type(), 0)
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
            i = arith.index_cast(_idx_type(), block.arguments[2 * k])
            if k == 0 and extrap is not None:
                zero = arith.constant(_idx_type(), 0)
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


# =============================================================================
# ConvTranspose: a stride-1 sits.conv over the zero-inserted input with the
# flipped, in/out-swapped filter
# =============================================================================
#
# y[o] = sum_{i, t: i*s + t*d = o + pb} x[i] w[t]. Inserting s - 1 zeros
# between input elements (xz[i*s] = x[i]) and padding xz by d*(K-1) - pb at
# the start makes that sum a plain convolution with the kernel reversed:
# y[o] = sum_t xz_pad[o + t*d] w[K-1-t]. Negative paddings crop xz instead.

def _convt_geometry(g, node):
    """(strides, dilations, groups, begin pads, end pads of the conv over xz,
    output spatial extents), or a str reason."""
    xs, ws = g.shape(node.input[0]), g.shape(node.input[1])
    a = attributes(node)
    if xs is None or ws is None or len(xs) != len(ws):
        return "input ranks are unknown or differ"
    if not 3 <= len(xs) <= 5:
        return f"{len(xs) - 2}-D ConvTranspose is not supported (1-D to 3-D are)"
    k = len(xs) - 2
    if None in xs[1:] or None in ws:
        return "ConvTranspose needs static channel and spatial extents and a static filter shape"
    group = int(a.get("group", 1))
    if group < 1 or xs[1] % group or ws[0] != xs[1]:
        return f"filter {_fmt(ws)} does not fit input {_fmt(xs)} with group={group}"
    kernel = list(ws[2:])
    if list(a.get("kernel_shape", kernel)) != kernel:
        return f"kernel_shape {a['kernel_shape']} differs from the filter's {kernel}"
    strides = list(a.get("strides", [1] * k))
    dil = list(a.get("dilations", [1] * k))
    opad = list(a.get("output_padding", [0] * k))
    if len(strides) != k or len(dil) != k or len(opad) != k:
        return f"strides/dilations/output_padding must have {k} entries"
    if min(strides) < 1 or min(dil) < 1 or min(opad) < 0:
        return "strides and dilations must be positive, output_padding non-negative"
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        return f"unsupported attribute value auto_pad='{auto_pad}'"
    full = [strides[i] * (xs[2 + i] - 1) + opad[i] + (kernel[i] - 1) * dil[i] + 1
            for i in range(k)]
    out_attr = a.get("output_shape")
    if out_attr is not None:
        out_attr = list(out_attr)[-k:]
        if len(out_attr) != k:
            return f"output_shape must have {k} spatial entries"
    # As the ONNX reference: SAME_* derive the pads from output_shape
    # (default input * stride); otherwise pads (default 0) stand and an
    # explicit output_shape only sets the extent.
    if auto_pad in ("SAME_UPPER", "SAME_LOWER") and "pads" not in a:
        out = out_attr or [xs[2 + i] * strides[i] for i in range(k)]
        total = [full[i] - out[i] for i in range(k)]
        small = [t // 2 for t in total]
        big = [t - t // 2 for t in total]
        pb = small if auto_pad == "SAME_UPPER" else big
    else:
        pads = [0] * (2 * k) if auto_pad == "VALID" else list(a.get("pads", [0] * (2 * k)))
        if len(pads) != 2 * k:
            return f"pads must have {2 * k} entries"
        pb = pads[:k]
        out = out_attr or [full[i] - pads[i] - pads[k + i] for i in range(k)]
    if min(out) < 1:
        return f"the result extents {out} are empty"
    begin = [dil[i] * (kernel[i] - 1) - pb[i] for i in range(k)]
    end = [out[i] - (xs[2 + i] - 1) * strides[i] - 1 + pb[i] for i in range(k)]
    ys = g.shape(node.output[0])
    if ys is not None and len(ys) == len(xs) and any(
            y is not None and y != o for y, o in zip(ys[2:], out)):
        return f"the computed result extents {out} disagree with ONNX's {_fmt(ys)}"
    return strides, dil, group, begin, end, out


def _check_convt(g, node):
    r = need_float(g, node) or need_float(g, node, 1)
    if r:
        return r
    geo = _convt_geometry(g, node)
    return geo if isinstance(geo, str) else None


def _convt_filter(ctx, node, group):
    """[C_in, C_out/g, K...] -> [C_out, C_in/g, K...] with the spatial axes
    reversed: at import for a constant filter, else a gather generic."""
    g, b = ctx.g, ctx.b
    name = node.input[1]
    ws = g.shape(name)
    cin, cog, kernel = ws[0], ws[1], list(ws[2:])
    cig = cin // group
    k = len(kernel)
    if g.is_const(name):
        w = g.const(name).reshape([group, cig, cog] + kernel)
        w = np.swapaxes(w, 1, 2).reshape([group * cog, cig] + kernel)
        w = np.ascontiguousarray(np.flip(w, axis=tuple(range(2, 2 + k))))
        return ctx.const_value(w, name + "_transposed")
    w = ctx.get(name)
    elem = elem_of(w)
    shape = [group * cog, cig] + kernel
    init = b.empty(shape, elem)
    n = len(shape)
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))]),
                          ir.ArrayAttr.get([_PARALLEL()] * n))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        o, i = linalg.IndexOp(0).result, linalg.IndexOp(1).result
        c = lambda v: arith.constant(_idx_type(), v)  # noqa: E731
        # w[(o / cog) * cig + i, o % cog, K - 1 - t...]
        src = [arith.addi(arith.muli(arith.divui(o, c(cog)), c(cig)), i), arith.remui(o, c(cog))]
        for t in range(k):
            src.append(arith.subi(c(kernel[t] - 1), linalg.IndexOp(2 + t).result))
        linalg.YieldOp([tensor.extract(w, src)])
    return op.results[0]


@converter("ConvTranspose", check=_check_convt)
def _conv_transpose(ctx, node):
    b, g = ctx.b, ctx.g
    strides, dil, group, begin, end, out = _convt_geometry(g, node)
    x = ctx.get(node.input[0])
    wf = _convt_filter(ctx, node, group)
    bias = ctx.get(node.input[2]) if has_input(node, 2) else None
    xs = shape_of(x)
    k = len(xs) - 2
    elem = elem_of(x)
    if any(s != 1 for s in strides):
        # Zero insertion: x into a zero tensor at stride s.
        lead = b.mixed_shape(x)[:2]
        zs = [(xs[2 + i] - 1) * strides[i] + 1 for i in range(k)]
        zeros = b.splat(0.0, lead + zs, elem)
        dyn = [d for d in lead if not isinstance(d, int)]
        x = tensor.insert_slice(x, zeros, [], dyn, [], [0] * (2 + k),
                                [DYN if not isinstance(d, int) else d for d in lead] + list(xs[2:]),
                                [1, 1] + list(strides))
    crop = {2 + i: (max(0, -begin[i]),
                    shape_of(x)[2 + i] - max(0, -begin[i]) - max(0, -end[i]), 1)
            for i in range(k) if begin[i] < 0 or end[i] < 0}
    if crop:
        x = extract_slice(ctx, x, crop)
    kw = {}
    pads = [max(0, p) for p in begin] + [max(0, p) for p in end]
    if any(pads):
        kw["padding"] = ir.DenseI64ArrayAttr.get(pads)
    if any(d != 1 for d in dil):
        kw["dilations"] = ir.DenseI64ArrayAttr.get(dil)
    if group != 1:
        kw["groups"] = i64_attr(group)
    return [sits.conv(x, wf, bias=bias, **kw)]


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
