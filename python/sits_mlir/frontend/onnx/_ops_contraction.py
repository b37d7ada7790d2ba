"""Contractions: MatMul and Gemm as `sits.matmul`, Conv (1-D to 3-D) as
`sits.conv`. (The integer and quantized ones are in `_ops_quantization.py`,
Einsum in `_ops_einsum.py`), and ConvTranspose as a `sits.conv` over the
zero-inserted input.
"""

from __future__ import annotations

import numpy as np

from ... import ir
from ...dialects import arith, linalg, sits, tensor
from ._builder import DYN, elem_of, shape_of
from ._graph import attributes
from ._ops_common import (_PARALLEL, _fmt, conv_padding, extract_slice, has_input, i64_attr,
                          need_float)
from ._ops_registry import converter


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
    a, w = ctx.get(a_name), ctx.weight(b_name)
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
    A, B = ctx.get(node.input[0]), ctx.weight(node.input[1])
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
        c = lambda v: arith.constant(ir.IndexType.get(), v)  # noqa: E731
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
