"""Contractions: MatMul and Gemm as `sits.matmul`, Conv (1-D to 3-D) as
`sits.conv`. (The integer and quantized ones are in `_ops_quantization.py`,
Einsum in `_ops_einsum.py`, ConvTranspose in `_ops_resize.py`.)
"""

from __future__ import annotations

import numpy as np

from ... import ir
from ...dialects import arith, sits
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import conv_padding, has_input, i64_attr, need_float
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
