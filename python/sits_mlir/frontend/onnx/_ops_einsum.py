"""ONNX Einsum as one `linalg.generic`.

Every letter of the equation is a loop: those of the output are parallel,
the others reductions, and each operand reads the loops of its letters (a
letter repeated within an operand reads a diagonal). `...` stands for the
leading dims an operand has beyond its letters, broadcast NumPy-style.
Floats accumulate in at least f32, as the contractions do.
"""

from __future__ import annotations

import re

import numpy as np

from ... import ir
from ...dialects import arith, linalg, tensor
from . import _types
from ._builder import DYN, elem_of, shape_of
from ._graph import attributes
from ._ops_common import cast_value, fail_unless
from ._ops_registry import converter

_TERM = re.compile(r"^(\.\.\.)?[A-Za-z]*(\.\.\.)?[A-Za-z]*$")


def _parse(equation: str, ranks: list[int]):
    """([letters per operand], output letters) with `...` expanded to
    the digits '0', '1', ... (one per broadcast dim, right-aligned; no
    equation letter is a digit), or a str reason."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        return f"the equation has {len(terms)} operands, the node {len(ranks)}"
    ell = 0
    for t, r in zip(terms, ranks):
        if not _TERM.match(t) or t.count("...") > 1:
            return f"cannot parse the term '{t}'"
        if "..." in t:
            ell = max(ell, r - (len(t) - 3))
        elif len(t) != r:
            return f"the term '{t}' names {len(t)} dims of a rank-{r} operand"
    dots = [str(k) for k in range(ell)]

    def expand(t, r):
        if "..." not in t:
            return list(t)
        head, _, tail = t.partition("...")
        n = r - len(head) - len(tail)
        if n < 0:
            return None
        return list(head) + dots[ell - n:] + list(tail)

    letters = [expand(t, r) for t, r in zip(terms, ranks)]
    if any(x is None for x in letters):
        return "an operand has fewer dims than its term names"
    if arrow:
        if not _TERM.match(rhs) or rhs.count("...") > 1:
            return f"cannot parse the output '{rhs}'"
        out = expand(rhs, ell + len(rhs.replace("...", ""))) if "..." in rhs else list(rhs)
    else:  # implicit: broadcast dims, then letters used once, sorted
        counts = {}
        for ls in letters:
            for c in ls:
                counts[c] = counts.get(c, 0) + 1
        out = dots + sorted(c for c, n in counts.items() if n == 1 and not c.isdigit())
    used = {c for ls in letters for c in ls}
    if len(set(out)) != len(out) or not set(out) <= used:
        return f"the output '{rhs}' repeats a letter or names one no operand has"
    return letters, out


def _check_einsum(g, node):
    eq = attributes(node).get("equation")
    if isinstance(eq, bytes):
        eq = eq.decode()
    shapes = [g.shape(x) for x in node.input]
    if eq is None or any(s is None for s in shapes):
        return "needs the equation and the operand ranks"
    dt = g.dtype(node.input[0])
    if dt is None or _types.is_bool(dt) or _types.is_small_float(dt):
        return "needs numeric operands"
    parsed = _parse(eq, [len(s) for s in shapes])
    if isinstance(parsed, str):
        return parsed
    letters, _ = parsed
    sizes = {}
    for ls, s in zip(letters, shapes):
        for c, d in zip(ls, s):
            if d is None:
                # Whether it broadcasts is only known at run time.
                if c.isdigit() and sum(c in other for other in letters) > 1:
                    return "dims under '...' that broadcast must have static extents"
                continue
            if c.isdigit():  # a dim under `...`: broadcasts
                if d != 1 and sizes.setdefault(c, d) != d:
                    return f"the dims under '...' do not broadcast ({sizes[c]} and {d})"
            elif sizes.setdefault(c, d) != d:
                return f"'{c}' has extents {sizes[c]} and {d}"
    return None


@converter("Einsum", check=_check_einsum)
def _einsum(ctx, node):
    b = ctx.b
    eq = attributes(node)["equation"]
    eq = eq.decode() if isinstance(eq, bytes) else eq
    operands = [ctx.get(x) for x in node.input]
    dtype = ctx.g.dtype(node.input[0])
    letters, out = _parse(eq, [len(shape_of(v)) for v in operands])
    operands, sizes = _common_extents(ctx, node, letters, operands)
    loops = list(out) + sorted({c for ls in letters for c in ls} - set(out))
    dim = {c: k for k, c in enumerate(loops)}
    n = len(loops)

    def operand_map(ls, shape):
        # A broadcast dim of extent 1 reads index 0.
        exprs = [ir.AffineConstantExpr.get(0) if c.isdigit() and d == 1 and sizes[c] not in
                 (1, None)
                 else ir.AffineDimExpr.get(dim[c]) for c, d in zip(ls, shape)]
        return ir.AffineMap.get(n, 0, exprs)

    is_float = _types.is_float(dtype)
    acc_dtype = np.dtype(np.float32) if is_float and np.dtype(dtype).itemsize < 4 else dtype
    operands = [cast_value(ctx, v, dtype, acc_dtype) for v in operands]
    acc = _types.mlir_type(acc_dtype)
    init = b.fill(b.scalar(0, acc), b.empty([sizes[c] for c in out], acc))
    sizes = {c: v if isinstance(v, int) else None for c, v in sizes.items()}
    maps = [operand_map(ls, shape_of(v)) for ls, v in zip(letters, operands)]
    maps.append(ir.AffineMap.get(n, 0, [ir.AffineDimExpr.get(k) for k in range(len(out))]))
    kinds = ["parallel" if c in out else "reduction" for c in loops]
    op = linalg.GenericOp([init.type], operands, [init],
                          ir.ArrayAttr.get([ir.AffineMapAttr.get(m) for m in maps]),
                          ir.ArrayAttr.get([ir.Attribute.parse(f"#linalg.iterator_type<{k}>")
                                            for k in kinds]))
    block = op.regions[0].blocks.append(*([acc] * (len(operands) + 1)))
    with ir.InsertionPoint(block):
        args = list(block.arguments)
        prod = args[0]
        for a in args[1:-1]:
            prod = arith.mulf(prod, a) if is_float else arith.muli(prod, a)
        linalg.YieldOp([arith.addf(args[-1], prod) if is_float else arith.addi(args[-1], prod)])
    return [cast_value(ctx, op.results[0], acc_dtype, dtype)]


def _common_extents(ctx, node, letters, operands):
    """(operands, extent per letter: int or index value). A letter's
    extents must agree: static ones broadcast under `...`; dynamic ones are
    checked at run time, and every operand is sliced to the smallest, so
    that a mismatch fails the call without reading past an operand."""
    b = ctx.b
    sizes, dynamic = {}, {}
    for ls, v in zip(letters, operands):
        for k, (c, d) in enumerate(zip(ls, shape_of(v))):
            if d is not None:
                sizes[c] = max(sizes.get(c, 1), d)
            else:
                dynamic.setdefault(c, []).append(b.dim(v, k))
    ok = arith.constant(ir.IntegerType.get_signless(1), 1)
    for c, dims in dynamic.items():
        if c in sizes:  # a static extent elsewhere decides
            for d in dims:
                ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, d, b.index(sizes[c])))
            continue
        sizes[c] = dims[0]
        for d in dims[1:]:
            ok = arith.andi(ok, arith.cmpi(arith.CmpIPredicate.eq, d, dims[0]))
            sizes[c] = arith.minui(sizes[c], d)
    if not dynamic:
        return operands, sizes
    fail_unless(ctx, node, ok, "the extents of a subscript differ")
    sliced = []
    for ls, v in zip(letters, operands):
        shape = shape_of(v)
        want = [sizes[c] if d is None else d for c, d in zip(ls, shape)]
        if all(isinstance(w, int) for w in want):
            sliced.append(v)
            continue
        sliced.append(tensor.extract_slice(
            b.tensor_type(shape, elem_of(v)), v, [], [w for w in want if not isinstance(w, int)],
            [], [0] * len(shape), [w if isinstance(w, int) else DYN for w in want],
            [1] * len(shape)))
    return sliced, sizes
