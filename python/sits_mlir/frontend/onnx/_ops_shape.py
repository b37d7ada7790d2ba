"""Data-movement ONNX ops: Reshape, Flatten, Squeeze and Unsqueeze (to ONNX's
inferred shape, symbolic extents included), Transpose, Concat, Split,
Gather, Expand, Tile, Trilu, DepthToSpace/SpaceToDepth, Shape and Size.
(Slice and Pad are in `_ops_slice.py`.)
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from ... import ir
from ...dialects import arith, linalg, scf, tensor
from . import _types
from ._builder import DYN, elem_of, reshape_kind, shape_of
from ._graph import attributes
from ._ops_common import (I64, _PARALLEL, _fmt, axis_masks, cast_value, check_indices,
                          checked_reshape, extract_slice, fail_unless, has_input, need_const,
                          need_static, norm_axis, read_if, unmasked_extents,
                          wrap_clamp)
from ._ops_registry import converter


def _check_depth_space(g, node):
    s = g.shape(node.input[0])
    if s is None or len(s) != 4:
        return "needs a 4-D NCHW input"
    bs = attributes(node).get("blocksize")
    if not bs or bs < 1:
        return "blocksize must be a positive integer"
    if node.op_type == "DepthToSpace" and s[1] is not None and s[1] % (bs * bs):
        return "the channel count must be a multiple of blocksize²"
    if node.op_type == "SpaceToDepth" and any(d is not None and d % bs for d in s[2:]):
        return "H and W must be multiples of blocksize"
    return None


@converter("DepthToSpace", "SpaceToDepth", check=_check_depth_space)
def _depth_space(ctx, node):
    """The ONNX definitions: a 6-D expansion, a transpose and a collapse.
    Extents known only at run time must divide by the block size (else the
    call fails, and the code reads within x)."""
    b = ctx.b
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    bs = a["blocksize"]
    crd = a.get("mode", "DCR") in ("CRD", b"CRD")
    shape = shape_of(x)
    dims = b.mixed_shape(x)
    ok = arith.constant(ir.IntegerType.get_signless(1), 1)

    def part(k, by):
        """Extent k divided by `by`: an int, or an index value (checked)."""
        nonlocal ok
        if shape[k] is not None:
            return shape[k] // by
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, arith.remui(
            dims[k], b.index(by)), b.index(0)))
        return arith.divui(dims[k], b.index(by))

    def expand(groups, extents):
        static = [e if isinstance(e, int) else None for e in extents]
        sizes = [b.index(e) if isinstance(e, int) else e for e in extents]
        return b.expand_sized(x, groups, static, sizes)

    n, c, h, w = dims
    if node.op_type == "DepthToSpace":
        cc = part(1, bs * bs)
        if crd:
            t = expand([[0], [1, 2, 3], [4], [5]], [n, cc, bs, bs, h, w])
            perm = (0, 1, 4, 2, 5, 3)
        else:
            t = expand([[0], [1, 2, 3], [4], [5]], [n, bs, bs, cc, h, w])
            perm = (0, 3, 4, 1, 5, 2)
        groups = [[0], [1], [2, 3], [4, 5]]
    else:
        t = expand([[0], [1], [2, 3], [4, 5]], [n, c, part(2, bs), bs, part(3, bs), bs])
        perm = (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4)
        groups = [[0], [1, 2, 3], [4], [5]]
    if None in shape:
        fail_unless(ctx, node, ok, f"an extent is not a multiple of the block size {bs}")
    t = b.transpose(t, perm)
    ts = shape_of(t)
    out = [None if any(ts[j] is None for j in g) else int(np.prod([ts[j] for j in g]))
           for g in groups]
    return [b.collapse(t, groups, out)]


def _check_reshape_to_inferred(g, node, what):
    src = g.shape(node.input[0])
    dst = g.shape(node.output[0])
    if src is None or dst is None:
        return f"the {what} result shape could not be inferred"
    if reshape_kind(src, dst) is None and not symbolic_reshape_ok(g, node.input[0], node.output[0]) \
            and _target_symbols(g, node) is None:
        return (f"{what} from {_fmt(src)} to {_fmt(dst)} is neither a collapse nor an "
                f"expansion and has dynamic extents")
    return None


def _target_symbols(g, node):
    """(source, target) symbolic shapes of a Flatten, or of a Reshape to a
    constant shape, in terms of the input's own extents (`d0`, `d1`, ...
    for its dynamic ones): a 0 in the shape copies the input's extent, a
    -1 is the product of the extents the others leave. None when that is
    not a plain product (a dynamic extent split, or one of several -1s)."""
    src = g.shape(node.input[0])
    if src is None:
        return None
    syms = [d if d is not None else f"d{k}" for k, d in enumerate(src)]
    if node.op_type == "Flatten":
        axis = attributes(node).get("axis", 1)
        axis = axis + len(src) if axis < 0 else axis  # in [-r, r]
        return syms, [_product_symbol(syms[:axis]), _product_symbol(syms[axis:])]
    if node.op_type != "Reshape" or not g.is_const(node.input[1]):
        return None
    shape = [int(v) for v in np.asarray(g.const(node.input[1])).reshape(-1)]
    allowzero = attributes(node).get("allowzero", 0)
    dst = [syms[k] if v == 0 and not allowzero and k < len(syms) else v
           for k, v in enumerate(shape)]
    if dst.count(-1) > 1 or any(isinstance(v, int) and v < -1 for v in dst):
        return None
    if -1 in dst:
        left = list(syms)
        for v in dst:
            if isinstance(v, str):
                if v not in left:
                    return None
                left.remove(v)
        known = int(np.prod([v for v in dst if isinstance(v, int) and v != -1], dtype=np.int64))
        static = int(np.prod([v for v in left if isinstance(v, int)], dtype=np.int64))
        if known == 0 or static % known:
            return None
        dst[dst.index(-1)] = _product_symbol([static // known] + [v for v in left if isinstance(v, str)])
    return syms, dst


def _product_symbol(factors):
    """A product of ints and names as `_product_of` reads it: an int when
    every factor is one."""
    names = [f for f in factors if isinstance(f, str)]
    c = int(np.prod([f for f in factors if not isinstance(f, str)], dtype=np.int64))
    if not names:
        return c
    return "*".join(([str(c)] if c != 1 else []) + names)


def _reshape_by_symbols(ctx, node):
    """A Flatten, or a Reshape to a constant shape, by `_target_symbols`: a
    collapse or an expansion whose dynamic extents are products of the
    input's, or a `tensor.reshape` to extents computed from them."""
    b = ctx.b
    x = ctx.get(node.input[0])
    src, dst = _target_symbols(ctx.g, node)
    shape = ctx.g.shape(node.output[0])
    if _same_symbolic(src, dst):
        return [b.cast_to(x, shape)]
    groups = symbolic_groups(src, dst)
    if groups is not None and len(dst) < len(src):
        return [b.collapse(x, groups, shape)]
    sizes = []
    for d, want in zip(dst, shape):
        if want is not None:
            sizes.append(b.index(want))
            continue
        c, names = _product_of(d)
        e = b.index(c)
        for n in names:
            e = arith.muli(e, b.dim(x, int(n[1:])))
        sizes.append(e)
    if groups is not None:
        return [b.expand_sized(x, groups, shape, sizes)]
    i64 = ir.IntegerType.get_signless(64)
    target = tensor.from_elements(ir.RankedTensorType.get([len(sizes)], i64),
                                  [arith.index_cast(i64, e) for e in sizes])
    # All extents dynamic: memref.reshape lowers only those (the importer
    # pins the static ones).
    return [tensor.reshape(b.tensor_type([None] * len(sizes), elem_of(x)), x, target)]


def symbolic_reshape_ok(g, src_name, dst_name) -> bool:
    """Whether ONNX's symbolic shapes prove that reshaping `src_name` to
    `dst_name` is a collapse or an expansion whose dynamic extents are
    products of named ones (`batch*seq` from `batch` and `seq`)."""
    src, dst = g.sym_shape(src_name), g.sym_shape(dst_name)
    if _same_symbolic(src, dst):
        return True
    if symbolic_groups(src, dst) is None:
        return False
    # An expansion computes its dynamic extents from graph-input dimensions.
    static = g.shape(dst_name) or ()
    return len(dst) < len(src) or all(
        d is not None or g.evaluable(s) for d, s in zip(static, dst))


def _same_symbolic(src, dst) -> bool:
    """Whether two symbolic shapes are provably equal (every extent known)."""
    return (src is not None and dst is not None and len(src) == len(dst) and
            all(a is not None and a == b for a, b in zip(src, dst)))


def symbolic_groups(src, dst):
    """The reassociation of a collapse or expansion between symbolic shapes
    `src` and `dst` (ints, symbol names and `a*b` products), as groups of
    the larger shape's dims; None when none is provable."""
    if src is None or dst is None or len(src) == len(dst):
        return None
    big, small = (src, dst) if len(src) > len(dst) else (dst, src)
    factors = [_product_of(d) for d in big]
    if any(f is None for f in factors):
        return None
    groups, i = [], 0
    for d in small:
        want = _product_of(d)
        if want is None:
            return None
        start, coefficient, symbols = i, 1, []
        while i < len(big):
            c, syms = factors[i]
            coefficient *= c
            symbols += syms
            i += 1
            if (coefficient, tuple(sorted(symbols))) == want:
                break
        else:
            return None
        groups.append(list(range(start, i)))
    # Trailing unit dims join the last group.
    while i < len(big) and factors[i] == (1, ()):
        if not groups:
            return None
        groups[-1].append(i)
        i += 1
    return groups if i == len(big) else None


def _product_of(dim):
    """A static or symbolic extent as (coefficient, sorted symbol factors),
    or None when it is unknown or not a plain product."""
    if isinstance(dim, (int, np.integer)):
        return int(dim), ()
    if not isinstance(dim, str):
        return None
    coefficient, symbols = 1, []
    depth, start, terms = 0, 0, []
    for i, ch in enumerate(dim):  # factors of the top-level product
        depth += (ch == "(") - (ch == ")")
        if ch == "*" and depth == 0:
            terms.append(dim[start:i])
            start = i + 1
    terms.append(dim[start:])
    for term in terms:
        term = term.replace(" ", "")
        while term.startswith("(") and term.endswith(")"):
            term = term[1:-1]
        if not term:
            return None
        if term.isdigit():
            coefficient *= int(term)
        else:  # a name, or a sum such as `past+seq`, taken whole
            symbols.append(term)
    return coefficient, tuple(sorted(symbols))


def _runtime_shape(g, node) -> bool:
    """Whether a Reshape's target shape is read at run time: not provable
    from ONNX's symbolic shapes, and not a constant whose extents are
    products of the input's (a constant that splits a dynamic extent is
    read like a computed one)."""
    if symbolic_reshape_ok(g, node.input[0], node.output[0]):
        return False
    if not g.is_const(node.input[1]):
        return True
    src, dst = g.shape(node.input[0]), g.shape(node.output[0])
    return src is not None and dst is not None and reshape_kind(src, dst) is None and \
        _target_symbols(g, node) is None


def _check_runtime_axes(g, node, name):
    """Why a 1-D int64 input `name` (axes, a shape) read at run time cannot
    be, or None. Its length (the output's rank) must be known."""
    s = g.shape(node.input[1])
    if g.dtype(node.input[1]) != np.int64 or s is None or len(s) != 1:
        return f"input '{name}' must be a 1-D int64 tensor"
    if g.shape(node.input[0]) is None:
        return "input rank is unknown"
    if s[0] is None and g.rank(node.output[0]) is None:
        return f"the length of '{name}' (the output's rank) must be known at import time"
    return None


def _check_reshape(g, node):
    if _runtime_shape(g, node):
        return _check_runtime_axes(g, node, "shape")
    return _check_reshape_to_inferred(g, node, "Reshape")


def _reshape_to_inferred(ctx, node):
    g, b = ctx.g, ctx.b
    x = ctx.get(node.input[0])
    shape = g.shape(node.output[0])
    groups = None
    if symbolic_reshape_ok(g, node.input[0], node.output[0]):
        groups = symbolic_groups(g.sym_shape(node.input[0]), g.sym_shape(node.output[0]))
    if groups is None:
        if reshape_kind(shape_of(x), shape) is None and \
                not _same_symbolic(g.sym_shape(node.input[0]), g.sym_shape(node.output[0])):
            return _reshape_by_symbols(ctx, node)
        return [b.reshape(x, shape)]  # the shapes tell
    if len(shape) < len(shape_of(x)):
        return [b.collapse(x, groups, shape)]
    # An expansion: every dynamic extent comes from the symbols it names.
    sizes = [None if d is not None else ctx.symbolic_size(s)
             for d, s in zip(shape, g.sym_shape(node.output[0]))]
    return [b.expand_sized(x, groups, shape, sizes)]


def _reshape(ctx, node):
    if not _runtime_shape(ctx.g, node):
        return _reshape_to_inferred(ctx, node)
    # A shape computed at run time: 0 copies the input's extent there
    # (unless allowzero), one -1 takes what is left.
    b = ctx.b
    x, shape = ctx.get(node.input[0]), ctx.get(node.input[1])
    index = ir.IndexType.get()
    rank = ctx.g.rank(node.output[0]) or shape_of(shape)[0]
    ins = [arith.constant(index, d) if isinstance(d, int) else d for d in b.mixed_shape(x)]
    zero, one, minus = (arith.constant(index, v) for v in (0, 1, -1))
    total = one
    for d in ins:
        total = arith.muli(total, d)
    allowzero = ctx.attrs(node).get("allowzero", 0)
    extents, known, wildcards = [], one, zero
    for k in range(rank):
        e = arith.index_cast(index, tensor.extract(shape, [arith.constant(index, k)]))
        if not allowzero:
            copy = ins[k] if k < len(ins) else zero
            e = arith.select(arith.cmpi(arith.CmpIPredicate.eq, e, zero), copy, e)
        wild = arith.cmpi(arith.CmpIPredicate.eq, e, minus)
        wildcards = arith.addi(wildcards, arith.select(wild, one, zero))
        known = arith.muli(known, arith.select(wild, one, e))
        extents.append(e)
    empty = arith.cmpi(arith.CmpIPredicate.eq, known, zero)
    rest = arith.select(empty, zero, arith.divui(total, arith.select(empty, one, known)))
    extents = [arith.select(arith.cmpi(arith.CmpIPredicate.eq, e, minus), rest, e)
               for e in extents]
    single = arith.cmpi(arith.CmpIPredicate.ule, wildcards, one)
    return [checked_reshape(ctx, node, x, extents, single,
                            f"the shape does not fit the input's {_fmt(shape_of(x))} elements")]


# The result shape is ONNX's inferred one where a constant or ONNX's
# symbolic shapes give it: the shape input is then not read.
converter("Reshape", check=_check_reshape,
          reads=lambda g, n: (0, 1) if _runtime_shape(g, n) else (0,))(_reshape)
converter("Flatten", check=lambda g, n: _check_reshape_to_inferred(g, n, "Flatten"))(
    _reshape_to_inferred)


def _check_squeeze(g, node):  # opsets 1-12: the axes are an attribute
    return _check_reshape_to_inferred(g, node, node.op_type)


def _check_squeeze_13(g, node):  # opset 13 on: the axes are input 1
    if has_input(node, 1) and not g.is_const(node.input[1]):
        return _check_runtime_axes(g, node, "axes")
    return _check_squeeze(g, node)


def _squeeze_13(ctx, node):
    if not has_input(node, 1) or ctx.g.is_const(node.input[1]):
        return _reshape_to_inferred(ctx, node)
    # Axes computed at run time: which extents go (or where the 1s go) is
    # only known then.
    b = ctx.b
    x, axes = ctx.get(node.input[0]), ctx.get(node.input[1])
    rank, count = len(shape_of(x)), shape_of(axes)[0]
    out_rank = ctx.g.rank(node.output[0])
    index = ir.IndexType.get()
    if node.op_type == "Squeeze":
        out_rank = rank - count if out_rank is None else out_rank
        check_indices(ctx, node, axes, rank, "axes")
        masks, _ = axis_masks(ctx, axes, rank)
        extents, kept = unmasked_extents(masks, b.mixed_shape(x), out_rank)
        valid = arith.cmpi(arith.CmpIPredicate.eq, kept, arith.constant(index, out_rank))
        return [checked_reshape(ctx, node, x, extents, valid,
                                "axes name an axis twice or one whose extent is not 1")]
    out_rank = rank + count if out_rank is None else out_rank
    check_indices(ctx, node, axes, out_rank, "axes")
    masks, _ = axis_masks(ctx, axes, out_rank)
    ins = [arith.constant(index, d) if isinstance(d, int) else d for d in b.mixed_shape(x)]
    one, zero = arith.constant(index, 1), arith.constant(index, 0)
    extents, seen = [], zero
    for m in masks:  # a 1 where the axes say, else the next input extent
        e = zero
        for d, v in enumerate(ins):
            e = arith.select(arith.cmpi(arith.CmpIPredicate.eq, seen,
                                        arith.constant(index, d)), v, e)
        extents.append(arith.select(m, one, e))
        seen = arith.addi(seen, arith.select(m, zero, one))
    valid = arith.cmpi(arith.CmpIPredicate.eq, seen, arith.constant(index, rank))
    return [checked_reshape(ctx, node, x, extents, valid, "axes name an axis twice")]


converter("Squeeze", "Unsqueeze", check=_check_squeeze)(_reshape_to_inferred)
converter("Squeeze", "Unsqueeze", check=_check_squeeze_13, since=13)(_squeeze_13)


@converter("Transpose")
def _transpose(ctx, node):
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    perm = ctx.attrs(node).get("perm", list(range(rank))[::-1])
    return [ctx.transpose(x, node.input[0], perm)]


def _concat_reads(g, node) -> tuple:
    """The inputs a Concat reads: not those statically empty along its axis
    (the pass-through half of a partial rotary embedding that covers the
    whole head), whose producers then need not be imported; all of them
    when every input is empty."""
    named = [k for k, x in enumerate(node.input) if x]
    shapes = [g.shape(node.input[k]) for k in named]
    if not shapes or any(s is None for s in shapes):
        return tuple(named)
    axis = next((a.i for a in node.attribute if a.name == "axis"), None)
    rank = len(shapes[0])
    if axis is None or not -rank <= axis < rank:
        return tuple(named)
    axis = norm_axis(axis, rank)
    full = tuple(k for k, s in zip(named, shapes) if len(s) == rank and s[axis] != 0)
    return full or tuple(named)


@converter("Concat", reads=_concat_reads)
def _concat(ctx, node):
    reads = _concat_reads(ctx.g, node)
    vals = [ctx.get(node.input[k]) for k in reads]
    shapes = [shape_of(v) for v in vals]
    rank = len(shapes[0])
    axis = norm_axis(ctx.attrs(node)["axis"], rank)
    vals = [v for v, s in zip(vals, shapes) if s[axis] != 0] or vals[:1]
    if len(vals) == 1:
        return [vals[0]]
    shapes = [shape_of(v) for v in vals]
    inferred = ctx.g.shape(node.output[0]) or (None,) * rank
    out = []
    for d in range(rank):
        col = [s[d] for s in shapes]
        if inferred[d] is not None:
            out.append(inferred[d])
        elif d == axis:
            out.append(None if None in col else sum(col))
        else:
            known = [c for c in col if c is not None]
            out.append(known[0] if known else None)
    return [tensor.concat(ctx.b.tensor_type(out, elem_of(vals[0])), axis, vals)]


def _runtime_split(g, node) -> bool:
    """Whether a Split's lengths are only known at run time: given by a
    computed input, or equal parts of a dynamic extent."""
    if has_input(node, 1):
        return not g.is_const(node.input[1])
    xs = g.shape(node.input[0])
    return xs is not None and xs[norm_axis(attributes(node).get("axis", 0), len(xs))] is None


def _check_split(g, node):
    xs = g.shape(node.input[0])
    if xs is None:
        return "input rank is unknown"
    if _runtime_split(g, node) and has_input(node, 1):
        s = g.shape(node.input[1])
        if g.dtype(node.input[1]) != np.int64 or s is None or len(s) != 1:
            return "input 'split' must be a 1-D int64 tensor"
        if s[0] is not None and s[0] != len(node.output):
            return f"'split' has {s[0]} lengths for {len(node.output)} outputs"
        return None
    if _runtime_split(g, node):
        return None
    axis = norm_axis(attributes(node).get("axis", 0), len(xs))
    for o in node.output:
        s = g.shape(o) if o else ()
        if s is None or (o and s[axis] is None):
            return "Split needs static output extents along the split axis"
    return None


@converter("Split", check=_check_split)
def _split(ctx, node):
    g = ctx.g
    x = ctx.get(node.input[0])
    rank = len(shape_of(x))
    axis = norm_axis(ctx.attrs(node).get("axis", 0), rank)
    if _runtime_split(g, node):
        return _split_at_run_time(ctx, node, x, axis)
    # Given lengths are the truth: inferred output types may have come
    # from a symbolic inference that misreads a length of 0.
    given = g.const(node.input[1]) if has_input(node, 1) else None
    outs, offset = [], 0
    for k, o in enumerate(node.output):
        size = int(given[k]) if given is not None and k < len(given) else g.shape(o)[axis]
        outs.append(extract_slice(ctx, x, {axis: (offset, size, 1)}) if o else None)
        offset += size
    return outs


def _split_at_run_time(ctx, node, x, axis):
    """Split with lengths computed at run time: slices at offsets that
    follow from them. Lengths that are negative or do not add up to the
    extent fail the call; the slices stay inside x meanwhile."""
    b = ctx.b
    index = ir.IndexType.get()
    extent = b.mixed_shape(x)[axis]
    extent = arith.constant(index, extent) if isinstance(extent, int) else extent
    zero = arith.constant(index, 0)
    count = arith.constant(index, len(node.output))
    if has_input(node, 1):
        given = ctx.get(node.input[1])
        lengths = [arith.index_cast(index, tensor.extract(given, [arith.constant(index, k)]))
                   for k in range(len(node.output))]
    elif "num_outputs" in ctx.attrs(node):
        # Parts of ceil(extent / n); the last one takes what is left.
        part = arith.ceildivui(extent, count)
        lengths = [part] * (len(node.output) - 1)
        lengths.append(arith.subi(extent, arith.muli(part, arith.subi(count, arith.constant(
            index, 1)))))
    else:  # equal parts: the extent must divide
        lengths = [arith.divui(extent, count)] * len(node.output)
    offset, total, outs = zero, zero, []
    ok = arith.constant(ir.IntegerType.get_signless(1), 1)
    for k, o in enumerate(node.output):
        n = lengths[k]
        ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.sge, n, zero))
        total = arith.addi(total, n)
        # Clamped into [offset, extent): never past the end.
        size = arith.minsi(arith.maxsi(n, zero), arith.subi(extent, offset))
        if o:
            shape = list(shape_of(x))
            shape[axis] = None
            sizes = b.mixed_shape(x)
            sizes[axis] = size
            outs.append(tensor.extract_slice(
                b.tensor_type(shape, elem_of(x)), x, [offset],
                [v for v in sizes if not isinstance(v, int)], [],
                [DYN if i == axis else 0 for i in range(len(shape))],
                [v if isinstance(v, int) else DYN for v in sizes], [1] * len(shape)))
        else:
            outs.append(None)
        offset = arith.addi(offset, size)
    ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, total, extent))
    fail_unless(ctx, node, ok, f"the lengths do not add up to the extent along axis {axis}")
    return outs


def _check_gather(g, node):
    xs, is_ = g.shape(node.input[0]), g.shape(node.input[1])
    if xs is None or is_ is None:
        return "input ranks are unknown"
    axis = attributes(node).get("axis", 0)
    if not -len(xs) <= axis < len(xs):
        return f"axis {axis} is out of range for rank {len(xs)}"
    axis = norm_axis(axis, len(xs))
    return None


#: Float tables with more elements than this that a Gather reads at run-time
#: indices along axis 0 (embedding tables) are stored as INT8 rows when the
#: weights are quantized (`Importer.quantize_tables`).
QUANTIZE_TABLE_ABOVE = 1 << 20


@converter("Gather", check=_check_gather)
def _gather(ctx, node):
    g = ctx.g
    if ctx.quantize_tables:
        rows = _gather_int8_rows(ctx, node)
        if rows is not None:
            return [rows]
    narrow = g.narrow.get(node.input[0])
    if narrow is None:
        return [_emit_gather(ctx, node, ctx.get(node.input[0]))]
    # Rows of narrow weights (an fp16 embedding table): gathered as stored,
    # then widened.
    rows = _emit_gather(ctx, node, ctx.get(narrow))
    return [cast_value(ctx, rows, g.dtype(narrow), g.dtype(node.output[0]))]


def _gather_int8_rows(ctx, node) -> Optional[ir.Value]:
    """An embedding lookup with the table stored as INT8 codes and a scale
    per row (its largest magnitude / 127), the rows widened after the
    gather: a quarter of an fp32 table's bytes, in the artifact and in
    memory, for an error of at most half a step (1/254 of the row's
    largest magnitude). None when `node` is not such a lookup."""
    g, b = ctx.g, ctx.b
    name = g.narrow.get(node.input[0], node.input[0])
    idx_name = node.input[1]
    if not g.is_const(name) or g.is_const(idx_name):
        return None
    table = g.const(name)
    out_dt = g.dtype(node.output[0])
    if (table.ndim != 2 or table.size <= QUANTIZE_TABLE_ABOVE
            or norm_axis(ctx.attrs(node).get("axis", 0), 2) != 0
            or not _types.is_float(table.dtype) or not _types.is_float(out_dt)):
        return None
    t = table.astype(np.float32)
    amax = np.abs(t).max(axis=1, keepdims=True)
    scale = np.where(amax > 0, amax / 127, 1).astype(np.float32)
    codes = np.clip(np.rint(t / scale), -127, 127).astype(np.int8)
    check_indices(ctx, node, ctx.get(idx_name), table.shape[0],
                  f"an index of '{idx_name}' (into axis 0 of '{node.input[0]}') is")
    indices = ctx.get(idx_name)
    rows = gather_generic(ctx, b.constant(codes, name=f"{name}_int8"), indices, 0)
    # [V, 1] scales gather to [..., 1]: they broadcast over each row.
    scales = gather_generic(ctx, b.constant(scale, name=f"{name}_scale"), indices, 0)
    wide = cast_value(ctx, rows, np.int8, np.float32)
    return cast_value(ctx, b.elementwise(arith.mulf, [wide, scales]), np.float32, out_dt)


def _emit_gather(ctx, node, data) -> ir.Value:
    g, b = ctx.g, ctx.b
    ds = shape_of(data)
    axis = norm_axis(ctx.attrs(node).get("axis", 0), len(ds))
    idx_name = node.input[1]
    check_indices(ctx, node, None if g.is_const(idx_name) else ctx.get(idx_name),
                  ds[axis] if ds[axis] is not None else b.dim(data, axis),
                  f"an index of '{idx_name}' (into axis {axis} of '{node.input[0]}') is")
    if g.is_const(idx_name) and (ds[axis] is not None or np.all(g.const(idx_name) >= 0)):
        # Slices at constant offsets. (Negative indices along a dynamic
        # axis, x[:, -1] in a decoder, count from an extent known only at
        # run time: the generic below wraps them.)
        idx = g.const(idx_name)
        if ds[axis] is not None:
            idx = np.where(idx < 0, idx + ds[axis], idx)
        if idx.ndim == 0:
            # One index: a slice that drops the axis.
            sl = extract_slice(ctx, data, {axis: (int(idx), 1, 1)})
            return b.drop_unit_dims(sl, [d for d in range(len(ds)) if d != axis])
        flat = idx.reshape(-1)
        if flat.size > 0 and np.all(np.diff(flat) == 1):
            sl = extract_slice(ctx, data, {axis: (int(flat[0]), int(flat.size), 1)})
            out = list(ds[:axis]) + list(idx.shape) + list(ds[axis + 1:])
            return b.reshape(sl, out)
    indices = ctx.get(idx_name)
    return gather_generic(ctx, data, indices, axis)


def gather_generic(ctx, data, indices, axis):
    """`linalg.generic` reading `data` at `indices` along `axis` with
    `tensor.extract` (negative indices count from the end; out-of-range
    ones are clamped, see `wrap_clamp`). Along an axis whose extent is 0
    at run time nothing can be read: the result is zeros (and
    `check_indices` fails the call when there are indices)."""
    b = ctx.b
    ds, is_ = shape_of(data), shape_of(indices)
    q = len(is_)
    dmix, imix = b.mixed_shape(data), b.mixed_shape(indices)
    out_mixed = dmix[:axis] + imix + dmix[axis + 1:]
    n = len(out_mixed)
    elem = elem_of(data)
    init = b.empty(out_mixed, elem)
    ielem = elem_of(indices)
    extent = b.dim(data, axis) if ds[axis] is None else None
    if extent is not None:
        empty = arith.cmpi(arith.CmpIPredicate.eq, extent, b.index(0))
        branch = scf.IfOp(empty, [init.type], has_else=True)
        with ir.InsertionPoint(branch.then_block):
            scf.YieldOp([b.fill(b.scalar(0, elem), init)])
        with ir.InsertionPoint(branch.else_block):
            scf.YieldOp([_gather_body(data, indices, axis, init, extent)])
        return branch.results[0]
    return _gather_body(data, indices, axis, init, b.index(ds[axis]))


def _gather_body(data, indices, axis, init, size):
    ds, n, q = shape_of(data), len(shape_of(init)), len(shape_of(indices))
    elem, ielem = elem_of(data), elem_of(indices)
    idx_map = ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(axis + j) for j in range(q)])
    op = linalg.GenericOp([init.type], [indices], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(idx_map),
                                            ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))]),
                          ir.ArrayAttr.get([_PARALLEL()] * n))
    block = op.regions[0].blocks.append(ielem, elem)
    with ir.InsertionPoint(block):
        i = wrap_clamp(block.arguments[0], size)
        coords = [linalg.IndexOp(d).result for d in range(axis)] + [i] + \
                 [linalg.IndexOp(axis + q + d).result for d in range(len(ds) - axis - 1)]
        linalg.YieldOp([tensor.extract(data, coords)])
    return op.results[0]


def _symbolic_expand(g, node) -> bool:
    """Whether symbolic inference names every extent of an Expand to a
    computed shape in terms of the graph inputs' dimensions."""
    out = g.sym_shape(node.output[0])
    return out is not None and all(map(g.evaluable, out))


def _check_expand(g, node):
    if not g.is_const(node.input[1]) and not _symbolic_expand(g, node):
        # The shape's values are read at run time.
        return _check_runtime_axes(g, node, "shape")
    if g.shape(node.output[0]) is None:
        return "the result shape could not be inferred"
    return None


@converter("Expand", check=_check_expand)
def _expand(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    if not ctx.g.is_const(node.input[1]) and not _symbolic_expand(ctx.g, node):
        return [_expand_at_run_time(ctx, node, x)]
    out = ctx.g.shape(node.output[0])
    sym_out = ctx.g.sym_shape(node.output[0])
    sym_in = ctx.g.sym_shape(node.input[0]) or ()
    xs = shape_of(x)
    off = len(out) - len(xs)
    mixed = []
    for o, d in enumerate(out):
        if d is not None:
            mixed.append(d)
        elif o >= off and (ctx.g.is_const(node.input[1]) or sym_in[o - off] == sym_out[o]):
            mixed.append(b.dim(x, o - off))
        else:
            mixed.append(ctx.symbolic_size(sym_out[o]))
    return [b.broadcast_to(x, mixed)]


def _expand_at_run_time(ctx, node, x):
    """Expand to a shape read at run time: NumPy broadcasting of x's shape
    and the shape's values, both aligned to the right. Values that do not
    broadcast fail the call, and the result is then empty."""
    b = ctx.b
    index = ir.IndexType.get()
    shape = ctx.get(node.input[1])
    xs = [arith.constant(index, d) if isinstance(d, int) else d for d in b.mixed_shape(x)]
    n = b.mixed_shape(shape)[0]
    rank = ctx.g.rank(node.output[0]) or max(n, len(xs))
    n = arith.constant(index, n) if isinstance(n, int) else n
    one, zero = arith.constant(index, 1), arith.constant(index, 0)
    # The rank is max(len(shape), rank(x)).
    ok = arith.cmpi(arith.CmpIPredicate.eq, arith.maxui(n, arith.constant(index, len(xs))),
                    arith.constant(index, rank))
    extents = []
    for o in range(rank):
        # shape[o - (rank - n)], or 1 left of the shape (read only inside).
        k = arith.subi(arith.addi(arith.constant(index, o), n), arith.constant(index, rank))
        inside = arith.cmpi(arith.CmpIPredicate.sge, k, zero)
        s = read_if(inside, lambda k=k: arith.index_cast(index, tensor.extract(shape, [k])),
                    one)
        d = xs[o - (rank - len(xs))] if o >= rank - len(xs) else one
        fits = arith.ori(arith.cmpi(arith.CmpIPredicate.eq, s, one),
                         arith.ori(arith.cmpi(arith.CmpIPredicate.eq, d, one),
                                   arith.cmpi(arith.CmpIPredicate.eq, s, d)))
        ok = arith.andi(ok, arith.andi(fits, arith.cmpi(arith.CmpIPredicate.sge, s, zero)))
        static = shape_of(x)[o - (rank - len(xs))] if o >= rank - len(xs) else 1
        # An extent of x other than 1 is the result's (or the call fails).
        extents.append(static if static not in (None, 1) else
                       arith.select(arith.cmpi(arith.CmpIPredicate.eq, s, one), d, s))
    fail_unless(ctx, node, ok, f"the shape does not broadcast with the input's "
                f"{_fmt(shape_of(x))}")
    return b.broadcast_to(x, [e if isinstance(e, int) else arith.select(ok, e, zero)
                              for e in extents])


def _check_tile(g, node):
    return need_const(g, node, 1) or need_static(g, node.input[0], what="Tile")


@converter("Tile", check=_check_tile)
def _tile(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    xs = shape_of(x)
    reps = [int(r) for r in ctx.g.const(node.input[1]).reshape(-1)]
    if all(r == 1 for r in reps):
        return [x]
    out = [d * r for d, r in zip(xs, reps)]
    n = len(xs)
    elem = elem_of(x)
    init = b.empty(out, elem)
    op = linalg.GenericOp([init.type], [], [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))]),
                          ir.ArrayAttr.get([_PARALLEL()] * n))
    block = op.regions[0].blocks.append(elem)
    with ir.InsertionPoint(block):
        coords = []
        for d in range(n):
            i = linalg.IndexOp(d).result
            if reps[d] != 1:
                i = arith.remui(i, arith.constant(ir.IndexType.get(), xs[d]))
            coords.append(i)
        linalg.YieldOp([tensor.extract(x, coords)])
    return [op.results[0]]


def _check_trilu(g, node):
    s = g.shape(node.input[0])
    if s is None or len(s) < 2:
        return "Trilu needs a tensor of rank >= 2"
    if has_input(node, 1) and not g.is_const(node.input[1]):
        ks = g.shape(node.input[1])
        if g.dtype(node.input[1]) != np.int64 or ks is None or \
                any(d is not None and d != 1 for d in ks) or len(ks) > 1:
            return "input 'k' must be an int64 scalar"
    return None


@converter("Trilu", check=_check_trilu)
def _trilu(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    # k is the diagonal's offset: a constant, or a scalar read at run time.
    k = 0
    if has_input(node, 1):
        k = ctx.g.const(node.input[1]) if ctx.g.is_const(node.input[1]) else None
        k = int(np.asarray(k).reshape(-1)[0]) if k is not None else ctx.get(node.input[1])
    if not isinstance(k, int):
        k = tensor.extract(k, [b.index(0)] * len(shape_of(k)))
    upper = ctx.attrs(node).get("upper", 1)
    n = len(shape_of(x))
    elem = elem_of(x)
    zero = b.scalar(0, elem)
    init = b.empty(b.mixed_shape(x), elem)
    ident = ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))
    op = linalg.GenericOp([init.type], [x], [init], ir.ArrayAttr.get([ident, ident]),
                          ir.ArrayAttr.get([_PARALLEL()] * n))
    block = op.regions[0].blocks.append(elem, elem)
    with ir.InsertionPoint(block):
        i64 = I64()
        row = arith.index_cast(i64, linalg.IndexOp(n - 2).result)
        col = arith.index_cast(i64, linalg.IndexOp(n - 1).result)
        diff = arith.subi(col, row)
        kk = arith.constant(i64, k) if isinstance(k, int) else k
        keep = arith.cmpi(arith.CmpIPredicate.sge if upper else arith.CmpIPredicate.sle, diff, kk)
        linalg.YieldOp([arith.select(keep, block.arguments[0], zero)])
    return [op.results[0]]


@converter("Size")
def _size(ctx, node):
    """The element count, when some extent is known only at run time (a
    static one is folded at import time)."""
    b = ctx.b
    i64 = I64()
    total = arith.constant(i64, 1)
    for d in b.mixed_shape(ctx.get(node.input[0])):
        total = arith.muli(total, arith.constant(i64, d) if isinstance(d, int)
                           else arith.index_cast(i64, d))
    return [tensor.from_elements(b.tensor_type([], np.int64), [total])]


@converter("Shape")
def _shape(ctx, node):
    b = ctx.b
    x = ctx.get(node.input[0])
    s = shape_of(x)
    a = ctx.attrs(node)
    r = len(s)
    start = min(max(a.get("start", 0) + (r if a.get("start", 0) < 0 else 0), 0), r)
    end = a.get("end", r)
    end = min(max(end + r if end < 0 else end, 0), r)
    i64 = I64()
    elems = []
    for d in range(start, end):
        if s[d] is None:
            elems.append(arith.index_cast(i64, b.dim(x, d)))
        else:
            elems.append(arith.constant(i64, s[d]))
    return [tensor.from_elements(b.tensor_type([len(elems)], np.int64), elems)]
