"""The analysed ONNX graph: constants, import-time folding, liveness, uses.

`Graph` is the one view of the model both the pre-flight check and the IR
emission work from, so they always agree on which nodes are emitted:

1. initializers and `Constant` nodes are constants;
2. a live node whose inputs are all constants is evaluated at import time
   (with `onnx.reference`), as are `Shape`/`Size` of statically shaped values;
   quantization ops are never folded (they stay `sits.quantize` /
   `sits.dequantize`), nor are results above `FOLD_LIMIT` elements;
3. the nodes left to emit are those a graph output depends on, stopping at
   constants.

An exact widening Cast of a large float constant (fp16/bf16 weights of an
fp32 model) is not folded: its result is *narrow* (`Graph.narrow`), and the
contractions and gathers that read it read the stored weights and widen
them in registers, so the weights stay in their stored type from the ONNX
file to the artifact.
"""

from __future__ import annotations

import ast
from typing import Optional

import numpy as np
import onnx
from onnx import helper, numpy_helper

from . import _types
from ._load import LoadedModel, initializer_array

#: Largest folded result, in elements.
FOLD_LIMIT = 1 << 26
#: Widening casts of float constants above this many elements are kept
#: narrow (see the module docstring); smaller ones fold.
NARROW_ABOVE = 1 << 12
#: The operand positions that read narrow weights: a contraction's weights,
#: a gather's table.
_READS_NARROW = {("MatMul", 1), ("Gemm", 1), ("Gather", 0)}
#: Ops never evaluated at import time.
_NO_FOLD = {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
            "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
            "Multinomial", "Bernoulli", "If", "Loop", "Scan", "SequenceConstruct"}
#: Ops whose output extents are values of their inputs: evaluated only when
#: the output's static shape is known (from the graph's inference, else from
#: the node's alone), which FOLD_LIMIT then bounds (a HannWindow of 2^31 - 1
#: samples would not fit in memory).
_SIZED_BY_VALUES = {"Range", "ConstantOfShape", "Expand", "Tile", "Pad", "Resize", "Upsample",
                    "OneHot", "HannWindow", "HammingWindow", "BlackmanWindow",
                    "MelWeightMatrix", "CenterCropPad", "Col2Im", "DFT", "STFT", "MaxUnpool"}


_EXTENT_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//"}


def extent_tree(extent):
    """A static or symbolic extent (`4`, `seq`, `past + seq`, `batch*seq`,
    symbolic shape inference's names and expressions) as a tree of
    ("int", n), ("dim", name) and (op, left, right) with op one of
    + - * // (a negation `-x` is `0 - x`); None for anything else."""
    if isinstance(extent, (int, np.integer)):
        return ("int", int(extent))
    if not isinstance(extent, str):
        return None
    try:
        node = ast.parse(extent, mode="eval").body
    except SyntaxError:
        return None

    def tree(node):
        if isinstance(node, ast.Name):
            return ("dim", node.id)
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return ("int", node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = tree(node.operand)
            return None if operand is None else ("-", ("int", 0), operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _EXTENT_OPS:
            left, right = tree(node.left), tree(node.right)
            return None if left is None or right is None else \
                (_EXTENT_OPS[type(node.op)], left, right)
        return None
    return tree(node)


def extent_names(tree) -> list:
    """The dimension names an `extent_tree` reads."""
    if tree[0] == "dim":
        return [tree[1]]
    return [] if tree[0] == "int" else extent_names(tree[1]) + extent_names(tree[2])


def shape_node_slice(node: onnx.NodeProto, dims) -> list:
    """The part of `dims` (a shape) that a `Shape` node with its `start` and
    `end` attributes returns."""
    a, r = attributes(node), len(dims)
    start, end = a.get("start", 0), a.get("end", r)
    start = min(max(start + r if start < 0 else start, 0), r)
    end = min(max(end + r if end < 0 else end, 0), r)
    return list(dims[start:end])


def attributes(node: onnx.NodeProto) -> dict:
    """Attribute name -> Python value (bytes decoded to str)."""
    out = {}
    for a in node.attribute:
        v = helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode("utf-8", "replace")
        elif isinstance(v, list) and v and isinstance(v[0], bytes):
            v = [x.decode("utf-8", "replace") for x in v]
        out[a.name] = v
    return out


def subgraphs(node: onnx.NodeProto) -> list:
    """The graphs `node`'s attributes hold (If branches, Loop and Scan bodies)."""
    out = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH:
            out.append(a.g)
        elif a.type == onnx.AttributeProto.GRAPHS:
            out.extend(a.graphs)
    return out


def graph_captures(graph: onnx.GraphProto) -> list:
    """The outer-scope values `graph` (and the graphs nested in it) reads,
    in order of first use."""
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    out: dict = {}
    for n in graph.node:
        for x in list(n.input) + captured(n):
            if x and x not in defined:
                out[x] = None
        defined.update(o for o in n.output if o)
    out.update((o.name, None) for o in graph.output if o.name not in defined)
    return list(out)


def captured(node: onnx.NodeProto) -> list:
    """The outer-scope values `node`'s subgraphs read."""
    return list(dict.fromkeys(x for sub in subgraphs(node) for x in graph_captures(sub)))


class FoldError(Exception):
    pass


def constant_node_value(node: onnx.NodeProto) -> np.ndarray:
    """The tensor a `Constant` node holds; FoldError for sparse/string ones."""
    if not node.attribute:
        raise FoldError("Constant node without a value")
    a = node.attribute[0]
    if a.name == "value":
        return numpy_helper.to_array(a.t)
    if a.name == "value_float":
        return np.array(a.f, dtype=np.float32)
    if a.name == "value_floats":
        return np.array(list(a.floats), dtype=np.float32)
    if a.name == "value_int":
        return np.array(a.i, dtype=np.int64)
    if a.name == "value_ints":
        return np.array(list(a.ints), dtype=np.int64)
    raise FoldError(f"Constant with a '{a.name}' attribute")


class Graph:
    """See the module docstring. Node indices are positions in graph.node."""

    def __init__(self, loaded: LoadedModel):
        self.loaded = loaded
        self.model = loaded.model
        self.opset = loaded.opset
        self.opsets = loaded.opsets
        self.types = loaded.types
        g = self.model.graph
        self.nodes = list(g.node)
        self.consts: dict = {}
        self.const_errors: dict = {}            # node index -> reason
        for t in g.initializer:
            self.consts[t.name] = t               # decoded lazily, see const()
        self.initializer_names = set(self.consts)
        self.inputs = [i.name for i in g.input if i.name not in self.consts]
        self.outputs = [o.name for o in g.output]
        #: Values kept though no output needs them: what later layers read
        #: of the one the reduced graph holds (see `_layers`).
        self.keep = set(loaded.layers.keep) if loaded.layers is not None else set()
        self.producer = {}
        for i, n in enumerate(self.nodes):
            for o in n.output:
                if o:
                    self.producer[o] = i
        self.folded: set = set()
        #: Result of an exact widening Cast of a large constant -> the
        #: constant (see the module docstring).
        self.narrow: dict = {}
        self._readers: Optional[dict] = None
        self._fold()
        self.emit_nodes = self._live()
        self.consumers: dict = {}
        for i in sorted(self.emit_nodes):
            for name in self.nodes[i].input:
                if name:
                    self.consumers.setdefault(name, []).append(i)
            # What a control-flow node's subgraphs read is read by the node.
            for name in captured(self.nodes[i]):
                self.consumers.setdefault(name, []).append(i)

    # -- queries -----------------------------------------------------------

    def node_name(self, index: int) -> str:
        n = self.nodes[index]
        return n.name or f"{n.op_type}_{index}"

    def domain(self, index: int) -> str:
        d = self.nodes[index].domain
        return "" if d in ("", "ai.onnx") else d

    def is_const(self, name: str) -> bool:
        return name in self.consts

    def const(self, name: str) -> Optional[np.ndarray]:
        v = self.consts.get(name)
        if isinstance(v, onnx.TensorProto):
            v = initializer_array(v, self.loaded.external)
            self.consts[name] = v
        return v

    def elem_type(self, name: str) -> Optional[int]:
        if name in self.consts:
            v = self.consts[name]
            if isinstance(v, onnx.TensorProto):
                return v.data_type
            try:
                return helper.np_dtype_to_tensor_dtype(v.dtype)
            except Exception:  # strings and other objects
                return onnx.TensorProto.STRING
        t = self.types.get(name)
        return t.elem_type if t else None

    def dtype(self, name: str) -> Optional[np.dtype]:
        et = self.elem_type(name)
        try:
            return _types.numpy_dtype(et)
        except KeyError:
            return None

    def shape(self, name: str) -> Optional[tuple]:
        """Static shape, None for dynamic dims; None if the rank is unknown."""
        if name in self.consts:
            v = self.consts[name]
            if isinstance(v, onnx.TensorProto):
                return tuple(int(d) for d in v.dims)
            return tuple(v.shape)
        t = self.types.get(name)
        return t.static_shape if t else None

    def sym_shape(self, name: str) -> Optional[tuple]:
        """Shape with symbolic extents as their ONNX names (str), unknown
        ones as None; None if the rank is unknown."""
        if name in self.consts:
            return self.shape(name)
        t = self.types.get(name)
        return t.shape if t else None

    def input_dim(self, symbol: str) -> Optional[tuple]:
        """(graph input, axis) whose extent is named `symbol`, if any."""
        for name in self.inputs:
            shape = self.sym_shape(name) or ()
            if symbol in shape:
                return name, list(shape).index(symbol)
        return None

    def evaluable(self, extent) -> bool:
        """Whether a static or symbolic extent (`seq`, `past + seq`) can be
        computed from graph-input dimensions at run time."""
        tree = extent_tree(extent)
        return tree is not None and all(self.input_dim(name) is not None
                                        for name in extent_names(tree))

    def rank(self, name: str) -> Optional[int]:
        s = self.shape(name)
        return None if s is None else len(s)

    def uses(self, name: str) -> int:
        return len(self.consumers.get(name, ())) + self.outputs.count(name)

    def single_use(self, name: str) -> bool:
        return self.uses(name) == 1 and name not in self.outputs

    def producer_of(self, name: str) -> Optional[int]:
        """Index of the emitted node producing `name` (None for inputs,
        constants and folded values)."""
        i = self.producer.get(name)
        if i is None or i not in self.emit_nodes:
            return None
        return i

    # -- folding and liveness ------------------------------------------------

    def _needed_nodes(self, stop_at_consts: bool) -> set:
        needed = set(self.outputs) | self.keep
        live = set()
        for i in range(len(self.nodes) - 1, -1, -1):
            n = self.nodes[i]
            outs = [o for o in n.output if o]
            if not any(o in needed for o in outs):
                continue
            # (A kept narrow widening is read by its readers from the
            # constant it widens, see `narrow`: it is not emitted either.)
            if stop_at_consts and outs and all(o in self.consts or o in self.narrow
                                               for o in outs):
                continue
            live.add(i)
            for name in n.input:
                if name:
                    needed.add(name)
            # Values captured by subgraphs (If/Loop bodies) count as used.
            for a in n.attribute:
                for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                    for sn in sub.node:
                        needed.update(x for x in sn.input if x)
        return live

    def _fold(self):
        from ._load import reinfer

        live = self._needed_nodes(stop_at_consts=False)
        for _ in range(4):
            if not self._fold_pass(live):
                break
            # New constants can make more shapes static (and more Shape ops
            # foldable): let ONNX infer again with them.
            folded = {o: self.consts[o] for i in self.folded if self.nodes[i].op_type != "Constant"
                      for o in self.nodes[i].output if o}
            self.types.update(reinfer(self.loaded, folded, self.types))

    def _fold_pass(self, live) -> bool:
        """Folds what can be; True if a non-Constant node was folded."""
        changed = False
        for i, n in enumerate(self.nodes):
            if i not in live or i in self.folded or i in self.const_errors:
                continue
            domain = self.domain(i)
            if domain != "":
                continue
            try:
                values = self._fold_node(i, n)
            except FoldError as e:
                self.const_errors[i] = str(e)
                continue
            except Exception:  # left to the converter (or the pre-flight)
                continue
            if values is None:
                continue
            for name, v in zip(n.output, values):
                if name:
                    self.consts[name] = np.asarray(v)
            self.folded.add(i)
            changed = changed or n.op_type != "Constant"
        return changed

    def _fold_node(self, i, n):
        op = n.op_type
        if op == "Constant":
            return [constant_node_value(n)]
        if op in ("Shape", "Size") and n.input and n.input[0] not in self.consts:
            shape = self.shape(n.input[0])
            if shape is None:
                return None
            if op == "Size":
                return [np.array(np.prod(shape), np.int64)] if None not in shape else None
            sub = shape_node_slice(n, shape)
            if None in sub:
                return None
            return [np.array(sub, dtype=np.int64)]
        if op == "Gather" and len(n.input) == 2 and n.input[1] in self.consts:
            # Static extents picked out of the shape of a dynamically shaped
            # value (an exported head size, `x.shape[-1] // 2`).
            dims = self._shape_vector(n.input[0])
            if dims is not None and attributes(n).get("axis", 0) == 0:
                idx = np.asarray(self.const(n.input[1])).astype(np.int64)
                picked = [dims[int(k) + len(dims) if k < 0 else int(k)]
                          for k in idx.reshape(-1)] if -len(dims) <= idx.min(initial=0) \
                    and idx.max(initial=0) < len(dims) else None
                if picked is not None and None not in picked:
                    return [np.array(picked, np.int64).reshape(idx.shape)]
        if op in _NO_FOLD or not n.output:
            return None
        if op in ("Cast", "CastLike") and self._keeps_narrow(n):
            self.narrow[n.output[0]] = n.input[0]
            return None
        if op == "CastLike" and len(n.input) == 2 and n.input[0] in self.consts:
            # Only the type of CastLike's second input matters.
            to = self.elem_type(n.input[1])
            if to is None:
                return None
            cast = onnx.helper.make_node("Cast", [n.input[0]], list(n.output), to=to,
                                         **{k: v for k, v in attributes(n).items()
                                            if k == "saturate"})
            from onnx.reference import ReferenceEvaluator

            return ReferenceEvaluator(cast, opsets={"": self.opset}).run(
                None, {n.input[0]: self.const(n.input[0])})
        ins = [x for x in n.input if x]
        if not all(x in self.consts for x in ins):
            return None
        for k, o in enumerate(n.output):
            s = self.shape(o) if o else ()
            if (s is None or None in s) and op in _SIZED_BY_VALUES:
                s = self._shape_from_values(n, k)
                if s is None:
                    return None
            if s is not None and None not in s and int(np.prod(s, dtype=np.int64)) > FOLD_LIMIT:
                return None
        from onnx.reference import ReferenceEvaluator

        feeds = {x: self.const(x) for x in ins}
        ev = ReferenceEvaluator(n, opsets={"": self.opset})
        return ev.run(None, feeds)

    def _shape_from_values(self, n, k: int) -> Optional[tuple]:
        """Output `k`'s static shape as ONNX infers it for node `n` alone,
        given the values of its small constant inputs (the extents it
        reads), or None."""
        inits, ins = [], []
        for x in dict.fromkeys(i for i in n.input if i):
            et, shape = self.elem_type(x), self.shape(x)
            if et is None or shape is None or None in shape:
                return None
            if int(np.prod(shape, dtype=np.int64)) <= 1 << 10:  # extents: values
                inits.append(numpy_helper.from_array(np.asarray(self.const(x)), x))
            else:  # data: its type alone, never read
                ins.append(helper.make_tensor_value_info(x, et, list(shape)))
        graph = helper.make_graph([n], "fold", ins, [helper.make_value_info(n.output[k],
                                  onnx.TypeProto())], inits)
        try:
            model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
            out = onnx.shape_inference.infer_shapes(model, data_prop=True).graph.output[0]
        except Exception:
            return None
        t = out.type.tensor_type
        if not t.HasField("shape") or any(not d.HasField("dim_value") for d in t.shape.dim):
            return None
        return tuple(d.dim_value for d in t.shape.dim)

    def _keeps_narrow(self, n) -> bool:
        """Whether Cast/CastLike `n` widens a large float constant exactly."""
        src = n.input[0] if n.input else ""
        if not n.output[0] or src not in self.consts:
            return False
        to = self.elem_type(n.input[1]) if n.op_type == "CastLike" and len(n.input) > 1 \
            else attributes(n).get("to")
        frm = self.elem_type(src)
        if to not in _types.SUPPORTED_ONNX_TYPES or frm not in _types.SUPPORTED_ONNX_TYPES:
            return False
        shape = self.shape(src)
        if shape is None or len(shape) != 2 or None in shape \
                or int(np.prod(shape, dtype=np.int64)) <= NARROW_ABOVE \
                or not _types.widens_exactly(_types.numpy_dtype(frm), _types.numpy_dtype(to)):
            return False
        if self._readers is None:
            self._readers = {}
            for k, node in enumerate(self.nodes):
                for pos, name in enumerate(node.input):
                    if name:
                        self._readers.setdefault(name, []).append((k, pos))
        # Every reader must take narrow weights; anything else gets the
        # widened constant folded as before.
        out = n.output[0]
        return out not in self.outputs and bool(self._readers.get(out)) and all(
            (self.nodes[k].op_type, pos) in _READS_NARROW and self.domain(k) == ""
            for k, pos in self._readers[out])

    def _shape_vector(self, name: str) -> Optional[list]:
        """The extents (None where dynamic) that `name` holds when it is the
        result of an unfolded Shape node."""
        i = self.producer.get(name)
        if i is None or i in self.folded or self.nodes[i].op_type != "Shape":
            return None
        shape = self.shape(self.nodes[i].input[0])
        return None if shape is None else shape_node_slice(self.nodes[i], shape)

    def _live(self) -> set:
        return self._needed_nodes(stop_at_consts=True)
