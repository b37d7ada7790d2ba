"""Fuzz target: hostile ONNX model bytes through `sits_mlir.check` and the
import into the SITS dialect (`sits_mlir.frontend.onnx.import_model`; no
lowering, no LLVM).

Contract: each step returns or raises `sits_mlir.errors.CompileError` (or a
subclass). Any other exception, a native crash or abort, more than
`_harness.TIMEOUT_S` seconds or more than `_harness.RSS_LIMIT_MB` of memory
for one input is a finding.

The custom mutator is structure-aware: it parses the ModelProto, changes
dims and dim_params, element types, attributes (added from the op's schema
too), initializer dims and data (raw_data lengths, interesting values),
node inputs and outputs, op types, opsets and graph outputs, adds nodes of
the ops SITS supports (wired to existing values and made graph outputs, so
that they are imported), and serializes again; now and then the bytes are
mutated raw as well, for the protobuf parser.

    python test/fuzz/onnx_import_fuzz.py --seconds 600
    python test/fuzz/onnx_import_fuzz.py crash-1234     # reproduce one input
"""

from __future__ import annotations

import pathlib
import random
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _harness  # noqa: E402

with _harness.instrumented("sits_mlir.errors", "sits_mlir.targets", "sits_mlir.frontend.onnx"):
    import sits_mlir
    from sits_mlir import ir
    from sits_mlir.errors import CompileError
    from sits_mlir.frontend.onnx import SUPPORTED_OPS, import_model

NAME = "onnx_import"
MAX_LEN = 1 << 16


def one_input(data: bytes) -> None:
    """check(), then import_model() when check() finds nothing unsupported
    (otherwise import_model raises those problems as one CompileError)."""
    try:
        problems = sits_mlir.check(data)
    except CompileError as e:
        _harness.feedback("check", _diagnostic(e))
        return
    assert isinstance(problems, list), type(problems)
    for p in problems:
        _harness.feedback("problem", p.op_type, p.message[:80])
        if "cannot be checked (" in p.message:  # a converter's check crashed
            _harness.note(f"check crashed: {p.op_type}: {p.message[:160]}", data)
    if problems:
        return
    try:
        with ir.Context() as context:
            imported = import_model(data, context=context)
            assert imported.module is not None
            del imported
    except CompileError as e:
        # Allowed, but a model check() passes should import: these are
        # converter bugs reported as CompileErrors.
        _harness.feedback("import", _diagnostic(e))
        _harness.note(f"import failed after check passed: {_diagnostic(e)}", data)


def _diagnostic(e: CompileError) -> str:
    """A CompileError's summary and first diagnostic, one line."""
    first = e.diagnostics[0].message.splitlines() if e.diagnostics else []
    return f"{e.summary.splitlines()[0][:160]}: {first[0][:160] if first else ''}"


# -- the structure-aware mutator ------------------------------------------------

_INTS = [-2**63, -2**31 - 1, -2**31, -65, -5, -3, -2, -1, 0, 1, 2, 3, 4, 5, 7, 8, 16, 31, 63,
         64, 65, 127, 255, 1024, 1 << 16, 2**31 - 1, 2**31, 2**32, 2**40, 2**62, 2**63 - 1]
_SMALL = [-2, -1, 0, 1, 1, 2, 2, 3, 4]
_FLOATS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 1e-30, 1e-7, 1e30, 3.4e38, float("inf"),
           float("-inf"), float("nan")]
_STRINGS = [b"", b"NOTSET", b"SAME_UPPER", b"SAME_LOWER", b"VALID", b"constant", b"reflect",
            b"edge", b"wrap", b"nearest", b"linear", b"cubic", b"half_pixel", b"asymmetric",
            b"align_corners", b"pytorch_half_pixel", b"tf_crop_and_resize", b"round_prefer_floor",
            b"floor", b"ceil", b"none", b"tanh", b"sum", b"mean", b"add", b"mul", b"max", b"min",
            b"\xff\xfe", b"x" * 300]
_DIM_PARAMS = ["n", "batch", "seq", "past", "past + seq", "2*n", "n - 1", "(a + b) // 2",
               "a", "b", "", "unk__0", "x y", "9"]
_ELEM_TYPES = [TensorProto.FLOAT] * 6 + [TensorProto.INT64] * 3 + [
    TensorProto.INT32, TensorProto.BOOL, TensorProto.FLOAT16, TensorProto.BFLOAT16,
    TensorProto.DOUBLE, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16,
    TensorProto.UINT16, TensorProto.UINT32, TensorProto.UINT64, TensorProto.STRING,
    TensorProto.COMPLEX64, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2, TensorProto.INT4,
    TensorProto.UINT4, TensorProto.UNDEFINED, 40]
_OPSETS = [1, 7, 9, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 28, 29, 100]
_MAIN_OPS = sorted(op for domain, op in SUPPORTED_OPS if domain == "")
_CONTRIB_OPS = sorted((domain, op) for domain, op in SUPPORTED_OPS if domain != "")
_ALL_OPS = sorted({s.name for s in onnx.defs.get_all_schemas() if s.domain == ""})


def _int(rng: random.Random) -> int:
    return rng.choice(_SMALL) if rng.random() < 0.7 else rng.choice(_INTS)


def _float(rng: random.Random) -> float:
    return rng.choice(_FLOATS) if rng.random() < 0.5 else rng.uniform(-4, 4)


def _opset(m: onnx.ModelProto, domain: str = "") -> int:
    for o in m.opset_import:
        if (o.domain or "") in ((domain,) if domain else ("", "ai.onnx")):
            return o.version
    return 17


def _types(m: onnx.ModelProto) -> dict:
    """name -> elem_type of the values: declared, else the type of the
    producer's first typed input (a guess, right for most ops). No ONNX
    inference here: its C++ aborts on some models (found so), and a crash
    in the mutator would be a finding without a reproducer."""
    g = m.graph
    types = {t.name: t.data_type for t in g.initializer}
    for vi in [*g.input, *g.value_info, *g.output]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
            types.setdefault(vi.name, vi.type.tensor_type.elem_type)
    for n in g.node:
        guess = next((types[x] for x in n.input if x in types), None)
        for y in n.output:
            if y and y not in types and guess is not None:
                types[y] = guess
    return types


def _values(m: onnx.ModelProto) -> list:
    g = m.graph
    names = [i.name for i in g.input] + [t.name for t in g.initializer]
    names += [o for n in g.node for o in n.output if o]
    return names


def _tensor(rng: random.Random, elem: int = 0) -> TensorProto:
    """A small tensor of interesting values."""
    elem = elem or rng.choice([TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32,
                               TensorProto.BOOL, TensorProto.FLOAT16])
    rank = rng.choice([0, 1, 1, 1, 2])
    shape = [rng.choice([1, 1, 2, 3, 4]) for _ in range(rank)]
    count = int(np.prod(shape, dtype=np.int64))
    dtype = helper.tensor_dtype_to_np_dtype(elem) if elem not in (
        TensorProto.STRING, TensorProto.UNDEFINED) else np.float32
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        vals = [min(max(_int(rng), info.min), info.max) for _ in range(count)]
    elif dtype == np.bool_:
        vals = [rng.random() < 0.5 for _ in range(count)]
    else:
        vals = [_float(rng) for _ in range(count)]
    try:
        with np.errstate(all="ignore"):
            return numpy_helper.from_array(np.array(vals).astype(dtype).reshape(shape))
    except Exception:
        return numpy_helper.from_array(np.zeros(shape, np.float32))


def _mutate_tensor(t: TensorProto, rng: random.Random) -> None:
    r = rng.random()
    if r < 0.2 and t.dims:
        t.dims[rng.randrange(len(t.dims))] = _int(rng)
    elif r < 0.3:
        if t.dims and rng.random() < 0.5:
            del t.dims[-1]
        else:
            t.dims.append(rng.choice([1, 2, 3, 0]))
    elif r < 0.45 and t.HasField("raw_data"):
        raw = t.raw_data
        if rng.random() < 0.5 and raw:
            t.raw_data = raw[:rng.randrange(len(raw))]
        else:
            t.raw_data = raw + bytes(rng.randrange(256) for _ in range(rng.choice([1, 4, 8])))
    elif r < 0.55:
        t.data_type = rng.choice(_ELEM_TYPES)
    else:  # new values, same dtype and shape (where the data can be read)
        try:
            a = numpy_helper.to_array(t).copy()
        except Exception:
            return
        if a.size == 0 or a.size > 4096:
            return
        flat = a.reshape(-1)
        for _ in range(rng.choice([1, 1, 2, flat.size])):
            i = rng.randrange(flat.size)
            with np.errstate(all="ignore"):
                if np.issubdtype(flat.dtype, np.integer):
                    info = np.iinfo(flat.dtype)
                    flat[i] = min(max(_int(rng), info.min), info.max)
                elif flat.dtype == np.bool_:
                    flat[i] = not flat[i]
                elif np.issubdtype(flat.dtype, np.floating) or flat.dtype.kind == "V":
                    try:
                        flat[i] = _float(rng)
                    except Exception:
                        return
        try:
            new = numpy_helper.from_array(a, t.name)
        except Exception:
            return
        t.CopyFrom(new)


def _attribute_value(name: str, kind, rng: random.Random) -> onnx.AttributeProto:
    A = onnx.defs.OpSchema.AttrType  # noqa: N806
    if kind == A.INT:
        return helper.make_attribute(name, _int(rng))
    if kind == A.INTS:
        return helper.make_attribute(name, [_int(rng) for _ in range(rng.choice([0, 1, 2, 2, 4]))],
                                     attr_type=onnx.AttributeProto.INTS)
    if kind == A.FLOAT:
        return helper.make_attribute(name, _float(rng))
    if kind == A.FLOATS:
        return helper.make_attribute(name, [_float(rng) for _ in range(rng.choice([0, 1, 2, 4]))],
                                     attr_type=onnx.AttributeProto.FLOATS)
    if kind == A.STRING:
        return helper.make_attribute(name, rng.choice(_STRINGS))
    if kind == A.STRINGS:
        return helper.make_attribute(name, [rng.choice(_STRINGS) for _ in range(2)],
                                     attr_type=onnx.AttributeProto.STRINGS)
    if kind == A.TENSOR:
        return helper.make_attribute(name, _tensor(rng))
    if kind == A.GRAPH:
        body = helper.make_graph([helper.make_node("Identity", ["outer"], ["inner"])], "body", [],
                                 [helper.make_tensor_value_info("inner", TensorProto.FLOAT, None)])
        return helper.make_attribute(name, body)
    return helper.make_attribute(name, _int(rng))


def _schema(m: onnx.ModelProto, node: onnx.NodeProto):
    try:
        return onnx.defs.get_schema(node.op_type, _opset(m, node.domain), node.domain)
    except Exception:
        return None


def m_dim(m, rng, types):
    g = m.graph
    vis = [vi for vi in [*g.input, *g.output, *g.value_info] if vi.type.HasField("tensor_type")]
    if not vis:
        return
    tt = rng.choice(vis).type.tensor_type
    dims = tt.shape.dim
    r = rng.random()
    if r < 0.45 and dims:
        d = dims[rng.randrange(len(dims))]
        if rng.random() < 0.7:
            d.dim_value = _int(rng)
        else:
            d.dim_param = rng.choice(_DIM_PARAMS)
    elif r < 0.6 and dims:
        dims[rng.randrange(len(dims))].Clear()
    elif r < 0.75:
        tt.shape.dim.add().dim_value = rng.choice([1, 2, 3])
    elif r < 0.9 and dims:
        del dims[rng.randrange(len(dims))]
    else:
        tt.ClearField("shape")


def m_elem_type(m, rng, types):
    g = m.graph
    if g.initializer and rng.random() < 0.3:
        rng.choice(g.initializer).data_type = rng.choice(_ELEM_TYPES)
        return
    vis = [vi for vi in [*g.input, *g.output, *g.value_info] if vi.type.HasField("tensor_type")]
    if vis:
        rng.choice(vis).type.tensor_type.elem_type = rng.choice(_ELEM_TYPES)


def m_attribute(m, rng, types):
    if not m.graph.node:
        return
    node = rng.choice(m.graph.node)
    r = rng.random()
    schema = _schema(m, node)
    if r < 0.55 and node.attribute:
        a = rng.choice(node.attribute)
        T = onnx.AttributeProto  # noqa: N806
        if a.type == T.INT:
            a.i = _int(rng)
        elif a.type == T.INTS:
            if a.ints and rng.random() < 0.6:
                a.ints[rng.randrange(len(a.ints))] = _int(rng)
            elif a.ints and rng.random() < 0.5:
                del a.ints[-1]
            else:
                a.ints.append(_int(rng))
        elif a.type == T.FLOAT:
            a.f = _float(rng)
        elif a.type == T.FLOATS:
            if a.floats:
                a.floats[rng.randrange(len(a.floats))] = _float(rng)
            else:
                a.floats.append(_float(rng))
        elif a.type == T.STRING:
            a.s = rng.choice(_STRINGS)
        elif a.type == T.TENSOR:
            _mutate_tensor(a.t, rng)
        else:
            node.attribute.remove(a)
    elif r < 0.7 and node.attribute:
        node.attribute.remove(rng.choice(node.attribute))
    elif schema is not None and schema.attributes:
        name = rng.choice(sorted(schema.attributes))
        for a in list(node.attribute):
            if a.name == name:
                node.attribute.remove(a)
        kind = schema.attributes[name].type
        if rng.random() < 0.1:  # the wrong kind
            kind = rng.choice(list(onnx.defs.OpSchema.AttrType.__members__.values()))
        node.attribute.append(_attribute_value(name, kind, rng))


def m_initializer(m, rng, types):
    g = m.graph
    if g.initializer:
        _mutate_tensor(rng.choice(g.initializer), rng)


def m_node_input(m, rng, types):
    if not m.graph.node:
        return
    node = rng.choice(m.graph.node)
    values = _values(m)
    r = rng.random()
    if r < 0.5 and node.input:
        i = rng.randrange(len(node.input))
        node.input[i] = rng.choice(values + ["", "no_such_value"]) if values else ""
    elif r < 0.7:
        node.input.append(rng.choice(values + [""]) if values else "")
    elif r < 0.85 and node.input:
        del node.input[-1]
    elif len(node.input) >= 2:
        i, j = rng.sample(range(len(node.input)), 2)
        node.input[i], node.input[j] = node.input[j], node.input[i]


def m_node_output(m, rng, types):
    if not m.graph.node:
        return
    node = rng.choice(m.graph.node)
    r = rng.random()
    if r < 0.4 and node.output:
        node.output[rng.randrange(len(node.output))] = rng.choice(_values(m) + ["", "fresh"])
    elif r < 0.7:
        node.output.append(f"extra{rng.randrange(100)}")
    elif node.output:
        del node.output[-1]


def m_op_type(m, rng, types):
    if not m.graph.node:
        return
    node = rng.choice(m.graph.node)
    r = rng.random()
    if r < 0.7:
        node.op_type, node.domain = rng.choice(_MAIN_OPS), ""
    elif r < 0.8 and _CONTRIB_OPS:
        node.domain, node.op_type = rng.choice(_CONTRIB_OPS)
        if not any(o.domain == node.domain for o in m.opset_import):
            m.opset_import.append(helper.make_opsetid(node.domain, 1))
    elif r < 0.95:
        node.op_type, node.domain = rng.choice(_ALL_OPS), ""
    else:
        node.domain = rng.choice(["com.example", "ai.onnx.ml", "ai.onnx", "com.microsoft"])


def m_opset(m, rng, types):
    r = rng.random()
    if r < 0.6 and m.opset_import:
        rng.choice(m.opset_import).version = rng.choice(_OPSETS)
    elif r < 0.8:
        domain = rng.choice(["com.microsoft", "ai.onnx.ml", "com.example", "ai.onnx"])
        m.opset_import.append(helper.make_opsetid(domain, rng.choice([1, 3])))
    elif r < 0.9 and m.opset_import:
        del m.opset_import[rng.randrange(len(m.opset_import))]
    else:
        m.ir_version = rng.choice([0, 1, 3, 4, 7, 8, 9, 10, 11, 12, 100])


def m_add_node(m, rng, types):
    """A node of an op SITS supports, reading existing values, its first
    output made a graph output (so that it is live)."""
    g = m.graph
    values = _values(m)
    if not values:
        return
    op = rng.choice(_MAIN_OPS)
    node = helper.make_node(op, [], [], name=f"fuzz{len(g.node)}")
    schema = _schema(m, node)
    if schema is None:
        return
    count = rng.randint(schema.min_input, min(schema.max_input, schema.min_input + 2))
    for _ in range(count):
        if rng.random() < 0.15:  # a constant operand of interesting values
            t = _tensor(rng)
            t.name = f"fuzzc{len(g.initializer)}_{len(g.node)}"
            g.initializer.append(t)
            node.input.append(t.name)
        else:
            node.input.append(rng.choice(values))
    for k in range(max(schema.min_output, 1)):
        node.output.append(f"fuzz{len(g.node)}_{k}")
    for name, attr in schema.attributes.items():
        if attr.required or rng.random() < 0.2:
            node.attribute.append(_attribute_value(name, attr.type, rng))
    g.node.append(node)
    elem = types.get(node.input[0], TensorProto.FLOAT) if node.input else TensorProto.FLOAT
    g.output.append(helper.make_tensor_value_info(node.output[0], elem, None))


def m_remove_node(m, rng, types):
    g = m.graph
    if len(g.node) > 1:
        del g.node[rng.randrange(len(g.node))]


def m_reorder(m, rng, types):
    g = m.graph
    if len(g.node) >= 2:
        i, j = rng.sample(range(len(g.node)), 2)
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(g.node[i])
        b.CopyFrom(g.node[j])
        g.node[i].CopyFrom(b)
        g.node[j].CopyFrom(a)


def m_graph_output(m, rng, types):
    g = m.graph
    r = rng.random()
    if r < 0.5:
        candidates = [o for n in g.node for o in n.output if o]
        if candidates:
            name = rng.choice(candidates)
            g.output.append(helper.make_tensor_value_info(
                name, types.get(name, TensorProto.FLOAT), None))
    elif r < 0.8 and len(g.output) > 1:
        del g.output[rng.randrange(len(g.output))]
    elif g.output:
        g.output[rng.randrange(len(g.output))].name = rng.choice(_values(m) + ["nowhere"])


def m_graph_input(m, rng, types):
    g = m.graph
    r = rng.random()
    if r < 0.4 and g.initializer:
        # An initializer becomes a run-time input (its declared type kept).
        t = g.initializer[rng.randrange(len(g.initializer))]
        g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        g.initializer.remove(t)
    elif r < 0.6 and g.initializer:
        # ... or an input that an initializer also names (a default value).
        t = rng.choice(g.initializer)
        g.input.append(helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    elif r < 0.8 and len(g.input) > 1:
        del g.input[rng.randrange(len(g.input))]
    else:
        g.input.append(helper.make_tensor_value_info(
            f"in{len(g.input)}", rng.choice(_ELEM_TYPES[:12]),
            [rng.choice([1, 2, 3, "n"]) for _ in range(rng.choice([0, 1, 2, 3]))]))


MUTATIONS = [m_dim] * 3 + [m_elem_type] + [m_attribute] * 4 + [m_initializer] * 3 + \
    [m_node_input] * 2 + [m_node_output, m_op_type, m_op_type, m_opset, m_add_node, m_add_node,
                          m_add_node, m_remove_node, m_reorder, m_graph_output, m_graph_input]


def mutate(data: bytes, max_size: int, seed: int) -> bytes:
    rng = random.Random(seed)
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data)
        parsed = model.HasField("graph")
    except Exception:
        parsed = False
    if not parsed:
        return _harness.raw_mutate(data, max_size, seed)
    types = _types(model)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        rng.choice(MUTATIONS)(model, rng, types)
    out = model.SerializeToString()
    if rng.random() < 0.05:  # raw bytes, for the parser
        out = _harness.raw_mutate(out, max_size, seed)
    return out if len(out) <= max_size else data


def crossover(data1: bytes, data2: bytes, max_out_size: int, seed: int) -> bytes:
    """A node of the second model (with the initializers it reads) added to
    the first, reading the first's values where the names differ, its output
    a graph output."""
    rng = random.Random(seed)
    a, b = onnx.ModelProto(), onnx.ModelProto()
    a.ParseFromString(data1)
    b.ParseFromString(data2)
    if not b.graph.node or not a.HasField("graph"):
        return data1
    node = onnx.NodeProto()
    node.CopyFrom(rng.choice(b.graph.node))
    values = _values(a)
    inits = {t.name: t for t in b.graph.initializer}
    for i, x in enumerate(node.input):
        if x in inits and rng.random() < 0.7:
            t = TensorProto()
            t.CopyFrom(inits[x])
            t.name = f"x_{x}_{len(a.graph.initializer)}"
            a.graph.initializer.append(t)
            node.input[i] = t.name
        elif x not in values and values:
            node.input[i] = rng.choice(values)
    for i, y in enumerate(node.output):
        node.output[i] = f"x_{y}_{len(a.graph.node)}"
    node.name = f"x{len(a.graph.node)}"
    a.graph.node.append(node)
    if node.output:
        types = _types(a)
        a.graph.output.append(helper.make_tensor_value_info(
            node.output[0], types.get(node.input[0] if node.input else "", TensorProto.FLOAT),
            None))
    out = a.SerializeToString()
    return out if len(out) <= max_out_size else data1


if __name__ == "__main__":
    sys.exit(_harness.main(NAME, one_input, custom_mutator=mutate, custom_crossover=crossover,
                           max_len=MAX_LEN))
