"""Shared checks and helpers of the op converters.

Checks (`need_float`, `need_const`, `need_static`, `unused_outputs`) return
why a node cannot be imported, or None; the emitters here (`cast_value`,
`pad_tensor`, `extract_slice`) and `conv_padding` serve several op families.
"""

from __future__ import annotations

import numpy as np

from ... import ir
from ...dialects import arith, linalg, scf, tensor
from . import _types
from ._builder import DYN, elem_of, shape_of
from ._graph import attributes


I64 = lambda: ir.IntegerType.get_signless(64)  # noqa: E731


def i64_attr(v):
    return ir.IntegerAttr.get(I64(), int(v))


def f64_attr(v):
    return ir.FloatAttr.get_f64(float(v))


def has_input(node, k):
    return k < len(node.input) and node.input[k] != ""


def norm_axis(axis, rank):
    return axis + rank if axis < 0 else axis


def _dt(g, name):
    return g.dtype(name)


def need_float(g, node, k=0):
    dt = g.dtype(node.input[k])
    if dt is not None and not _types.is_float(dt):
        return f"needs a floating-point input, got {np.dtype(dt).name}"
    return None


def need_const(g, node, *ks, what=None):
    for k in ks:
        if has_input(node, k) and not g.is_const(node.input[k]):
            return (f"input {k} ('{node.input[k]}') must be known at import time "
                    f"(it is computed at run time{', ' + what if what else ''})")
    return None


def need_static(g, name, axes=None, what="this op"):
    s = g.shape(name)
    if s is None:
        return f"the rank of '{name}' is unknown"
    dims = range(len(s)) if axes is None else axes
    if any(s[d] is None for d in dims):
        return f"{what} needs static extents of '{name}', got {_fmt(s)}"
    return None


def _fmt(shape):
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def unused_outputs(*ks):
    def check(g, node):
        for k in ks:
            if k < len(node.output) and node.output[k] and g.uses(node.output[k]):
                return f"output {k} ('{node.output[k]}') is used; only output 0 is supported"
        return None
    return check


def cast_value(ctx, v: ir.Value, src, dst, saturate: bool = True) -> ir.Value:
    """Converts `v` from NumPy dtype `src` to `dst` with ONNX Cast semantics.
    `saturate` (Cast's attribute) clamps values beyond an 8-bit float's range
    to its largest finite value instead of giving infinity or NaN."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst:
        return v
    b = ctx.b
    target = b.tensor_type(shape_of(v), dst)
    f32 = np.dtype(np.float32)
    if _types.is_small_float(src) and dst != f32:
        # 8- and 4-bit floats convert through f32, the only float type their
        # software conversion (sits-cpu-expand-small-floats) speaks.
        return cast_value(ctx, cast_value(ctx, v, src, f32), f32, dst, saturate)
    if _types.is_small_float(dst):
        if src != f32:
            v = cast_value(ctx, v, src, f32)
        if saturate:
            import ml_dtypes

            big = float(ml_dtypes.finfo(dst).max)
            shape = b.mixed_shape(v)
            v = arith.minimumf(arith.maximumf(v, b.splat(-big, shape, elem_of(v))),
                               b.splat(big, shape, elem_of(v)))
        return arith.truncf(target, v)
    fs, fd = _types.is_float(src), _types.is_float(dst)
    if _types.is_bool(dst):
        zero = b.splat(0, b.mixed_shape(v), elem_of(v))
        if fs:
            return arith.cmpf(arith.CmpFPredicate.UNE, v, zero)
        return arith.cmpi(arith.CmpIPredicate.ne, v, zero)
    if fs and fd:
        ws, wd = ir.FloatType(elem_of(v)).width, ir.FloatType(_types.mlir_type(dst)).width
        if ws < wd:
            return arith.extf(target, v)
        if ws > wd:
            return arith.truncf(target, v)
        mid = b.tensor_type(shape_of(v), np.float32)
        return arith.truncf(target, arith.extf(mid, v))
    if fs:
        wd = ir.IntegerType(_types.mlir_type(dst)).width
        if wd < 8:
            # As ml_dtypes (the reference) converts: toward zero, and 0 for
            # values outside the sub-byte range.
            i32 = ir.IntegerType.get_signless(32)
            shape = b.mixed_shape(v)
            whole = arith.fptosi(b.tensor_type(shape_of(v), i32), v)
            lo, hi = (0, (1 << wd) - 1) if _types.is_unsigned(dst) else \
                (-(1 << (wd - 1)), (1 << (wd - 1)) - 1)
            inside = arith.andi(
                arith.cmpi(arith.CmpIPredicate.sge, whole, b.splat(lo, shape, i32)),
                arith.cmpi(arith.CmpIPredicate.sle, whole, b.splat(hi, shape, i32)))
            whole = arith.select(inside, whole, b.splat(0, shape, i32))
            return arith.trunci(target, whole)
        return (arith.fptoui if _types.is_unsigned(dst) else arith.fptosi)(target, v)
    unsigned_src = _types.is_unsigned(src) or _types.is_bool(src)
    if fd:
        return (arith.uitofp if unsigned_src else arith.sitofp)(target, v)
    ws = ir.IntegerType(elem_of(v)).width
    wd = ir.IntegerType(_types.mlir_type(dst)).width
    if ws < wd:
        return (arith.extui if unsigned_src else arith.extsi)(target, v)
    if ws > wd:
        return arith.trunci(target, v)
    return v  # signed <-> unsigned of one width: same bits


def conv_padding(g, node, x_shape, w_shape):
    """Explicit [begins..., ends...] padding of a Conv/Pool node, or a str
    reason when it cannot be resolved."""
    a = attributes(node)
    k = len(x_shape) - 2
    strides = list(a.get("strides", [1] * k))
    dil = list(a.get("dilations", [1] * k))
    kernel = list(a.get("kernel_shape", w_shape[2:] if w_shape else []))
    auto_pad = a.get("auto_pad", "NOTSET")
    if auto_pad == "NOTSET":
        return list(a.get("pads", [0] * (2 * k)))
    if auto_pad == "VALID":
        return [0] * (2 * k)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        begins, ends = [], []
        for i in range(k):
            d = x_shape[2 + i]
            if d is None or kernel[i] is None:
                return f"auto_pad={auto_pad} needs static spatial extents"
            out = -(-d // strides[i])
            total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dil[i] + 1 - d)
            small, big = total // 2, total - total // 2
            begins.append(small if auto_pad == "SAME_UPPER" else big)
            ends.append(big if auto_pad == "SAME_UPPER" else small)
        return begins + ends
    return f"unsupported attribute value auto_pad='{auto_pad}'"


def pad_tensor(ctx, x, begin, end, value):
    """`tensor.pad` of `x` with `value` (low `begin`, high `end`: ints, or
    `index` values known at run time)."""
    b = ctx.b
    static = all(isinstance(p, int) for p in list(begin) + list(end))
    if static and not any(begin) and not any(end):
        return x
    elem = elem_of(x)
    s = shape_of(x)
    out = [d + lo + hi if d is not None and isinstance(lo, int) and isinstance(hi, int)
           else None for d, lo, hi in zip(s, begin, end)]
    pad_value = value if isinstance(value, ir.Value) else b.scalar(value, elem)
    values = lambda ps: [p for p in ps if not isinstance(p, int)]  # noqa: E731
    attrs = lambda ps: [p if isinstance(p, int) else DYN for p in ps]  # noqa: E731
    op = tensor.PadOp(b.tensor_type(out, elem), x, values(begin), values(end),
                      attrs(begin), attrs(end))
    block = op.regions[0].blocks.append(*([ir.IndexType.get()] * len(s)))
    with ir.InsertionPoint(block):
        tensor.YieldOp(pad_value)
    return op.result


def extract_slice(ctx, x, params):
    """`tensor.extract_slice` with per-axis (start, size, step); other axes whole."""
    b = ctx.b
    s = shape_of(x)
    offsets, sizes, strides, dyn_sizes = [], [], [], []
    out = []
    for d in range(len(s)):
        if d in params:
            st, size, sp = params[d]
            if size == 0:  # nothing is read: any in-bounds offset will do
                st, sp = 0, 1
            offsets.append(st)
            sizes.append(size)
            strides.append(sp)
            out.append(size)
        else:
            offsets.append(0)
            strides.append(1)
            if s[d] is None:
                sizes.append(DYN)
                dyn_sizes.append(b.dim(x, d))
            else:
                sizes.append(s[d])
            out.append(s[d])
    if all(o == 0 for o in offsets) and all(st == 1 for st in strides) and tuple(out) == s:
        return x
    return tensor.extract_slice(b.tensor_type(out, elem_of(x)), x, [], dyn_sizes, [],
                                offsets, sizes, strides)


def _PARALLEL():
    return ir.Attribute.parse("#linalg.iterator_type<parallel>")


def _affine(n, exprs):
    """The affine map attribute of `n` dims to the expressions `exprs`."""
    return ir.AffineMapAttr.get(ir.AffineMap.get(n, 0, list(exprs)))


def check_indices(ctx, node, indices: ir.Value, bounds, what: str) -> None:
    """Makes an index out of range an error, as ONNX defines it: records in
    the model's status (`Importer.range_checks`) whether some element of
    `indices` lies outside [-n, n). `bounds` holds n, one `index` Value or
    int for every element or, for index tuples (ScatterND), one per
    position along the last dimension. Constant indices are checked now.
    The accesses themselves still go through `wrap_clamp`, so a bad index
    never reads or writes outside the tensor; the runtime then fails the
    call (InputOutOfRangeError) naming `what`."""
    g = ctx.g
    name = node.name or f"{node.op_type} -> '{node.output[0]}'"
    message = f"{node.op_type} node '{name}': {what} out of range"[:1000]
    per_tuple = isinstance(bounds, (list, tuple))
    static = [b for b in (bounds if per_tuple else [bounds]) if isinstance(b, int)]
    if g.is_const(node.input[1]) and len(static) == (len(bounds) if per_tuple else 1):
        idx = np.asarray(g.const(node.input[1]), np.int64)
        n = np.asarray(static, np.int64) if per_tuple else static[0]
        if idx.size and (np.any(idx < -n) or np.any(idx >= n)):
            from ...errors import CompileError

            raise CompileError(f"{message}: the constant indices must lie in [-n, n) for "
                               f"n = {static if per_tuple else static[0]}")
        return
    b = ctx.b
    if indices is None:
        indices = ctx.get(node.input[1])
    index = ir.IndexType.get()
    i1 = ir.IntegerType.get_signless(1)
    rank = len(shape_of(indices))
    values = [arith.constant(index, v) if isinstance(v, int) else v
              for v in (bounds if per_tuple else [bounds])]
    # Per element whether it is out of range, then their `or`.
    init = b.empty(b.mixed_shape(indices), i1)
    ident = ir.AffineMapAttr.get(ir.AffineMap.get_identity(rank))
    op = linalg.GenericOp(
        [init.type], [indices], [init], ir.ArrayAttr.get([ident, ident]),
        ir.ArrayAttr.get([ir.Attribute.parse("#linalg.iterator_type<parallel>")] * rank))
    block = op.regions[0].blocks.append(elem_of(indices), i1)
    with ir.InsertionPoint(block):
        i = arith.index_cast(index, block.arguments[0])
        n = values[0]
        if per_tuple:  # the bound of the tuple component at this position
            c = linalg.IndexOp(rank - 1).result
            for k, v in enumerate(values[1:], 1):
                n = arith.select(arith.cmpi(arith.CmpIPredicate.eq, c, arith.constant(index, k)),
                                 v, n)
        zero = arith.constant(index, 0)
        low = arith.cmpi(arith.CmpIPredicate.slt, i, arith.subi(zero, n))
        high = arith.cmpi(arith.CmpIPredicate.sge, i, n)
        linalg.YieldOp([arith.ori(low, high)])
    flag = b.reduce(op.results[0], range(rank), arith.ori, False)
    ctx.range_checks.append((flag, message))


def fail_unless(ctx, node, ok: ir.Value, what: str) -> None:
    """Records in the model's status that the call fails (InputOutOfRange-
    Error naming `node` and `what`) when the i1 `ok` is false, as
    `check_indices` does for indices."""
    name = node.name or f"{node.op_type} -> '{node.output[0]}'"
    i1 = ir.IntegerType.get_signless(1)
    bad = arith.xori(ok, arith.constant(i1, 1))
    ctx.range_checks.append((tensor.from_elements(ir.RankedTensorType.get([], i1), [bad]),
                             f"{node.op_type} node '{name}': {what}"[:1000]))


def axis_masks(ctx, axes, rank):
    """Per dimension, an i1 saying whether the run-time `axes` (a 1-D
    tensor; negative axes count from the end) name it; and their number."""
    b = ctx.b
    index, i1 = ir.IndexType.get(), ir.IntegerType.get_signless(1)
    n = b.mixed_shape(axes)[0]
    n = b.index(n) if isinstance(n, int) else n
    loop = scf.ForOp(b.index(0), n, b.index(1), [arith.constant(i1, 0)] * rank)
    with ir.InsertionPoint(loop.body):
        a = arith.index_cast(index, tensor.extract(axes, [loop.induction_variable]))
        negative = arith.cmpi(arith.CmpIPredicate.slt, a, arith.constant(index, 0))
        a = arith.select(negative, arith.addi(a, arith.constant(index, rank)), a)
        scf.YieldOp([arith.ori(m, arith.cmpi(arith.CmpIPredicate.eq, a,
                                             arith.constant(index, d)))
                     for d, m in enumerate(loop.inner_iter_args)])
    return list(loop.results), n


def per_axis_entries(ctx, rank, n, read, defaults, ok):
    """A loop over n entries (an `index` value) that each name an axis and
    carry values, `read(j) -> (axis, values)` (index values; negative
    axes count from the end). Returns, per dim, the values of the entry
    naming it (`defaults[d]` when none does), and `ok` (i1) and-ed with
    every axis being in range and no dim being named twice."""
    b = ctx.b
    zero, one = b.index(0), b.index(1)
    width = len(defaults[0])
    init = [ok]
    for d in range(rank):
        init += list(defaults[d]) + [zero]
    loop = scf.ForOp(zero, n, one, init)
    with ir.InsertionPoint(loop.body):
        a, values = read(loop.induction_variable)
        carried = list(loop.inner_iter_args)
        valid = arith.andi(carried[0], arith.andi(
            arith.cmpi(arith.CmpIPredicate.sge, a, b.index(-rank)),
            arith.cmpi(arith.CmpIPredicate.slt, a, b.index(rank))))
        a = arith.select(arith.cmpi(arith.CmpIPredicate.slt, a, zero),
                         arith.addi(a, b.index(rank)), a)
        out = [valid]
        for d in range(rank):
            named = arith.cmpi(arith.CmpIPredicate.eq, a, b.index(d))
            old = carried[1 + (width + 1) * d:1 + (width + 1) * (d + 1)]
            out += [arith.select(named, v, o) for v, o in zip(values, old)]
            out.append(arith.addi(old[width], arith.select(named, one, zero)))
        scf.YieldOp(out)
    results = list(loop.results)
    ok, per_dim = results[0], []
    for d in range(rank):
        chunk = results[1 + (width + 1) * d:1 + (width + 1) * (d + 1)]
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.ule, chunk[width], one))
        per_dim.append(chunk[:width])
    return per_dim, ok


def unmasked_extents(masks, extents, count):
    """The first `count` of `extents` whose mask (i1) is false, in order
    (index values; 0 past the last), and how many are unmasked."""
    index, i1 = ir.IndexType.get(), ir.IntegerType.get_signless(1)
    out = [arith.constant(index, 0)] * count
    seen = arith.constant(index, 0)
    for m, e in zip(masks, extents):
        e = arith.constant(index, e) if isinstance(e, int) else e
        keep = arith.xori(m, arith.constant(i1, 1))
        for k in range(count):
            here = arith.andi(keep, arith.cmpi(arith.CmpIPredicate.eq, seen,
                                               arith.constant(index, k)))
            out[k] = arith.select(here, e, out[k])
        seen = arith.addi(seen, arith.select(keep, arith.constant(index, 1),
                                             arith.constant(index, 0)))
    return out, seen


def checked_reshape(ctx, node, x, extents, valid, what: str):
    """`x` reshaped to the run-time `extents` (index values), a shape the
    data decides. When `valid` (i1) is false, or the extents do not hold
    exactly x's elements, the call fails (InputOutOfRangeError: `what`) and
    the code reshapes to extents of 0 instead, so that it never reads past
    x. The result's extents are all dynamic; the importer pins those ONNX
    knows, which the check covers too."""
    b = ctx.b
    index, i64 = ir.IndexType.get(), ir.IntegerType.get_signless(64)
    zero = arith.constant(index, 0)
    total = arith.constant(index, 1)
    for d in b.mixed_shape(x):
        total = arith.muli(total, arith.constant(index, d) if isinstance(d, int) else d)
    product = arith.constant(index, 1)
    for e in extents:
        product = arith.muli(product, e)
    ok = arith.andi(valid, arith.cmpi(arith.CmpIPredicate.eq, product, total))
    expected = ctx.g.shape(node.output[0]) or (None,) * len(extents)
    for e, want in zip(extents, expected):
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.sge, e, zero))
        if isinstance(want, int):
            ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, e,
                                           arith.constant(index, want)))
    # The fallback keeps the extents the signature names (static ones, and
    # symbolic ones the inputs give), so that the call reaches its status
    # check; one of the others is 0, so nothing is read.
    fallback = [arith.constant(index, want) if isinstance(want, int) else None
                for want in expected]
    sym = ctx.g.sym_shape(node.output[0]) or ()
    for k, s in enumerate(sym[:len(fallback)]):
        if fallback[k] is None and isinstance(s, str) and ctx.g.evaluable(s):
            fallback[k] = ctx.symbolic_size(s)
    if all(f is not None for f in fallback):
        fallback = [zero] * len(extents)
    safe = [arith.select(ok, e, f if f is not None else zero) for e, f in zip(extents, fallback)]
    fail_unless(ctx, node, ok, what)
    target = tensor.from_elements(ir.RankedTensorType.get([len(extents)], i64),
                                  [arith.index_cast(i64, e) for e in safe])
    return tensor.reshape(b.tensor_type([None] * len(extents), elem_of(x)), x, target)


# The runtime reads at most this many status messages (manifest.cpp).
MAX_CHECKS = 4096


def status_value(checks) -> tuple[ir.Value, list[str]]:
    """The model's status from its `check_indices` flags (tensor<i1>s):
    an i32 scalar tensor, 0 or k when check k (the first failing one,
    1-based) found an index out of range, and the messages of the codes.
    Checks past MAX_CHECKS share its code. It is a linalg op (a kernel of
    its own on a GPU), not host scalar code."""
    i1, i32 = ir.IntegerType.get_signless(1), ir.IntegerType.get_signless(32)
    messages = [m for _, m in checks[:MAX_CHECKS]]
    if len(checks) > MAX_CHECKS:
        rest = len(checks) - MAX_CHECKS + 1
        messages[-1] = f"one of {rest} index checks failed (the first: {messages[-1]})"
    flags = [f for f, _ in checks]
    out = tensor.empty([], i32)
    scalar = ir.AffineMapAttr.get(ir.AffineMap.get(0, 0, []))
    op = linalg.GenericOp([out.type], flags, [out],
                          ir.ArrayAttr.get([scalar] * (len(flags) + 1)), ir.ArrayAttr.get([]))
    block = op.regions[0].blocks.append(*([i1] * len(flags)), i32)
    with ir.InsertionPoint(block):
        code = arith.constant(i32, 0)
        for k in reversed(range(len(flags))):
            code = arith.select(block.arguments[k],
                                arith.constant(i32, min(k + 1, MAX_CHECKS)), code)
        linalg.YieldOp([code])
    return op.results[0], messages


def wrap_clamp(i: ir.Value, size: ir.Value) -> ir.Value:
    """Index `i` (any integer type) as an `index` in [0, size): negative
    values count from the end, the rest is clamped. Index ops read through
    it: an out-of-range index from the data (a token id past the
    vocabulary) must never read or write outside the tensor."""
    index = ir.IndexType.get()
    i = arith.index_cast(index, i)
    zero = arith.constant(index, 0)
    i = arith.select(arith.cmpi(arith.CmpIPredicate.slt, i, zero), arith.addi(i, size), i)
    i = arith.maxsi(i, zero)
    return arith.minsi(i, arith.subi(size, arith.constant(index, 1)))


def read_if(present: ir.Value, read, default: ir.Value) -> ir.Value:
    """`read()` (emitted where it runs) when `present` (i1) holds, else
    `default`: an element of a run-time tensor that may not have it is
    never read."""
    op = scf.IfOp(present, [default.type], has_else=True)
    with ir.InsertionPoint(op.then_block):
        scf.YieldOp([read()])
    with ir.InsertionPoint(op.else_block):
        scf.YieldOp([default])
    return op.results[0]
