"""The import driver: pre-flight check, then IR emission."""

from __future__ import annotations

from collections import ChainMap
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Optional

import numpy as np
import onnx

from ... import ir, passmanager
from ...dialects import arith, func, tensor
from ...errors import CompileError, Diagnostic, UnsupportedNode
from . import _types
from ._builder import Builder, shape_of
from ._graph import Graph, attributes, captured, extent_tree, subgraphs
from ._layers import NoLayers, Slot
from ._load import LoadedModel, ValueType, initializer_array
from ._ops import CONVERTERS  # every op family, registered
from ._ops_common import status_value
from ._ops_control import CONTROL_OPS, bodies
from ._patterns import emit_fusion, match


@dataclass(frozen=True)
class TensorSpec:
    """A graph input or output: its name, shape (a tuple; None marks a
    dynamic extent) and NumPy dtype."""

    name: str
    shape: tuple
    dtype: np.dtype
    #: ONNX's symbolic name of each dynamic extent ("batch"), else None.
    dim_names: tuple = ()


def _dim_names(g: Graph, name: str) -> tuple:
    shape = g.sym_shape(name) or ()
    return tuple(d if isinstance(d, str) else None for d in shape)


@dataclass
class ImportedModel:
    """The result of `import_model`.

    `module` holds one public `func.func @main` whose arguments are the graph
    inputs and whose results are the graph outputs, in graph order.
    `weights` maps each `dense_resource` name in the module to the NumPy
    array holding its data (64-byte aligned); keep this object alive as long
    as the module is used. `opset` is the model's ai.onnx opset and
    `context` the `ir.Context` the module lives in.
    """

    module: ir.Module
    inputs: list
    outputs: list
    weights: dict
    opset: int
    context: Optional[ir.Context] = field(default=None, repr=False)
    #: (layers, nodes per layer) of the repeated layers that were checked,
    #: inferred and emitted once (see `_layers`), or None.
    shared_layers: Optional[tuple] = None


def _loc_str(name: str) -> str:
    return 'loc("' + name.replace("\\", "\\\\").replace('"', '\\"') + '")'


class Importer:
    def __init__(self, loaded: LoadedModel, *, quantize_tables: bool = False):
        self.loaded = loaded
        #: Embedding tables become INT8 rows (the weights are quantized).
        self.quantize_tables = quantize_tables
        self.g = Graph(loaded)
        self.matcher = match(self.g)
        self.live = self._live_nodes()
        self.values: dict = {}
        self._transposes: dict = {}
        self._attrs: dict = {}
        self.b: Optional[Builder] = None
        # (i1 tensor, message) per run-time index check (`check_indices`):
        # @main returns their status as a last result marked `sits.status`.
        self.range_checks: list = []
        #: Each layer's escaping values, by name (see `_emit_layers`).
        self._layer_results: dict = {}
        #: While a layer function is emitted: @main's values, the function's
        #: entry block and the graph inputs it added as arguments.
        self._outer = None

    def _live_nodes(self) -> set:
        """Emitted nodes some graph output still needs once fusions read only
        their own inputs (e.g. a causal mask's producers become dead)."""
        g, m = self.g, self.matcher
        needed = set(g.outputs) | g.keep
        live = set()
        for i in sorted(g.emit_nodes, reverse=True):
            f = m.by_anchor.get(i)
            if f is not None:
                if f.output in needed:
                    live.add(i)
                    needed.update(f.external_inputs(g))
                continue
            if i in m.claimed:
                continue
            n = g.nodes[i]
            if any(o in needed for o in n.output if o):
                live.add(i)
                needed.update(self._reads(i))
        return live

    def _reads(self, i: int) -> list:
        """The values emitting live node `i` (or the fusion it anchors) reads."""
        g = self.g
        f = self.matcher.by_anchor.get(i)
        if f is not None:
            return f.external_inputs(g)
        n = g.nodes[i]
        conv = self._converter(i)
        reads = conv.read_inputs(g, n) if conv is not None else None
        if reads is None:
            reads = range(len(n.input))
        return [n.input[k] for k in reads if k < len(n.input) and n.input[k]] + captured(n)

    def _converter(self, i: int):
        """Node `i`'s converter for the opset the model imports its domain
        at (the highest since_version <= it), or None."""
        g = self.g
        domain = g.domain(i)
        return CONVERTERS.lookup(domain, g.nodes[i].op_type, g.opsets.get(domain))

    # -- pre-flight ------------------------------------------------------------

    def _problem(self, i: int, message: str) -> UnsupportedNode:
        g = self.g
        n = g.nodes[i]
        domain = g.domain(i)
        return UnsupportedNode(message=message, location=_loc_str(g.node_name(i)),
                               op_type=n.op_type, node_name=g.node_name(i),
                               domain=domain or "ai.onnx", opset=g.opsets.get(domain, 0))

    def _value_problem(self, name: str) -> Optional[str]:
        """Why `name`'s type cannot be imported (None if it can). Returns ''
        when the cause lies upstream (an unknown input rank)."""
        g = self.g
        et = g.elem_type(name)
        if et is None:
            return ""
        if g.dtype(name) is None:
            return f"unsupported element type {_types.dtype_name(et)} of '{name}'"
        if g.shape(name) is None:
            return ""
        return None

    def preflight(self) -> list:
        g = self.g
        problems = []
        for kind, names in (("input", g.inputs), ("output", g.outputs)):
            for name in names:
                if kind == "output" and g.producer_of(name) is not None:
                    continue  # reported with its producer
                et = g.elem_type(name)
                reason = None
                if et is None:
                    reason = "is not a tensor"
                elif g.dtype(name) is None:
                    reason = f"has the unsupported element type {_types.dtype_name(et)}"
                elif g.shape(name) is None:
                    reason = "has an unknown rank"
                if reason:
                    problems.append(UnsupportedNode(
                        message=f"graph {kind} '{name}' {reason}", location=_loc_str(name),
                        op_type=f"graph {kind}", node_name=name, domain="ai.onnx",
                        opset=g.opset))
        for i in sorted(self.live):
            if i in self.matcher.claimed:
                continue
            reason = self._node_problem(i)
            if reason:
                problems.append(self._problem(i, reason))
        return problems

    def _node_problem(self, i: int) -> Optional[str]:
        g = self.g
        n = g.nodes[i]
        domain = g.domain(i)
        if i in g.const_errors:
            return g.const_errors[i]
        conv = self._converter(i)
        if conv is None:
            if domain not in ("", "ai.onnx.ml"):
                return f"unknown op (domain '{domain}' is not supported)"
            try:
                onnx.defs.get_schema(n.op_type, g.opsets.get(domain, g.opset), domain)
            except Exception:
                return "unknown op"
            return f"{n.op_type} is not supported by SITS"
        if subgraphs(n):
            if (domain, n.op_type) not in CONTROL_OPS:
                return "ops with subgraphs are not supported"
            # Their check types the bodies (and refuses sequences) first.
            try:
                reason = conv.check(g, n)
            except Exception as e:
                return f"cannot be checked ({type(e).__name__}: {e})"
            if reason:
                return reason
        schema = _schema(n, domain, g.opsets.get(domain, g.opset))
        missing = _missing_input(n, schema)
        if missing is not None:
            return f"its required input {missing} is not given (an empty name)"
        if schema is not None and len(n.output) > schema.max_output:
            return (f"it has {len(n.output)} outputs; {n.op_type} has at most "
                    f"{schema.max_output}")
        mixed = _mixed_types(g, n, schema)
        if mixed:
            return mixed
        upstream = False
        for name in list(n.input) + list(n.output):
            if not name:
                continue
            if name in n.output and not g.uses(name) and name != n.output[0]:
                continue
            r = self._value_problem(name)
            if r:
                return r
            if r == "":
                if name in n.output and not any(
                        self._value_problem(x) == "" for x in n.input if x):
                    return (f"the shape of output '{name}' could not be inferred "
                            f"(it may depend on run-time data)")
                upstream = True
        if upstream or conv.check is None:
            return None
        try:
            reason = conv.check(g, n)
        except Exception as e:  # a check must not crash on odd models
            return f"cannot be checked ({type(e).__name__}: {e})"
        return reason if reason or not subgraphs(n) else self._body_problem(n)

    # -- subgraphs (If/Loop/Scan bodies, see `_ops_control`) --------------------

    @contextmanager
    def nested(self, g: Graph):
        """Makes subgraph `g` the graph imported: its nodes see the enclosing
        scopes' values by name, and what is bound in it stays in it."""
        saved = (self.g, self.matcher, self.live, self.values, self._transposes)
        self.g, self.matcher = g, SimpleNamespace(by_anchor={}, claimed=set())
        self.values, self._transposes = ChainMap({}, self.values), ChainMap({}, self._transposes)
        try:
            self.live = self._live_nodes()
            yield
        finally:
            self.g, self.matcher, self.live, self.values, self._transposes = saved

    def _body_problem(self, node) -> Optional[str]:
        """The first problem of a node in `node`'s subgraphs, or None."""
        for label, body in bodies(self.g, node):
            with self.nested(body):
                for p in self.preflight():
                    return f"in its {label}, {p.op_type} '{p.node_name}': {p.message}"
        return None

    def emit_body(self, g: Graph, args) -> list:
        """Emits subgraph `g` at the insertion point (a region of the op
        importing it), its formal inputs bound to `args`; returns the values
        of its outputs."""
        with self.nested(g):
            for vi, v in zip(g.model.graph.input, args):
                self._bind(vi.name, v)
            self._emit_nodes(sorted(self.live))
            return [self.get(name) for name in g.outputs]

    # -- emission helpers (the converters' context) ----------------------------

    def attrs(self, node) -> dict:
        key = id(node)
        a = self._attrs.get(key)
        if a is None:
            a = self._attrs[key] = attributes(node)
        return a

    def const_value(self, array, name, elem=None) -> ir.Value:
        """A constant derived from ONNX value `name` (the value itself when
        `array` is its unchanged data)."""
        if elem is None and self.g.is_const(name) and self.g.const(name) is array:
            return self.get(name)
        return self.b.constant(np.asarray(array), name=name, elem=elem)

    def symbolic_size(self, extent) -> ir.Value:
        """The run-time value (index) of a symbolic extent such as `seq`,
        `batch*seq` or `past + seq` (symbolic shape inference's names and
        expressions), from the graph-input dimensions its symbols name."""
        b = self.b
        binary = {"+": arith.addi, "-": arith.subi, "*": arith.muli, "//": arith.floordivsi}

        def value(t):
            if t[0] == "int":
                return b.index(t[1])
            if t[0] == "dim":
                found = self.g.input_dim(t[1])
                if found is None:
                    raise KeyError(f"no graph input has the extent '{t[1]}'")
                return b.dim(self.get(found[0]), found[1])
            return binary[t[0]](value(t[1]), value(t[2]))
        tree = extent_tree(extent)
        if tree is None:
            raise KeyError(f"cannot evaluate the extent '{extent}'")
        return value(tree)

    def get(self, name: str) -> ir.Value:
        v = self.values.get(name)
        if v is not None:
            return v
        g = self.g
        if g.is_const(name):
            producer = g.producer.get(name)
            loc = ir.Location.name(g.node_name(producer) if producer is not None else name)
            with loc:
                v = self.b.constant(g.const(name), name=name)
            self.values[name] = v
            return v
        if self._outer is not None and name in self._outer[0] and name in g.inputs:
            # A graph input the layer reads the extents of: one more argument.
            v = self._outer[1].add_argument(self._outer[0][name].type, ir.Location.name(name))
            self.values[name] = v
            self._outer[2].append(name)
            return v
        raise KeyError(f"value '{name}' is not available")

    def weight(self, name: str) -> ir.Value:
        """ONNX value `name` for an operand that widens in registers (a
        contraction's weights): the stored constant when `name` is a kept
        narrow widening (see `Graph.narrow`), else the value itself."""
        src = self.g.narrow.get(name)
        return self.get(src if src is not None else name)

    def transpose(self, v: ir.Value, source_name: str, perm) -> ir.Value:
        """Transpose of ONNX value `source_name`, shared by every user."""
        key = (source_name, tuple(int(p) for p in perm))
        t = self._transposes.get(key)
        if t is None:
            t = self._transposes[key] = self.b.transpose(v, perm)
        return t

    def elementwise(self, fn, names, out_name) -> ir.Value:
        """`fn` over ONNX values `names` broadcast to `out_name`'s shape.
        Constant splats become splat constants of the result shape."""
        g = self.g
        out_shape = g.shape(out_name)
        static_out = out_shape is not None and None not in out_shape
        vals = []
        for name in names:
            if static_out and g.is_const(name):
                c = g.const(name)
                if c.size >= 1 and (c.size == 1 or _all_equal(c)):
                    vals.append(("splat", c.reshape(-1)[0]))
                    continue
            vals.append(("value", self.get(name)))
        b = self.b
        values = [v for k, v in vals if k == "value"]
        mixed = self._result_shape(values, out_shape)
        ops = []
        for (k, v), name in zip(vals, names):
            if k == "splat":
                ops.append(b.splat(v.item(), mixed, _types.mlir_type(g.dtype(name))))
            else:
                ops.append(b.broadcast_to(v, mixed))
        return fn(*ops)

    def _result_shape(self, values, out_shape):
        b = self.b
        if out_shape is not None and None not in out_shape:
            return list(out_shape)
        if not values:
            raise ValueError("dynamic result shape without operands")
        return b.broadcast_shape(values, out_shape)

    # -- emission ----------------------------------------------------------------

    def _bind(self, name: str, value: Optional[ir.Value]):
        if not name or value is None:
            return
        expected = self.g.shape(name)
        if expected is not None:
            have = shape_of(value)
            if len(have) == len(expected) and have != expected:
                # Pin extents ONNX knows statically.
                merged = tuple(e if e is not None else h for h, e in zip(have, expected))
                if merged != have and all(h is None or e is None or h == e
                                          for h, e in zip(have, expected)):
                    value = tensor.cast(self.b.tensor_type(merged, ir.RankedTensorType(
                        value.type).element_type), value)
        self.values[name] = value

    def _emit_node(self, i: int):
        g = self.g
        n = g.nodes[i]
        f = self.matcher.by_anchor.get(i)
        with ir.Location.name(g.node_name(f.loc_node if f else i)):
            if f is not None:
                self._bind(f.output, emit_fusion(self, f))
                return
            conv = self._converter(i)
            if conv is None:
                raise KeyError((g.domain(i), n.op_type))
            outs = list(conv.emit(self, n))
            for k, name in enumerate(n.output):
                if k < len(outs):
                    self._bind(name, outs[k])
                elif name and self.g.uses(name):
                    raise CompileError(f"node '{g.node_name(i)}' ({n.op_type}) gives "
                                       f"{len(outs)} outputs, and output {k} ('{name}') "
                                       f"is read", [Diagnostic(
                                           "the converter does not produce it",
                                           _loc_str(g.node_name(i)))])

    def _emit_nodes(self, indices):
        g = self.g
        for i in indices:
            try:
                self._emit_node(i)
            except CompileError:
                raise
            except ir.MLIRError as e:
                raise CompileError.from_mlir_error(
                    f"importing node '{g.node_name(i)}' ({g.nodes[i].op_type}) failed",
                    e) from None
            except Exception as e:
                raise CompileError(
                    f"internal error importing node '{g.node_name(i)}' ({g.nodes[i].op_type})",
                    [Diagnostic(f"{type(e).__name__}: {e}", _loc_str(g.node_name(i)))]) from e

    # -- repeated layers (see `_layers`) -----------------------------------------

    def _counterpart(self, name: str) -> str:
        """`name`, or for a later layer's graph output the first layer's,
        which the reduced graph holds."""
        plan = self.g.loaded.layers
        return plan.counterpart.get(name, name) if plan is not None else name

    def check_layers(self):
        """Raises NoLayers where the reduced graph's analysis does not hold
        for every layer."""
        g, plan = self.g, self.g.loaded.layers
        start, stop = plan.start, plan.start + plan.period

        def region(i):
            return 0 if i < start else 1 if i < stop else 2
        for f in self.matcher.by_anchor.values():
            if len({region(i) for i in f.nodes}) > 1:
                raise NoLayers("a fusion crosses the first layer's boundary")
        # The first layer's folded values must not depend on what differs
        # between layers (its weights, its inputs' data); extents may.
        own = {s.names[0] for s in plan.slots if s.kind in ("carried", "varying")}
        for i in range(start, stop):
            n = g.nodes[i]
            if n.op_type in ("Shape", "Size") or not any(x in own for x in n.input if x):
                continue
            if i in g.folded:
                raise NoLayers(f"node '{g.node_name(i)}' folds what differs between layers")
            own.update(o for o in n.output if o)
        for s in plan.slots:
            x0 = s.names[0]
            if s.kind == "carried":
                y0 = plan.escape_names[plan.escapes.index(s.carried_from)][0]
                if g.elem_type(x0) != g.elem_type(y0) or g.sym_shape(x0) != g.sym_shape(y0) \
                        or g.is_const(x0) or g.is_const(y0):
                    raise NoLayers(f"a layer maps '{x0}' to '{y0}' of another type")
            elif s.kind == "varying":
                for x in s.names[1:]:
                    if x in plan.initializers:
                        continue
                    if g.elem_type(x) != g.elem_type(x0) or g.sym_shape(x) != g.sym_shape(x0):
                        raise NoLayers(f"layers read '{x0}' and '{x}' of different types")
                if all(g.is_const(x) for x in s.names) and \
                        int(np.prod(g.shape(x0) or (), dtype=np.int64)) <= (1 << 16) and \
                        all(_same(g.const(x), g.const(x0)) for x in s.names[1:]):
                    s.kind = "constant"

    def _layer_value(self, name: str) -> ir.Value:
        """A later layer's own input `name` in @main."""
        v = self.values.get(name)
        if v is not None:
            return v
        t = self.g.loaded.layers.initializers.get(name)
        if t is None:
            return self.get(name)
        with ir.Location.name(name):
            v = self.b.constant(initializer_array(t, self.loaded.external), name=name)
        self.values[name] = v
        return v

    def _emit_layers(self, module: ir.Module, main: str):
        """The prefix, one call per layer to a function holding the first
        layer, and the suffix, which reads the last call's results."""
        g, plan = self.g, self.g.loaded.layers
        start, stop = plan.start, plan.start + plan.period
        live = sorted(self.live)
        self._emit_nodes(i for i in live if i < start)
        reads = set()
        for i in live:
            if start <= i < stop:
                reads.update(self._reads(i))
        args = [s for s in plan.slots if s.names[0] in reads and (
            s.kind in ("carried", "varying") or
            (s.kind == "shared" and not g.is_const(s.names[0])))]
        first = [self.get(s.names[0]) for s in args]
        arg_types = [v.type for v in first]

        # The function: the first layer's nodes on its arguments; the
        # layer's own constants are arguments, not constants, in it.
        scope = (self.values, self._transposes, self.b._index_consts, len(self.range_checks))
        hidden = {}
        for s in args:
            x = s.names[0]
            if x in g.consts:
                hidden[x] = (g.consts.pop(x), g.types.get(x))
                g.types[x] = ValueType(_onnx_elem_type(hidden[x][0]), _const_shape(hidden[x][0]))
        with ir.InsertionPoint(module.body), ir.Location.name(plan.node_names[0][0]):
            layer = func.FuncOp(f"{main}_layer", (arg_types, []), visibility="private")
        entry = layer.add_entry_block()
        self.values = {s.names[0]: a for s, a in zip(args, entry.arguments)}
        self._transposes, self.b._index_consts = {}, {}
        self._outer = (scope[0], entry, [])
        try:
            with ir.InsertionPoint(entry):
                self._emit_nodes(i for i in live if start <= i < stop)
                returned = [self.get(names[0]) for names in plan.escape_names]
                checks = self.range_checks[scope[3]:]
                with ir.Location.name(plan.node_names[0][-1]):
                    func.ReturnOp(returned + [c for c, _ in checks])
        finally:
            extra = self._outer[2]
            self._outer = None
            self.values, self._transposes, self.b._index_consts = scope[:3]
            del self.range_checks[scope[3]:]
            for x, (c, t) in hidden.items():
                g.consts[x] = c
                if t is None:
                    g.types.pop(x, None)
                else:
                    g.types[x] = t
        args += [Slot("shared", (x,) * plan.count) for x in extra]
        arg_types += [self.values[x].type for x in extra]
        result_types = [v.type for v in returned] + [c.type for c, _ in checks]
        layer.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get(arg_types, result_types))
        layer.attributes["sits.inline"] = ir.UnitAttr.get()
        layer.attributes["sits.node_names"] = _names_attr(plan.node_names[0])

        # One call per layer.
        prev = None
        for k in range(plan.count):
            operands = []
            for s, t in zip(args, arg_types):
                if s.kind == "carried" and k > 0:
                    v = prev[plan.escapes.index(s.carried_from)]
                else:
                    v = self._layer_value(s.names[k]) if k > 0 else self.get(s.names[0])
                if v.type != t:
                    raise NoLayers(f"layer {k} reads '{s.names[k]}' as {v.type}, not {t}")
                operands.append(v)
            with ir.Location.name(plan.node_names[k][0]):
                call = func.CallOp(result_types, ir.FlatSymbolRefAttr.get(layer.name.value),
                                   operands)
            call.attributes["sits.node_names"] = _names_attr(plan.node_names[k])
            results = list(call.results)
            prev = results[:len(plan.escapes)]
            for (_, message), v in zip(checks, results[len(plan.escapes):]):
                self.range_checks.append((v, message))
            for names, v in zip(plan.escape_names, prev):
                self._layer_results[names[k]] = v
        # The suffix reads the last layer's values under the first's names.
        for names, v in zip(plan.escape_names, prev):
            self.values[names[0]] = v
        self._emit_nodes(i for i in live if i >= stop)

    def build(self, context: Optional[ir.Context]) -> ImportedModel:
        g = self.g
        weights: dict = {}
        ctx = context or ir.Context.current or ir.Context()
        # The module, @main and its return carry the graph's name.
        with ctx, ir.Location.name(g.model.graph.name or "main"):
            self.b = Builder(weights)
            module = ir.Module.create()
            plan = g.loaded.layers
            out_names = plan.outputs if plan is not None else g.outputs
            in_specs = [TensorSpec(n, g.shape(n), g.dtype(n), _dim_names(g, n)) for n in g.inputs]
            # fp8, int4 and the like cross the boundary as bytes (the
            # runtime's and ml_dtypes' layout) and convert inside.
            arg_types = [self.b.tensor_type(
                s.shape, ir.IntegerType.get_signless(8) if _types.is_byte_coded(s.dtype)
                else s.dtype) for s in in_specs]
            with ir.InsertionPoint(module.body):
                fn = func.FuncOp("main", (arg_types, []))
                block = fn.add_entry_block(arg_locs=[ir.Location.name(n) for n in g.inputs])
                with ir.InsertionPoint(block):
                    for spec, arg in zip(in_specs, block.arguments):
                        if _types.is_byte_coded(spec.dtype):
                            with ir.Location.name(spec.name):
                                arg = self.b.from_bytes(arg, spec.dtype)
                        self.values[spec.name] = arg
                    if plan is None:
                        self._emit_nodes(sorted(self.live))
                    else:
                        self._emit_layers(module, fn.name.value)
                    results = []
                    for name in out_names:
                        with ir.Location.name(name):
                            r = self._layer_results.get(name)
                            r = self.get(name) if r is None else r
                            dtype = g.dtype(self._counterpart(name))
                            if _types.is_byte_coded(dtype):
                                r = self.b.to_bytes(r, dtype)
                            results.append(r)
                    outputs = list(results)
                    if self.range_checks:
                        with ir.Location.name("status"):
                            status, messages = status_value(self.range_checks)
                            results.append(status)
                    func.ReturnOp(results)
                fn.attributes["function_type"] = ir.TypeAttr.get(
                    ir.FunctionType.get(arg_types, [r.type for r in results]))
                if self.range_checks:
                    messages = ir.ArrayAttr.get([ir.StringAttr.get(m) for m in messages])
                    fn.attributes["res_attrs"] = ir.ArrayAttr.get(
                        [ir.DictAttr.get({}) for _ in outputs] +
                        [ir.DictAttr.get({"sits.status": messages})])
            try:
                module.operation.verify()
            except ir.MLIRError as e:
                raise CompileError.from_mlir_error("the imported module does not verify", e) from None
            out_specs = [TensorSpec(n, shape_of(r), g.dtype(self._counterpart(n)),
                                    _dim_names(g, self._counterpart(n)))
                         for n, r in zip(out_names, outputs)]
            del outputs, results
            if plan is not None:
                self._layer_results.clear()
                try:
                    passmanager.PassManager.parse("builtin.module(sits-inline-layers)").run(
                        module.operation)
                except ir.MLIRError as e:
                    raise CompileError.from_mlir_error("inlining the imported layers failed",
                                                       e) from None
        return ImportedModel(module=module, inputs=in_specs, outputs=out_specs,
                             weights=weights, opset=g.opset, context=ctx,
                             shared_layers=(plan.count, plan.period) if plan else None)


def _schema(node, domain: str, opset: int):
    """The ONNX schema of `node`'s op at `opset` (or its newest, for an op
    SITS imports before ONNX defines it), None for ops ONNX does not know."""
    try:
        return onnx.defs.get_schema(node.op_type, opset, domain)
    except Exception:
        try:
            return onnx.defs.get_schema(node.op_type, domain=domain)
        except Exception:
            return None


def _formal_inputs(node, schema):
    """(input name, formal parameter) of each input `node` gives."""
    if schema is None:
        return
    option = onnx.defs.OpSchema.FormalParameterOption
    for k, formal in enumerate(schema.inputs):
        if formal.option == option.Variadic:
            for name in node.input[k:]:
                yield name, formal
            return
        if k < len(node.input):
            yield node.input[k], formal


def _missing_input(node, schema) -> Optional[int]:
    """The first input the op's schema requires that `node` leaves out with
    an empty name (onnx.checker lets that through), or None."""
    if schema is None:
        return None
    option = onnx.defs.OpSchema.FormalParameterOption
    for k, formal in enumerate(schema.inputs):
        if formal.option == option.Variadic:
            break
        if formal.option == option.Single and (k >= len(node.input) or not node.input[k]):
            return k
    return None


def _mixed_types(g: Graph, node, schema) -> Optional[str]:
    """Why `node`'s inputs break its schema's type constraints (two inputs
    of one type parameter with different element types), or None. ONNX's
    inference does not always see it (declared types it cannot check), and
    the converters assume it."""
    if schema is None:
        return None
    params = {c.type_param_str for c in schema.type_constraints}
    bound: dict = {}
    for name, formal in _formal_inputs(node, schema):
        et = g.elem_type(name) if name else None
        # (A heterogeneous variadic, Scan's or Loop's, mixes types.)
        if et is None or formal.type_str not in params or not formal.is_homogeneous:
            continue
        first = bound.setdefault(formal.type_str, (name, et))
        if first[1] != et:
            return (f"inputs '{first[0]}' ({_types.dtype_name(first[1])}) and '{name}' "
                    f"({_types.dtype_name(et)}) must have one element type "
                    f"({formal.type_str})")
    return None


def _names_attr(names) -> ir.ArrayAttr:
    return ir.ArrayAttr.get([ir.StringAttr.get(n) for n in names])


def _onnx_elem_type(c) -> int:
    if isinstance(c, onnx.TensorProto):
        return c.data_type
    return onnx.helper.np_dtype_to_tensor_dtype(np.asarray(c).dtype)


def _const_shape(c) -> tuple:
    if isinstance(c, onnx.TensorProto):
        return tuple(int(d) for d in c.dims)
    return tuple(np.asarray(c).shape)


def _same(a, b) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _all_equal(c: np.ndarray) -> bool:
    flat = c.reshape(-1)
    try:
        return bool(np.all(flat == flat[0]))
    except TypeError:
        return False
