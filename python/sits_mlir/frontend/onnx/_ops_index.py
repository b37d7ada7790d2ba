"""Index-driven ONNX ops: GatherElements, ScatterElements, ScatterND, ArgMax/ArgMin,
Hardmax, CumSum/CumProd, TopK, and the loss ops built on gathers
(NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).

Converters register into `CONVERTERS` (`_ops_registry.py`) with the
`converter` decorator, like those of the other `_ops_*.py` families.

Reads and writes at run-time indices go through `tensor.extract` /
`tensor.insert`; every such index is wrapped (negative counts from the end)
and then clamped into the axis, so an out-of-range index can never touch
memory outside the tensor.
"""

from __future__ import annotations

import numpy as np

from ... import ir
from ...dialects import arith, linalg, math, scf, tensor
from . import _types
from ._builder import elem_of, shape_of
from ._graph import attributes
from ._ops_common import I64, check_indices, has_input, need_float, norm_axis
from ._ops_common import wrap_clamp as _wrap_clamp
from ._ops_registry import converter


# -- helpers ------------------------------------------------------------------

def _iter(kind: str) -> ir.Attribute:
    return ir.Attribute.parse(f"#linalg.iterator_type<{kind}>")


def _map(n: int, dims) -> ir.AffineMapAttr:
    return ir.AffineMapAttr.get(ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(d) for d in dims]))


def _generic(ins, outs, maps, iters, body):
    """`linalg.generic` over `ins`/`outs` (tensors) with the given maps (dim
    lists) and iterator kinds; `body(*block_args)` returns the yielded values."""
    n = len(iters)
    op = linalg.GenericOp([o.type for o in outs], list(ins), list(outs),
                          ir.ArrayAttr.get([_map(n, m) for m in maps]),
                          ir.ArrayAttr.get([_iter(k) for k in iters]))
    block = op.regions[0].blocks.append(*[elem_of(v) for v in list(ins) + list(outs)])
    with ir.InsertionPoint(block):
        linalg.YieldOp(list(body(*block.arguments)))
    return list(op.results)


def _index():
    return ir.IndexType.get()


def _cidx(i: int) -> ir.Value:
    """An `index` constant at the current insertion point (inside regions)."""
    return arith.constant(_index(), int(i))


def _extent(b, v, d):
    """Extent `d` of `v`: an int when static, else a `tensor.dim` built at
    the current point (outside the region that uses it)."""
    s = shape_of(v)[d]
    return s if s is not None else b.dim(v, d)


def _as_index(e) -> ir.Value:
    """An `_extent` as an `index` Value at the current point."""
    return _cidx(e) if isinstance(e, int) else e


def _lowest(dt, largest: bool):
    """The identity of max (largest) or min over NumPy dtype `dt`."""
    if _types.is_float(dt):
        return float("-inf") if largest else float("inf")
    info = np.iinfo(dt)
    return int(info.min if largest else info.max)


def _better(dt, x, acc, largest: bool, or_equal: bool):
    """i1: `x` replaces `acc` in an arg-max (largest) / arg-min scan. NaN
    counts as the extreme, like NumPy's argmax: the first NaN wins, or the
    last one with `or_equal`."""
    if _types.is_float(dt):
        P = arith.CmpFPredicate
        pred = (P.OGE if or_equal else P.OGT) if largest else (P.OLE if or_equal else P.OLT)
        c = arith.cmpf(pred, x, acc)
        x_nan = arith.cmpf(P.UNO, x, x)
        if not or_equal:
            x_nan = arith.andi(x_nan, arith.cmpf(P.ORD, acc, acc))
        return arith.ori(c, x_nan)
    P = arith.CmpIPredicate
    u = _types.is_unsigned(dt)
    if largest:
        pred = (P.uge if or_equal else P.ugt) if u else (P.sge if or_equal else P.sgt)
    else:
        pred = (P.ule if or_equal else P.ult) if u else (P.sle if or_equal else P.slt)
    return arith.cmpi(pred, x, acc)


def _need_rank(g, name, what="input"):
    if g.shape(name) is None:
        return f"the rank of {what} '{name}' is unknown"
    return None


def _check_axis(g, node, rank, axis):
    if not -rank <= axis < max(rank, 1):
        return f"axis {axis} is out of range for rank {rank}"
    return None


# -- ArgMax / ArgMin / Hardmax ------------------------------------------------

def _check_arg(g, node):
    r = _need_rank(g, node.input[0])
    if r:
        return r
    dt = g.dtype(node.input[0])
    if dt is not None and _types.is_bool(dt):
        return f"{node.op_type} of bool tensors is not supported"
    rank = len(g.shape(node.input[0]))
    if rank == 0:
        return f"{node.op_type} of a 0-D tensor"
    return _check_axis(g, node, rank, attributes(node).get("axis", 0))


def arg_extreme(ctx, x, dt, axis, largest: bool, last: bool) -> ir.Value:
    """i64 index of the max (largest) / min of `x` along `axis` (dropped):
    one `linalg.generic` reducing (value, index) pairs."""
    b = ctx.b
    shape = b.mixed_shape(x)
    n = len(shape)
    out_shape = [d for i, d in enumerate(shape) if i != axis]
    elem = elem_of(x)
    vals = b.fill(b.scalar(_lowest(dt, largest), elem), b.empty(out_shape, elem))
    idx = b.fill(b.scalar(0, I64()), b.empty(out_shape, I64()))
    keep = [d for d in range(n) if d != axis]

    def body(v, acc, acc_i):
        take = _better(dt, v, acc, largest, last)
        j = arith.index_cast(I64(), linalg.IndexOp(axis).result)
        return [arith.select(take, v, acc), arith.select(take, j, acc_i)]

    iters = ["reduction" if d == axis else "parallel" for d in range(n)]
    return _generic([x], [vals, idx], [list(range(n)), keep, keep], iters, body)[1]


@converter("ArgMax", "ArgMin", check=_check_arg)
def _arg(ctx, node):
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    rank = len(shape_of(x))
    axis = norm_axis(a.get("axis", 0), rank)
    y = arg_extreme(ctx, x, ctx.g.dtype(node.input[0]), axis, node.op_type == "ArgMax",
                    bool(a.get("select_last_index", 0)))
    if a.get("keepdims", 1):
        y = ctx.b.keep_dims(y, rank, [axis])
    return [y]


def _check_hardmax(g, node):
    r = need_float(g, node) or _need_rank(g, node.input[0])
    if r:
        return r
    rank = len(g.shape(node.input[0]))
    if rank == 0:
        return "Hardmax of a 0-D tensor"
    return _check_axis(g, node, rank, attributes(node).get("axis", -1))


@converter("Hardmax", check=_check_hardmax)
def _hardmax(ctx, node):
    """1 at the first maximum along `axis`, 0 elsewhere."""
    b = ctx.b
    x = ctx.get(node.input[0])
    n = len(shape_of(x))
    axis = norm_axis(ctx.attrs(node).get("axis", -1), n)
    elem = elem_of(x)
    idx = arg_extreme(ctx, x, ctx.g.dtype(node.input[0]), axis, True, False)
    init = b.empty(b.mixed_shape(x), elem)
    keep = [d for d in range(n) if d != axis]

    def body(i, _):
        j = arith.index_cast(I64(), linalg.IndexOp(axis).result)
        hit = arith.cmpi(arith.CmpIPredicate.eq, i, j)
        return [arith.select(hit, b.scalar(1.0, elem), b.scalar(0.0, elem))]

    return _generic([idx], [init], [keep, list(range(n))], ["parallel"] * n, body)


# -- GatherElements -----------------------------------------------------------

def _check_gather_elements(g, node):
    r = _need_rank(g, node.input[0]) or _need_rank(g, node.input[1], "indices")
    if r:
        return r
    rank = len(g.shape(node.input[0]))
    if len(g.shape(node.input[1])) != rank:
        return "indices must have the rank of the data"
    if rank == 0:
        return "GatherElements of a 0-D tensor"
    return _check_axis(g, node, rank, attributes(node).get("axis", 0))


def gather_elements(ctx, data, indices, axis):
    """out[p] = data[p with p[axis] = indices[p]], over the indices' shape."""
    b = ctx.b
    n = len(shape_of(indices))
    init = b.empty(b.mixed_shape(indices), elem_of(data))
    size = _extent(b, data, axis)

    def body(i, _):
        i = _wrap_clamp(i, _as_index(size))
        coords = [i if d == axis else linalg.IndexOp(d).result for d in range(n)]
        return [tensor.extract(data, coords)]

    ident = list(range(n))
    return _generic([indices], [init], [ident, ident], ["parallel"] * n, body)[0]


@converter("GatherElements", check=_check_gather_elements)
def _gather_elements(ctx, node):
    data, indices = ctx.get(node.input[0]), ctx.get(node.input[1])
    axis = norm_axis(ctx.attrs(node).get("axis", 0), len(shape_of(data)))
    check_indices(ctx, node, indices, _extent(ctx.b, data, axis),
                  f"an index of '{node.input[1]}' (into axis {axis} of '{node.input[0]}') is")
    return [gather_elements(ctx, data, indices, axis)]


# -- CumSum / CumProd ---------------------------------------------------------

def _check_cum(g, node):
    r = _need_rank(g, node.input[0])
    if r:
        return r
    dt = g.dtype(node.input[0])
    if dt is not None and _types.is_bool(dt):
        return f"{node.op_type} of bool tensors is not supported"
    rank = len(g.shape(node.input[0]))
    if rank == 0:
        return f"{node.op_type} of a 0-D tensor"
    if g.is_const(node.input[1]):
        axis = int(np.asarray(g.const(node.input[1])).reshape(-1)[0])
        return _check_axis(g, node, rank, axis)
    s = g.shape(node.input[1])
    if s is None or len(s) > 1 or (len(s) == 1 and s[0] not in (1, None)):
        return "the axis input must be a scalar"
    return None


def cumulative(ctx, x, dt, axis, prod, exclusive, reverse):
    """out[.., i, ..] = combine of x[.., j, ..] over the j that `i` includes
    (j <= i; < with exclusive; >= / > with reverse): one `linalg.generic`
    with an extra reduction dim j, masking the others with the identity.
    Quadratic in the axis extent, but exact: j runs in order, so each
    prefix is combined like a sequential scan (plus identities)."""
    b = ctx.b
    n = len(shape_of(x))
    f = _types.is_float(dt)
    elem = elem_of(x)
    ident = 1 if prod else 0
    init = b.fill(b.scalar(ident, elem), b.empty(b.mixed_shape(x), elem))
    P = arith.CmpIPredicate
    pred = {(0, 0): P.ule, (1, 0): P.ult, (0, 1): P.uge, (1, 1): P.ugt}[
        (int(bool(exclusive)), int(bool(reverse)))]
    combine = (arith.mulf if f else arith.muli) if prod else (arith.addf if f else arith.addi)

    def body(v, acc):
        j, i = linalg.IndexOp(n).result, linalg.IndexOp(axis).result
        v = arith.select(arith.cmpi(pred, j, i), v, b.scalar(ident, elem))
        return [combine(acc, v)]

    x_map = [n if d == axis else d for d in range(n)]
    return _generic([x], [init], [x_map, list(range(n))], ["parallel"] * n + ["reduction"],
                    body)[0]


@converter("CumSum", "CumProd", check=_check_cum)
def _cum(ctx, node):
    g = ctx.g
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    n = len(shape_of(x))
    dt = g.dtype(node.input[0])
    args = (node.op_type == "CumProd", a.get("exclusive", 0), a.get("reverse", 0))
    if g.is_const(node.input[1]):
        axis = norm_axis(int(np.asarray(g.const(node.input[1])).reshape(-1)[0]), n)
        return [cumulative(ctx, x, dt, axis, *args)]
    # A run-time axis: `scf.index_switch` over the (wrapped, clamped) axis,
    # one scan per possible axis.
    av = ctx.get(node.input[1])
    av = tensor.extract(av, [ctx.b.index(0)] * len(shape_of(av)))
    axis = _wrap_clamp(av, ctx.b.index(n))
    sw = scf.IndexSwitchOp([x.type], axis, list(range(n - 1)))
    for k, block in enumerate(list(sw.case_blocks) + [sw.default_block]):
        with ir.InsertionPoint(block):
            scf.YieldOp([cumulative(ctx, x, dt, k, *args)])
    return [sw.results[0]]


# -- ScatterElements / ScatterND ----------------------------------------------

_SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _check_scatter_reduction(g, node):
    red = attributes(node).get("reduction", "none")
    if red not in _SCATTER_REDUCTIONS:
        return f"unsupported attribute value reduction='{red}'"
    dt = g.dtype(node.input[0])
    if red != "none" and dt is not None and _types.is_bool(dt):
        return f"reduction='{red}' on bool tensors is not supported"
    return None


def _scatter_combine(red, dt):
    """(old, new) -> stored value, or None for a plain write."""
    if red == "none":
        return None
    f, u = _types.is_float(dt), _types.is_unsigned(dt)
    return {"add": arith.addf if f else arith.addi,
            "mul": arith.mulf if f else arith.muli,
            "max": arith.maximumf if f else (arith.maxui if u else arith.maxsi),
            "min": arith.minimumf if f else (arith.minui if u else arith.minsi)}[red]


def _loop_nest(extents, init, body):
    """Nested `scf.for` over `extents` (ints or index Values, outermost
    first) carrying tensor `init`; `body(ivs, t)` returns the new tensor.
    Sequential on purpose: scatters apply their updates in order."""
    if not extents:
        return body([], init)

    def level(k, ivs, t):
        loop = scf.ForOp(_cidx(0), _as_index(extents[k]), _cidx(1), [t])
        with ir.InsertionPoint(loop.body):
            iv, carried = loop.induction_variable, loop.inner_iter_args[0]
            if k + 1 == len(extents):
                new = body(ivs + [iv], carried)
            else:
                new = level(k + 1, ivs + [iv], carried)
            scf.YieldOp([new])
        return loop.results[0]

    return level(0, [], init)


def _scatter_store(t, coords, value, combine):
    if combine is not None:
        value = combine(tensor.extract(t, coords), value)
    return tensor.insert(value, t, coords)


def _check_scatter_elements(g, node):
    r = _need_rank(g, node.input[0]) or _need_rank(g, node.input[1], "indices") or \
        _need_rank(g, node.input[2], "updates")
    if r:
        return r
    rank = len(g.shape(node.input[0]))
    if rank == 0:
        return "ScatterElements of a 0-D tensor"
    if len(g.shape(node.input[1])) != rank or len(g.shape(node.input[2])) != rank:
        return "indices and updates must have the rank of the data"
    return _check_axis(g, node, rank, attributes(node).get("axis", 0)) or \
        _check_scatter_reduction(g, node)


@converter("ScatterElements", check=_check_scatter_elements)
def _scatter_elements(ctx, node):
    """A copy of data where, in order over the indices' positions p,
    out[p with p[axis] = indices[p]] (op)= updates[p]."""
    b = ctx.b
    data, indices, updates = (ctx.get(n) for n in node.input[:3])
    n = len(shape_of(data))
    a = ctx.attrs(node)
    axis = norm_axis(a.get("axis", 0), n)
    combine = _scatter_combine(a.get("reduction", "none"), ctx.g.dtype(node.input[0]))
    extents = [_extent(b, indices, d) for d in range(n)]
    size = _extent(b, data, axis)
    check_indices(ctx, node, indices, size,
                  f"an index of '{node.input[1]}' (into axis {axis} of '{node.input[0]}') is")

    def body(ivs, t):
        i = _wrap_clamp(tensor.extract(indices, ivs), _as_index(size))
        coords = [i if d == axis else iv for d, iv in enumerate(ivs)]
        return _scatter_store(t, coords, tensor.extract(updates, ivs), combine)

    return [_loop_nest(extents, data, body)]


def _check_scatter_nd(g, node):
    r = _need_rank(g, node.input[0]) or _need_rank(g, node.input[1], "indices") or \
        _need_rank(g, node.input[2], "updates")
    if r:
        return r
    ds, is_, us = (g.shape(n) for n in node.input[:3])
    if len(is_) == 0:
        return "ScatterND needs indices of rank >= 1"
    k = _nd_depth(ds, is_, us)
    if not 1 <= k <= len(ds) or is_[-1] not in (k, None):
        return "the ranks and shapes of data, indices and updates do not match"
    return _check_scatter_reduction(g, node)


def _nd_depth(ds, is_, us):
    """How many leading data dims an index tuple addresses: the last extent
    of indices, which the ranks determine (rank(updates) = rank(indices) - 1
    + rank(data) - k), so it is known even when that extent is dynamic."""
    return len(is_) - 1 + len(ds) - len(us)


@converter("ScatterND", check=_check_scatter_nd)
def _scatter_nd(ctx, node):
    """A copy of data where, in order over the index tuples at positions p,
    out[indices[p], q] (op)= updates[p, q] for every trailing position q."""
    b = ctx.b
    data, indices, updates = (ctx.get(n) for n in node.input[:3])
    ds, is_ = shape_of(data), shape_of(indices)
    k = _nd_depth(ds, is_, shape_of(updates))
    combine = _scatter_combine(ctx.attrs(node).get("reduction", "none"),
                               ctx.g.dtype(node.input[0]))
    outer = [_extent(b, indices, d) for d in range(len(is_) - 1)]
    inner = [_extent(b, data, d) for d in range(k, len(ds))]
    sizes = [_extent(b, data, d) for d in range(k)]
    check_indices(ctx, node, indices, sizes,
                  f"an index tuple of '{node.input[1]}' (into '{node.input[0]}') is")
    # A dynamic tuple length must be k; clamp the reads should it be shorter.
    last = None if is_[-1] is not None else b.dim(indices, len(is_) - 1)

    def component(p, c):
        c = _cidx(c)
        if last is not None:
            c = arith.maxsi(arith.minsi(c, arith.subi(last, _cidx(1))), _cidx(0))
        return tensor.extract(indices, p + [c])

    def body(ivs, t):
        p, q = ivs[:len(outer)], ivs[len(outer):]
        coords = [_wrap_clamp(component(p, c), _as_index(sizes[c])) for c in range(k)]
        return _scatter_store(t, coords + q, tensor.extract(updates, p + q), combine)

    return [_loop_nest(outer + inner, data, body)]


# -- NegativeLogLikelihoodLoss / SoftmaxCrossEntropyLoss ----------------------

def _check_loss(g, node):
    a = attributes(node)
    red = a.get("reduction", "mean")
    if red not in ("none", "sum", "mean"):
        return f"unsupported attribute value reduction='{red}'"
    r = need_float(g, node) or _need_rank(g, node.input[0]) or \
        _need_rank(g, node.input[1], "target")
    if r:
        return r
    xs, ts = g.shape(node.input[0]), g.shape(node.input[1])
    if len(xs) < 2 or len(ts) != len(xs) - 1:
        return f"needs an [N, C, d1, ...] input and an [N, d1, ...] target, got ranks " \
               f"{len(xs)} and {len(ts)}"
    if has_input(node, 2):
        ws = g.shape(node.input[2])
        if ws is None or len(ws) != 1:
            return "the weight input must be 1-D"
        if g.dtype(node.input[2]) != g.dtype(node.input[0]):
            return "the weight must have the input's element type"
    return None


def nll_loss(ctx, x, target, weight, ignore_index, reduction):
    """ONNX NegativeLogLikelihoodLoss of `x` [N, C, d...] (log-probabilities)
    at `target` [N, d...]: loss = -x[n, t, d] * w[t] (w = 1 without weights;
    0 where t == ignore_index), then none / sum / mean (sum over the sum of
    the applied weights). Targets are clamped into [0, C) for the reads."""
    b = ctx.b
    elem = elem_of(x)
    n = len(shape_of(target))
    classes = _extent(b, x, 1)
    tshape = b.mixed_shape(target)
    mean = reduction == "mean"
    outs = [b.empty(tshape, elem)] + ([b.empty(tshape, elem)] if mean else [])

    def body(t, *_):
        ti = arith.index_cast(_index(), t)
        ti = arith.minsi(arith.maxsi(ti, _cidx(0)), arith.subi(_as_index(classes), _cidx(1)))
        dims = [linalg.IndexOp(d).result for d in range(n)]
        v = tensor.extract(x, dims[:1] + [ti] + dims[1:])
        w = tensor.extract(weight, [ti]) if weight is not None else None
        loss = arith.negf(v) if w is None else arith.mulf(w, arith.negf(v))
        if w is None and mean:
            w = b.scalar(1.0, elem)
        if ignore_index is not None:
            ign = arith.cmpi(arith.CmpIPredicate.eq, t, b.scalar(ignore_index, elem_of(target)))
            zero = b.scalar(0.0, elem)
            loss = arith.select(ign, zero, loss)  # also when -x is inf or NaN
            w = arith.select(ign, zero, w) if w is not None else None
        return [loss, w] if mean else [loss]

    ident = list(range(n))
    res = _generic([target], outs, [ident] * (1 + len(outs)), ["parallel"] * n, body)
    if reduction == "none":
        return res[0]

    def total(v):
        return b.reduce(v, list(range(n)), lambda e, acc: arith.addf(acc, e), 0.0)

    s = total(res[0])
    return arith.divf(s, total(res[1])) if mean else s


def _loss_args(ctx, node):
    a = ctx.attrs(node)
    weight = ctx.get(node.input[2]) if has_input(node, 2) else None
    ii = a.get("ignore_index")
    return ctx.get(node.input[1]), weight, (None if ii is None else int(ii)), \
        a.get("reduction", "mean")


@converter("NegativeLogLikelihoodLoss", check=_check_loss)
def _nll(ctx, node):
    return [nll_loss(ctx, ctx.get(node.input[0]), *_loss_args(ctx, node))]


def log_softmax(ctx, x, axis):
    """x - max - log(sum(exp(x - max))) along `axis`."""
    b = ctx.b
    rank = len(shape_of(x))
    shape = b.mixed_shape(x)
    m = b.keep_dims(b.reduce(x, [axis], arith.maximumf, float("-inf")), rank, [axis])
    s = arith.subf(x, b.broadcast_to(m, shape))
    z = b.reduce(math.exp(s), [axis], lambda v, acc: arith.addf(acc, v), 0.0)
    return arith.subf(s, b.broadcast_to(b.keep_dims(math.log(z), rank, [axis]), shape))


@converter("SoftmaxCrossEntropyLoss", check=_check_loss)
def _sce(ctx, node):
    """NegativeLogLikelihoodLoss of LogSoftmax(scores) over the classes
    (axis 1); the optional second output is that log-probability."""
    lp = log_softmax(ctx, ctx.get(node.input[0]), 1)
    loss = nll_loss(ctx, lp, *_loss_args(ctx, node))
    return [loss, lp][:len(node.output)]


# -- TopK ---------------------------------------------------------------------

def _check_topk(g, node):
    r = _need_rank(g, node.input[0])
    if r:
        return r
    dt = g.dtype(node.input[0])
    if dt is not None and _types.is_bool(dt):
        return "TopK of bool tensors is not supported"
    s = g.shape(node.input[0])
    if len(s) == 0:
        return "TopK of a 0-D tensor"
    axis = attributes(node).get("axis", -1)
    r = _check_axis(g, node, len(s), axis)
    if r:
        return r
    axis = norm_axis(axis, len(s))
    if g.is_const(node.input[1]):
        k = np.asarray(g.const(node.input[1])).reshape(-1)
        if k.size != 1:
            return "k must have one element"
        k = int(k[0])
    else:  # a run-time k must be the result extent the model declares
        out = g.shape(node.output[0])
        k = None if out is None else out[axis]
        if k is None:
            return ("k is computed at run time and the model does not declare the result "
                    "extent (the result shape depends on run-time data)")
    if k < 0 or (s[axis] is not None and k > s[axis]):
        return f"k = {k} is out of range for an axis of extent {s[axis]}"
    if k == 0:
        return "k = 0 (an empty result) is not supported"
    return None


def _precedes(dt, a, i, b, j, largest: bool):
    """i1: element (a, position i) comes before (b, position j) in TopK's
    order: by value (NaN above everything, as NumPy sorts), ties by the
    lower position."""
    if _types.is_float(dt):
        P = arith.CmpFPredicate
        a_nan, b_nan = arith.cmpf(P.UNO, a, a), arith.cmpf(P.UNO, b, b)
        hi, lo, hi_nan, lo_nan = (a, b, a_nan, b_nan) if largest else (b, a, b_nan, a_nan)
        ordered = arith.ori(arith.cmpf(P.OGT, hi, lo),
                            arith.andi(hi_nan, arith.xori(lo_nan, _true())))
        tie = arith.ori(arith.cmpf(P.OEQ, a, b), arith.andi(a_nan, b_nan))
    else:
        P = arith.CmpIPredicate
        gt = P.ugt if _types.is_unsigned(dt) else P.sgt
        ordered = arith.cmpi(gt, a, b) if largest else arith.cmpi(gt, b, a)
        tie = arith.cmpi(P.eq, a, b)
    return arith.ori(ordered, arith.andi(tie, arith.cmpi(arith.CmpIPredicate.ult, i, j)))


def _true():
    i1 = ir.IntegerType.get_signless(1)
    return arith.constant(i1, ir.IntegerAttr.get(i1, 1))


@converter("TopK", check=_check_topk, reads=(0,))
def _topk(ctx, node):
    """The k first elements along `axis` in sorted order (stable: equal
    values by position). rank[i] = how many elements precede element i (a
    `linalg.generic` with a reduction dim over the axis, quadratic in its
    extent); indices[p] = the i whose rank is p (a second one); values are
    gathered at those indices."""
    b = ctx.b
    x = ctx.get(node.input[0])
    a = ctx.attrs(node)
    dt = ctx.g.dtype(node.input[0])
    n = len(shape_of(x))
    axis = norm_axis(a.get("axis", -1), n)
    largest = bool(a.get("largest", 1))
    if ctx.g.is_const(node.input[1]):
        k = int(np.asarray(ctx.g.const(node.input[1])).reshape(-1)[0])
    else:  # the model declares the result extent (see _check_topk): k must be it
        k = ctx.g.shape(node.output[0])[axis]
    ident, swept = list(range(n)), [n if d == axis else d for d in range(n)]
    iters = ["parallel"] * n + ["reduction"]
    i64 = I64()

    rank0 = b.fill(b.scalar(0, i64), b.empty(b.mixed_shape(x), i64))

    def count(xj, xi, acc):
        i, j = linalg.IndexOp(axis).result, linalg.IndexOp(n).result
        before = _precedes(dt, xj, j, xi, i, largest)
        return [arith.addi(acc, arith.extui(i64, before))]

    rank = _generic([x, x], [rank0], [swept, ident, ident], iters, count)[0]

    out_shape = b.mixed_shape(x)
    out_shape[axis] = k
    idx0 = b.fill(b.scalar(0, i64), b.empty(out_shape, i64))

    def pick(r, acc):
        p = arith.index_cast(i64, linalg.IndexOp(axis).result)
        i = arith.index_cast(i64, linalg.IndexOp(n).result)
        return [arith.select(arith.cmpi(arith.CmpIPredicate.eq, r, p), i, acc)]

    idx = _generic([rank], [idx0], [swept, ident], iters, pick)[0]
    return [gather_elements(ctx, x, idx, axis), idx]
