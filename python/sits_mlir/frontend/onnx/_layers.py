"""A model's repeated layers, imported once.

A transformer's graph repeats one layer N times: the same nodes in the same
order, wired alike, on other weights. Checking, inferring, folding and
emitting every copy would make import time grow with the depth, so
`find_layers` looks for the longest run of N >= 2 such blocks in the node
list and `LayerPlan.reduced` gives the graph the importer analyses instead:
the nodes before the run (the prefix), the first block and the nodes after
it (the suffix), which reads the last block's values from the first
block's. The importer emits the first block once as a function and calls it
once per layer (see `Importer`), and `sits-inline-layers` inlines the calls
again, each op named by its own layer's node.

What a block reads from outside it is a *slot*: per block, the name it
reads at one input position. A slot is

* internal when every block reads its own value at that position;
* shared when every block reads the same value;
* carried when block k reads what block k-1 computes at one position (the
  hidden state), and the first block a value from before the run;
* varying when every block reads a value of its own from outside the run:
  a weight, a graph input (its past K/V), or a prefix value.

Varying and carried slots become the function's arguments; shared values
are arguments too unless they are constants, which the function holds.
Small integer constants and scalars (shape vectors, axes, epsilons) must be
equal in value in every block and are held by the function. Anything else (a block reading a
value two blocks back, the suffix reading an earlier block, a block's
folded value depending on its weights) is not a repeat the importer can
share, and the model is imported node by node.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import onnx

#: Integer initializers with at most this many elements, and scalars, are
#: compared by value: blocks that differ in one are different code (a
#: reshape's shape, an epsilon). Other initializers are data.
SMALL_CONSTANT = 64
_FLOAT_TYPES = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                onnx.TensorProto.DOUBLE}
#: Fewest nodes in a block, and the least share of the graph a run covers.
MIN_BLOCK_NODES = 16
MIN_COVERAGE = 0.25


class NoLayers(Exception):
    """The repeat cannot be imported as shared layers (the reason is the
    message); the model is imported node by node."""


@dataclass
class Slot:
    """What every block reads at one external input position."""

    kind: str            # "shared", "carried", "varying" or "constant"
    names: tuple         # the name block k reads, per block
    carried_from: Optional[tuple] = None  # (node, output) position, carried


@dataclass
class LayerPlan:
    start: int           # index of the first block's first node
    period: int          # nodes per block
    count: int           # blocks
    #: Per block, its nodes' names (unnamed nodes get `op_type_index`).
    node_names: list
    #: External reads, deduplicated by their per-block names.
    slots: list
    #: Block outputs read outside their block, as (node, output) positions
    #: in the block, and per position the value's name in each block.
    escapes: list
    escape_names: list
    #: Values the reduced graph keeps alive though nothing in it reads them.
    keep: set
    #: The full graph's outputs, in order, and for those of later blocks the
    #: first block's counterpart. (The reduced graph keeps every input.)
    outputs: list
    counterpart: dict
    #: Initializers only later blocks read (not in the reduced graph).
    initializers: dict = field(default_factory=dict)

    def block_range(self, k: int) -> range:
        return range(self.start + k * self.period, self.start + (k + 1) * self.period)


def _numel(t: onnx.TensorProto) -> int:
    return int(np.prod(t.dims, dtype=np.int64))


def _by_value(t: onnx.TensorProto) -> bool:
    n = _numel(t)
    return n == 1 or (n <= SMALL_CONSTANT and t.data_type not in _FLOAT_TYPES)


def _constant_key(t: onnx.TensorProto) -> bytes:
    c = onnx.TensorProto()
    c.CopyFrom(t)
    c.ClearField("name")
    c.ClearField("doc_string")
    return c.SerializeToString()


def _signatures(nodes, ins, outs, inits) -> list:
    """A small integer per node; equal for nodes that are the same code
    (op, attributes, which inputs are given, constants read). `ins` and
    `outs` are the nodes' input and output names."""
    ids: dict = {}
    kind_of: dict = {"": False}  # an input name -> what the code sees of it
    subgraph = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    out = []
    for i, n in enumerate(nodes):
        attributes = n.attribute
        if attributes and any(a.type in subgraph for a in attributes):
            out.append(-1 - i)  # subgraphs: never part of a repeat
            continue
        kinds = []
        for x in ins[i]:
            kind = kind_of.get(x)
            if kind is None:
                t = inits.get(x)
                kind = True if t is None else _constant_key(t) if _by_value(t) else \
                    (t.data_type, tuple(t.dims))
                kind_of[x] = kind
            kinds.append(kind)
        key = (n.op_type, n.domain,
               tuple(a.SerializeToString() for a in attributes) if attributes else (),
               tuple(kinds), tuple(bool(o) for o in outs[i]))
        out.append(ids.setdefault(key, len(ids)))
    return out


def _runs(sig: list) -> list:
    """(coverage, start, period, count) of periodic runs, best first."""
    n = len(sig)
    last: dict = {}
    gaps: Counter = Counter()
    for i, s in enumerate(sig):
        j = last.get(s)
        if j is not None and i - j >= MIN_BLOCK_NODES:
            gaps[i - j] += 1
        last[s] = i
    arr = np.asarray(sig, dtype=np.int64)
    found = []
    for period, _ in gaps.most_common(6):
        if 2 * period > n:
            continue
        eq = np.concatenate([[False], arr[:-period] == arr[period:], [False]])
        edges = np.flatnonzero(np.diff(eq.astype(np.int8)))
        for a, b in zip(edges[0::2], edges[1::2]):
            count = (int(b - a) + period) // period
            if count >= 2:
                found.append((count * period, int(a), period, count))
    found.sort(key=lambda r: (-r[0], r[2]))
    return found


def find_layers(graph: onnx.GraphProto) -> Optional[LayerPlan]:
    """The longest run of repeated blocks in `graph` the importer can share,
    or None."""
    nodes = graph.node
    if len(nodes) < 2 * MIN_BLOCK_NODES:
        return None
    inits = {t.name: t for t in graph.initializer}
    # Names read once from the protos: the loops below visit them often.
    ins = [list(n.input) for n in nodes]
    outs = [list(n.output) for n in nodes]
    sig = _signatures(nodes, ins, outs, inits)
    for coverage, start, period, count in _runs(sig)[:4]:
        if coverage < MIN_COVERAGE * len(nodes):
            break
        # The run's first node may belong to the layer before (equal by
        # chance): try the next alignments too.
        for shift in range(3):
            c = (coverage - shift) // period
            if c < 2 or c * period < MIN_COVERAGE * len(nodes):
                break
            try:
                return _plan(graph, ins, outs, inits, start + shift, period, c)
            except NoLayers:
                continue
    return None


def _plan(graph, ins, outs, inits, start: int, period: int, count: int) -> LayerPlan:
    nodes = graph.node
    end = start + period * count
    producer = {}
    for i, names in enumerate(outs):
        for o, name in enumerate(names):
            if name:
                producer[name] = (i, o)
    graph_outputs = [o.name for o in graph.output]

    def block_of(i):
        return (i - start) // period if start <= i < end else None

    # Internal references are the same in every block; the rest are slots.
    slots: dict = {}
    for j in range(period):
        for q in range(len(ins[start + j])):
            names = []
            internal = None
            for k in range(count):
                x = ins[start + k * period + j][q]
                p = producer.get(x)
                inside = p is not None and block_of(p[0]) == k
                pos = (p[0] - start - k * period, p[1]) if inside else None
                if k == 0:
                    internal = pos
                elif (pos is None) != (internal is None) or (internal is not None and pos != internal):
                    raise NoLayers(f"block {k} is wired unlike the first")
                names.append(x)
            if internal is None and names[0]:
                slots[tuple(names)] = None  # an ordered set

    # Values read outside their block, by position.
    readers: dict = {}
    for i, names in enumerate(ins):
        for x in names:
            if x:
                readers.setdefault(x, []).append(i)
    escapes = set()
    graph_outs = set(graph_outputs)
    for k in range(count):
        for j in range(period):
            for o, y in enumerate(outs[start + k * period + j]):
                if not y:
                    continue
                for r in readers.get(y, ()):
                    kr = block_of(r)
                    if kr == k:
                        continue
                    if kr is None and r >= end and k != count - 1:
                        raise NoLayers("the nodes after the run read an earlier block")
                    escapes.add((j, o))
                if y in graph_outs:
                    escapes.add((j, o))
    escapes = sorted(escapes)
    escape_names = [[outs[start + k * period + j][o] for k in range(count)]
                    for j, o in escapes]

    plan_slots = []
    keep = {names[0] for names in escape_names}
    for names in slots:
        if all(x == names[0] for x in names):
            plan_slots.append(Slot("shared", names))
            continue
        prods = [producer.get(x) for x in names]
        carried = None
        if prods[0] is None or block_of(prods[0][0]) is None:
            pos = set()
            for k in range(1, count):
                p = prods[k]
                if p is None or block_of(p[0]) != k - 1:
                    pos = None
                    break
                pos.add((p[0] - start - (k - 1) * period, p[1]))
            if pos is not None and len(pos) == 1:
                carried = pos.pop()
        if carried is not None:
            if carried not in escapes:
                raise NoLayers("a carried value does not escape")
            plan_slots.append(Slot("carried", names, carried))
            continue
        if any(p is not None and block_of(p[0]) is not None for p in prods):
            raise NoLayers("a block reads a value of another block")
        if all(x in inits and _by_value(inits[x]) for x in names):
            plan_slots.append(Slot("constant", names))  # equal values: signatures
            continue
        keep.update(x for x in names[1:] if x in producer)
        plan_slots.append(Slot("varying", names))
    # One name of the first block is one value in the function.
    first = Counter(s.names[0] for s in plan_slots if s.kind != "constant")
    if any(c > 1 for c in first.values()):
        raise NoLayers("a value is read through slots of different kinds")

    # The first block's counterpart of each later block's graph output (its
    # type), and the later blocks' own weights.
    counterpart = {names[k]: names[0] for names in escape_names for k in range(1, count)}
    later_inits = {x: inits[x] for s in plan_slots if s.kind == "varying"
                   for x in s.names[1:] if x in inits}
    names_per_block = [[nodes[i].name or f"{nodes[i].op_type}_{i}" for i in
                        range(start + k * period, start + (k + 1) * period)]
                       for k in range(count)]
    return LayerPlan(start=start, period=period, count=count, node_names=names_per_block,
                     slots=plan_slots, escapes=escapes, escape_names=escape_names,
                     keep=keep, outputs=graph_outputs,
                     counterpart=counterpart, initializers=later_inits)


def reduced(proto: onnx.ModelProto, plan: LayerPlan) -> onnx.ModelProto:
    """`proto` with the prefix, the first block and the suffix only; the
    suffix reads the first block's values for the last block's."""
    g = proto.graph
    red = onnx.ModelProto()
    for f in ("ir_version", "producer_name", "producer_version", "domain", "model_version",
              "doc_string"):
        setattr(red, f, getattr(proto, f))
    red.opset_import.extend(proto.opset_import)
    red.metadata_props.extend(proto.metadata_props)
    red.functions.extend(proto.functions)
    rg = red.graph
    rg.name = g.name
    end = plan.start + plan.period * plan.count
    last = {names[-1]: names[0] for names in plan.escape_names}
    keep_nodes = list(range(plan.start + plan.period)) + list(range(end, len(g.node)))
    used = set()
    for i in keep_nodes:
        n = rg.node.add()
        n.CopyFrom(g.node[i])
        if not n.name:
            n.name = f"{n.op_type}_{i}"
        if i >= end:
            for q, x in enumerate(n.input):
                if x in last:
                    n.input[q] = last[x]
        used.update(n.input)
    later = set(plan.counterpart) | set(plan.initializers)
    rg.initializer.extend(t for t in g.initializer if t.name not in later or t.name in used)
    rg.input.extend(g.input)
    rg.output.extend(o for o in g.output if o.name not in later)
    rg.value_info.extend(v for v in g.value_info if v.name not in later)
    rg.sparse_initializer.extend(g.sparse_initializer)
    return red
