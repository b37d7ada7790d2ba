"""Control flow: Scan, If and Loop, whose bodies are ONNX subgraphs.

Each body is imported as a graph of its own (`BodyGraph`): ONNX's inference
runs on it with its formal inputs typed from the outer values and the outer
values it reads as inputs or, when small constants, initializers (inference
of the whole model does not see outer constants inside a body, so an
Unsqueeze by an outer axes constant would leave ranks unknown). The
importer then emits the body's nodes with the same converters into the
region of the op importing it (`Importer.emit_body`), outer values visible
by name.

    Scan  scf.for over the scan axis carrying the state variables; each scan
          input is sliced per step, each scan output inserted into a tensor
          allocated before the loop (either in reverse where its direction
          says so)
    If    scf.if; both branches yield the type their outputs share (dynamic
          extents where they differ); a constant condition imports one branch
    Loop  scf.while on the trip count and the condition, carrying the loop
          variables; scan outputs fill a tensor of trip-count rows, of which
          the rows the loop ran are the result

Sequence- and optional-typed values are refused.
"""

from __future__ import annotations

import weakref

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ... import ir
from ...dialects import arith, bufferization, scf, tensor
from ...errors import CompileError
from . import _types
from ._builder import DYN, elem_of, shape_of
from ._graph import Graph, attributes, extent_names, extent_tree, graph_captures
from ._load import _SKELETON_LIMIT, LoadedModel, ValueType, _infer
from ._ops_common import norm_axis
from ._ops_registry import converter

#: (domain, op_type) of the ops whose subgraphs the importer imports.
CONTROL_OPS = {("", "Scan"), ("", "If"), ("", "Loop")}


class BodyError(Exception):
    """Why a body cannot be imported."""


class BodyGraph(Graph):
    """A subgraph as a `Graph`. `shared`: the outer constants it reads too
    large to give inference (typed inputs of its model), as the outer graph
    holds them. Extents named by the outer graph's inputs stay evaluable."""

    def __init__(self, loaded: LoadedModel, parent: Graph, shared: dict):
        self.parent, self._shared = parent, shared
        super().__init__(loaded)

    def _fold(self):
        self.consts.update(self._shared)
        self.inputs = [x for x in self.inputs if x not in self.consts]
        super()._fold()

    def input_dim(self, symbol: str):
        found = super().input_dim(symbol)
        return found if found is not None else self.parent.input_dim(symbol)


#: Outer Graph -> {id(node): (node, [(label, BodyGraph)])}: a check and the
#: emission share one inference of each body.
_BODIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def bodies(g: Graph, node) -> list:
    """(label, BodyGraph) of each of `node`'s subgraphs; BodyError when one
    cannot be imported."""
    cache = _BODIES.setdefault(g, {})
    hit = cache.get(id(node))
    if hit is None or hit[0] is not node:
        hit = cache[id(node)] = (node, _BUILD[node.op_type](g, node))
    return hit[1]


def _value_type(g: Graph, name: str, what: str) -> ValueType:
    et, shape = g.elem_type(name), g.sym_shape(name)
    if et is None:
        raise BodyError(f"{what} '{name}' is not a tensor")
    if shape is None:
        raise BodyError(f"{what} '{name}' has an unknown rank")
    return ValueType(et, tuple(shape))


def _named(vt: ValueType, prefix: str) -> ValueType:
    """`vt` with each unknown extent named, so that the body's extents that
    follow it are grounded in its inputs."""
    return ValueType(vt.elem_type, tuple(f"{prefix}_{k}" if d is None else d
                                         for k, d in enumerate(vt.shape)))


def _model(g: Graph, graph: onnx.GraphProto, in_types: list) -> tuple:
    """The model `BodyGraph` reads: `graph` with typed formal inputs, the
    outer values it reads as inputs or small initializers; and the large
    outer constants it reads."""
    m = onnx.ModelProto()
    m.ir_version = max(g.model.ir_version, 4)
    m.opset_import.extend(g.model.opset_import)
    mg = m.graph
    mg.name = graph.name or "body"
    for vi, vt in zip(graph.input, in_types):
        mg.input.append(helper.make_tensor_value_info(vi.name, vt.elem_type, list(vt.shape)))
    shared = {}
    for x in graph_captures(graph):
        if g.is_const(x):
            shape = g.shape(x)
            if int(np.prod(shape, dtype=np.int64)) <= _SKELETON_LIMIT:
                try:
                    mg.initializer.append(numpy_helper.from_array(np.asarray(g.const(x)), x))
                    continue
                except Exception:
                    pass
            shared[x] = g.consts[x]
            mg.input.append(helper.make_tensor_value_info(x, g.elem_type(x), list(shape)))
        else:
            vt = _value_type(g, x, "the outer value")
            mg.input.append(helper.make_tensor_value_info(x, vt.elem_type, list(vt.shape)))
    mg.initializer.extend(graph.initializer)
    mg.node.extend(graph.node)
    mg.output.extend(graph.output)
    return m, shared


def _body(g: Graph, graph: onnx.GraphProto, in_types: list, carried=()) -> BodyGraph:
    """`graph` as a BodyGraph, its formal inputs of `in_types`. `carried`:
    (input, output) positions of loop-carried values, whose extents become
    dynamic where an iteration changes them."""
    if len(in_types) != len(graph.input):
        raise BodyError(f"its body '{graph.name}' has {len(graph.input)} inputs, "
                        f"not {len(in_types)}")
    for vi in list(graph.input) + list(graph.output):
        if vi.type.WhichOneof("value") not in (None, "tensor_type"):
            raise BodyError(f"its body's '{vi.name}' is not a tensor "
                            f"({vi.type.WhichOneof('value')}); only tensors are supported")
    in_types = [_named(vt, f"sits_{vi.name}") for vi, vt in zip(graph.input, in_types)]
    for _ in range(2):
        m, shared = _model(g, graph, in_types)
        try:
            types = _infer(m)
        except CompileError as e:
            detail = e.diagnostics[0].message if e.diagnostics else ""
            raise BodyError(f"its body '{graph.name}': {e.summary} {detail}".strip()) from None
        changed = False
        for i, o in carried:
            vi, out = graph.input[i], graph.output[o].name
            vt, ot = in_types[i], types.get(out)
            if ot is None or ot.shape is None or len(ot.shape) != len(vt.shape) \
                    or ot.elem_type != vt.elem_type:
                raise BodyError(f"its body's '{out}' must have the type of '{vi.name}'")
            shape = tuple(d if d == e else f"sits_{vi.name}_{k}"
                          for k, (d, e) in enumerate(zip(vt.shape, ot.shape)))
            if shape != vt.shape:
                in_types[i], changed = ValueType(vt.elem_type, shape), True
        if not changed:
            break
    else:
        # Loop-carried values live in one buffer each (the bufferization
        # wants yields equivalent to the iteration's arguments).
        raise BodyError(f"loop-carried '{graph.input[i].name}' of its body may change its "
                        f"shape between iterations")
    loaded = LoadedModel(model=m, opset=g.opset, opsets=g.opsets, types=types, skeleton=m,
                         external=g.loaded.external)
    body = BodyGraph(loaded, g, shared)
    for vi in graph.input:
        if body.elem_type(vi.name) is None or body.dtype(vi.name) is None:
            raise BodyError(f"its body's input '{vi.name}' is not a supported tensor")
    return body


# -- extents of the results, at the outer scope ---------------------------------


def _sources(body: BodyGraph, formal: list, carried=()) -> dict:
    """Symbol -> (outer value, axis) for the extents of `body`'s formal
    inputs: `formal` holds per formal input None (not an outer value) or
    (outer name, axes: the outer axis of each of its axes). A carried
    input's extent counts only where an iteration keeps it."""
    out_of = dict(carried)
    src = {}
    for k, (vi, f) in enumerate(zip(body.model.graph.input, formal)):
        if f is None:
            continue
        shape = body.sym_shape(vi.name) or ()
        keep = body.sym_shape(body.outputs[out_of[k]]) if k in out_of else shape
        for d, (e, ax) in enumerate(zip(shape, f[1])):
            if isinstance(e, str) and keep and d < len(keep) and keep[d] == e:
                src.setdefault(e, (f[0], ax))
    return src


def _extent_ok(g: Graph, d, src: dict) -> bool:
    tree = extent_tree(d)
    return tree is not None and all(n in src or g.input_dim(n) is not None
                                    for n in extent_names(tree))


def _extent(ctx, d, src: dict):
    """Extent `d` of a body value, as an int or an index Value computed
    before the op."""
    if isinstance(d, int):
        return d
    b, g = ctx.b, ctx.g
    ops = {"+": arith.addi, "-": arith.subi, "*": arith.muli, "//": arith.floordivsi}

    def value(t):
        if t[0] == "int":
            return b.index(t[1])
        if t[0] == "dim":
            name, axis = src[t[1]] if t[1] in src else g.input_dim(t[1])
            v = ctx.get(name)
            s = shape_of(v)[axis]
            return b.index(s) if s is not None else b.dim(v, axis)
        return ops[t[0]](value(t[1]), value(t[2]))
    return value(extent_tree(d))


def _mlir_shape(body: BodyGraph, name: str) -> list:
    return [d if isinstance(d, int) else None for d in body.sym_shape(name)]


# -- region helpers ---------------------------------------------------------------


def _index(ctx, v):
    return ctx.b.index(v) if isinstance(v, int) else v


def _extract(ctx, x, axis: int, at) -> ir.Value:
    """Slice `at` (index Value) of `x` along `axis`, that axis dropped."""
    b, s = ctx.b, shape_of(x)
    dyn = [b.dim(x, d) for d in range(len(s)) if d != axis and s[d] is None]
    sizes = [1 if d == axis else (DYN if s[d] is None else s[d]) for d in range(len(s))]
    out = [e for d, e in enumerate(s) if d != axis]
    offsets = [DYN if d == axis else 0 for d in range(len(s))]
    return tensor.extract_slice(b.tensor_type(out, elem_of(x)), x, [at], dyn, [], offsets,
                                sizes, [1] * len(s))


def _insert(ctx, v, dst, axis: int, at) -> ir.Value:
    """`v` inserted into `dst` as its slice `at` along `axis`."""
    b, s = ctx.b, list(shape_of(v))
    dyn = [b.dim(v, d) for d in range(len(s)) if s[d] is None]
    s.insert(axis, 1)
    sizes = [DYN if e is None else e for e in s]
    offsets = [DYN if d == axis else 0 for d in range(len(s))]
    return tensor.insert_slice(v, dst, [at], dyn, [], offsets, sizes, [1] * len(s))


def _scalar(ctx, v) -> ir.Value:
    """The element of a one-element tensor."""
    return tensor.extract(v, [ctx.b.index(0)] * len(shape_of(v)))


def _no_checks(ctx, node, start: int):
    """Run-time index checks in an If's branches would need yielding."""
    if len(ctx.range_checks) > start:
        name = node.name or node.op_type
        raise CompileError(f"node '{name}' ({node.op_type}): run-time index checks inside "
                           f"its branches are not supported ({ctx.range_checks[start][1]})")


def _with_checks(ctx, build) -> list:
    """The results of the loop `build(k)` emits carrying `k` i1 flags (its
    body's run-time index checks, or-ed over the iterations; its results
    end with them). Those checks are known once the body is emitted: where
    there are some, the loop is built again carrying them, and they join
    the model's status."""
    start = len(ctx.range_checks)
    op, results = build(0)
    messages = [m for _, m in ctx.range_checks[start:]]
    if not messages:
        return results
    del ctx.range_checks[start:]
    op.operation.erase()
    op, results = build(len(messages))
    i1 = ir.IntegerType.get_signless(1)
    for f, m in zip(results[-len(messages):], messages):
        ctx.range_checks.append((tensor.from_elements(ir.RankedTensorType.get([], i1), [f]), m))
    return results[:-len(messages)]


def _flags(ctx, start: int, carried: list) -> list:
    """`carried` flags or-ed with the checks the body added since `start`."""
    new = ctx.range_checks[start:]
    if not carried:
        return []
    del ctx.range_checks[start:]
    return [arith.ori(c, _scalar(ctx, f)) for c, (f, _) in zip(carried, new)]


def _carried_type(ctx, body: BodyGraph, name: str, v: ir.Value) -> ir.Type:
    return ctx.b.tensor_type(_mlir_shape(body, name), elem_of(v))


def _fresh(ctx, v, t: ir.Type) -> ir.Value:
    """A copy of `v` (as type `t`) to carry: the loop writes its buffer,
    which must not be a read-only input's."""
    v = ctx.b.cast_to(v, shape_of_type(t))
    return bufferization.AllocTensorOp(v.type, [], copy=v).result


def _yield_into(ctx, v, arg) -> ir.Value:
    """`v` materialized in loop-carried `arg`'s buffer: the bufferization
    wants each yield equivalent to its iteration argument. `v` is copied
    first: empty-tensor elimination would otherwise compute it in that
    buffer, which the body may still read (a conflict it then refuses)."""
    v = ctx.b.cast_to(v, shape_of(arg))
    v = bufferization.AllocTensorOp(v.type, [], copy=v).result
    return bufferization.MaterializeInDestinationOp(arg.type, v, arg).result


# -- Scan -----------------------------------------------------------------------


def _scan_attrs(g: Graph, node) -> dict:
    if g.model.ir_version < 4:
        # An opset-8 Scan (IR version 3): batched, which ONNX's version
        # converter drops from the graph's input types, not from the data.
        raise BodyError("an opset-8 Scan (batched, with sequence_lens) is not supported")
    a = attributes(node)
    m = a.get("num_scan_inputs")
    n = len(node.input) - (m or 0)
    if m is None or m < 1 or n < 0:
        raise BodyError("num_scan_inputs must be between 1 and the number of inputs")
    body = a["body"]
    k = len(body.output) - n
    if k < 0:
        raise BodyError("its body has fewer outputs than state variables")
    ranks = []
    for x in node.input[n:]:
        r = g.rank(x)
        if r is None or r < 1:
            raise BodyError(f"scan input '{x}' has an unknown rank or none")
        ranks.append(r)
    in_axes = list(a.get("scan_input_axes", [0] * m))
    in_dirs = list(a.get("scan_input_directions", [0] * m))
    out_axes = list(a.get("scan_output_axes", [0] * k))
    out_dirs = list(a.get("scan_output_directions", [0] * k))
    if len(in_axes) != m or len(in_dirs) != m or len(out_axes) != k or len(out_dirs) != k:
        raise BodyError("its scan axes and directions must give one per scan input and output")
    for r, ax in zip(ranks, in_axes):
        if not -r <= ax < r:
            raise BodyError(f"scan input axis {ax} is out of range for rank {r}")
    return dict(n=n, m=m, k=k, body=body, in_axes=[norm_axis(ax, r) for ax, r in
                                                    zip(in_axes, ranks)],
                in_dirs=in_dirs, out_axes=out_axes, out_dirs=out_dirs)


def _scan_bodies(g: Graph, node) -> list:
    a = _scan_attrs(g, node)
    n = a["n"]
    types = [_value_type(g, x, "state") for x in node.input[:n]]
    for x, ax in zip(node.input[n:], a["in_axes"]):
        vt = _value_type(g, x, "scan input")
        types.append(ValueType(vt.elem_type, vt.shape[:ax] + vt.shape[ax + 1:]))
    return [("body", _body(g, a["body"], types, [(k, k) for k in range(n)]))]


def _scan_sources(node, a, body) -> dict:
    n = a["n"]
    formal = []
    for k, x in enumerate(node.input):
        r = len(body.sym_shape(body.model.graph.input[k].name))
        if k < n:
            formal.append((x, list(range(r))))
        else:
            ax = a["in_axes"][k - n]
            formal.append((x, [d if d < ax else d + 1 for d in range(r)]))
    return _sources(body, formal, [(k, k) for k in range(n)])


def _check_scan(g, node):
    try:
        a = _scan_attrs(g, node)
        (_, body), = bodies(g, node)
    except BodyError as e:
        return str(e)
    n = a["n"]
    lengths = {g.shape(x)[ax] for x, ax in zip(node.input[n:], a["in_axes"])} - {None}
    if len(lengths) > 1:
        return f"its scan inputs have different lengths {sorted(lengths)}"
    src = _scan_sources(node, a, body)
    for out, ax in zip(body.outputs[n:], a["out_axes"]):
        shape = body.sym_shape(out)
        if shape is None:
            return f"the rank of its body's scan output '{out}' is unknown"
        if not -len(shape) - 1 <= ax <= len(shape):
            return f"scan output axis {ax} is out of range for '{out}'"
        for d in shape:
            if not isinstance(d, int) and not _extent_ok(g, d, src):
                return f"an extent of its body's scan output '{out}' is not known before the loop"
    return None


@converter("Scan", check=_check_scan)
def emit_scan(ctx, node):
    g, b = ctx.g, ctx.b
    a = _scan_attrs(g, node)
    (_, body), = bodies(g, node)
    n = a["n"]
    states = [ctx.get(x) for x in node.input[:n]]
    xs = [ctx.get(x) for x in node.input[n:]]
    src = _scan_sources(node, a, body)
    ax0 = a["in_axes"][0]
    length = shape_of(xs[0])[ax0]
    steps = b.index(length) if length is not None else b.dim(xs[0], ax0)
    formal = [vi.name for vi in body.model.graph.input]
    types = [_carried_type(ctx, body, f, v) for f, v in zip(formal, states)]
    inits = [_fresh(ctx, v, t) for v, t in zip(states, types)]
    bufs, out_axes = [], []
    for out, ax in zip(body.outputs[n:], a["out_axes"]):
        ext = [_extent(ctx, d, src) for d in body.sym_shape(out)]
        ax = norm_axis(ax, len(ext) + 1)
        ext.insert(ax, length if length is not None else steps)
        out_axes.append(ax)
        bufs.append(b.empty(ext, _types.mlir_type(body.dtype(out))))
    no = arith.constant(ir.IntegerType.get_signless(1), 0)
    m = len(inits + bufs)

    def build(k):
        start = len(ctx.range_checks)
        loop = scf.ForOp(b.index(0), steps, b.index(1), inits + bufs + [no] * k)
        with ir.InsertionPoint(loop.body):
            t = loop.induction_variable
            rev = arith.subi(arith.subi(steps, b.index(1)), t)
            it = list(loop.inner_iter_args)
            args = it[:n] + [_extract(ctx, x, ax, rev if d else t)
                             for x, ax, d in zip(xs, a["in_axes"], a["in_dirs"])]
            outs = ctx.emit_body(body, args)
            flags = _flags(ctx, start, it[m:])
            # The scan outputs read what the states' yields then overwrite.
            scans = [_insert(ctx, v, buf, ax, rev if d else t)
                     for v, buf, ax, d in zip(outs[n:], it[n:m], out_axes, a["out_dirs"])]
            scf.YieldOp([_yield_into(ctx, v, arg) for v, arg in zip(outs[:n], it[:n])] +
                        scans + flags)
        return loop, list(loop.results)
    return _with_checks(ctx, build)


def shape_of_type(t: ir.Type) -> tuple:
    rt = ir.RankedTensorType(t)
    return tuple(None if rt.is_dynamic_dim(i) else rt.get_dim_size(i) for i in range(rt.rank))



# -- If -------------------------------------------------------------------------


def _if_bodies(g: Graph, node) -> list:
    a = attributes(node)
    return [("then branch", _body(g, a["then_branch"], [])),
            ("else branch", _body(g, a["else_branch"], []))]


def _if_shapes(node, then: BodyGraph, other: BodyGraph) -> list:
    """The shape both branches' outputs have (None where they differ)."""
    if not len(then.outputs) == len(other.outputs) == len(node.output):
        raise BodyError("its branches and the node have different numbers of outputs")
    shapes = []
    for x, y in zip(then.outputs, other.outputs):
        sx, sy = then.sym_shape(x), other.sym_shape(y)
        if then.elem_type(x) != other.elem_type(y):
            raise BodyError(f"its branches' outputs '{x}' and '{y}' differ in element type")
        if sx is None or sy is None or len(sx) != len(sy):
            raise BodyError(f"its branches' outputs '{x}' and '{y}' differ in rank")
        shapes.append([d if isinstance(d, int) and d == e else None for d, e in zip(sx, sy)])
    return shapes


def _check_if(g, node):
    try:
        (_, then), (_, other) = bodies(g, node)
        _if_shapes(node, then, other)
    except BodyError as e:
        return str(e)
    return None


@converter("If", check=_check_if)
def emit_if(ctx, node):
    g, b = ctx.g, ctx.b
    (_, then), (_, other) = bodies(g, node)
    if g.is_const(node.input[0]):
        taken = bool(np.asarray(g.const(node.input[0])).reshape(-1)[0])
        return ctx.emit_body(then if taken else other, [])
    c = _scalar(ctx, ctx.get(node.input[0]))
    shapes = _if_shapes(node, then, other)
    types = [b.tensor_type(s, _types.mlir_type(then.dtype(x)))
             for s, x in zip(shapes, then.outputs)]
    op = scf.IfOp(c, types, has_else=True)
    start = len(ctx.range_checks)
    for block, body in ((op.then_block, then), (op.else_block, other)):
        with ir.InsertionPoint(block):
            outs = ctx.emit_body(body, [])
            _no_checks(ctx, node, start)
            scf.YieldOp([b.cast_to(v, s) for v, s in zip(outs, shapes)])
    return list(op.results)


# -- Loop -----------------------------------------------------------------------


def _loop_parts(node) -> tuple:
    body = attributes(node)["body"]
    n = len(node.input) - 2
    k = len(body.output) - 1 - n
    if n < 0 or k < 0:
        raise BodyError("its body must give the condition, the loop variables and the scan "
                        "outputs")
    return body, n, k


def _loop_bodies(g: Graph, node) -> list:
    body, n, _ = _loop_parts(node)
    types = [ValueType(onnx.TensorProto.INT64, ()), ValueType(onnx.TensorProto.BOOL, ())]
    types += [_value_type(g, x, "loop variable") for x in node.input[2:]]
    return [("body", _body(g, body, types, [(2 + i, 1 + i) for i in range(n)]))]


def _loop_sources(node, body: BodyGraph, n: int) -> dict:
    formal = [None, None] + [
        (x, list(range(len(body.sym_shape(vi.name)))))
        for x, vi in zip(node.input[2:], body.model.graph.input[2:])]
    return _sources(body, formal, [(2 + i, 1 + i) for i in range(n)])


def _check_loop(g, node):
    try:
        body_proto, n, k = _loop_parts(node)
        (_, body), = bodies(g, node)
    except BodyError as e:
        return str(e)
    trips = bool(node.input[0])
    if not trips and not (len(node.input) > 1 and node.input[1]):
        return "it has neither a trip count nor a condition"
    if k and not trips:
        return "it has scan outputs and no trip count (their length is not known before it)"
    for x in [body.outputs[0]] + ([node.input[0]] if trips else []):
        shape = (body if x == body.outputs[0] else g).shape(x)
        if shape is None or int(np.prod(shape, dtype=np.int64)) != 1:
            return f"its trip count or condition '{x}' must have one element"
    src = _loop_sources(node, body, n)
    for out in body.outputs[1 + n:]:
        shape = body.sym_shape(out)
        if shape is None:
            return f"the rank of its body's scan output '{out}' is unknown"
        for d in shape:
            if not isinstance(d, int) and not _extent_ok(g, d, src):
                return f"an extent of its body's scan output '{out}' is not known before the loop"
    return None


def _rows(ctx, buf, count) -> ir.Value:
    """The first `count` rows of `buf`."""
    b, s = ctx.b, shape_of(buf)
    dyn = [count] + [b.dim(buf, d) for d in range(1, len(s)) if s[d] is None]
    sizes = [DYN] + [DYN if e is None else e for e in s[1:]]
    return tensor.extract_slice(b.tensor_type((None,) + s[1:], elem_of(buf)), buf, [], dyn,
                                [], [0] * len(s), sizes, [1] * len(s))


@converter("Loop", check=_check_loop)
def emit_loop(ctx, node):
    g, b = ctx.g, ctx.b
    (_, body), = bodies(g, node)
    _, n, _ = _loop_parts(node)
    index, i1 = ir.IndexType.get(), ir.IntegerType.get_signless(1)
    i64 = ir.IntegerType.get_signless(64)
    trips = None
    if node.input[0]:
        m = arith.maxsi(_scalar(ctx, ctx.get(node.input[0])), arith.constant(i64, 0))
        trips = arith.index_cast(index, m)
    go = _scalar(ctx, ctx.get(node.input[1])) if node.input[1] else arith.constant(i1, 1)
    formal = [vi.name for vi in body.model.graph.input]
    vs = [ctx.get(x) for x in node.input[2:]]
    inits = [_fresh(ctx, v, _carried_type(ctx, body, f, v)) for f, v in zip(formal[2:], vs)]
    src = _loop_sources(node, body, n)
    bufs = [b.empty([trips] + [_extent(ctx, d, src) for d in body.sym_shape(out)],
                    _types.mlir_type(body.dtype(out))) for out in body.outputs[1 + n:]]
    no = arith.constant(i1, 0)
    m = len(inits + bufs)

    # The tensors come first: the canonicalizer drops unused scalar
    # arguments, and the bufferization pairs the condition's operands with
    # the arguments by position.
    def build(k):
        types = [v.type for v in inits + bufs] + [index, i1] + [i1] * k
        loop = scf.WhileOp(types, inits + bufs + [b.index(0), go] + [no] * k)
        before = loop.before.blocks.append(*types)
        with ir.InsertionPoint(before):
            i, c = before.arguments[m], before.arguments[m + 1]
            if trips is not None:
                c = arith.andi(c, arith.cmpi(arith.CmpIPredicate.slt, i, trips))
            scf.ConditionOp(c, list(before.arguments))
        after = loop.after.blocks.append(*types)
        start = len(ctx.range_checks)
        with ir.InsertionPoint(after):
            rest = list(after.arguments)
            i, c = rest[m], rest[m + 1]
            args = [tensor.from_elements(ir.RankedTensorType.get([], i64),
                                         [arith.index_cast(i64, i)]),
                    tensor.from_elements(ir.RankedTensorType.get([], i1), [c])]
            outs = ctx.emit_body(body, args + rest[:n])
            flags = _flags(ctx, start, rest[m + 2:])
            scans = [_insert(ctx, v, buf, 0, i) for v, buf in zip(outs[1 + n:], rest[n:m])]
            scf.YieldOp([_yield_into(ctx, v, arg) for v, arg in zip(outs[1:1 + n], rest[:n])] +
                        scans + [arith.addi(i, b.index(1)), _scalar(ctx, outs[0])] + flags)
        return loop, list(loop.results)
    res = _with_checks(ctx, build)
    return res[:n] + [_rows(ctx, buf, res[m]) for buf in res[n:m]]


_BUILD = {"Scan": _scan_bodies, "If": _if_bodies, "Loop": _loop_bodies}
