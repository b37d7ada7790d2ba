"""ONNX Attention (opsets 23-25) and the attention-family ops.

Converters register into `CONVERTERS` (`_ops_registry.py`) with the
`converter` decorator, like those of the other `_ops_*.py` families.

Attention follows the ONNX function body (and `onnx.reference`) exactly:

* 3-D Q/K/V `[B, S, H*D]` are split into heads `[B, H, S, D]` (and Y merged
  back); past K/V are joined in front of the new ones (`tensor.concat`),
  which are also the present outputs.
* Every mask term becomes one additive bias `[B|1, Hq|1, Tq, Tk]` built by a
  `linalg.generic`: a bool mask as 0/-inf, a float mask as is (a mask
  shorter than Tk counts as masked beyond its end, ONNX's padding), the
  causal frontier `j <= i + offset` (offset = past length, nonpad_kv_seqlen
  - Tq per batch, or 0), the sliding window, and the nonpad padding.
* A query row whose bias is all -inf has no key: its output (and mode-3
  probabilities) are 0, not NaN (the spec's fully-masked-row guard).
* Without softcap, qk_matmul_output or a double softmax, this is one
  `sits.attention` (the bias as its float mask, or `{causal}` when its
  bottom-right frontier is ONNX's); otherwise Q·Kᵀ and P·V are
  `sits.matmul`s (GQA as a broadcast batch dim) around `sits.softmax`.
"""

from __future__ import annotations

import math as pymath

import numpy as np

from ... import ir
from ...dialects import arith, linalg, math, sits, tensor
from . import _types
from ._builder import DYN, elem_of, shape_of
from ._graph import attributes
from ._ops_common import (_PARALLEL, I64, cast_value, f64_attr, has_input, i64_attr,
                          need_float)
from ._ops_registry import converter

# -- small mixed-size helpers (int for static extents, index Value otherwise) --


def _idx(b, d):
    return b.index(d) if isinstance(d, int) else d


def _div(b, x, y):
    if isinstance(x, int) and isinstance(y, int):
        return x // y
    return arith.divui(_idx(b, x), _idx(b, y))


def _static(shape):
    return [d if isinstance(d, int) else None for d in shape]


def _expand(b, v, groups, out_mixed):
    """`tensor.expand_shape` to the mixed shape `out_mixed` (a group may hold
    several dynamic extents: their sizes are given, not derived)."""
    static = [d if isinstance(d, int) else DYN for d in out_mixed]
    dyn = [d for d in out_mixed if not isinstance(d, int)]
    t = b.tensor_type(_static(out_mixed), elem_of(v))
    return tensor.expand_shape(t, v, groups, dyn, static)


def _collapse(b, v, groups):
    s = shape_of(v)
    out = []
    for g in groups:
        ext = [s[i] for i in g]
        out.append(None if None in ext else int(np.prod(ext)))
    return b.collapse(v, groups, out)


# -- check ----------------------------------------------------------------------

def _softmax_dtype(g, node, a):
    sp = a.get("softmax_precision")
    if sp is None:
        return np.dtype(g.dtype(node.input[0]))
    return _types.numpy_dtype(sp)


def _check_attention(g, node):
    a = attributes(node)
    for k in range(3):
        r = need_float(g, node, k)
        if r:
            return f"input {k} {r}"
    qdt = g.dtype(node.input[0])
    for k in (1, 2, 4, 5):
        if has_input(node, k) and g.dtype(node.input[k]) != qdt:
            return (f"input {k} ('{node.input[k]}') has element type "
                    f"{np.dtype(g.dtype(node.input[k])).name}, not the query's {np.dtype(qdt).name}")
    ranks = [g.rank(node.input[k]) for k in range(3)]
    if None in ranks:
        return "the ranks of Q, K and V must be known"
    if len(set(ranks)) != 1 or ranks[0] not in (3, 4):
        return f"Q, K and V must all be 3-D or all 4-D, got ranks {ranks}"
    rank = ranks[0]
    sq, sk, sv = (g.shape(node.input[k]) for k in range(3))
    hq, hkv = a.get("q_num_heads"), a.get("kv_num_heads")
    if rank == 3:
        if not hq or not hkv or hq <= 0 or hkv <= 0:
            return "3-D inputs need positive q_num_heads and kv_num_heads"
        for s, h, nm in ((sq, hq, "Q"), (sk, hkv, "K"), (sv, hkv, "V")):
            if s[2] is not None and s[2] % h:
                return f"{nm}'s hidden size {s[2]} is not a multiple of its {h} heads"
    else:
        if hq is not None and sq[1] is not None and hq != sq[1]:
            return f"q_num_heads={hq} differs from Q's {sq[1]} heads"
        if hkv is not None and sk[1] is not None and hkv != sk[1]:
            return f"kv_num_heads={hkv} differs from K's {sk[1]} heads"
        hq, hkv = sq[1], sk[1]
    if hq is not None and hkv is not None and (hkv == 0 or hq % hkv):
        return f"query heads ({hq}) must be a multiple of key/value heads ({hkv})"
    scale = a.get("scale")
    if scale is not None and not (pymath.isfinite(scale) and scale > 0):
        return f"scale must be finite and positive, got {scale}"
    softcap = a.get("softcap", 0.0)
    if not pymath.isfinite(softcap):
        return f"softcap must be finite, got {softcap}"
    mode = a.get("qk_matmul_output_mode", 0)
    qk_used = len(node.output) > 3 and node.output[3] and g.uses(node.output[3])
    if mode not in (0, 1, 2, 3):
        return f"qk_matmul_output_mode={mode} is not defined"
    if qk_used and mode == 0 and softcap > 0:
        # The spec (pre-softcap scores) and onnx.reference (post-softcap) disagree.
        return "qk_matmul_output_mode=0 with softcap is ambiguous in ONNX"
    sp = a.get("softmax_precision")
    if sp is not None and sp not in (1, 10, 11, 16):
        return f"softmax_precision={sp} is not a floating-point type"
    if has_input(node, 4) != has_input(node, 5):
        return "past_key and past_value must be given together"
    if has_input(node, 6) and has_input(node, 4):
        return "nonpad_kv_seqlen cannot be combined with past_key/past_value"
    for k in (4, 5):
        if has_input(node, k) and g.rank(node.input[k]) != 4:
            return f"input {k} ('{node.input[k]}') must be 4-D"
    if has_input(node, 3):
        mdt, mr = g.dtype(node.input[3]), g.rank(node.input[3])
        if mdt is None or not (_types.is_bool(mdt) or mdt == qdt):
            return "attn_mask must be bool or of the query's element type"
        if mr is None or not 1 <= mr <= 4:
            return f"attn_mask must have rank 1 to 4, got {mr}"
    if has_input(node, 6):
        s = g.shape(node.input[6])
        if g.dtype(node.input[6]) != np.int64 or s is None or len(s) != 1:
            return "nonpad_kv_seqlen must be a 1-D int64 tensor"
    for w in ("left_window_size", "right_window_size"):
        if a.get(w, -1) < -1:
            return f"{w} must be -1 or nonnegative, got {a[w]}"
    return None


# -- emission -------------------------------------------------------------------


def _split_heads(b, v, heads):
    """[B, S, H*D] -> [B, H, S, D]."""
    bs, s, hidden = b.mixed_shape(v)
    x = _expand(b, v, [[0], [1], [2, 3]], [bs, s, heads, _div(b, hidden, heads)])
    return b.transpose(x, [0, 2, 1, 3])


def _generic(b, ins, in_maps, out_shape, elem, body):
    """All-parallel `linalg.generic` over `out_shape` (mixed) with identity
    output map; `body(args)` builds the yielded value."""
    n = len(out_shape)
    init = b.empty(out_shape, elem)
    maps = [ir.AffineMapAttr.get(m) for m in in_maps] + \
           [ir.AffineMapAttr.get(ir.AffineMap.get_identity(n))]
    op = linalg.GenericOp([init.type], ins, [init], ir.ArrayAttr.get(maps),
                          ir.ArrayAttr.get([_PARALLEL()] * n))
    block = op.regions[0].blocks.append(*[elem_of(x) for x in ins], elem)
    with ir.InsertionPoint(block):
        linalg.YieldOp([body(block.arguments)])
    return op.results[0]


def _bias(ctx, node, a, q4, k4, past_len):
    """The additive bias [Bm, Hm, Tq, Tk] of every mask term (None when there
    is none), and whether a row of it can be all -inf."""
    b, g = ctx.b, ctx.g
    causal = bool(a.get("is_causal", 0))
    left, right = a.get("left_window_size", -1), a.get("right_window_size", -1)
    window = left >= 0 or right >= 0
    mask = ctx.get(node.input[3]) if has_input(node, 3) else None
    nonpad = ctx.get(node.input[6]) if has_input(node, 6) else None
    if mask is None and nonpad is None and not causal and not window:
        return None, False
    qs, ks = b.mixed_shape(q4), b.mixed_shape(k4)
    batch, hq, tq, tk = qs[0], qs[1], qs[2], ks[2]
    ms = shape_of(mask) if mask is not None else ()
    mm = b.mixed_shape(mask) if mask is not None else []
    m4 = (None,) * (4 - len(ms)) + tuple(ms)  # right-aligned; None: absent

    bm = batch if (nonpad is not None or (len(ms) == 4 and ms[0] != 1)) else 1
    hm = hq if (len(ms) >= 3 and m4[1] != 1) else 1
    shape = [bm, hm, tq, tk]
    elem = _types.mlir_type(g.dtype(node.input[0]))
    i64, index = ir.IntegerType.get_signless(64), ir.IndexType.get()
    if mask is not None and _types.is_bool(g.dtype(node.input[3])):
        # As 0/-inf first: an elementwise select reads i1 vectors, while a
        # scalar i1 load in the region below is not lowered by CPU codegen.
        mshape = b.mixed_shape(mask)
        mask = arith.select(mask, b.splat(0.0, mshape, elem), b.splat(float("-inf"), mshape, elem))
    ins = [nonpad] if nonpad is not None else []
    in_maps = [ir.AffineMap.get(4, 0, [ir.AffineDimExpr.get(0)])] if nonpad is not None else []
    # Hoist the mask's extents and the past length out of the region.
    m_ext = [(_idx(b, d) if not (isinstance(d, int) and d == 1) else None) for d in mm]
    m_len = _idx(b, mm[-1]) if mask is not None else None
    p_len = arith.index_cast(i64, _idx(b, past_len)) if past_len is not None else None
    tq_i = arith.index_cast(i64, _idx(b, tq))

    def body(args):
        zero, ninf = b.scalar(0.0, elem), b.scalar(float("-inf"), elem)
        c0, c1 = b.scalar(0, index), b.scalar(1, index)
        pos = [linalg.IndexOp(d).result for d in range(4)]
        i, j = (arith.index_cast(i64, p) for p in pos[2:])
        val = zero
        if mask is not None:
            r = len(ms)
            coords = []
            for md in range(r):
                d = 4 - r + md
                p = pos[d]
                if md == r - 1:  # beyond the mask's end: masked (ONNX pads it)
                    inside = arith.cmpi(arith.CmpIPredicate.ult, p, m_len)
                    p = arith.select(inside, p, c0)
                elif m_ext[md] is None:
                    p = c0
                elif not isinstance(mm[md], int):  # dynamic: may broadcast at run time
                    p = arith.select(arith.cmpi(arith.CmpIPredicate.eq, m_ext[md], c1), c0, p)
                coords.append(p)
            val = arith.select(inside, tensor.extract(mask, coords), ninf)
        if causal or window:
            if nonpad is not None:
                off = arith.subi(args[0], tq_i)
            elif p_len is not None:
                off = p_len
            else:
                off = b.scalar(0, i64)
            diff = arith.subi(arith.addi(i, off), j)  # (i + offset) - j
            conds = []
            if causal:
                conds.append(arith.cmpi(arith.CmpIPredicate.sge, diff, b.scalar(0, i64)))
            if left >= 0:
                conds.append(arith.cmpi(arith.CmpIPredicate.sle, diff, b.scalar(left, i64)))
            if right >= 0:
                conds.append(arith.cmpi(arith.CmpIPredicate.sge, diff, b.scalar(-right, i64)))
            # Causal and window are separate additive terms in ONNX.
            for c in conds:
                val = arith.addf(val, arith.select(c, zero, ninf))
        if nonpad is not None:
            ok = arith.cmpi(arith.CmpIPredicate.slt, j, args[0])
            val = arith.addf(val, arith.select(ok, zero, ninf))
        return val

    bias = _generic(b, ins, in_maps, shape, elem, body)
    return bias, (mask is not None or nonpad is not None or window)


def _concat_seq(b, past, new):
    """Past and new keys (or values) joined along the sequence (dim 2)."""
    ps, ns = shape_of(past), shape_of(new)
    out = [p if p is not None else n for p, n in zip(ps, ns)]
    out[2] = None if ps[2] is None or ns[2] is None else ps[2] + ns[2]
    return tensor.concat(b.tensor_type(out, elem_of(new)), 2, [past, new])


def _row_max(b, bias):
    """[Bm, Hm, Tq]: the largest bias of each query row (-inf: no key)."""
    return b.reduce(bias, [3], arith.maximumf, float("-inf"))


def _zero_rows(b, row_max, x):
    """`x` [B, H, Tq, N] with the rows whose bias maximum is -inf set to 0.
    One generic compares in its region: no i1 tensor is materialised (CPU
    codegen cannot store i1 buffers)."""
    elem = elem_of(x)
    rs = shape_of(row_max)
    # The row maxima's unit (broadcast) dims are dropped from the operand.
    m = b.collapse(row_max, _unit_groups(rs), [d for d in rs if d != 1]) \
        if 1 in rs else row_max
    exprs = [ir.AffineDimExpr.get(d) for d in range(3) if rs[d] != 1]
    maps = [ir.AffineMap.get(4, 0, exprs), ir.AffineMap.get_identity(4)]

    def body(args):
        ninf = b.scalar(float("-inf"), elem_of(row_max))
        dead = arith.cmpf(arith.CmpFPredicate.OEQ, args[0], ninf)
        return arith.select(dead, b.scalar(0.0, elem), args[1])

    return _generic(b, [m, x], maps, b.mixed_shape(x), elem, body)


def _unit_groups(shape):
    """Reassociation dropping the unit dims of `shape`."""
    keep = [i for i, d in enumerate(shape) if d != 1]
    groups, pending = [], []
    for i in range(len(shape)):
        if i in keep:
            groups.append(pending + [i])
            pending = []
        elif groups:
            groups[-1].append(i)
        else:
            pending.append(i)
    return groups


def _grouped(b, x, hkv, group):
    """[B, Hq, T, N] -> [B, Hkv, G, T, N] (query head h = hk * G + g)."""
    s = b.mixed_shape(x)
    return _expand(b, x, [[0], [1, 2], [3], [4]], [s[0], hkv, group, s[2], s[3]])


def _kv5(b, x):
    """[B, Hkv, T, N] -> [B, Hkv, 1, T, N]: broadcast over the query group."""
    s = b.mixed_shape(x)
    return _expand(b, x, [[0], [1, 2], [3], [4]], [s[0], s[1], 1, s[2], s[3]])


def _head_matmul(ctx, lhs, rhs, hkv, group, dt, transpose_rhs=None):
    """Per-head `lhs @ rhs` of [B, Hq, M, K] by [B, Hkv, K, N] (or N x K with
    `transpose_rhs`); query heads share a key/value head in groups of
    `group` (None: Hq == Hkv) through a broadcast batch dim. Half-precision
    operands are multiplied as f32 and the product rounded once: the same
    value as the half `sits.matmul` (which accumulates in f32), avoiding
    CPU codegen's mixed-precision contraction, which fails to translate."""
    b = ctx.b
    half = np.dtype(dt).itemsize == 2
    if half:
        lhs, rhs = cast_value(ctx, lhs, dt, np.float32), cast_value(ctx, rhs, dt, np.float32)
    if group is None:
        y = sits.matmul(lhs, rhs, transpose_rhs=transpose_rhs)
    elif not isinstance(group, int):
        # A run-time group size: [Hkv, G] cannot be split out of one dynamic
        # head dim (CPU codegen needs one dynamic extent per expanded group),
        # so K/V are repeated to Hq heads (np.repeat) by broadcast + collapse.
        s = b.mixed_shape(rhs)
        rep = linalg.broadcast(rhs, outs=[b.empty([s[0], s[1], group, s[2], s[3]], elem_of(rhs))],
                               dimensions=[2]).results[0]
        y = sits.matmul(lhs, _collapse(b, rep, [[0], [1, 2], [3], [4]]),
                        transpose_rhs=transpose_rhs)
    else:
        y = sits.matmul(_grouped(b, lhs, hkv, group), _kv5(b, rhs), transpose_rhs=transpose_rhs)
        y = _collapse(b, y, [[0], [1, 2], [3], [4]])
    return cast_value(ctx, y, np.float32, dt) if half else y


@converter("Attention", check=_check_attention)
def _attention(ctx, node):
    b, g = ctx.b, ctx.g
    a = ctx.attrs(node)
    q, k, v = (ctx.get(node.input[i]) for i in range(3))
    qdt = np.dtype(g.dtype(node.input[0]))
    elem = elem_of(q)
    rank3 = len(shape_of(q)) == 3
    if rank3:
        q = _split_heads(b, q, a["q_num_heads"])
        k = _split_heads(b, k, a["kv_num_heads"])
        v = _split_heads(b, v, a["kv_num_heads"])
    past_len = None
    if has_input(node, 4):
        pk, pv = ctx.get(node.input[4]), ctx.get(node.input[5])
        past_len = b.mixed_shape(pk)[2]
        k_new_len = b.mixed_shape(k)[2]
        k, v = _concat_seq(b, pk, k), _concat_seq(b, pv, v)
    else:
        k_new_len = b.mixed_shape(k)[2]
    present_k, present_v = k, v

    qs, ks = b.mixed_shape(q), b.mixed_shape(k)
    hq, hkv, tq = qs[1], ks[1], qs[2]
    head = qs[3]
    scale = a.get("scale")
    softcap = a.get("softcap", 0.0)
    mode = a.get("qk_matmul_output_mode", 0)
    qk_used = len(node.output) > 3 and bool(node.output[3]) and g.uses(node.output[3]) > 0
    sm_dt = _softmax_dtype(g, node, a)

    bias, guard = _bias(ctx, node, a, q, k, past_len)
    dead = _row_max(b, bias) if guard else None

    # Q and K are each scaled by sqrt(scale) cast to T1 (the function body's
    # ScaleFactorF): the effective scale is that value squared.
    root = None
    if scale is not None or isinstance(head, int):
        s = scale if scale is not None else 1.0 / pymath.sqrt(head)
        root = float(np.asarray(pymath.sqrt(s), dtype=np.float64).astype(qdt))

    # sits.attention with a dynamic head count splits it into [Hkv, G],
    # which CPU codegen cannot expand (two dynamic extents in one group).
    static_heads = isinstance(hq, int) and isinstance(hkv, int)
    fused = softcap <= 0 and not qk_used and sm_dt.itemsize <= 4 and static_heads
    if fused:
        kw = {}
        if root is not None:
            kw["scale"] = f64_attr(root * root)
        causal = bool(a.get("is_causal", 0))
        only_causal = causal and not guard and not has_input(node, 6)
        # sits.attention's causal frontier is Tk - Tq: ONNX's when the new
        # keys are as many as the queries.
        if only_causal and isinstance(k_new_len, int) and k_new_len == tq:
            kw["causal"] = True
            bias = None
        y = sits.attention(q, k, v, mask=bias, **kw)
        if dead is not None:
            y = _zero_rows(b, dead, y)
        qk_out = None
    else:
        if root is not None:
            r = b.scalar(root, elem)
        else:  # dynamic head size: sqrt(1 / sqrt(D)) computed at run time
            f32 = ir.F32Type.get()
            d = arith.sitofp(f32, arith.index_cast(ir.IntegerType.get_signless(64), head))
            r = math.sqrt(arith.divf(b.scalar(1.0, f32), math.sqrt(d)))
            r = _scalar_cast(r, elem)
        qsc = arith.mulf(q, b.fill(r, b.empty(qs, elem)))
        ksc = arith.mulf(k, b.fill(r, b.empty(ks, elem)))
        group = None if isinstance(hq, int) and isinstance(hkv, int) and hq == hkv \
            else _div(b, hq, hkv)
        qk = _head_matmul(ctx, qsc, ksc, hkv, group, qdt, transpose_rhs=True)
        if softcap > 0:
            c = b.splat(softcap, b.mixed_shape(qk), elem)
            qk = arith.mulf(math.tanh(arith.divf(qk, c)), c)
        scores = qk
        if bias is not None:
            scores = arith.addf(qk, b.broadcast_to(bias, b.mixed_shape(qk)))
        qk_out = qk if mode in (0, 1) else scores
        p = cast_value(ctx, scores, qdt, sm_dt)
        p = sits.softmax(p, axis=i64_attr(-1))
        if dead is not None:
            p = _zero_rows(b, dead, p)
        p = cast_value(ctx, p, sm_dt, qdt)
        if mode == 3:
            qk_out = p
        y = _head_matmul(ctx, p, v, hkv, group, qdt)
    if rank3:
        y = b.transpose(y, [0, 2, 1, 3])
        y = _collapse(b, y, [[0], [1], [2, 3]])
    outs = [y, present_k, present_v, qk_out]
    return outs[:len(node.output)]


def _scalar_cast(x, elem):
    src = ir.FloatType(x.type).width
    dst = ir.FloatType(elem).width
    if src > dst:
        return arith.truncf(elem, x)
    if src < dst:
        return arith.extf(elem, x)
    return x


# -- RotaryEmbedding (opset 23) --------------------------------------------------

def _check_rotary(g, node):
    r = need_float(g, node)
    if r:
        return r
    a = attributes(node)
    x = g.shape(node.input[0])
    if x is None or len(x) not in (3, 4):
        return "needs a 3-D [B, S, H*D] or 4-D [B, H, S, D] input"
    if len(x) == 3 and not a.get("num_heads"):
        return "a 3-D input needs the num_heads attribute"
    hidden = x[-1]
    if hidden is None:
        return "the head size must be static"
    head = hidden // a["num_heads"] if len(x) == 3 else hidden
    rot = a.get("rotary_embedding_dim", 0) or head
    if rot % 2 or rot > head:
        return f"rotary_embedding_dim={rot} must be even and at most the head size {head}"
    for k in (1, 2):
        if g.dtype(node.input[k]) != g.dtype(node.input[0]):
            return "the cos and sin caches must have the input's element type"
    if has_input(node, 3) and g.dtype(node.input[3]) != np.int64:
        return "position_ids must be int64"
    return None


@converter("RotaryEmbedding", check=_check_rotary)
def _rotary_embedding(ctx, node):
    """out = x rotated pairwise by (cos, sin) of its position: pairs are
    (d, d + rot/2) or, interleaved, (2i, 2i + 1); dims past
    rotary_embedding_dim pass through. One generic over the output reads x,
    the caches and position_ids by index (as onnx.reference computes)."""
    b, g = ctx.b, ctx.g
    a = attributes(node)
    x = ctx.get(node.input[0])
    cos, sin = ctx.get(node.input[1]), ctx.get(node.input[2])
    pos = ctx.get(node.input[3]) if has_input(node, 3) else None
    three_d = len(shape_of(x)) == 3
    if three_d:
        heads = int(a["num_heads"])
        bs, s, hidden = b.mixed_shape(x)
        x4 = _expand(b, x, [[0], [1], [2, 3]], [bs, s, heads, hidden // heads])
        dims = (0, 1, 3)  # [B, S, H, D]
    else:
        x4 = x
        dims = (0, 2, 3)  # [B, H, S, D]
    rot = int(a.get("rotary_embedding_dim", 0)) or shape_of(x4)[3]
    out = _rotate(b, x4, cos, sin, pos, dims, rot, bool(a.get("interleaved", 0)))
    if three_d:
        out = _collapse(b, out, [[0], [1], [2, 3]])
    return [out]


def _rotate(b, x4, cos, sin, pos, dims, rot, interleaved):
    """`x4` (4-D, batch, sequence and head-size dims at `dims`) rotated by
    the (cos, sin) caches `[positions, rot/2]` at each token's position:
    `pos[b, s]` (i64), or the token's index in the sequence when None."""
    bi, si, di = dims
    half = rot // 2
    elem = elem_of(x4)
    index = ir.IndexType.get()

    def body(_args):
        c = {k: arith.constant(index, k) for k in (0, 1, 2, half, rot)}
        at = [linalg.IndexOp(i).result for i in range(4)]
        d = at[di]
        in_rot = arith.cmpi(arith.CmpIPredicate.ult, d, c[rot])
        if interleaved:
            i = arith.divui(d, c[2])
            first = arith.cmpi(arith.CmpIPredicate.eq, arith.remui(d, c[2]), c[0])
            partner = arith.select(first, arith.addi(d, c[1]), arith.subi(d, c[1]))
        else:
            first = arith.cmpi(arith.CmpIPredicate.ult, d, c[half])
            i = arith.select(first, d, arith.subi(d, c[half]))
            partner = arith.select(first, arith.addi(d, c[half]), arith.subi(d, c[half]))
        # Past the rotated dims the indices would be out of range: clamp
        # them (the value read there is not used).
        i = arith.select(in_rot, i, c[0])
        partner = arith.select(in_rot, partner, d)
        if pos is not None:
            p = arith.index_cast(index, tensor.extract(pos, [at[bi], at[si]]))
            row = [p, i]
        else:
            row = [at[bi], at[si], i]
        cv, sv = tensor.extract(cos, row), tensor.extract(sin, row)
        xs = tensor.extract(x4, at)
        xp = tensor.extract(x4, [partner if k == di else at[k] for k in range(4)])
        real = arith.subf(arith.mulf(cv, xs), arith.mulf(sv, xp))  # x1 = self
        imag = arith.addf(arith.mulf(sv, xp), arith.mulf(cv, xs))  # x2 = self
        return arith.select(in_rot, arith.select(first, real, imag), xs)

    return _generic(b, [], [], b.mixed_shape(x4), elem, body)


# -- com.microsoft GroupQueryAttention -------------------------------------------

def _check_gqa(g, node):
    r = need_float(g, node)
    if r:
        return r
    a = attributes(node)
    hq, hkv = a.get("num_heads", 0), a.get("kv_num_heads", 0)
    if hq <= 0 or hkv <= 0 or hq % hkv:
        return f"num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})"
    if not (has_input(node, 1) and has_input(node, 2)):
        return "packed QKV (no key and value inputs) is not supported"
    if has_input(node, 3) != has_input(node, 4):
        return "past_key and past_value must be given together"
    if not (has_input(node, 5) and has_input(node, 6)):
        return "needs the seqlens_k and total_sequence_length inputs"
    for k, what in ((9, "position_ids"), (10, "attention_bias"), (11, "head_sink")):
        if has_input(node, k):
            return f"the {what} input is not supported"
    if len(node.output) > 3 and node.output[3]:
        return "the output_qk output is not supported"
    for key, off, what in (("local_window_size", -1, "a sliding window"),
                           ("softcap", 0.0, "softcap"), ("smooth_softmax", 0, "smooth softmax"),
                           ("qk_output", 0, "qk_output")):
        if a.get(key, off) != off:
            return f"{what} ({key}={a[key]}) is not supported"
    q = g.shape(node.input[0])
    if q is None or len(q) != 3 or not isinstance(q[2], int) or q[2] % hq:
        return "query must be [batch, seq, num_heads * head_size] with a static hidden size"
    head = q[2] // hq
    if a.get("do_rotary", 0):
        if not (has_input(node, 7) and has_input(node, 8)):
            return "do_rotary needs the cos_cache and sin_cache inputs"
        c = g.shape(node.input[7])
        if c is None or len(c) != 2 or not isinstance(c[1], int) or 2 * c[1] > head:
            return "cos_cache must be [positions, rotary_dim / 2] with rotary_dim <= head size"
    if g.dtype(node.input[5]) != np.int32 or g.dtype(node.input[6]) != np.int32:
        return "seqlens_k and total_sequence_length must be int32"
    return None


@converter("GroupQueryAttention", check=_check_gqa, domain="com.microsoft")
def _group_query_attention(ctx, node):
    """onnxruntime's GQA with its KV cache in BNSH (past and present not
    sharing a buffer), as its CPU kernel computes it: sequence b holds
    `seqlens_k[b] + 1` tokens, the new ones last (all at 0.. when
    `total_sequence_length == S`, a first prompt); RoPE rotates Q and K at
    those positions; present is past with the new K/V written at their
    positions, `max(total_sequence_length, past)` long. That is
    `sits.paged_attention` over a pool of one block per sequence built from
    the past (`tensor.concat`s), which `sits-page-kv-cache` can then point at
    the real KV pool."""
    b = ctx.b
    a = attributes(node)
    hq, hkv = int(a["num_heads"]), int(a["kv_num_heads"])
    q = _split_heads(b, ctx.get(node.input[0]), hq)
    k = _split_heads(b, ctx.get(node.input[1]), hkv)
    v = _split_heads(b, ctx.get(node.input[2]), hkv)
    elem = elem_of(q)
    bs, _, s, head = b.mixed_shape(q)
    index, i32, i64 = ir.IndexType.get(), ir.IntegerType.get_signless(32), I64()
    seqlens = ctx.get(node.input[5])
    total_t = ctx.get(node.input[6])
    total = arith.index_cast(index, tensor.extract(
        total_t, [b.index(0)] * len(shape_of(total_t))))
    new = _idx(b, s)
    first_prompt = arith.cmpi(arith.CmpIPredicate.eq, total, new)
    new_i32 = arith.index_cast(i32, new)
    one = ir.AffineMap.get_identity(1)

    def length(args):  # tokens of sequence b, the new ones included
        plus = arith.addi(args[0], arith.constant(i32, 1))
        return arith.select(first_prompt, new_i32, plus)

    lens = _generic(b, [seqlens], [one], [bs], i32, length)
    new_i64 = arith.index_cast(i64, new)

    def position(args):  # lens[b] - S + s
        start = arith.subi(arith.extsi(i64, args[0]), new_i64)
        return arith.addi(start, arith.index_cast(i64, linalg.IndexOp(1).result))

    pos = _generic(b, [lens], [ir.AffineMap.get(2, 0, [ir.AffineDimExpr.get(0)])],
                   [bs, s], i64, position)
    if a.get("do_rotary", 0):
        cos, sin = ctx.get(node.input[7]), ctx.get(node.input[8])
        rot = 2 * shape_of(cos)[1]
        interleaved = bool(a.get("rotary_interleaved", 0))
        q = _rotate(b, q, cos, sin, pos, (0, 2, 3), rot, interleaved)
        k = _rotate(b, k, cos, sin, pos, (0, 2, 3), rot, interleaved)

    # One block per sequence, as long as the present: past K/V then zeros.
    if has_input(node, 3):
        pasts = [ctx.get(node.input[3]), ctx.get(node.input[4])]
        past_len = b.mixed_shape(pasts[0])[2]
    else:
        pasts, past_len = None, 0
    present = arith.maxui(total, _idx(b, past_len))
    kinds = []
    for kind in range(2):
        if pasts is None:
            full = b.fill(b.scalar(0.0, elem), b.empty([bs, hkv, present, head], elem))
        else:
            pad = arith.subi(present, _idx(b, past_len))
            zeros = b.fill(b.scalar(0.0, elem), b.empty([bs, hkv, pad, head], elem))
            full = tensor.concat(b.tensor_type([_static([bs])[0], hkv, None, head], elem), 2,
                                 [pasts[kind], zeros])
        kinds.append(_expand(b, full, [[0, 1, 2], [3], [4], [5]],
                             [bs, 1, 1, hkv, present, head]))
    pool_type = b.tensor_type([_static([bs])[0], 1, 2, hkv, None, head], elem)
    pool = tensor.concat(pool_type, 2, kinds)
    tables = _generic(b, [], [], [bs, 1], i32,
                      lambda _: arith.index_cast(i32, linalg.IndexOp(0).result))
    present_i64 = arith.index_cast(i64, present)

    def slot(args):  # b * present + position, or -1 outside the buffer
        p = args[0]
        zero = arith.constant(i64, 0)
        inside = arith.andi(arith.cmpi(arith.CmpIPredicate.sge, p, zero),
                            arith.cmpi(arith.CmpIPredicate.slt, p, present_i64))
        row = arith.index_cast(i64, linalg.IndexOp(0).result)
        return arith.select(inside, arith.addi(arith.muli(row, present_i64), p),
                            arith.constant(i64, -1))

    slots = _generic(b, [pos], [ir.AffineMap.get_identity(2)], [bs, s], i64, slot)
    kw = {}
    if a.get("scale"):
        kw["scale"] = f64_attr(a["scale"])
    y, pool = sits.paged_attention(q, k, v, pool, tables, slots, lens, layer=i64_attr(0), **kw)
    presents = []
    for kind in range(2):
        sizes = [bs, 1, 1, hkv, present, head]
        presents.append(tensor.extract_slice(
            b.tensor_type([_static([bs])[0], hkv, None, head], elem), pool, [],
            [x for x in sizes if not isinstance(x, int)], [],
            [0, 0, kind, 0, 0, 0], [x if isinstance(x, int) else DYN for x in sizes],
            [1] * 6))
    y = b.transpose(y, [0, 2, 1, 3])
    y = _collapse(b, y, [[0], [1], [2, 3]])
    return [y] + presents
