"""Run-time causal masks and repeated K/V heads, as decoders exported from
`transformers` (eager attention, KV cache, no attention-mask input) build
them; used by the attention pattern of `_patterns.py`.

The causal mask is computed from positions at run time:

    q_pos = Range(0, seq, 1) + past          # absolute query positions
    k_pos = Range(0, past + seq, 1)          # absolute key positions
    allowed = LessOrEqual(k_pos[None, None, None, :], q_pos[None, None, :, None])
    mask = Where(Expand(allowed, [B, 1, seq, past + seq]), 0, finfo.min)

with `seq` and `past` read from tensor shapes (Shape → Gather). It is proven
to be `sits.attention {causal}` by evaluating it symbolically: every extent
is a linear form in the graph's symbolic dimensions (`{"past": 1, "seq": 1}`
for `past + seq`), each position vector is `arange(length) + offset`, and the
comparison `k_off + j <= q_off + i + c` is causal (bottom-right aligned)
exactly when the vectors run along the score's key and query axes, their
lengths are the key and query lengths Tk and Tq of the attention, and
`q_off - k_off + c == Tk - Tq`. Anything that is not exactly that (a window,
an off-by-one, a padding mask combined in, an unknown extent) is no match.

repeat_kv (GQA) is Reshape(Expand(Unsqueeze(kv, 2), [B, Hkv, n, T, D]),
[B, Hkv·n, T, D]): query head h reads kv head h // n, which is the head
mapping of `sits.attention`, so the fused op reads the unrepeated K/V.

Symbolic extents are trusted the way the rest of the importer trusts them:
equal names are equal sizes.
"""

from __future__ import annotations

from typing import Optional

import numpy as np
import onnx

from . import _types
from ._graph import attributes, extent_tree, shape_node_slice

#: A linear form over symbolic extents: {symbol: coefficient}, "" the constant.
Lin = dict


def _lin_norm(d: dict) -> Lin:
    return {k: v for k, v in d.items() if v != 0}


def _lin_add(a: Lin, b: Lin, sign: int = 1) -> Lin:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + sign * v
    return _lin_norm(out)


def lin_of_extent(extent) -> Optional[Lin]:
    """Linear form of a static or symbolic (`past + seq`) extent."""
    def walk(t) -> Optional[Lin]:
        if t is None:
            return None
        if t[0] == "dim":
            return {t[1]: 1}
        if t[0] == "int":
            return _lin_norm({"": t[1]})
        a, b = walk(t[1]), walk(t[2])
        if a is None or b is None:
            return None
        if t[0] in ("+", "-"):
            return _lin_add(a, b, 1 if t[0] == "+" else -1)
        if t[0] == "*":
            for x, y in ((a, b), (b, a)):
                if set(x) <= {""}:          # constant factor
                    c = x.get("", 0)
                    return _lin_norm({k: c * v for k, v in y.items()})
        return None  # a product of symbols, a division, ...: not linear

    return walk(extent_tree(extent))


_INT_SOURCES = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
                onnx.TensorProto.INT64, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                onnx.TensorProto.UINT32}


class CausalProver:
    def __init__(self, m):
        self.m = m
        self.g = m.g

    def _node(self, name):
        i = self.g.producer_of(name)
        return None if i is None else self.g.nodes[i]

    def _is_int(self, name):
        return self.g.elem_type(name) in _INT_SOURCES

    def _axes(self, node) -> Optional[list]:
        """Constant axes of an Unsqueeze (input since opset 13, else attribute)."""
        if len(node.input) > 1 and node.input[1]:
            if not self.g.is_const(node.input[1]):
                return None
            return [int(a) for a in self.g.const(node.input[1]).reshape(-1)]
        return attributes(node).get("axes")

    # -- integer scalars --------------------------------------------------------

    def scalar(self, name, depth=0) -> Optional[Lin]:
        """Linear form of a one-element integer value: a constant, a tensor
        extent (Shape → Gather), or sums, differences, integer casts and
        reshapes of those."""
        g = self.g
        if depth > 32 or not name or not self._is_int(name):
            return None
        if g.is_const(name):
            c = np.asarray(g.const(name))
            return _lin_norm({"": int(c.reshape(-1)[0])}) if c.size == 1 else None
        n = self._node(name)
        if n is None or not self.m.is_op(n, "Cast", "Add", "Sub", "Gather", "Shape", "Squeeze",
                                         "Unsqueeze", "Reshape", "Identity"):
            return None
        s = g.shape(name)
        if s is None or None in s or int(np.prod(s, dtype=np.int64)) != 1:
            return None
        op = n.op_type
        if op == "Cast":
            # Only widening to int64 (extents and positions fit any int type).
            if attributes(n).get("to") != onnx.TensorProto.INT64:
                return None
            return self.scalar(n.input[0], depth + 1)
        if op in ("Squeeze", "Unsqueeze", "Reshape", "Identity"):
            return self.scalar(n.input[0], depth + 1)
        if op in ("Add", "Sub"):
            a, b = self.scalar(n.input[0], depth + 1), self.scalar(n.input[1], depth + 1)
            if a is None or b is None:
                return None
            return _lin_add(a, b, 1 if op == "Add" else -1)
        if op == "Shape":
            dims = self._shape_slice(n)
            return lin_of_extent(dims[0]) if dims is not None and len(dims) == 1 else None
        # Gather(Shape(x), k, axis 0): the k-th extent of x.
        if attributes(n).get("axis", 0) != 0 or not g.is_const(n.input[1]):
            return None
        src = self._node(n.input[0])
        if not self.m.is_op(src, "Shape"):
            return None
        dims = self._shape_slice(src)
        idx = np.asarray(g.const(n.input[1])).reshape(-1)
        if dims is None or idx.size != 1:
            return None
        k = int(idx[0])
        if not -len(dims) <= k < len(dims):
            return None
        return lin_of_extent(dims[k])

    def _shape_slice(self, shape_node) -> Optional[list]:
        dims = self.g.sym_shape(shape_node.input[0])
        return None if dims is None else shape_node_slice(shape_node, dims)

    # -- position vectors ---------------------------------------------------------

    def positions(self, name, depth=0):
        """(length, offset) when 1-D integer `name` is arange(length) + offset."""
        g = self.g
        if depth > 16 or not self._is_int(name) or g.rank(name) != 1:
            return None
        n = self._node(name)
        if self.m.is_op(n, "Range"):
            start, limit = self.scalar(n.input[0]), self.scalar(n.input[1])
            if start is None or limit is None or not g.is_const(n.input[2]) \
                    or np.asarray(g.const(n.input[2])).reshape(-1).tolist() != [1]:
                return None
            return _lin_add(limit, start, -1), start
        if self.m.is_op(n, "Cast"):
            if attributes(n).get("to") != onnx.TensorProto.INT64:
                return None
            return self.positions(n.input[0], depth + 1)
        if self.m.is_op(n, "Add", "Sub"):
            for k in (0, 1):
                if k == 1 and n.op_type == "Sub":
                    break  # scalar - positions counts down
                p = self.positions(n.input[k], depth + 1)
                s = self.scalar(n.input[1 - k])
                if p is not None and s is not None:
                    return p[0], _lin_add(p[1], s, 1 if n.op_type == "Add" else -1)
        return None

    def placed(self, name):
        """(length, offset, axis from the end, rank) for a position vector
        unsqueezed to a higher rank (every other extent 1)."""
        chain = []
        cur = name
        while True:
            n = self._node(cur)
            if self.m.is_op(n, "Unsqueeze"):
                chain.append(n)
                cur = n.input[0]
                continue
            break
        p = self.positions(cur)
        if p is None:
            return None
        rank, axis = 1, 0
        for n in reversed(chain):
            axes = self._axes(n)
            if not axes:
                return None
            out_rank = rank + len(axes)
            axes = sorted({a + out_rank if a < 0 else a for a in axes})
            if len(axes) != len(self._axes(n)) or axes[0] < 0 or axes[-1] >= out_rank:
                return None
            kept = [d for d in range(out_rank) if d not in axes]
            axis, rank = kept[axis], out_rank
        return p[0], p[1], axis - rank, rank

    # -- the mask -------------------------------------------------------------------

    def predicate(self, name, depth=0):
        """(length_q, length_k, d, negated, rank) when bool `name` is
        `j <= i + d` (or its negation when `negated`) over query index i on
        axis -2 and key index j on axis -1, broadcast over leading axes."""
        g = self.g
        n = self._node(name)
        if n is None or depth > 8:
            return None
        if self.m.is_op(n, "Not"):
            r = self.predicate(n.input[0], depth + 1)
            return None if r is None else r[:3] + (not r[3],) + r[4:]
        if self.m.is_op(n, "Expand"):
            # Expand only replicates along the leading axes when the last two
            # extents are unchanged.
            src, out = g.sym_shape(n.input[0]), g.sym_shape(n.output[0])
            if src is None or out is None or len(src) < 2 or len(out) < 2 \
                    or None in src[-2:] or tuple(src[-2:]) != tuple(out[-2:]):
                return None
            r = self.predicate(n.input[0], depth + 1)
            return None if r is None else r[:4] + (len(out),)
        if not self.m.is_op(n, "LessOrEqual", "Less", "GreaterOrEqual", "Greater"):
            return None
        a, b = self.placed(n.input[0]), self.placed(n.input[1])
        if a is None or b is None:
            return None
        op = n.op_type
        if a[2] == -2 and b[2] == -1:
            # Write it with the key position first: Q op K  ==  K op' Q.
            a, b = b, a
            op = {"LessOrEqual": "GreaterOrEqual", "Less": "Greater",
                  "GreaterOrEqual": "LessOrEqual", "Greater": "Less"}[op]
        if a[2] != -1 or b[2] != -2:
            return None
        # K <= Q + 0 | K < Q ≡ K <= Q - 1 | K >= Q ≡ not K <= Q - 1 | K > Q ≡ not K <= Q.
        c, negated = {"LessOrEqual": (0, False), "Less": (-1, False),
                      "GreaterOrEqual": (-1, True), "Greater": (0, True)}[op]
        (lk, ok, _, rk), (lq, oq, _, rq) = a, b
        # k_off + j <= q_off + i + c  <=>  j <= i + (q_off - k_off + c)
        d = _lin_add(_lin_add(oq, ok, -1), {"": c})
        return lq, lk, _lin_norm(d), negated, max(rk, rq)

    def is_causal(self, mask, tq, tk, additive: bool) -> bool:
        """Whether run-time `mask` (additive float or boolean keep-mask) is
        exactly the bottom-right-aligned causal mask of query length `tq` and
        key length `tk` (static or symbolic extents)."""
        g, m = self.g, self.m
        lq_want, lk_want = lin_of_extent(tq), lin_of_extent(tk)
        if lq_want is None or lk_want is None:
            return False
        negated_fill = False
        cond = mask
        if additive:
            n = self._node(mask)
            if not m.is_op(n, "Where") or len(n.input) != 3:
                return False
            a, b = m.scalar(n.input[1]), m.scalar(n.input[2])
            dtype = g.dtype(mask)
            if a == 0.0 and _types.masks_out(b, dtype):
                pass
            elif b == 0.0 and _types.masks_out(a, dtype):
                negated_fill = True
            else:
                return False
            cond = n.input[0]
        elif not _types.is_bool(g.dtype(mask)):
            return False
        r = self.predicate(cond)
        if r is None:
            return False
        lq, lk, d, negated, rank = r
        if negated != negated_fill or rank > 4:
            return False
        return lq == lq_want and lk == lk_want and d == _lin_add(lk_want, lq_want, -1)

    # -- repeat_kv ------------------------------------------------------------------

    def repeat_kv(self, name):
        """(source, nodes) when `name` is the kv heads of `source` (rank 4,
        heads on axis 1) each repeated n times in place:
        Reshape(Expand(Unsqueeze(source, 2), [B, H, n, ...]), [B, H·n, ...])."""
        g, m = self.g, self.m
        ri, rn = m.prod(name)
        if not m.is_op(rn, "Reshape") or not g.single_use(name) \
                or not g.single_use(rn.input[0]):
            return None
        ei, en = m.prod(rn.input[0])
        if not m.is_op(en, "Expand") or not g.single_use(en.input[0]):
            return None
        ui, un = m.prod(en.input[0])
        if not m.is_op(un, "Unsqueeze") or self._axes(un) not in ([2], [-3]):
            return None
        src = un.input[0]
        s, e, r = g.sym_shape(src), g.sym_shape(en.output[0]), g.sym_shape(name)
        if s is None or e is None or r is None or len(s) != 4 or len(e) != 5 or len(r) != 4 \
                or None in s or None in e or None in r:
            return None
        n_rep, heads = e[2], s[1]
        if not isinstance(n_rep, (int, np.integer)) or not isinstance(heads, (int, np.integer)) \
                or n_rep < 1:
            return None
        if (e[0], e[1], e[3], e[4]) != tuple(s) or \
                tuple(r) != (s[0], heads * n_rep, s[2], s[3]):
            return None
        return src, [ui, ei, ri]
