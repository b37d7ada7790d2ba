"""Multi-node ONNX patterns imported as one SITS op.

A match *claims* its nodes; the importer emits the fused op when it reaches
the match's anchor (its last node, so every external input exists by then)
and skips the other claimed nodes. Every value inside a match must have
exactly one use and must not be a graph output, so nothing else can observe
the intermediate results that disappear. When a pattern does not match
exactly, the nodes are imported one by one — correctness first.

Patterns, in matching order:

* attention: MatMul(Q[*sq], Kᵀ[*sk]) → (Mul|Div scale) → (Add mask | Where
  mask) → Softmax(-1) (→ identity Casts) → MatMul(·, V)  ⇒  `sits.attention`
  (`causal` when the mask is the constant bottom-right-aligned
  upper-triangular -inf, or a run-time mask proven to be it, see
  `_patterns_causal.py`; K/V repeated per head group by repeat_kv are read
  unrepeated, as GQA);
* decomposed LayerNormalization: ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div
  (/Mul γ/Add β)  ⇒  `sits.layer_norm`;
* decomposed RMSNorm (Llama's, as torch exports it): Pow 2/ReduceMean/Add/Sqrt/
  (Reciprocal or Div 1)/Mul x (/Mul γ), or Div(x, Sqrt(...))  ⇒  `sits.rms_norm`;
* erf GELU (as torch exports it, every operand order): Div(x, √2) or
  Mul(x, 1/√2) → Erf → Add 1 → Mul x → Mul 0.5  ⇒  `sits.activation <gelu>`;
* x * Sigmoid(x)  ⇒  `sits.activation <silu>`;
* Conv → BatchNormalization (constant parameters)  ⇒  one `sits.conv` with
  the normalization folded into filter and bias;
* MatMul → Add(constant 1-D bias)  ⇒  `sits.matmul` with `bias`.
"""

from __future__ import annotations

import math as pymath
from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from ... import ir
from ...dialects import sits
from . import _types
from ._graph import Graph, attributes
from ._patterns_causal import CausalProver
from ._ops_common import conv_padding, f64_attr, i64_attr, norm_axis
from ._ops_contraction import conv_attrs, emit_matmul
from ._ops_normalization import bn_affine, norm_param
from ._ops_reduction import reduce_axes


@dataclass
class Fusion:
    kind: str
    anchor: int                 # node index where the fused op is emitted
    nodes: list                 # every claimed node index (anchor included)
    output: str                 # the ONNX value the fused op produces
    loc_node: int               # node whose name the fused op's location carries
    params: dict = field(default_factory=dict)
    #: ONNX values the fused op reads (default: every input of the claimed
    #: nodes that they do not produce themselves).
    inputs: Optional[list] = None

    def external_inputs(self, g: Graph) -> list:
        if self.inputs is not None:
            return [x for x in self.inputs if x]
        produced = {o for i in self.nodes for o in g.nodes[i].output}
        return [x for i in self.nodes for x in g.nodes[i].input if x and x not in produced]


def _close(a, b, rtol=1e-5):
    return a is not None and abs(a - b) <= rtol * abs(b)


class Matcher:
    def __init__(self, g: Graph):
        self.g = g
        self.claimed: set = set()
        self.by_anchor: dict = {}

    # -- graph queries ----------------------------------------------------------

    def prod(self, name):
        """(index, node) of the unclaimed emitted producer of `name`."""
        i = self.g.producer_of(name)
        if i is None or i in self.claimed:
            return None, None
        return i, self.g.nodes[i]

    def only_user(self, name):
        """(index, node) of the single unclaimed consumer of `name`."""
        g = self.g
        if not g.single_use(name):
            return None, None
        i = g.consumers[name][0]
        if i in self.claimed:
            return None, None
        return i, g.nodes[i]

    def scalar(self, name) -> Optional[float]:
        """The value of a constant whose elements are all equal."""
        g = self.g
        if not name or not g.is_const(name):
            return None
        c = g.const(name)
        if c.size == 0 or c.dtype.kind not in "fiu" and str(c.dtype) != "bfloat16":
            return None
        flat = c.reshape(-1).astype(np.float64)
        if not np.all(flat == flat[0]):
            return None
        return float(flat[0])

    def is_float(self, name):
        dt = self.g.dtype(name)
        return dt is not None and _types.is_float(dt)

    def claim(self, f: Fusion):
        self.claimed.update(f.nodes)
        self.by_anchor[f.anchor] = f

    def is_op(self, node, *types):
        return node is not None and node.op_type in types and (node.domain or "") in ("", "ai.onnx")

    # -- driver -----------------------------------------------------------------

    def run(self):
        g = self.g
        order = sorted(g.emit_nodes)
        for matcher, op in ((self.attention, "Softmax"), (self.layer_norm, "ReduceMean"),
                            (self.rms_norm, "ReduceMean"),
                            (self.gelu, "Erf"), (self.silu, "Sigmoid"),
                            (self.conv_bn, "BatchNormalization"), (self.matmul_bias, "Add")):
            for i in order:
                n = g.nodes[i]
                if i in self.claimed or not self.is_op(n, op):
                    continue
                try:
                    f = matcher(i, n)
                except Exception:  # a pattern that does not fit is no match
                    f = None
                if f is not None and not (set(f.nodes) & self.claimed):
                    self.claim(f)
        return self

    # -- GELU / SiLU --------------------------------------------------------------

    def gelu(self, i, n):
        d_name = n.input[0]
        di, dn = self.prod(d_name)
        if dn is None or not self.g.single_use(d_name):
            return None
        x = None
        if self.is_op(dn, "Div") and _close(self.scalar(dn.input[1]), pymath.sqrt(2)):
            x = dn.input[0]
        elif self.is_op(dn, "Mul"):
            for k in (0, 1):
                if _close(self.scalar(dn.input[k]), 1 / pymath.sqrt(2)):
                    x = dn.input[1 - k]
        if x is None or not self.is_float(x):
            return None
        ai, an = self.only_user(n.output[0])
        if not self.is_op(an, "Add"):
            return None
        other = an.input[1] if an.input[0] == n.output[0] else an.input[0]
        if not _close(self.scalar(other), 1.0):
            return None
        mi, mn = self.only_user(an.output[0])
        if not self.is_op(mn, "Mul"):
            return None
        o = mn.input[1] if mn.input[0] == an.output[0] else mn.input[0]
        nodes = [di, i, ai, mi]
        if o == x:
            # x * (1 + erf) then * 0.5
            hi, hn = self.only_user(mn.output[0])
            if not self.is_op(hn, "Mul"):
                return None
            h_other = hn.input[1] if hn.input[0] == mn.output[0] else hn.input[0]
            if not _close(self.scalar(h_other), 0.5):
                return None
            nodes.append(hi)
            out, anchor = hn.output[0], hi
        elif _close(self.scalar(o), 0.5):
            # (1 + erf) * 0.5 then * x
            hi, hn = self.only_user(mn.output[0])
            if not self.is_op(hn, "Mul") or x not in hn.input:
                return None
            nodes.append(hi)
            out, anchor = hn.output[0], hi
        else:
            # (x * 0.5) * (1 + erf)
            pi, pn = self.prod(o)
            if not self.is_op(pn, "Mul") or not self.g.single_use(o) or x not in pn.input:
                return None
            p_other = pn.input[1] if pn.input[0] == x else pn.input[0]
            if not _close(self.scalar(p_other), 0.5):
                return None
            nodes.append(pi)
            out, anchor = mn.output[0], max(mi, pi)
        if self.g.shape(out) != self.g.shape(x):
            return None
        anchor = max(nodes)
        return Fusion("activation", anchor, nodes, out, anchor,
                      {"input": x, "kind": "Gelu"})

    def silu(self, i, n):
        x = n.input[0]
        if not self.is_float(x):
            return None
        mi, mn = self.only_user(n.output[0])
        if not self.is_op(mn, "Mul"):
            return None
        other = mn.input[1] if mn.input[0] == n.output[0] else mn.input[0]
        if other != x or self.g.shape(mn.output[0]) != self.g.shape(x):
            return None
        return Fusion("activation", mi, [i, mi], mn.output[0], mi, {"input": x, "kind": "Silu"})

    # -- LayerNorm ----------------------------------------------------------------

    def _reduce_mean_axes(self, node):
        axes = reduce_axes(self.g, node)
        if isinstance(axes, str) or not axes or not attributes(node).get("keepdims", 1):
            return None
        return axes

    def layer_norm(self, i, n):
        g = self.g
        x = n.input[0]
        xs = g.shape(x)
        axes = self._reduce_mean_axes(n)
        if xs is None or axes is None or axes != list(range(axes[0], len(xs))) \
                or not self.is_float(x):
            return None
        si, sn = self.only_user(n.output[0])
        if not self.is_op(sn, "Sub") or sn.input[0] != x or sn.input[1] != n.output[0]:
            return None
        d = sn.output[0]
        users = g.consumers.get(d, [])
        if len(users) != 2 or d in g.outputs or any(u in self.claimed for u in users):
            return None
        pw = dv = None
        for u in users:
            un = g.nodes[u]
            if self.is_op(un, "Pow") and un.input[0] == d and _close(self.scalar(un.input[1]), 2.0):
                pw = u
            elif self.is_op(un, "Mul") and un.input[0] == d and un.input[1] == d:
                pw = u
            elif self.is_op(un, "Div") and un.input[0] == d:
                dv = u
        if pw is None or dv is None:
            return None
        vi, vn = self.only_user(g.nodes[pw].output[0])
        if not self.is_op(vn, "ReduceMean") or self._reduce_mean_axes(vn) != axes:
            return None
        ei, en = self.only_user(vn.output[0])
        if not self.is_op(en, "Add"):
            return None
        eps = self.scalar(en.input[1] if en.input[0] == vn.output[0] else en.input[0])
        if eps is None or eps < 0:
            return None
        qi, qn = self.only_user(en.output[0])
        if not self.is_op(qn, "Sqrt"):
            return None
        di2, dn2 = self.only_user(qn.output[0])
        if di2 != dv or g.nodes[dv].input[1] != qn.output[0]:
            return None
        nodes = [i, si, pw, vi, ei, qi, dv]
        out = g.nodes[dv].output[0]
        normalized = xs[axes[0]:]
        gamma = beta = None
        mi, mn = self.only_user(out)
        if self.is_op(mn, "Mul"):
            other = mn.input[1] if mn.input[0] == out else mn.input[0]
            if g.is_const(other) and self._fits(other, normalized):
                gamma, out = other, mn.output[0]
                nodes.append(mi)
                bi, bn = self.only_user(out)
                if self.is_op(bn, "Add"):
                    other = bn.input[1] if bn.input[0] == out else bn.input[0]
                    if g.is_const(other) and self._fits(other, normalized):
                        beta, out = other, bn.output[0]
                        nodes.append(bi)
        if g.shape(out) != xs or None in normalized:
            return None
        anchor = max(nodes)
        return Fusion("layer_norm", anchor, nodes, out, anchor,
                      {"input": x, "axis": axes[0], "epsilon": eps, "scale": gamma,
                       "bias": beta, "normalized": normalized})

    def rms_norm(self, i, n):
        """Pow(x, 2) | Mul(x, x) → ReduceMean → Add ε → Sqrt → (Reciprocal |
        Div(1, ·)) → Mul x, or Div(x, ·); then optionally Mul γ."""
        g = self.g
        axes = self._reduce_mean_axes(n)
        pi, pn = self.prod(n.input[0])
        if axes is None or pn is None or not g.single_use(n.input[0]):
            return None
        if self.is_op(pn, "Pow") and _close(self.scalar(pn.input[1]), 2.0):
            x = pn.input[0]
        elif self.is_op(pn, "Mul") and pn.input[0] == pn.input[1]:
            x = pn.input[0]
        else:
            return None
        xs = g.shape(x)
        if xs is None or axes != list(range(axes[0], len(xs))) or not self.is_float(x):
            return None
        ei, en = self.only_user(n.output[0])
        if not self.is_op(en, "Add"):
            return None
        eps = self.scalar(en.input[1] if en.input[0] == n.output[0] else en.input[0])
        qi, qn = self.only_user(en.output[0])
        if eps is None or eps < 0 or not self.is_op(qn, "Sqrt"):
            return None
        nodes = [pi, i, ei, qi]
        ri, rn = self.only_user(qn.output[0])
        if self.is_op(rn, "Div") and rn.input[1] == qn.output[0] and rn.input[0] == x:
            nodes.append(ri)
            out = rn.output[0]
        elif (self.is_op(rn, "Reciprocal") or (self.is_op(rn, "Div") and rn.input[1] == qn.output[0]
                                                and _close(self.scalar(rn.input[0]), 1.0))):
            mi, mn = self.only_user(rn.output[0])
            if not self.is_op(mn, "Mul") or x not in mn.input:
                return None
            nodes += [ri, mi]
            out = mn.output[0]
        else:
            return None
        normalized = xs[axes[0]:]
        gamma = None
        gi, gn = self.only_user(out)
        if self.is_op(gn, "Mul"):
            other = gn.input[1] if gn.input[0] == out else gn.input[0]
            if g.is_const(other) and self._fits(other, normalized):
                gamma, out = other, gn.output[0]
                nodes.append(gi)
        if g.shape(out) != xs or None in normalized:
            return None
        anchor = max(nodes)
        return Fusion("rms_norm", anchor, nodes, out, anchor,
                      {"input": x, "axis": axes[0], "epsilon": eps, "scale": gamma,
                       "normalized": normalized})

    def _fits(self, name, normalized):
        """Whether constant `name` broadcasts to the normalized shape
        (extra leading unit dims allowed)."""
        s = self.g.shape(name)
        if s is None:
            return False
        extra = len(s) - len(normalized)
        if extra > 0:
            if any(d != 1 for d in s[:extra]):
                return False
            s = s[extra:]
        tail = normalized[len(normalized) - len(s):]
        return all(a == b or a == 1 for a, b in zip(s, tail))

    # -- attention ----------------------------------------------------------------

    def _peel_scale(self, name):
        """(source, factor, nodes) through at most one Mul/Div by a scalar
        constant with a single-use result."""
        i, n = self.prod(name)
        if n is None or not self.g.single_use(name):
            return name, 1.0, []
        if self.is_op(n, "Mul"):
            for k in (0, 1):
                s = self.scalar(n.input[k])
                if s is not None and self.g.shape(n.input[1 - k]) == self.g.shape(name):
                    return n.input[1 - k], s, [i]
        if self.is_op(n, "Div"):
            s = self.scalar(n.input[1])
            if s not in (None, 0.0) and self.g.shape(n.input[0]) == self.g.shape(name):
                return n.input[0], 1.0 / s, [i]
        return name, 1.0, []

    def _scores(self, name):
        """(q_name, kt_name, scale, nodes) when `name` is a scaled Q·Kᵀ."""
        src, s, nodes = self._peel_scale(name)
        mi, mn = self.prod(src)
        if not self.is_op(mn, "MatMul") or not self.g.single_use(src):
            return None
        return mn.input[0], mn.input[1], s, nodes + [mi]

    def attention(self, i, n):
        g = self.g
        x = n.input[0]
        xs = g.shape(x)
        if xs is None or len(xs) != 4 or norm_axis(attributes(n).get("axis", -1), 4) != 3 \
                or not self.is_float(x):
            return None
        nodes = [i]
        probs = n.output[0]
        pi, pn = self.only_user(probs)
        # Casts to the type the probabilities already have, and a widening
        # cast cast straight back (torch exports `softmax(..., dtype=float32)
        # .to(query.dtype)`), change nothing.
        while self.is_op(pn, "Cast"):
            to = attributes(pn).get("to")
            if to != g.elem_type(probs):
                ri, rn = self.only_user(pn.output[0])
                if to not in _types.SUPPORTED_ONNX_TYPES or not (
                        _types.widens_exactly(g.dtype(probs), _types.numpy_dtype(to))
                        and self.is_op(rn, "Cast")
                        and attributes(rn).get("to") == g.elem_type(probs)):
                    break
                nodes.append(pi)
                pi, pn = ri, rn
            nodes.append(pi)
            probs = pn.output[0]
            pi, pn = self.only_user(probs)
        if not self.is_op(pn, "MatMul") or pn.input[0] != probs:
            return None
        nodes.append(pi)
        causal_prover = CausalProver(self)
        v = pn.input[1]
        v_rep = causal_prover.repeat_kv(v)
        mask = bool_mask = None
        scores = None
        mi, mn = self.prod(x)
        if self.is_op(mn, "Add") and g.single_use(x):
            for k in (0, 1):
                scores = self._scores(mn.input[k])
                if scores is not None:
                    mask = mn.input[1 - k]
                    nodes.append(mi)
                    break
        elif self.is_op(mn, "Where") and g.single_use(x):
            # A finite fill is kept only for a mask proven causal (below),
            # where no row is fully masked.
            fill = self.scalar(mn.input[2])
            if _types.masks_out(fill, g.dtype(x)):
                scores = self._scores(mn.input[1])
                if scores is not None:
                    bool_mask = mn.input[0]
                    nodes.append(mi)
        else:
            scores = self._scores(x)
        if scores is None:
            return None
        q, kt, scale, snodes = scores
        nodes += snodes
        q, sq, qnodes = self._peel_scale(q)
        kt, sk, knodes = self._peel_scale(kt)
        nodes += qnodes + knodes
        scale *= sq * sk
        # K = Kᵀ with its two inner dims swapped; fold a producing Transpose.
        ti, tn = self.prod(kt)
        if self.is_op(tn, "Transpose") and g.single_use(kt):
            perm = list(attributes(tn).get("perm", range(g.rank(tn.input[0]))[::-1]))
            k_src = tn.input[0]
            nodes.append(ti)
        else:
            perm, k_src = [0, 1, 2, 3], kt
        if len(perm) != 4 or g.rank(k_src) != 4:
            return None
        k_perm = perm[:2] + [perm[3], perm[2]]
        # GQA exported as repeat_kv of both K and V: read the unrepeated heads.
        k_rep = causal_prover.repeat_kv(k_src) if k_perm[:2] == [0, 1] else None
        if k_rep is not None and v_rep is not None:
            k_src, v = k_rep[0], v_rep[0]
            nodes += k_rep[1] + v_rep[1]
        ksrc_shape = g.shape(k_src)
        qs, vs = g.shape(q), g.shape(v)
        if ksrc_shape is None or qs is None or vs is None or len(qs) != 4 or len(vs) != 4:
            return None
        ks = tuple(ksrc_shape[p] for p in k_perm)
        if not all(self.is_float(t) for t in (q, k_src, v)) or \
                len({g.dtype(q), g.dtype(k_src), g.dtype(v), g.dtype(x)}) != 1:
            return None
        if not (qs[0] == ks[0] == vs[0] and ks[1] == vs[1] and ks[2] == vs[2] and qs[3] == ks[3]):
            return None
        if qs[1] is not None and ks[1] is not None and (ks[1] == 0 or qs[1] % ks[1]):
            return None
        if not (scale > 0 and pymath.isfinite(scale)):
            return None
        tq, tk = qs[2], ks[2]
        causal = False
        mask_name = mask or bool_mask
        if mask_name is not None:
            ms = g.shape(mask_name)
            if ms is None or len(ms) > 4:
                return None
            scores_shape = (qs[0], qs[1], tq, tk)
            for a, b in zip(ms[::-1], scores_shape[::-1]):
                if a not in (1, b):
                    return None
            if mask is not None and g.dtype(mask) != g.dtype(q):
                return None
            if bool_mask is not None and not _types.is_bool(g.dtype(bool_mask)):
                return None
            if g.is_const(mask_name) and tq is not None and tk is not None and tk >= tq:
                causal = self._is_causal(g.const(mask_name), tq, tk, additive=mask is not None)
            else:
                sq, sk = g.sym_shape(q)[2], g.sym_shape(k_src)[k_perm[2]]
                if mask is not None:
                    causal = self._is_causal_graph(mask, sq, sk)
                causal = causal or causal_prover.is_causal(mask_name, sq, sk,
                                                           additive=mask is not None)
            if bool_mask is not None and not causal and self.scalar(g.nodes[mi].input[2]) != float("-inf"):
                return None
        head = qs[3]
        default = head is not None and head > 0 and _close(scale, 1.0 / pymath.sqrt(head), 1e-6)
        out = pn.output[0]
        anchor = max(nodes)
        return Fusion("attention", anchor, nodes, out, anchor,
                      {"q": q, "k_src": k_src, "k_perm": k_perm, "v": v,
                       "mask": None if causal else mask_name, "causal": causal,
                       "scale": None if default else scale},
                      inputs=[q, k_src, v, None if causal else mask_name])

    def _is_causal_graph(self, mask, tq, tk) -> bool:
        """Whether run-time `mask` is Trilu(ConstantOfShape(-inf), k=1,
        upper) of shape [T, T] with T the (symbolic) query and key length:
        the causal mask of a model exported with dynamic sequence length."""
        g = self.g
        ms = g.sym_shape(mask)
        if tq is None or tq != tk or ms is None or len(ms) < 2 or tuple(ms[-2:]) != (tq, tk) \
                or any(d != 1 for d in ms[:-2]):
            return False
        ti, tn = self.prod(mask)
        if not self.is_op(tn, "Trilu") or not attributes(tn).get("upper", 1) or len(tn.input) < 2 \
                or self.scalar(tn.input[1]) != 1.0:
            return False
        ci, cn = self.prod(tn.input[0])
        if not self.is_op(cn, "ConstantOfShape"):
            return False
        value = attributes(cn).get("value")
        if value is None:
            return False
        from onnx import numpy_helper
        v = numpy_helper.to_array(value).reshape(-1)
        return v.size == 1 and _types.is_float(v.dtype) and _types.masks_out(v[0], v.dtype)

    @staticmethod
    def _is_causal(m, tq, tk, additive):
        if m.ndim < 2 or m.shape[-2:] not in ((tq, tk),):
            return False
        allowed = np.arange(tk)[None, :] <= np.arange(tq)[:, None] + (tk - tq)
        m = m.reshape(-1, tq, tk)
        if additive:
            return bool(np.all(m[:, allowed] == 0) and (
                not (~allowed).any() or _types.masks_out(m[:, ~allowed].max(), m.dtype)))
        return bool(np.all(m == allowed[None]))

    # -- Conv + BatchNormalization ------------------------------------------------

    def conv_bn(self, i, n):
        g = self.g
        a = attributes(n)
        if a.get("training_mode", 0) or any(o and g.uses(o) for o in n.output[1:]):
            return None
        ci, cn = self.prod(n.input[0])
        if not self.is_op(cn, "Conv") or not g.single_use(n.input[0]):
            return None
        if not g.is_const(cn.input[1]) or (len(cn.input) > 2 and cn.input[2] and not g.is_const(cn.input[2])):
            return None
        if not self.is_float(cn.input[0]) or bn_affine(g, n) is None:
            return None
        xs, ws = g.shape(cn.input[0]), g.shape(cn.input[1])
        if xs is None or not 3 <= len(xs) <= 5 or isinstance(conv_padding(g, cn, xs, ws), str):
            return None
        return Fusion("conv_bn", i, [ci, i], n.output[0], ci, {"conv": ci, "bn": i})

    # -- MatMul + bias ------------------------------------------------------------

    def matmul_bias(self, i, n):
        g = self.g
        for k in (0, 1):
            mi, mn = self.prod(n.input[k])
            if not self.is_op(mn, "MatMul") or not g.single_use(n.input[k]):
                continue
            bias = n.input[1 - k]
            ms, bs = g.shape(n.input[k]), g.shape(bias)
            if ms is None or bs is None or len(ms) < 2 or not g.is_const(bias):
                continue
            if g.rank(mn.input[0]) < 2 or g.rank(mn.input[1]) < 2:
                continue
            if not self.is_float(mn.input[0]) or g.dtype(bias) != g.dtype(mn.input[0]):
                continue
            nn = ms[-1]
            if nn is None or len(bs) < 1 or bs[-1] != nn or any(d != 1 for d in bs[:-1]) \
                    or len(bs) > len(ms) or g.shape(n.output[0]) != ms:
                continue
            return Fusion("matmul_bias", i, [mi, i], n.output[0], mi,
                          {"lhs": mn.input[0], "rhs": mn.input[1], "bias": bias})
        return None


def match(g: Graph) -> Matcher:
    return Matcher(g).run()


# -- emission -------------------------------------------------------------------

def emit_fusion(ctx, f: Fusion) -> ir.Value:
    p = f.params
    g = ctx.g
    if f.kind == "activation":
        return sits.activation(getattr(sits.ActivationKind, p["kind"]), ctx.get(p["input"]))
    if f.kind == "matmul_bias":
        bias = ctx.const_value(g.const(p["bias"]).reshape(-1), p["bias"])
        return emit_matmul(ctx, p["lhs"], p["rhs"], bias=bias)
    if f.kind == "conv_bn":
        conv, bn = g.nodes[p["conv"]], g.nodes[p["bn"]]
        scale, shift = bn_affine(g, bn)
        w = g.const(conv.input[1])
        dt = w.dtype
        wf = (w.astype(np.float64) * scale.reshape((-1,) + (1,) * (w.ndim - 1))).astype(dt)
        cb = g.const(conv.input[2]).astype(np.float64) if len(conv.input) > 2 and conv.input[2] \
            else np.zeros(w.shape[0])
        bf = (cb * scale + shift).astype(dt)
        x = ctx.get(conv.input[0])
        wv = ctx.const_value(wf, conv.input[1] + "_bn")
        bv = ctx.const_value(bf, (conv.input[2] if len(conv.input) > 2 and conv.input[2]
                                  else conv.input[1]) + "_bn_bias")
        return sits.conv(x, wv, bias=bv, **conv_attrs(g, conv))
    if f.kind == "layer_norm":
        x = ctx.get(p["input"])
        normalized = p["normalized"]
        if p["scale"] is not None:
            scale = norm_param(ctx, p["scale"], normalized)
        else:
            scale = ctx.const_value(np.ones(normalized, dtype=g.dtype(p["input"])), "ones")
        bias = norm_param(ctx, p["bias"], normalized) if p["bias"] is not None else None
        return sits.layer_norm(x, scale, bias=bias, axis=i64_attr(p["axis"]),
                               epsilon=f64_attr(p["epsilon"]))
    if f.kind == "rms_norm":
        x = ctx.get(p["input"])
        normalized = p["normalized"]
        if p["scale"] is not None:
            scale = norm_param(ctx, p["scale"], normalized)
        else:
            scale = ctx.const_value(np.ones(normalized, dtype=g.dtype(p["input"])), "ones")
        return sits.rms_norm(x, scale, axis=i64_attr(p["axis"]), epsilon=f64_attr(p["epsilon"]))
    if f.kind == "attention":
        q, v = ctx.get(p["q"]), ctx.get(p["v"])
        k = ctx.transpose(ctx.get(p["k_src"]), p["k_src"], p["k_perm"])
        mask = ctx.get(p["mask"]) if p["mask"] is not None else None
        kw = {}
        if p["causal"]:
            kw["causal"] = True
        if p["scale"] is not None:
            kw["scale"] = f64_attr(p["scale"])
        return sits.attention(q, k, v, mask=mask, **kw)
    raise AssertionError(f.kind)
