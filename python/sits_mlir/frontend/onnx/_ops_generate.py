"""ONNX ops that generate tensors: ConstantOfShape, Range, the Hann, Hamming
and Blackman windows, EyeLike and OneHot; and the ops with data-dependent
result shapes (NonZero, Unique, NonMaxSuppression, Compress), which are
imported only when folded at import time.
"""

from __future__ import annotations

import numpy as np
from onnx import numpy_helper

from ... import ir
from ...dialects import arith, linalg, math, tensor
from . import _types
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import _PARALLEL, cast_value, fail_unless, norm_axis
from ._ops_registry import converter


def _check_eye_like(g, node):
    s = g.shape(node.input[0])
    if s is None or len(s) != 2:
        return "needs a 2-D input"
    if g.dtype(node.output[0]) is None:
        return "unsupported output element type"
    return None


def _eye_like_reads(g, node) -> tuple:
    return () if None not in g.shape(node.input[0]) else (0,)


@converter("EyeLike", check=_check_eye_like, reads=_eye_like_reads)
def _eye_like(ctx, node):
    k = ctx.attrs(node).get("k", 0)
    dt = ctx.g.dtype(node.output[0])
    if None not in ctx.g.shape(node.input[0]):  # a constant
        n, m = ctx.g.shape(node.input[0])
        return [ctx.const_value(np.eye(n, m, k, dtype=dt), node.output[0])]
    # Extents known at run time: ones where column - row = k.
    b = ctx.b
    elem = _types.mlir_type(dt)
    init = b.empty(b.mixed_shape(ctx.get(node.input[0])), elem)
    ident = ir.AffineMapAttr.get(ir.AffineMap.get_identity(2))
    op = linalg.GenericOp([init.type], [], [init], ir.ArrayAttr.get([ident]),
                          ir.ArrayAttr.get([_PARALLEL()] * 2))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        index = ir.IndexType.get()
        diff = arith.subi(linalg.IndexOp(1).result, linalg.IndexOp(0).result)
        on = arith.cmpi(arith.CmpIPredicate.eq, diff, arith.constant(index, k))
        linalg.YieldOp([arith.select(on, b.scalar(1, elem), b.scalar(0, elem))])
    return [op.results[0]]


def _check_one_hot(g, node):
    s = g.shape(node.input[0])
    if s is None:
        return "needs indices of known rank"
    if g.dtype(node.input[0]) is None or _types.is_bool(g.dtype(node.input[0])):
        return "needs numeric indices"
    for k, what in ((1, "depth"), (2, "values")):
        if g.dtype(node.input[k]) is None:
            return f"unsupported element type of '{what}'"
    vs = g.shape(node.input[2])
    if vs is None or len(vs) != 1 or vs[0] not in (2, None):
        return "values must hold two elements, [off, on]"
    return None


@converter("OneHot", check=_check_one_hot)
def _one_hot(ctx, node):
    """One `linalg.generic` over the result: on where the index (negative
    ones count from the end of depth) equals the position along `axis`,
    off elsewhere, out-of-range indices included. Depth and values may be
    read at run time; a depth below 1 fails the call (the result is then
    empty)."""
    b, g = ctx.b, ctx.g
    idx = ctx.get(node.input[0])
    rank = len(shape_of(idx))
    axis = norm_axis(ctx.attrs(node).get("axis", -1), rank + 1)
    index, i64 = ir.IndexType.get(), ir.IntegerType.get_signless(64)
    if g.is_const(node.input[1]):
        depth = int(np.asarray(g.const(node.input[1])).reshape(-1)[0])
        fits = depth >= 1
        if not fits:
            from ...errors import CompileError

            raise CompileError(f"OneHot '{node.name}': depth {depth} is below 1")
    else:
        d = ctx.get(node.input[1])
        d = tensor.extract(d, [b.index(0)] * len(shape_of(d)))
        dt = g.dtype(node.input[1])
        if _types.is_float(dt):
            d = arith.fptosi(i64, d)
        elif ir.IntegerType(d.type).width != 64:
            d = (arith.extui if _types.is_unsigned(dt) else arith.extsi)(i64, d)
        ok = arith.cmpi(arith.CmpIPredicate.sge, d, arith.constant(i64, 1))
        fail_unless(ctx, node, ok, "depth is below 1")
        depth = arith.index_cast(index, arith.select(ok, d, arith.constant(i64, 0)))
    dt = g.dtype(node.output[0])
    elem = _types.mlir_type(dt)
    values = ctx.get(node.input[2])
    n = b.mixed_shape(values)[0]
    if not isinstance(n, int):  # two elements, else nothing is read
        ok = arith.cmpi(arith.CmpIPredicate.eq, n, b.index(2))
        fail_unless(ctx, node, ok, "values must hold two elements, [off, on]")
        depth = arith.select(ok, depth if not isinstance(depth, int) else b.index(depth),
                             b.index(0))
    out = list(b.mixed_shape(idx))
    out.insert(axis, depth)
    values = cast_value(ctx, values, g.dtype(node.input[2]), dt)
    init = b.empty(out, elem)
    n_out = rank + 1
    idx_map = ir.AffineMap.get(n_out, 0, [ir.AffineDimExpr.get(k) for k in range(n_out)
                                          if k != axis])
    op = linalg.GenericOp([init.type], [idx], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(idx_map),
                                            ir.AffineMapAttr.get(ir.AffineMap.get_identity(n_out))]),
                          ir.ArrayAttr.get([_PARALLEL()] * n_out))
    block = op.regions[0].blocks.append(elem_of(idx), elem)
    with ir.InsertionPoint(block):
        size = arith.index_cast(i64, depth if not isinstance(depth, int)
                                else arith.constant(index, depth))
        i = block.arguments[0]  # float indices are truncated, as ONNX casts them
        if _types.is_float(g.dtype(node.input[0])):
            i = arith.fptosi(i64, i)
        elif ir.IntegerType(i.type).width != 64:
            i = (arith.extui if _types.is_unsigned(g.dtype(node.input[0])) else arith.extsi)(i64, i)
        i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, arith.constant(i64, 0)),
                         arith.addi(i, size), i)
        k = arith.index_cast(i64, linalg.IndexOp(axis).result)
        hit = arith.cmpi(arith.CmpIPredicate.eq, i, k)
        off = tensor.extract(values, [arith.constant(index, 0)])
        on = tensor.extract(values, [arith.constant(index, 1)])
        linalg.YieldOp([arith.select(hit, on, off)])
    return [op.results[0]]


def _data_dependent(g, node):
    return "the result shape depends on run-time data"


def _check_constant_of_shape(g, node):
    out = g.sym_shape(node.output[0])
    if out is None or any(d is None for d in out):
        return _data_dependent(g, node)
    return None


@converter("ConstantOfShape", check=_check_constant_of_shape)
def _constant_of_shape(ctx, node):
    """A run-time shape (folded ones never get here): extents ONNX knows
    only symbolically are read from the shape tensor."""
    b = ctx.b
    shape_v = ctx.get(node.input[0])
    out = ctx.g.shape(node.output[0])
    value = ctx.attrs(node).get("value")
    arr = numpy_helper.to_array(value).reshape(-1) if value is not None else np.zeros(1, np.float32)
    dims = []
    for i, d in enumerate(out):
        if d is not None:
            dims.append(d)
        else:
            e = tensor.extract(shape_v, [b.index(i)])
            dims.append(arith.index_cast(ir.IndexType.get(), e))
    return [b.splat(arr[0].item(), dims, _types.mlir_type(arr.dtype))]


# Folded at import time when their inputs are constants; otherwise the
# result shape is data-dependent.
converter("NonZero", "Unique", "NonMaxSuppression", "Compress", check=_data_dependent,
          supported=False)(lambda ctx, node: None)


def _check_range(g, node):
    for x in node.input:
        s = g.shape(x)
        if s is None or int(np.prod(s, dtype=np.int64)) != 1 or len(s) > 1:
            return "start, limit and delta must be scalars"
    dt = g.dtype(node.input[0])
    if dt is None or _types.is_bool(dt) or _types.is_byte_coded(dt):
        return "needs numeric inputs"
    return None


@converter("Range", check=_check_range)
def _range(ctx, node):
    """start + i * delta for i < max(ceil((limit - start) / delta), 0): the
    length is computed at run time (constant inputs fold at import)."""
    b = ctx.b
    start, limit, delta = (b.collapse(v, [], ()) if shape_of(v) else v
                           for v in (ctx.get(x) for x in node.input))
    elem = elem_of(start)
    is_float = isinstance(elem, ir.FloatType)
    index, f64 = ir.IndexType.get(), ir.F64Type.get()
    scalars = [tensor.extract(v, []) for v in (start, limit, delta)]

    def wide(v):
        if not is_float:
            return arith.sitofp(f64, v)
        return v if ir.FloatType(elem).width == 64 else arith.extf(f64, v)

    s, l, d = (wide(v) for v in scalars)
    count = math.ceil(arith.divf(arith.subf(l, s), d))
    count = arith.maximumf(count, arith.constant(f64, 0.0))
    n = arith.index_cast(index, arith.fptosi(ir.IntegerType.get_signless(64), count))
    init = b.empty([n], elem)
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))]),
                          ir.ArrayAttr.get([_PARALLEL()]))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        i = arith.index_cast(ir.IntegerType.get_signless(64), linalg.IndexOp(0).result)
        if is_float:
            step = arith.mulf(arith.sitofp(elem, i), scalars[2])
            v = arith.addf(scalars[0], step)
        else:
            width = ir.IntegerType(elem).width
            i = i if width == 64 else arith.trunci(elem, i)
            v = arith.addi(scalars[0], arith.muli(i, scalars[2]))
        linalg.YieldOp([v])
    return [op.results[0]]


def _check_window(g, node):
    s = g.shape(node.input[0])
    if s is None or len(s) > 1 or int(np.prod(s, dtype=np.int64)) != 1:
        return "size must be a scalar"
    to = attributes(node).get("output_datatype", 1)
    if to not in _types.SUPPORTED_ONNX_TYPES or _types.is_byte_coded(_types.numpy_dtype(to)):
        return f"unsupported attribute value output_datatype={_types.dtype_name(to)}"
    return None


# cos(k * 2*pi*n / N) coefficients of each window, as onnx.reference has them.
_WINDOWS = {"HannWindow": (0.5, -0.5, 0.0), "HammingWindow": (25 / 46, -21 / 46, 0.0),
            "BlackmanWindow": (0.42, -0.5, 0.08)}


@converter("HannWindow", "HammingWindow", "BlackmanWindow", check=_check_window)
def _window(ctx, node):
    """a0 + a1 cos(2 pi n / N) + a2 cos(4 pi n / N) for n < size, N = size
    (periodic) or size - 1 (symmetric), computed in f64 like the reference."""
    b = ctx.b
    a = attributes(node)
    size = ctx.get(node.input[0])
    size = tensor.extract(b.collapse(size, [], ()) if shape_of(size) else size, [])
    dt = _types.numpy_dtype(a.get("output_datatype", 1))
    elem = _types.mlir_type(dt)
    f64, i64, index = ir.F64Type.get(), ir.IntegerType.get_signless(64), ir.IndexType.get()
    if ir.IntegerType(size.type).width != 64:
        size = arith.extsi(i64, size)
    period = size if a.get("periodic", 1) else arith.subi(size, arith.constant(i64, 1))
    period = arith.sitofp(f64, period)
    a0, a1, a2 = _WINDOWS[node.op_type]
    init = b.empty([arith.index_cast(index, size)], elem)
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(1))]),
                          ir.ArrayAttr.get([_PARALLEL()]))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        n = arith.sitofp(f64, arith.index_cast(i64, linalg.IndexOp(0).result))
        phase = arith.divf(arith.mulf(n, arith.constant(f64, 2 * np.pi)), period)
        w = arith.addf(arith.constant(f64, a0),
                       arith.mulf(arith.constant(f64, a1), math.cos(phase)))
        if a2:
            w = arith.addf(w, arith.mulf(arith.constant(f64, a2),
                                         math.cos(arith.mulf(phase, arith.constant(f64, 2.0)))))
        if _types.is_float(dt):
            w = w if ir.FloatType(elem).width == 64 else arith.truncf(elem, w)
        else:  # truncated, as astype does
            w = (arith.fptoui if _types.is_unsigned(dt) else arith.fptosi)(elem, w)
        linalg.YieldOp([w])
    return [op.results[0]]
