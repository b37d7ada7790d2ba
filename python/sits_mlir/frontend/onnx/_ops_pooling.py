"""Pooling: MaxPool and AveragePool (1-D to 3-D; integer MaxPool of any
rank), LpPool and GlobalLpPool, GlobalAveragePool and GlobalMaxPool.

MaxPool and AveragePool have one converter, `_pool`: a 2-D float NCHW pool is
a `tensor.pad` and `linalg.pooling_nchw_{max,sum}` (`_pool_2d`); other ranks
and integer MaxPools reduce over the window with `_window_reduce` (1-D float
through the named ops with a unit H dimension, 3-D and integers a
`linalg.generic` with reduction loops). AveragePool divides by the taps of
each window inside the input (ONNX's count_include_pad semantics). The
global pools are a `linalg.reduce` over the spatial dimensions.

Static spatial extents fix the geometry (pads, output extents, AveragePool
divisors) at import time. Dynamic ones get it at run time as ONNX shape
inference defines it (`_run_time_geometry`): the same windows, over a
`tensor.pad` with dynamic amounts, and divisors from a sum pool of ones.
"""

from __future__ import annotations

import numpy as np

from ... import ir
from ...dialects import arith, linalg, math
from . import _types
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import (_PARALLEL, _affine, conv_padding, fail_unless, need_float,
                          pad_tensor, unused_outputs)
from ._ops_normalization import count_splat
from ._ops_registry import converter


def _reduction():
    return ir.Attribute.parse("#linalg.iterator_type<reduction>")


def _check_pool_attrs(g, node, geometry):
    """Why a MaxPool/AveragePool cannot be imported beyond its element type:
    storage_order, a used Indices output, or what `geometry` rejects."""
    a = attributes(node)
    if a.get("storage_order", 0) != 0:
        return "unsupported attribute value storage_order=1"
    r = unused_outputs(1)(g, node)
    if r:
        return r
    geo = geometry(g, node)
    return geo if isinstance(geo, str) else None


def _divide_by_counts(ctx, node, y, counts):
    """The AveragePool `y` (window sums) divided by each position's count
    of taps: a splat when all are equal, else a constant broadcast."""
    b, g = ctx.b, ctx.g
    elem = elem_of(y)
    if np.all(counts == counts.flat[0]):
        div = b.splat(float(counts.flat[0]), b.mixed_shape(y), elem)
    else:
        c = ctx.const_value(counts.astype(g.dtype(node.input[0])), "pool_counts")
        div = b.broadcast_to(c, b.mixed_shape(y))
    return arith.divf(y, div)


# =============================================================================
# Dynamic spatial extents: the geometry at run time
# =============================================================================

def _static_pool(g, node):
    """Whether the input's and the output's spatial extents are static (the
    geometry is then fixed at import time)."""
    xs, ys = g.shape(node.input[0]), g.shape(node.output[0])
    return (xs is not None and ys is not None and len(ys) == len(xs)
            and None not in xs[2:] and None not in ys[2:])


def _pool_attrs(g, node):
    """(kernel, strides, dilations, pads, auto_pad, ceil_mode) of an N-D pool
    from its attributes alone, pads None for SAME_* (the extents decide
    them); or a str reason."""
    xs = g.shape(node.input[0])
    if xs is None or not 3 <= len(xs) <= 5:
        return "only 1-D to 3-D pooling ([N, C, D1, ...] inputs) is supported"
    k = len(xs) - 2
    a = attributes(node)
    kernel = list(a.get("kernel_shape", []))
    strides = list(a.get("strides", [1] * k))
    dil = list(a.get("dilations", [1] * k))
    if len(kernel) != k or len(strides) != k or len(dil) != k:
        return f"kernel_shape/strides/dilations must have {k} entries"
    if min(kernel + strides + dil) < 1:
        return "kernel_shape, strides and dilations must be positive"
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        pads = list(a.get("pads", [0] * (2 * k)))
        if len(pads) != 2 * k or min(pads) < 0:
            return f"invalid pads {pads}"
    elif auto_pad == "VALID":
        pads = [0] * (2 * k)
    elif auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pads = None
    else:
        return f"unsupported attribute value auto_pad='{auto_pad}'"
    return kernel, strides, dil, pads, auto_pad, int(a.get("ceil_mode", 0))


def _run_time_geometry(ctx, node, x):
    """(kernel, strides, dilations, begin, end, explicit_end, out) of a pool
    with dynamic spatial extents, per spatial axis; begin, end and out are
    `index` values (begin and explicit_end ints for explicit pads), as ONNX shape
    inference has them: SAME_* pads cover ceil(d / stride) windows; out is
    (d + pads - window) / stride + 1, rounded down, or up with ceil_mode
    less a last window that would start in the end padding; `end` adds the
    padding that last window reads past the explicit pads. A padded input
    smaller than the window fails the call, and then no window is read."""
    b = ctx.b
    kernel, strides, dil, pads, auto_pad, ceil = _pool_attrs(ctx.g, node)
    k = len(kernel)
    ix = lambda v: b.index(v) if isinstance(v, int) else v  # noqa: E731
    ge = lambda u, v: arith.cmpi(arith.CmpIPredicate.sge, ix(u), ix(v))  # noqa: E731
    ok = None
    begin, end, explicit_end, outs = [], [], [], []
    for i, d in enumerate(b.mixed_shape(x)[2:]):
        d, s, span = ix(d), b.index(strides[i]), dil[i] * (kernel[i] - 1) + 1
        if pads is None:
            total = arith.maxsi(arith.subi(arith.addi(arith.muli(
                arith.subi(arith.ceildivsi(d, s), b.index(1)), s), b.index(span)), d),
                b.index(0))
            small = arith.divsi(total, b.index(2))
            big = arith.subi(total, small)
            lo, hi = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
        else:
            lo, hi = pads[i], pads[k + i]
        start_end = arith.addi(d, ix(lo))  # where the end padding starts
        room = arith.subi(arith.addi(start_end, ix(hi)), b.index(span))
        fits = ge(room, 0)
        ok = fits if ok is None else arith.andi(ok, fits)
        n = (arith.ceildivsi if ceil else arith.floordivsi)(room, s)
        if ceil:  # n + 1 windows unless the last would start in the end padding
            n = arith.select(ge(arith.muli(n, s), start_end), n, arith.addi(n, b.index(1)))
        else:
            n = arith.addi(n, b.index(1))
        n = arith.select(fits, n, b.index(0))
        need = arith.addi(arith.muli(arith.subi(n, b.index(1)), s), b.index(span))
        extra = arith.maxsi(arith.subi(need, arith.addi(start_end, ix(hi))), b.index(0))
        begin.append(lo)
        end.append(arith.addi(ix(hi), extra))
        explicit_end.append(hi)
        outs.append(n)
    fail_unless(ctx, node, ok, "the padded input is smaller than the pooling window")
    return kernel, strides, dil, begin, end, explicit_end, outs


def _run_time_pool(ctx, node, x, kind):
    """Max or sum pool (`kind`) of `x` with dynamic spatial extents; an
    AveragePool divides the sums by each window's taps."""
    g = ctx.g
    geo = _run_time_geometry(ctx, node, x)
    kernel, strides, dil, begin, end, explicit_end, out = geo
    y = _window_reduce(ctx, x, kind, kernel, strides, dil, begin, end, out,
                       unsigned=_types.is_unsigned(g.dtype(node.input[0])))
    if node.op_type != "AveragePool":
        return y
    counts = _run_time_counts(ctx, x, geo, attributes(node).get("count_include_pad", 0))
    lead = ctx.b.mixed_shape(x)[:2]
    k = len(out)
    counts = ctx.b.drop_unit_dims(counts, list(range(2, 2 + k)))
    counts = linalg.broadcast(counts, outs=[ctx.b.empty(lead + out, elem_of(y))],
                              dimensions=[0, 1]).results[0]
    return arith.divf(y, counts)


def _run_time_counts(ctx, x, geo, include_pad):
    """The taps of each AveragePool window that count, [1, 1, out...]: a sum
    pool of ones over the input, padded with ones by the explicit pads with
    count_include_pad (the extra ceil_mode padding never counts)."""
    kernel, strides, dil, begin, end, explicit_end, out = geo
    k = len(out)
    ones = ctx.b.splat(1.0, [1, 1] + ctx.b.mixed_shape(x)[2:], elem_of(x))
    if include_pad:
        ones = pad_tensor(ctx, ones, [0, 0] + begin, [0, 0] + explicit_end, 1.0)
        begin = [0] * k
        end = [arith.subi(e, ctx.b.index(h) if isinstance(h, int) else h)
               for e, h in zip(end, explicit_end)]
    return _window_reduce(ctx, ones, "sum", kernel, strides, dil, begin, end, out)


# =============================================================================
# 2-D float NCHW MaxPool and AveragePool
# =============================================================================

def _pool_geometry_2d(g, node):
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


def _check_pool_2d(g, node):
    return need_float(g, node) or _check_pool_attrs(g, node, _pool_geometry_2d)


def _pool_2d(ctx, node):
    b, g = ctx.b, ctx.g
    x = ctx.get(node.input[0])
    elem = elem_of(x)
    kernel, strides, dil, begin, end = _pool_geometry_2d(g, node)
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
    counts = _avg_counts_2d(g, node, kernel, strides, dil, begin, end)
    return [_divide_by_counts(ctx, node, y, counts)]


def _avg_counts_2d(g, node, kernel, strides, dil, begin, end):
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


# =============================================================================
# MaxPool and AveragePool of every rank, LpPool
# =============================================================================

def _pool_geometry(g, node):
    """(kernel, strides, dilations, pads_begin, pads_end, explicit_pads) of
    an N-D pool, pads_end including the extra ceil_mode padding; or a str
    reason."""
    xs, ys = g.shape(node.input[0]), g.shape(node.output[0])
    a = attributes(node)
    if xs is None or not 3 <= len(xs) <= 5:
        return "only 1-D to 3-D pooling ([N, C, D1, ...] inputs) is supported"
    k = len(xs) - 2
    if None in xs[2:] or ys is None or len(ys) != len(xs) or None in ys[2:]:
        return "pooling needs static spatial extents"
    kernel = list(a.get("kernel_shape", []))
    strides = list(a.get("strides", [1] * k))
    dil = list(a.get("dilations", [1] * k))
    if len(kernel) != k or len(strides) != k or len(dil) != k:
        return f"kernel_shape/strides/dilations must have {k} entries"
    pads = conv_padding(g, node, xs, [None, None] + kernel)
    if isinstance(pads, str):
        return pads
    if len(pads) != 2 * k or min(pads) < 0:
        return f"invalid pads {pads}"
    begin, end = list(pads[:k]), list(pads[k:])
    for i in range(k):
        needed = (ys[2 + i] - 1) * strides[i] + dil[i] * (kernel[i] - 1) + 1
        have = xs[2 + i] + begin[i] + end[i]
        if needed > have:
            end[i] += needed - have
    return kernel, strides, dil, begin, end, list(pads)


def _check_pool_nd(g, node):
    dt = g.dtype(node.input[0])
    op = node.op_type
    if dt is not None and not _types.is_float(dt) and not (
            op == "MaxPool" and np.dtype(dt).kind in "iu"):
        return f"{op} on {np.dtype(dt).name} tensors is not supported"
    return _check_pool_attrs(g, node, _geometry_check)


def _geometry_check(g, node):
    """The static geometry, or with dynamic extents the attributes alone."""
    return _pool_geometry(g, node) if _static_pool(g, node) else _pool_attrs(g, node)


def _check_pool(g, node):
    xs = g.shape(node.input[0])
    if not _static_pool(g, node):
        return _check_pool_nd(g, node)
    if xs is not None and len(xs) == 4 and _types.is_float(g.dtype(node.input[0])):
        return _check_pool_2d(g, node)
    return _check_pool_nd(g, node)


@converter("MaxPool", "AveragePool", check=_check_pool, reads=(0,))
def _pool(ctx, node):
    g = ctx.g
    if not _static_pool(g, node):
        return [_run_time_pool(ctx, node, ctx.get(node.input[0]),
                               "max" if node.op_type == "MaxPool" else "sum")]
    if len(g.shape(node.input[0])) == 4 and _types.is_float(g.dtype(node.input[0])):
        return _pool_2d(ctx, node)
    x = ctx.get(node.input[0])
    kernel, strides, dil, begin, end, explicit = _pool_geometry(g, node)
    ys = g.shape(node.output[0])
    if node.op_type == "MaxPool":
        return [_window_reduce(ctx, x, "max", kernel, strides, dil, begin, end, ys[2:],
                               unsigned=_types.is_unsigned(g.dtype(node.input[0])))]
    y = _window_reduce(ctx, x, "sum", kernel, strides, dil, begin, end, ys[2:])
    include = attributes(node).get("count_include_pad", 0)
    counts = _avg_counts(xs_spatial=g.shape(node.input[0])[2:], ys_spatial=ys[2:],
                         kernel=kernel, strides=strides, dil=dil, begin=begin,
                         explicit=explicit, include_pad=include)
    return [_divide_by_counts(ctx, node, y, counts)]


def _avg_counts(xs_spatial, ys_spatial, kernel, strides, dil, begin, explicit, include_pad):
    """Divisor of each AveragePool output position: the taps inside the
    input (or inside the explicit padding with count_include_pad; the extra
    ceil_mode padding never counts)."""
    k = len(xs_spatial)
    counts = np.ones(ys_spatial, dtype=np.float64)
    for i in range(k):
        d = xs_spatial[i]
        lo, hi = (0, d) if not include_pad else (-explicit[i], d + explicit[k + i])
        taps = (np.arange(ys_spatial[i])[:, None] * strides[i] - begin[i]
                + dil[i] * np.arange(kernel[i])[None, :])
        per = np.count_nonzero((taps >= lo) & (taps < hi), axis=1).astype(np.float64)
        shape = [1] * k
        shape[i] = -1
        counts = counts * per.reshape(shape)
    return counts


def _lowest(elem, unsigned):
    """The identity of max for `elem` (-inf, or the smallest integer)."""
    if isinstance(elem, ir.FloatType):
        return float("-inf")
    return 0 if unsigned else -(1 << (ir.IntegerType(elem).width - 1))


def _window_reduce(ctx, x, kind, kernel, strides, dil, begin, end, out_spatial,
                   unsigned=False):
    """Max or sum of `x` [N, C, D...] over pooling windows, padded with the
    reduction's identity. 1-D and 2-D float pools use the named
    `linalg.pooling_nchw_*` ops (1-D with a unit H dimension); 3-D and
    integer pools a `linalg.generic` with reduction loops over the window.
    Pads and output extents may be `index` values."""
    b = ctx.b
    elem = elem_of(x)
    xs = shape_of(x)
    k = len(xs) - 2
    is_max = kind == "max"
    fill = _lowest(elem, unsigned) if is_max else 0.0
    xp = pad_tensor(ctx, x, [0, 0] + list(begin), [0, 0] + list(end), fill)
    lead = b.mixed_shape(x)[:2]
    is_float = isinstance(elem, ir.FloatType)
    if k <= 2 and is_float:
        if k == 1:
            xp = b.expand(xp, [[0], [1], [2, 3]], [xs[0], xs[1], 1, shape_of(xp)[2]])
            kernel, strides, dil = [1] + list(kernel), [1] + list(strides), [1] + list(dil)
            out_spatial = [1] + list(out_spatial)
        init = b.fill(b.scalar(fill, elem), b.empty(lead + list(out_spatial), elem))
        pool = linalg.pooling_nchw_max if is_max else linalg.pooling_nchw_sum
        y = pool(xp, b.empty(kernel, elem), outs=[init], strides=strides, dilations=dil)
        if k == 1:
            y = b.collapse(y, [[0], [1], [2, 3]], [xs[0], xs[1], shape_of(y)[3]])
        return y
    n = 2 + 2 * k
    init = b.fill(b.scalar(fill, elem), b.empty(lead + list(out_spatial), elem))
    d = [ir.AffineDimExpr.get(i) for i in range(n)]
    in_map = [d[0], d[1]] + [d[2 + i] * strides[i] + d[2 + k + i] * dil[i] for i in range(k)]
    out_map = d[:2 + k]
    # The window extents come from a map of their own: a window-shaped
    # operand like the named ops' (its values are never read).
    window = b.empty(kernel, elem)
    op = linalg.GenericOp([init.type], [xp, window], [init],
                          ir.ArrayAttr.get([_affine(n, in_map), _affine(n, d[2 + k:]),
                                            _affine(n, out_map)]),
                          ir.ArrayAttr.get([_PARALLEL()] * (2 + k) + [_reduction()] * k))
    block = op.regions[0].blocks.append(elem, elem, elem)
    with ir.InsertionPoint(block):
        v, acc = block.arguments[0], block.arguments[2]
        if is_max:
            if is_float:
                r = arith.maximumf(v, acc)
            elif unsigned:
                r = arith.maxui(v, acc)
            else:
                r = arith.maxsi(v, acc)
        else:
            r = arith.addf(v, acc)
        linalg.YieldOp([r])
    return op.results[0]


# -- LpPool, GlobalLpPool: (sum |x|^p)^(1/p) over the window -----------------

def _lp_p(node):
    return int(attributes(node).get("p", 2))


def _check_lp_pool(g, node):
    r = need_float(g, node)
    if r:
        return r
    if _lp_p(node) <= 0:
        return f"p must be positive, got {_lp_p(node)}"
    if node.op_type == "GlobalLpPool":
        xs = g.shape(node.input[0])
        return None if xs is not None and len(xs) >= 3 else "needs an [N, C, ...] input"
    geo = _geometry_check(g, node)
    return geo if isinstance(geo, str) else None


def _pow_abs(ctx, x, p):
    """|x|^p elementwise (p = 1, 2 without powf)."""
    if p == 2:
        return arith.mulf(x, x)
    ax = math.absf(x)
    if p == 1:
        return ax
    return math.powf(ax, ctx.b.splat(float(p), ctx.b.mixed_shape(x), elem_of(x)))


def _root(ctx, y, p):
    """y^(1/p) elementwise."""
    if p == 1:
        return y
    if p == 2:
        return math.sqrt(y)
    return math.powf(y, ctx.b.splat(1.0 / p, ctx.b.mixed_shape(y), elem_of(y)))


@converter("LpPool", check=_check_lp_pool, reads=(0,))
def _lp_pool(ctx, node):
    g = ctx.g
    p = _lp_p(node)
    x = _pow_abs(ctx, ctx.get(node.input[0]), p)
    if not _static_pool(g, node):
        return [_root(ctx, _run_time_pool(ctx, node, x, "sum"), p)]
    kernel, strides, dil, begin, end, _ = _pool_geometry(g, node)
    y = _window_reduce(ctx, x, "sum", kernel, strides, dil, begin, end,
                       g.shape(node.output[0])[2:])
    return [_root(ctx, y, p)]


@converter("GlobalLpPool", check=_check_lp_pool, reads=(0,))
def _global_lp_pool(ctx, node):
    b = ctx.b
    p = _lp_p(node)
    x = _pow_abs(ctx, ctx.get(node.input[0]), p)
    rank = len(shape_of(x))
    axes = list(range(2, rank))
    y = b.reduce(x, axes, lambda v, acc: arith.addf(acc, v), 0.0)
    return [b.keep_dims(_root(ctx, y, p), rank, axes)]


# =============================================================================
# GlobalAveragePool, GlobalMaxPool
# =============================================================================

def _check_global_pool(g, node):
    r = need_float(g, node)
    if r:
        return r
    xs = g.shape(node.input[0])
    if xs is None or len(xs) < 3:
        return "needs an [N, C, ...] input"
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
    y = arith.divf(y, count_splat(ctx, b.mixed_shape(x)[2:], b.mixed_shape(y), elem_of(y)))
    return [b.keep_dims(y, rank, axes)]
