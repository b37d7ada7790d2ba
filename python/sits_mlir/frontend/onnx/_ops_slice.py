"""Slice and Pad: a region of a tensor taken, or a tensor extended (or
cropped) around it.

With constant parameters over static extents they are a
`tensor.extract_slice` and a `tensor.pad`. Parameters read at run time
(of lengths known only then), dynamic extents, negative steps, negative
pads and the reflect/edge/wrap modes compute ONNX's clamping at run time
and read each element where it maps; parameters ONNX makes an error fail
the call through the model's status, and nothing is read meanwhile.
"""

from __future__ import annotations

import numpy as np

from ... import ir
from ...dialects import arith, linalg, scf, tensor
from ._builder import DYN, elem_of, shape_of
from ._graph import attributes
from ._ops_common import (_PARALLEL, extract_slice, fail_unless, has_input, need_const,
                          norm_axis, pad_tensor, per_axis_entries, read_if)
from ._ops_registry import converter


def slice_params(g, node):
    """Per-axis (start, size, step) of a Slice node, or a str reason."""
    r = need_const(g, node, 1, 2, 3, 4)
    if r:
        return r
    xs = g.shape(node.input[0])
    if xs is None:
        return "input rank is unknown"
    starts = g.const(node.input[1]).reshape(-1).astype(np.int64)
    ends = g.const(node.input[2]).reshape(-1).astype(np.int64)
    rank = len(xs)
    axes = g.const(node.input[3]).reshape(-1) if has_input(node, 3) else np.arange(len(starts))
    steps = g.const(node.input[4]).reshape(-1) if has_input(node, 4) else np.ones(len(starts), np.int64)
    params = {}
    for st, en, ax, sp in zip(starts, ends, axes, steps):
        ax = norm_axis(int(ax), rank)
        st, en, sp = int(st), int(en), int(sp)
        d = xs[ax]
        if sp <= 0:
            return "Slice with a negative step is not supported"
        if d is None:
            if st == 0 and en >= (1 << 62):
                continue
            return f"Slice along axis {ax}, whose extent is dynamic, is not supported"
        st = min(max(st + d if st < 0 else st, 0), d)
        en = min(max(en + d if en < 0 else en, 0), d)
        size = max(0, -(-(en - st) // sp))
        params[ax] = (st, size, sp)
    return params


def _check_slice(g, node):
    if not isinstance(slice_params(g, node), str):
        return None
    # Bounds, axes or steps read at run time, a dynamic extent or a
    # negative step: the run-time path.
    xs = g.shape(node.input[0])
    if xs is None:
        return "input rank is unknown"
    n = None
    for k in range(1, 5):
        if not has_input(node, k):
            continue
        s = g.shape(node.input[k])
        if g.dtype(node.input[k]) not in (np.int32, np.int64) or s is None or len(s) != 1:
            return f"input {k} ('{node.input[k]}') must be a 1-D int32 or int64 tensor"
        length = s[0] if s[0] is not None or not g.is_const(node.input[k]) else \
            g.const(node.input[k]).size
        if None not in (n, length) and length != n:
            return "starts, ends, axes and steps must have one length"
        n = length if n is None else n
    if has_input(node, 3) and g.is_const(node.input[3]):
        axes = [int(a) for a in np.asarray(g.const(node.input[3])).reshape(-1)]
        if any(not -len(xs) <= a < len(xs) for a in axes):
            return f"axes {axes} are out of range for rank {len(xs)}"
        if len({norm_axis(a, len(xs)) for a in axes}) != len(axes):
            return f"axes {axes} name an axis twice"
    return None


def _slice_runtime(g, node) -> bool:
    return isinstance(slice_params(g, node), str)


def _slice_reads(g, node) -> tuple:
    if not _slice_runtime(g, node):
        return (0,)
    return tuple(k for k in range(5) if has_input(node, k))


@converter("Slice", check=_check_slice, reads=_slice_reads)
def _slice(ctx, node):
    if _slice_runtime(ctx.g, node):
        return [_slice_at_run_time(ctx, node)]
    return [extract_slice(ctx, ctx.get(node.input[0]), slice_params(ctx.g, node))]


def _slice_at_run_time(ctx, node):
    """Slice with bounds, axes or steps as the data gives them, or along
    dynamic extents: ONNX's clamping computed per axis at run time. Positive
    constant steps take a `tensor.extract_slice`; other steps a
    `linalg.generic` reading x[start + i * step]. A step of 0, an axis out
    of range or named twice fails the call (the slice is then empty)."""
    g, b = ctx.g, ctx.b
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    index, i1 = ir.IndexType.get(), ir.IntegerType.get_signless(1)
    zero, one = b.index(0), b.index(1)

    def entries(k, default):
        """Input k's values: Python ints when constant, else index Values."""
        if not has_input(node, k):
            return None if default is None else list(default)
        if g.is_const(node.input[k]):
            return [int(v) for v in np.asarray(g.const(node.input[k])).reshape(-1)]
        t = ctx.get(node.input[k])
        return [arith.index_cast(index, tensor.extract(t, [b.index(j)]))
                for j in range(shape_of(t)[0])]

    def value(v):
        return b.index(v) if isinstance(v, int) else v

    dims = [value(d) for d in b.mixed_shape(x)]
    lengths = [shape_of(ctx.get(node.input[k]))[0] for k in range(1, 5) if has_input(node, k)]
    if None in lengths or (has_input(node, 3) and not g.is_const(node.input[3])):
        return _slice_by_loop(ctx, node, x, dims)
    starts, ends = entries(1, None), entries(2, None)
    n = len(starts)
    axes, steps = entries(3, range(n)), entries(4, [1] * n)
    ok = arith.constant(i1, 1)
    # Per dim: the (start, end, step) of the entry naming it (the check made
    # sure the constant axes are in range and distinct), or None.
    resolved = [None] * rank
    for j in range(n):
        resolved[norm_axis(axes[j], rank)] = (value(starts[j]), value(ends[j]), value(steps[j]))
    const_steps = {norm_axis(a, rank): sp for a, sp in zip(axes, steps) if isinstance(sp, int)}
    offsets, sizes, strides = [], [], []
    for d in range(rank):
        if resolved[d] is None:
            offsets.append(0)
            sizes.append(b.mixed_shape(x)[d])
            strides.append(1)
            continue
        st, en, sp = (value(v) for v in resolved[d])
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.ne, sp, zero))
        sp = arith.select(arith.cmpi(arith.CmpIPredicate.eq, sp, zero), one, sp)
        start, size = _clamped_range(b, st, en, sp, dims[d])
        offsets.append(start)
        sizes.append(size)
        strides.append(const_steps.get(d, sp))
    return _emit_slice(ctx, node, x, ok, resolved, offsets, sizes, strides)


def _slice_by_loop(ctx, node, x, dims):
    """Slice whose starts, ends, axes or steps have a length known only at
    run time: a loop over the entries gives each dim its bounds."""
    b = ctx.b
    rank = len(dims)
    index, i1 = ir.IndexType.get(), ir.IntegerType.get_signless(1)
    zero, one = b.index(0), b.index(1)
    given = {k: ctx.get(node.input[k]) for k in range(1, 5) if has_input(node, k)}
    lengths = [b.mixed_shape(t)[0] for t in given.values()]
    lengths = [b.index(v) if isinstance(v, int) else v for v in lengths]
    n = lengths[0]
    ok = arith.constant(i1, 1)
    for v in lengths[1:]:
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, v, n))
        n = arith.minui(n, v)

    def read(j):
        def at(k, default):
            if k not in given:
                return default
            return arith.index_cast(index, tensor.extract(given[k], [j]))
        return at(3, j), [at(1, None), at(2, None), at(4, one)]

    per_dim, ok = per_axis_entries(ctx, rank, n, read, [(zero, d, one) for d in dims], ok)
    offsets, sizes, strides, resolved = [], [], [], []
    for d in range(rank):
        st, en, sp = per_dim[d]
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.ne, sp, zero))
        sp = arith.select(arith.cmpi(arith.CmpIPredicate.eq, sp, zero), one, sp)
        start, size = _clamped_range(b, st, en, sp, dims[d])
        offsets.append(start)
        sizes.append(size)
        strides.append(sp)
        resolved.append((st, en, sp))
    return _emit_slice(ctx, node, x, ok, resolved, offsets, sizes, strides)


def _emit_slice(ctx, node, x, ok, resolved, offsets, sizes, strides):
    """The slice of x that `offsets`, `sizes` and `strides` (ints or index
    values, per dim; `resolved[d]` None for a dim taken whole) describe,
    empty unless `ok`."""
    b = ctx.b
    rank = len(offsets)
    index, zero = ir.IndexType.get(), b.index(0)
    fail_unless(ctx, node, ok, "a step is 0, or an axis is out of range or named twice")
    # Nothing is read when the arguments are bad.
    sizes = [s if isinstance(s, int) else arith.select(ok, s, zero) for s in sizes]
    out_shape = [s if isinstance(s, int) else None for s in sizes]
    if all(isinstance(sp, int) and sp > 0 for sp in strides):
        return tensor.extract_slice(
            b.tensor_type(out_shape, elem_of(x)), x,
            [o for o in offsets if not isinstance(o, int)],
            [s for s in sizes if not isinstance(s, int)], [],
            [o if isinstance(o, int) else DYN for o in offsets],
            [s if isinstance(s, int) else DYN for s in sizes], strides)
    init = b.empty(sizes, elem_of(x))
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                          ir.ArrayAttr.get([_PARALLEL()] * rank))
    block = op.regions[0].blocks.append(elem_of(x))
    with ir.InsertionPoint(block):
        coords = []
        for d in range(rank):
            i = linalg.IndexOp(d).result
            if resolved[d] is not None:
                sp = strides[d]
                sp = arith.constant(index, sp) if isinstance(sp, int) else sp
                o = offsets[d]
                o = arith.constant(index, o) if isinstance(o, int) else o
                i = arith.addi(o, arith.muli(i, sp))
            coords.append(i)
        linalg.YieldOp([tensor.extract(x, coords)])
    return op.results[0]


def _clamped_range(b, st, en, sp, d):
    """ONNX Slice's start and element count along an extent `d` (index
    values): negative bounds count from the end, then clamp to [0, d] for
    positive steps and to [-1, d - 1] for negative ones."""
    zero, one = b.index(0), b.index(1)
    lt = arith.CmpIPredicate.slt
    st = arith.select(arith.cmpi(lt, st, zero), arith.addi(st, d), st)
    en = arith.select(arith.cmpi(lt, en, zero), arith.addi(en, d), en)
    back = arith.cmpi(lt, sp, zero)
    low = arith.select(back, arith.constant(ir.IndexType.get(), -1), zero)
    high = arith.select(back, arith.subi(d, one), d)
    st = arith.minsi(arith.maxsi(st, zero), high)
    en = arith.minsi(arith.maxsi(en, low), high)
    size = arith.maxsi(arith.ceildivsi(arith.subi(en, st), sp), zero)
    # An empty slice starts at 0: in bounds even when d is 0.
    st = arith.select(arith.cmpi(arith.CmpIPredicate.eq, size, zero), zero, st)
    return st, size


_PAD_MODES = ("constant", "reflect", "edge", "wrap")


def _static_pad(g, node) -> bool:
    """Whether a Pad is a `tensor.pad`: constant mode, with constant pads
    (none negative), value and axes."""
    if attributes(node).get("mode", "constant") != "constant" or \
            need_const(g, node, 1, 2, 3) is not None:
        return False
    return not np.any(g.const(node.input[1]) < 0)


def _check_pad(g, node):
    mode = attributes(node).get("mode", "constant")
    if mode not in _PAD_MODES:
        return f"unsupported attribute value mode='{mode}'"
    if _static_pad(g, node):
        return None
    xs = g.shape(node.input[0])
    if xs is None:
        return "input rank is unknown"
    for k, what in ((1, "pads"), (3, "axes")):
        s = g.shape(node.input[k]) if has_input(node, k) else ()
        if has_input(node, k) and (g.dtype(node.input[k]) not in (np.int32, np.int64)
                                   or s is None or len(s) != 1):
            return f"input '{what}' must be a 1-D int32 or int64 tensor"
    if has_input(node, 3) and g.is_const(node.input[3]):
        axes = [int(a) for a in np.asarray(g.const(node.input[3])).reshape(-1)]
        if any(not -len(xs) <= a < len(xs) for a in axes) or \
                len({norm_axis(a, len(xs)) for a in axes}) != len(axes):
            return f"axes {axes} are out of range or name an axis twice"
    return None


def _pad_reads(g, node) -> tuple:
    if _static_pad(g, node):
        return (0,)
    return tuple(k for k in range(4) if has_input(node, k))


@converter("Pad", check=_check_pad, reads=_pad_reads)
def _pad(ctx, node):
    g = ctx.g
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    if not _static_pad(g, node):
        return [_pad_at_run_time(ctx, node, x)]
    pads = [int(p) for p in g.const(node.input[1]).reshape(-1)]
    axes = [norm_axis(int(a), rank) for a in g.const(node.input[3]).reshape(-1)] \
        if has_input(node, 3) else list(range(rank))
    begin, end = [0] * rank, [0] * rank
    for j, ax in enumerate(axes):
        begin[ax], end[ax] = pads[j], pads[j + len(axes)]
    value = 0
    if has_input(node, 2):
        value = g.const(node.input[2]).reshape(-1)[0].item()
    return [pad_tensor(ctx, x, begin, end, value)]


def _pad_amounts(ctx, node, rank):
    """Per dim, the (begin, end) pads as `index` values, with an i1 that is
    false when the pads or axes are malformed: a loop over the axes (all of
    them without an axes input), which may be known only at run time."""
    b = ctx.b
    index = ir.IndexType.get()
    zero = b.index(0)
    pads = ctx.get(node.input[1])
    n_pads = b.mixed_shape(pads)[0]
    n_pads = b.index(n_pads) if isinstance(n_pads, int) else n_pads
    axes = ctx.get(node.input[3]) if has_input(node, 3) else None
    if axes is not None:
        count = b.mixed_shape(axes)[0]
        count = b.index(count) if isinstance(count, int) else count
    else:
        count = b.index(rank)
    ok = arith.cmpi(arith.CmpIPredicate.eq, n_pads, arith.muli(count, b.index(2)))
    count = arith.select(ok, count, zero)  # nothing is read from bad pads

    def read(j):
        lo = arith.index_cast(index, tensor.extract(pads, [j]))
        hi = arith.index_cast(index, tensor.extract(pads, [arith.addi(j, count)]))
        a = j if axes is None else arith.index_cast(index, tensor.extract(axes, [j]))
        return a, [lo, hi]

    amounts, ok = per_axis_entries(ctx, rank, count, read, [(zero, zero)] * rank, ok)
    return amounts, ok


def _pad_at_run_time(ctx, node, x):
    """Pad with pads, value or axes read at run time, negative pads (which
    crop) or a mode other than constant: each output element reads the
    input where the mode maps it. Pads crop first, then pad the rest; a
    result extent below 0, malformed pads or axes, or reflect, edge and
    wrap of an empty extent fail the call (the result is then empty)."""
    g, b = ctx.g, ctx.b
    mode = attributes(node).get("mode", "constant")
    rank = len(shape_of(x))
    elem = elem_of(x)
    index = ir.IndexType.get()
    zero, one = b.index(0), b.index(1)
    amounts, ok = _pad_amounts(ctx, node, rank)
    dims = [b.index(d) if isinstance(d, int) else d for d in b.mixed_shape(x)]
    geometry, sizes = [], []
    for d, (lo, hi) in zip(dims, amounts):
        crop_lo = arith.maxsi(arith.subi(zero, lo), zero)
        crop_hi = arith.maxsi(arith.subi(zero, hi), zero)
        kept = arith.subi(arith.subi(d, crop_lo), crop_hi)
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.sge, kept, zero))
        if mode != "constant":  # something to repeat
            grows = arith.cmpi(arith.CmpIPredicate.sgt, arith.addi(lo, hi), zero)
            ok = arith.andi(ok, arith.ori(arith.xori(grows, arith.constant(
                ir.IntegerType.get_signless(1), 1)), arith.cmpi(arith.CmpIPredicate.sgt,
                                                                kept, zero)))
        pad_lo = arith.maxsi(lo, zero)
        size = arith.addi(arith.addi(kept, pad_lo), arith.maxsi(hi, zero))
        geometry.append((crop_lo, kept, pad_lo))
        sizes.append(size)
    fail_unless(ctx, node, ok, "the pads or axes are malformed, crop more than the "
                "extent, or repeat an empty extent")
    sizes = [arith.select(ok, s, zero) for s in sizes]
    value = b.scalar(0, elem)
    if has_input(node, 2):  # a scalar, or one element (none: 0)
        v = ctx.get(node.input[2])
        count = one
        for e in b.mixed_shape(v):
            count = arith.muli(count, b.index(e) if isinstance(e, int) else e)
        value = read_if(arith.cmpi(arith.CmpIPredicate.sgt, count, zero),
                        lambda: tensor.extract(v, [b.index(0)] * len(shape_of(v))), value)
    init = b.empty(sizes, elem)
    if mode != "constant":
        return _padded_reads(x, init, geometry, mode, value)
    # An empty input has nothing to read: every element is the value.
    nonempty = arith.constant(ir.IntegerType.get_signless(1), 1)
    for _, kept, _ in geometry:
        nonempty = arith.andi(nonempty, arith.cmpi(arith.CmpIPredicate.sgt, kept, zero))
    branch = scf.IfOp(nonempty, [init.type], has_else=True)
    with ir.InsertionPoint(branch.then_block):
        scf.YieldOp([_padded_reads(x, init, geometry, mode, value)])
    with ir.InsertionPoint(branch.else_block):
        scf.YieldOp([b.fill(value, init)])
    return branch.results[0]


def _padded_reads(x, init, geometry, mode, value):
    """`init` filled with x read where the pad `mode` maps each element
    (per dim: the crop offset, the kept extent and the low pad); constant
    mode takes `value` outside the kept range. x has no empty extent."""
    rank = len(geometry)
    elem = elem_of(x)
    index, i1 = ir.IndexType.get(), ir.IntegerType.get_signless(1)
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))]),
                          ir.ArrayAttr.get([_PARALLEL()] * rank))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        c0, c1, c2 = (arith.constant(index, v) for v in (0, 1, 2))
        inside = arith.constant(i1, 1)
        coords = []
        for d, (crop_lo, kept, pad_lo) in enumerate(geometry):
            i = arith.subi(linalg.IndexOp(d).result, pad_lo)
            last = arith.subi(kept, c1)
            if mode == "constant":
                inside = arith.andi(inside, arith.andi(
                    arith.cmpi(arith.CmpIPredicate.sge, i, c0),
                    arith.cmpi(arith.CmpIPredicate.slt, i, kept)))
            elif mode == "wrap":
                i = arith.remsi(arith.addi(arith.remsi(i, kept), kept), kept)
            elif mode == "reflect":  # a period of 2 (kept - 1), mirrored past the end
                period = arith.maxsi(arith.muli(last, c2), c1)
                j = arith.remsi(arith.addi(arith.remsi(i, period), period), period)
                i = arith.select(arith.cmpi(arith.CmpIPredicate.sgt, j, last),
                                 arith.subi(period, j), j)
            # Clamped into the kept range (edge mode is just this).
            coords.append(arith.addi(crop_lo, arith.minsi(arith.maxsi(i, c0), last)))
        read = tensor.extract(x, coords)
        linalg.YieldOp([arith.select(inside, read, value) if mode == "constant" else read])
    return op.results[0]
