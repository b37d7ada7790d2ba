"""2-D float NCHW MaxPool and AveragePool as `linalg.pooling_nchw_{max,sum}`,
and GlobalAveragePool/GlobalMaxPool as `linalg.reduce`.

`_ops_resize.py` registers MaxPool and AveragePool again, replacing these
converters: it handles 1-D, 3-D and integer pools itself and hands 2-D
float ones to `_check_pool` and `_pool` here.
"""

from __future__ import annotations

import numpy as np

from ...dialects import arith, linalg
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import conv_padding, need_float, pad_tensor, unused_outputs
from ._ops_registry import converter


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
