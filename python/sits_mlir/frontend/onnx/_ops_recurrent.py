"""Recurrent ONNX ops: RNN, GRU and LSTM (every opset; layout 0 and 1).

Per direction, one `sits.matmul` multiplies the whole input with W (X·Wᵀ
plus the biases that stay outside the recurrence, for every step at once);
an `scf.for` over the time steps then carries the hidden (and cell) state:
each step is a small matmul of the state with R and one `linalg.generic`
over [batch, hidden] computing the gates, the new state and the step's
output, which `tensor.insert_slice` writes into Y. Where `sequence_lens`
says a batch entry has ended, its state stays as it is and Y gets zeros,
so Y_h / Y_c are the states after each entry's last step.
"""

from __future__ import annotations

from ... import ir
from ...dialects import arith, linalg, math, scf, sits, tensor
from ._builder import DYN, elem_of
from ._graph import attributes
from ._ops_common import has_input, need_float
from ._ops_registry import converter

# Gate blocks of W, R and each half of B, in ONNX order (LSTM: i, o, f, c;
# GRU: z, r, h).
_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
_DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"),
                        "LSTM": ("Sigmoid", "Tanh", "Tanh")}
# Whether each activation reads alpha / beta, and their defaults: as in
# onnxruntime, which consumes activation_alpha/beta only for the activations
# that read them, in order.
_ACTIVATION_PARAMS = {
    "relu": (False, False, 0.0, 0.0), "tanh": (False, False, 0.0, 0.0),
    "sigmoid": (False, False, 0.0, 0.0), "softsign": (False, False, 0.0, 0.0),
    "softplus": (False, False, 0.0, 0.0), "affine": (True, True, 0.0, 0.0),
    "leakyrelu": (True, False, 0.01, 0.0), "thresholdedrelu": (True, False, 0.0, 0.0),
    "scaledtanh": (True, True, 0.0, 0.0), "hardsigmoid": (True, True, 0.2, 0.5),
    "elu": (True, False, 1.0, 0.0),
}


def _activations(op, a, nd):
    """Per direction, the (name, alpha, beta) of each activation of `op`;
    or a str reason."""
    n = len(_DEFAULT_ACTIVATIONS[op])
    names = list(a.get("activations", []))
    if not names:
        names = list(_DEFAULT_ACTIVATIONS[op]) * nd
    if len(names) not in (n, n * nd):
        return f"{len(names)} activations given; {op} takes {n} per direction"
    alphas, betas = list(a.get("activation_alpha", [])), list(a.get("activation_beta", []))
    out = []
    for name in names:
        p = _ACTIVATION_PARAMS.get(name.lower())
        if p is None:
            return f"unsupported activation '{name}'"
        alpha = (alphas.pop(0) if alphas else p[2]) if p[0] else 0.0
        beta = (betas.pop(0) if betas else p[3]) if p[1] else 0.0
        out.append((name.lower(), float(alpha), float(beta)))
    if len(out) == n:  # one set for both directions
        out = out * nd
    return [out[d * n:(d + 1) * n] for d in range(nd)]


def _hidden_size(g, node):
    a = attributes(node)
    if "hidden_size" in a:
        return int(a["hidden_size"])
    ws = g.shape(node.input[2])
    return ws[2] if ws is not None and len(ws) == 3 else None


def _check(g, node):
    r = need_float(g, node)
    if r:
        return r
    a = attributes(node)
    direction = a.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        return f"unsupported attribute value direction='{direction}'"
    if a.get("layout", 0) not in (0, 1):
        return f"unsupported attribute value layout={a['layout']}"
    xs = g.shape(node.input[0])
    if xs is None or len(xs) != 3:
        return "X must be 3-D"
    for k in (1, 2):
        s = g.shape(node.input[k])
        if s is None or len(s) != 3:
            return f"input {k} ('{node.input[k]}') must be 3-D"
    if _hidden_size(g, node) is None:
        return "needs a static hidden size (the hidden_size attribute or R's last extent)"
    acts = _activations(node.op_type, a, 2 if direction == "bidirectional" else 1)
    return acts if isinstance(acts, str) else None


# -- IR helpers -----------------------------------------------------------------

def _extract(v, offsets, sizes, out_shape):
    """`tensor.extract_slice` of `v` (unit strides) at mixed `offsets` and
    `sizes`, rank-reduced to `out_shape` (static ints, None for dynamic)."""
    dyn = lambda xs: [x for x in xs if not isinstance(x, int)]  # noqa: E731
    static = lambda xs: [x if isinstance(x, int) else DYN for x in xs]  # noqa: E731
    t = ir.RankedTensorType.get([DYN if d is None else d for d in out_shape], elem_of(v))
    return tensor.extract_slice(t, v, dyn(offsets), dyn(sizes), [], static(offsets),
                                static(sizes), [1] * len(sizes))


def _insert(src, dst, offsets, sizes):
    dyn = lambda xs: [x for x in xs if not isinstance(x, int)]  # noqa: E731
    static = lambda xs: [x if isinstance(x, int) else DYN for x in xs]  # noqa: E731
    return tensor.insert_slice(src, dst, dyn(offsets), dyn(sizes), [], static(offsets),
                               static(sizes), [1] * len(sizes))


def _cell(b, batch, hidden, elem, ins, outs, body):
    """A `linalg.generic` over [batch, hidden] (mixed extents). `ins` maps
    names to (value, kind): kind 'bh' is a [batch, hidden] tensor, 'h' one
    of [hidden] (read for every batch entry), 'b' one of [batch]. `outs`
    maps names to their [batch, hidden] destinations (None: a new tensor);
    `body(v)` gets every operand's scalar by name (an out's: its old value)
    and returns the outs' new values by name. Results in the order of
    `outs`."""
    d0, d1 = ir.AffineDimExpr.get(0), ir.AffineDimExpr.get(1)
    exprs = {"bh": [d0, d1], "h": [d1], "b": [d0]}
    ins = {k: v for k, v in ins.items() if v[0] is not None}
    maps = [ir.AffineMapAttr.get(ir.AffineMap.get(2, 0, exprs[k])) for _, k in ins.values()]
    maps += [ir.AffineMapAttr.get(ir.AffineMap.get(2, 0, [d0, d1]))] * len(outs)
    inits = [v if v is not None else b.empty([batch, hidden], elem) for v in outs.values()]
    parallel = ir.Attribute.parse("#linalg.iterator_type<parallel>")
    op = linalg.GenericOp([i.type for i in inits], [v for v, _ in ins.values()], inits,
                          ir.ArrayAttr.get(maps), ir.ArrayAttr.get([parallel] * 2))
    block = op.regions[0].blocks.append(*([elem_of(v) for v, _ in ins.values()]
                                          + [elem] * len(outs)))
    names = list(ins) + list(outs)
    with ir.InsertionPoint(block):
        new = body(dict(zip(names, block.arguments)))
        linalg.YieldOp([new[k] for k in outs])
    return list(op.results)


class _Scalars:
    """Scalar float arithmetic of one element type, for generic bodies."""

    def __init__(self, b, elem, clip):
        self.b, self.e, self.clip_value = b, elem, clip

    def c(self, v):
        return self.b.scalar(v, self.e)

    def clip(self, x):
        if self.clip_value is None:
            return x
        return arith.minimumf(arith.maximumf(x, self.c(-self.clip_value)),
                              self.c(self.clip_value))

    def act(self, spec, x):
        name, alpha, beta = spec
        c = self.c
        ge0 = lambda v: arith.cmpf(arith.CmpFPredicate.OGE, v, c(0.0))  # noqa: E731
        if name == "tanh":
            return math.tanh(x)
        if name == "sigmoid":
            return arith.divf(c(1.0), arith.addf(c(1.0), math.exp(arith.negf(x))))
        if name == "relu":
            return arith.maximumf(x, c(0.0))
        if name == "affine":
            return arith.addf(arith.mulf(c(alpha), x), c(beta))
        if name == "leakyrelu":
            return arith.select(ge0(x), x, arith.mulf(c(alpha), x))
        if name == "thresholdedrelu":
            return arith.select(arith.cmpf(arith.CmpFPredicate.OGE, x, c(alpha)), x, c(0.0))
        if name == "scaledtanh":
            return arith.mulf(c(alpha), math.tanh(arith.mulf(c(beta), x)))
        if name == "hardsigmoid":
            y = arith.addf(arith.mulf(c(alpha), x), c(beta))
            return arith.minimumf(arith.maximumf(y, c(0.0)), c(1.0))
        if name == "elu":
            return arith.select(ge0(x), x, arith.mulf(c(alpha), math.expm1(x)))
        if name == "softsign":
            return arith.divf(x, arith.addf(c(1.0), math.absf(x)))
        if name == "softplus":  # log(1 + e^x) without overflow
            return arith.addf(arith.maximumf(x, c(0.0)),
                              math.log1p(math.exp(arith.negf(math.absf(x)))))
        raise ValueError(f"unsupported activation '{name}'")


# -- the converter --------------------------------------------------------------

@converter("RNN", "GRU", "LSTM", check=_check)
def _recurrent(ctx, node):
    g, b = ctx.g, ctx.b
    op = node.op_type
    a = ctx.attrs(node)
    direction = a.get("direction", "forward")
    nd = 2 if direction == "bidirectional" else 1
    layout = int(a.get("layout", 0))
    acts = _activations(op, a, nd)
    n_gates = _GATES[op]
    hidden = _hidden_size(g, node)
    gh = n_gates * hidden
    clip = float(a["clip"]) if "clip" in a else None
    lbr = op == "GRU" and bool(a.get("linear_before_reset", 0))
    input_forget = op == "LSTM" and bool(a.get("input_forget", 0))

    # Every operand is fetched before the loops (constants materialize
    # where they are first read).
    x, w, r = ctx.get(node.input[0]), ctx.weight(node.input[1]), ctx.weight(node.input[2])
    opt = lambda k: ctx.get(node.input[k]) if has_input(node, k) else None  # noqa: E731
    bias, lens, h0 = opt(3), opt(4), opt(5)
    c0, peep = (opt(6), opt(7)) if op == "LSTM" else (None, None)
    elem = elem_of(x)
    t_axis, b_axis = (1, 0) if layout else (0, 1)
    xshape = b.mixed_shape(x)
    seq, batch = xshape[t_axis], xshape[b_axis]
    steps = b.index(seq) if isinstance(seq, int) else seq
    bs = batch if isinstance(batch, int) else None  # static batch, or None
    isize = b.mixed_shape(w)[2]
    isize_s = isize if isinstance(isize, int) else None
    one_idx = b.index(1)
    last = arith.subi(steps, one_idx)

    def want(k):
        return k < len(node.output) and node.output[k] != "" and g.uses(node.output[k]) > 0

    # Y: [seq, dirs, batch, hidden] (layout 0) or [batch, seq, dirs, hidden].
    y = None
    if want(0):
        yshape = [batch, seq, nd, hidden] if layout else [seq, nd, batch, hidden]
        y = b.empty(yshape, elem)
    # Y_h, Y_c: [dirs, batch, hidden] or [batch, dirs, hidden].
    sshape = [batch, nd, hidden] if layout else [nd, batch, hidden]
    y_h = b.empty(sshape, elem)
    y_c = b.empty(sshape, elem) if op == "LSTM" else None

    def state_at(d):  # where direction d lies in Y_h, Y_c, initial_h and initial_c
        return ([0, d, 0], [batch, 1, hidden]) if layout else ([d, 0, 0], [1, batch, hidden])

    def state_of(v, d):  # direction d of an initial state, [batch, hidden]
        if v is None:
            return b.splat(0.0, [batch, hidden], elem)
        return _extract(v, *state_at(d), [bs, hidden])

    def vec(v, start, n):  # [n] slice of a 1-D tensor
        return _extract(v, [start], [n], [n])

    # The states are double-buffered, [2, batch, hidden]: step s reads slot
    # s % 2 and writes the other, an update of the carried tensor in place (a
    # state written over itself would need each element's new value to read
    # its old one, which the RNN's and LSTM's h do not).
    two = [2, batch, hidden]

    def slot(k):
        return [k, 0, 0], [1, batch, hidden]

    s = _Scalars(b, elem, clip)
    for d in range(nd):
        f_acts = acts[d]
        reverse = direction == "reverse" or d == 1
        wd = _extract(w, [d, 0, 0], [1, gh, isize], [gh, isize_s])
        rd = _extract(r, [d, 0, 0], [1, gh, hidden], [gh, hidden])
        xbias = rbh = None
        if bias is not None:
            bd = _extract(bias, [d, 0], [1, 2 * gh], [2 * gh])
            wb, rb = vec(bd, 0, gh), vec(bd, gh, gh)
            if lbr:
                # The recurrent bias of the h gate is inside the reset product.
                zr = arith.addf(vec(wb, 0, 2 * hidden), vec(rb, 0, 2 * hidden))
                xbias = _insert(zr, wb, [0], [2 * hidden])
                rbh = vec(rb, 2 * hidden, hidden)
            else:
                xbias = arith.addf(wb, rb)
        xw = sits.matmul(x, wd, bias=xbias, transpose_rhs=True)
        peeps = None
        if peep is not None:
            pd = _extract(peep, [d, 0], [1, 3 * hidden], [3 * hidden])
            peeps = [vec(pd, k * hidden, hidden) for k in range(3)]  # i, o, f
        carried = [_insert(state_of(h0, d), b.empty(two, elem), *slot(0))]
        if op == "LSTM":
            carried.append(_insert(state_of(c0, d), b.empty(two, elem), *slot(0)))
        carried += [y] if y is not None else []

        loop = scf.ForOp(b.index(0), steps, one_idx, carried)
        with ir.InsertionPoint(loop.body):
            it = list(loop.inner_iter_args)
            cur = arith.remui(loop.induction_variable, b.index(2))
            nxt = arith.subi(b.index(1), cur)
            h_buf = it.pop(0)
            c_buf = it.pop(0) if op == "LSTM" else None
            y_in = it.pop(0) if y is not None else None
            h = _extract(h_buf, *slot(cur), [bs, hidden])
            c = _extract(c_buf, *slot(cur), [bs, hidden]) if op == "LSTM" else None
            t = arith.subi(last, loop.induction_variable) if reverse else loop.induction_variable

            def xg(k, t=t, xw=xw):  # gate k of X·Wᵀ at step t, [batch, hidden]
                off = [0, t, k * hidden] if layout else [t, 0, k * hidden]
                size = [batch, 1, hidden] if layout else [1, batch, hidden]
                return _extract(xw, off, size, [bs, hidden])

            def cols(v, k):
                return _extract(v, [0, k * hidden], [batch, hidden], [bs, hidden])

            def matmul_r(v, start, n, rd=rd):
                rpart = rd if n == gh else _extract(rd, [start, 0], [n, hidden], [n, hidden])
                return sits.matmul(v, rpart, transpose_rhs=True)

            outs = {"hn": None}
            if op == "LSTM":
                outs["cn"] = None
            # Without sequence_lens Y's step is the new state itself, which
            # is inserted into Y (not a second result of the same value).
            if y is not None and lens is not None:
                outs["y"] = None
            ins = {"len": (lens, "b"), "h": (h, "bh"), "c": (c, "bh")}

            def finish(v, hn, cn=None, t=t):
                """The step's results; past an entry's length the state stays
                and Y gets zeros."""
                new = {"hn": hn, "cn": cn, "y": hn}
                if lens is not None:
                    n = arith.index_cast(ir.IndexType.get(), v["len"])
                    ok = arith.cmpi(arith.CmpIPredicate.slt, t, n)
                    new = {"hn": arith.select(ok, hn, v["h"]),
                           "y": arith.select(ok, hn, s.c(0.0)),
                           "cn": arith.select(ok, cn, v["c"]) if cn is not None else None}
                return new

            if op == "RNN":
                ins.update(x=(xg(0), "bh"), r=(matmul_r(h, 0, gh), "bh"))

                def body(v):
                    return finish(v, s.act(f_acts[0], s.clip(arith.addf(v["x"], v["r"]))))
            elif op == "GRU":
                f, gfn = f_acts
                hr = matmul_r(h, 0, gh if lbr else 2 * hidden)
                ins.update(xz=(xg(0), "bh"), xh=(xg(2), "bh"), hz=(cols(hr, 0), "bh"))
                if lbr:
                    ins.update(xr=(xg(1), "bh"), hr=(cols(hr, 1), "bh"),
                               hh=(cols(hr, 2), "bh"), rbh=(rbh, "h"))
                else:
                    def reset(v):
                        rg = s.act(f, s.clip(arith.addf(v["xr"], v["hr"])))
                        return {"rh": arith.mulf(rg, v["h"])}
                    rh, = _cell(b, batch, hidden, elem,
                                {"xr": (xg(1), "bh"), "hr": (cols(hr, 1), "bh"),
                                 "h": (h, "bh")}, {"rh": None}, reset)
                    ins["hh"] = (matmul_r(rh, 2 * hidden, hidden), "bh")

                def body(v):
                    z = s.act(f, s.clip(arith.addf(v["xz"], v["hz"])))
                    if lbr:
                        rg = s.act(f, s.clip(arith.addf(v["xr"], v["hr"])))
                        lin = arith.addf(v["hh"], v["rbh"]) if "rbh" in v else v["hh"]
                        pre = arith.addf(v["xh"], arith.mulf(rg, lin))
                    else:
                        pre = arith.addf(v["xh"], v["hh"])
                    cand = s.act(gfn, s.clip(pre))
                    hn = arith.addf(arith.mulf(arith.subf(s.c(1.0), z), cand),
                                    arith.mulf(z, v["h"]))
                    return finish(v, hn)
            else:
                f, gfn, hfn = f_acts
                hr = matmul_r(h, 0, gh)
                for k, gate in enumerate("iofc"):
                    ins["x" + gate] = (xg(k), "bh")
                    ins["h" + gate] = (cols(hr, k), "bh")
                for k, gate in enumerate("iof"):
                    ins["p" + gate] = (peeps[k] if peeps else None, "h")

                def body(v):
                    def gate(k, cell):
                        pre = arith.addf(v["x" + k], v["h" + k])
                        if "p" + k in v:
                            pre = arith.addf(pre, arith.mulf(v["p" + k], cell))
                        return s.act(f, s.clip(pre))
                    ig = gate("i", v["c"])
                    fg = arith.subf(s.c(1.0), ig) if input_forget else gate("f", v["c"])
                    cand = s.act(gfn, s.clip(arith.addf(v["xc"], v["hc"])))
                    cn = arith.addf(arith.mulf(fg, v["c"]), arith.mulf(ig, cand))
                    hn = arith.mulf(gate("o", cn), s.act(hfn, cn))
                    return finish(v, hn, cn)
            res = _cell(b, batch, hidden, elem, ins, outs, body)
            yields = [_insert(res[0], h_buf, *slot(nxt))]
            if op == "LSTM":
                yields.append(_insert(res[1], c_buf, *slot(nxt)))
            if y is not None:
                off = [0, t, d, 0] if layout else [t, d, 0, 0]
                size = [batch, 1, 1, hidden] if layout else [1, 1, batch, hidden]
                yields.append(_insert(res[-1] if lens is not None else res[0], y_in, off, size))
            scf.YieldOp(yields)
        out = list(loop.results)
        final = arith.remui(steps, b.index(2))  # the slot the last step wrote
        off, size = state_at(d)
        y_h = _insert(_extract(out[0], *slot(final), [bs, hidden]), y_h, off, size)
        if op == "LSTM":
            y_c = _insert(_extract(out[1], *slot(final), [bs, hidden]), y_c, off, size)
        if y is not None:
            y = out[-1]
    results = [y, y_h if want(1) else None]
    if op == "LSTM":
        results.append(y_c if want(2) else None)
    return results

