"""Reading, validating and shape-inferring an ONNX model.

Everything here turns user errors (a missing file, bytes that are not ONNX,
a model `onnx.checker` rejects, an opset SITS does not read) into one
`CompileError` with a clear message.

Shapes come from `onnx.shape_inference.infer_shapes(strict_mode=True,
data_prop=True)`, run on a *skeleton* of the model: initializers larger than
`_SKELETON_LIMIT` elements are declared as typed graph inputs instead of
carrying their data, so inference costs time and memory proportional to the
graph, not to the weights. Small initializers keep their data because data
propagation reads them (shape tensors, axes, ...).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional

import numpy as np
import onnx
import onnx.inliner
import onnx.version_converter
from onnx import numpy_helper

from ...errors import CompileError, Diagnostic
from ...runtime.model import MAX_TENSOR_BYTES
from ._initializers import ExternalData, initializer_array  # noqa: F401 (also imported from here)
from ._layers import LayerPlan, NoLayers, find_layers, reduced
from ._wire import without_inline_weights

#: ai.onnx opsets this frontend reads (op semantics were reviewed up to here).
MIN_OPSET, MAX_OPSET = 13, 28
_SKELETON_LIMIT = 1024
_STANDARD_DOMAINS = ("", "ai.onnx")
#: Domain given to ops ONNX does not know, so the checker and shape inference
#: skip them and the pre-flight check reports them instead.
UNKNOWN_DOMAIN = "sits.unknown"

# Contrib ops SITS supports whose output 0 has the shape of input 0; shape
# inference sees them as `Identity` (ONNX itself does not know them).
SHAPE_PRESERVING_CONTRIB = {
    ("", "SimplifiedLayerNormalization"),
    ("com.microsoft", "SimplifiedLayerNormalization"),
    # Output 0 is the query's shape (Q/K/V given apart; packed QKV is refused).
    ("com.microsoft", "GroupQueryAttention"),
}


@dataclass
class ValueType:
    """Inferred type of one ONNX value: element type and shape. `shape` is
    None when even the rank is unknown; a dimension is an int, or a str
    (symbolic, from `dim_param`), or None (unknown)."""

    elem_type: int
    shape: Optional[tuple]

    @property
    def rank(self):
        return None if self.shape is None else len(self.shape)

    @property
    def static_shape(self) -> Optional[tuple]:
        """The shape with every non-integer dimension as None."""
        if self.shape is None:
            return None
        return tuple(d if isinstance(d, int) else None for d in self.shape)


@dataclass
class LoadedModel:
    model: onnx.ModelProto
    opset: int
    opsets: dict
    types: dict = field(default_factory=dict)        # name -> ValueType
    path: Optional[str] = None
    skeleton: Optional[onnx.ModelProto] = None
    external: Optional["ExternalData"] = None
    #: The repeated layers `model` stands for (see `_layers`): `model` is
    #: then the reduced graph.
    layers: Optional[LayerPlan] = None


def _fail(summary: str, detail: str = "") -> CompileError:
    return CompileError(summary, [Diagnostic(detail)] if detail else [])


def read_model(model) -> tuple:
    """Returns (ModelProto, path or None) or raises CompileError."""
    if isinstance(model, onnx.ModelProto):
        _check_strings(model, "<ModelProto>")
        return model, None
    if isinstance(model, (bytes, bytearray, memoryview)):
        return _parse(bytes(model), "<bytes>"), None
    if isinstance(model, (str, os.PathLike)):
        path = os.fspath(model)
        if not os.path.exists(path):
            raise _fail(f"cannot read ONNX model '{path}': no such file")
        if os.path.isdir(path):
            raise _fail(f"cannot read ONNX model '{path}': it is a directory")
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                import mmap

                data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        except (OSError, ValueError) as e:
            raise _fail(f"cannot read ONNX model '{path}': "
                        f"{getattr(e, 'strerror', None) or e}") from None
        # Big weights stored in the model file itself are read where they
        # lie, like external data: the protobuf parsed holds everything else.
        stripped = None if os.path.islink(path) else \
            without_inline_weights(data, os.path.basename(path))
        proto = _parse(stripped if stripped is not None else bytes(data), path)
        # External data stays where it is: load() maps it (ExternalData).
        return proto, path
    raise _fail(f"expected a path to an .onnx file, its bytes or an onnx.ModelProto, "
                f"got {type(model).__name__}")


def _parse(data: bytes, what: str) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as e:
        raise _fail(f"'{what}' is not an ONNX model (protobuf parse error: {e})") from None
    if proto.ir_version <= 0 or not proto.HasField("graph") or not proto.opset_import:
        raise _fail(f"'{what}' is not an ONNX model (no IR version, graph or opset import)")
    _check_strings(proto, what)
    return proto


def _bad_string(message, path: str) -> Optional[str]:
    """The path of the first string field of `message` (recursively) that is
    not valid UTF-8, or None. The protobuf parser accepts such bytes and
    hands them back as `bytes` rather than `str`, which nothing downstream
    expects. Bytes fields (raw_data) are not read: no weight is copied.
    Only the fields set are visited (`ListFields`): a model's nodes set a
    few of their many fields."""
    string, msg = _STRING, _MESSAGE
    for field, value in message.ListFields():
        kind = field.type
        if kind == string:
            if _is_repeated(field):
                for i, v in enumerate(value):
                    if type(v) is not str:
                        return f"{path}.{field.name}[{i}]"
            elif type(value) is not str:
                return f"{path}.{field.name}"
        elif kind == msg:
            if _is_repeated(field):
                for i, sub in enumerate(value):
                    bad = _bad_string(sub, f"{path}.{field.name}[{i}]")
                    if bad:
                        return bad
            else:
                bad = _bad_string(value, f"{path}.{field.name}")
                if bad:
                    return bad
    return None


_STRING = onnx.NodeProto.DESCRIPTOR.fields_by_name["name"].type
_MESSAGE = onnx.NodeProto.DESCRIPTOR.fields_by_name["attribute"].type


def _is_repeated(field) -> bool:
    return field.is_repeated if hasattr(field, "is_repeated") else \
        field.label == field.LABEL_REPEATED  # protobuf < 6


def _check_strings(proto: onnx.ModelProto, what: str) -> None:
    bad = _bad_string(proto, "model")
    if bad:
        raise _fail(f"'{what}' is not a valid ONNX model: the string field {bad} is not "
                    f"valid UTF-8")


def _schema_known(node: onnx.NodeProto, opsets: Mapping[str, int]) -> bool:
    domain = node.domain or ""
    version = opsets.get(domain if domain != "ai.onnx" else "", 0)
    try:
        onnx.defs.get_schema(node.op_type, version, domain)
        return True
    except Exception:
        return False


def _skeleton(model: onnx.ModelProto, opsets, dynamic_dims) -> onnx.ModelProto:
    """A light copy of `model` for checking and shape inference: big
    initializers become typed inputs, ops ONNX does not know get a custom
    domain (or an Identity stand-in when SITS knows their shape), and symbolic
    input dimensions named in `dynamic_dims` get their fixed size."""
    g = model.graph
    skel = onnx.ModelProto()
    skel.ir_version = max(model.ir_version, 4)
    skel.opset_import.extend(model.opset_import)
    sg = skel.graph
    sg.name = g.name or "main"
    init_names = {t.name for t in g.initializer}
    sg.input.extend(i for i in g.input if i.name not in init_names)
    for t in g.initializer:
        if int(np.prod(t.dims, dtype=np.int64)) <= _SKELETON_LIMIT:
            sg.initializer.append(t)
        else:
            sg.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    sg.output.extend(g.output)
    # value_info is a hint; one with a negative extent is dropped: ONNX's
    # inference would read it, and its Slice inference aborts the process
    # on one (std::clamp's assertion).
    sg.value_info.extend(v for v in g.value_info
                         if not any(d.HasField("dim_value") and d.dim_value < 0
                                    for d in v.type.tensor_type.shape.dim))
    sg.sparse_initializer.extend(g.sparse_initializer)
    need_unknown_domain = False
    for node in g.node:
        key = (node.domain or "", node.op_type)
        # Stand-ins need an input 0 and an output 0; a node without them is
        # left for the checker and the pre-flight check to refuse.
        wired = bool(node.input and node.input[0] and node.output and node.output[0])
        if key in SHAPE_PRESERVING_CONTRIB and wired:
            stand_in = onnx.helper.make_node("Identity", [node.input[0]], [node.output[0]],
                                             name=node.name)
            sg.node.append(stand_in)
            if len(node.output) > 1:
                n2 = onnx.NodeProto()
                n2.CopyFrom(node)
                del n2.output[0]
                n2.domain = UNKNOWN_DOMAIN
                sg.node.append(n2)
                need_unknown_domain = True
            continue
        if key == ("com.microsoft", "MatMulNBits") and wired:
            # Shape inference sees A x W[K, N] (W a typed stand-in input).
            attrs = {a.name: a.i for a in node.attribute}
            w = f"__sits_stand_in_{len(sg.node)}"
            elem = _elem_type_of(model, node.input[0])
            if elem is not None and "K" in attrs and "N" in attrs:
                sg.input.append(onnx.helper.make_tensor_value_info(
                    w, elem, [attrs["K"], attrs["N"]]))
                sg.node.append(onnx.helper.make_node("MatMul", [node.input[0], w],
                                                     [node.output[0]], name=node.name))
                continue
        n = sg.node.add()
        n.CopyFrom(node)
        if node.domain in _STANDARD_DOMAINS + ("ai.onnx.ml",) and not _schema_known(node, opsets):
            n.domain = UNKNOWN_DOMAIN
            need_unknown_domain = True
    if need_unknown_domain:
        skel.opset_import.append(onnx.helper.make_opsetid(UNKNOWN_DOMAIN, 1))
    if dynamic_dims:
        known = set()
        for inp in sg.input:
            for d in inp.type.tensor_type.shape.dim:
                if d.HasField("dim_param"):
                    known.add(d.dim_param)
        unknown = sorted(set(dynamic_dims) - known)
        if unknown:
            raise _fail(f"dynamic_dims names {', '.join(map(repr, unknown))}, which "
                        f"no graph input has; symbolic dimensions are: "
                        f"{', '.join(sorted(known)) or 'none'}")
        for inp in sg.input:
            for d in inp.type.tensor_type.shape.dim:
                if d.HasField("dim_param") and dynamic_dims.get(d.dim_param) is not None:
                    size = dynamic_dims[d.dim_param]
                    if not isinstance(size, (int, np.integer)) or size < 0:
                        raise _fail(f"dynamic_dims[{d.dim_param!r}] must be a "
                                    f"non-negative int or None, got {size!r}")
                    d.Clear()
                    d.dim_value = int(size)
    return skel


def _elem_type_of(model: onnx.ModelProto, name: str) -> Optional[int]:
    """The element type ONNX declares for a graph input or initializer."""
    for vi in list(model.graph.input) + list(model.graph.value_info):
        if vi.name == name and vi.type.HasField("tensor_type"):
            return vi.type.tensor_type.elem_type
    for t in model.graph.initializer:
        if t.name == name:
            return t.data_type
    return None


def _value_type(vi: onnx.ValueInfoProto) -> Optional[ValueType]:
    t = vi.type
    if not t.HasField("tensor_type"):
        return None
    tt = t.tensor_type
    if not tt.HasField("shape"):
        return ValueType(tt.elem_type, None)
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return ValueType(tt.elem_type, tuple(dims))


def _upgrade(proto: onnx.ModelProto, opset: int) -> onnx.ModelProto:
    """An older model converted to opset MIN_OPSET by ONNX's own version
    converter (its adapters rewrite the ops whose signature changed)."""
    try:
        return onnx.version_converter.convert_version(proto, MIN_OPSET)
    except Exception as e:
        msg = str(e).strip()
        raise _fail(f"the model uses ai.onnx opset {opset}, older than the {MIN_OPSET} SITS "
                    f"reads, and onnx.version_converter could not convert it",
                    msg.splitlines()[-1] if msg else repr(e)) from None


_EXPANDED = "sits.expanded"


def _schema_function(node: onnx.NodeProto, opset: int, types: dict):
    """The ONNX function defining `node`'s op at `opset` (with its
    attribute defaults added to `node`), or None."""
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:
        return None
    fn = onnx.FunctionProto()
    static = [v for v in schema.function_opset_versions if v <= opset]
    dependent = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
    try:
        if static:
            fn.ParseFromString(schema.get_function_with_opset_version(max(static)))
        elif dependent:
            input_types = []
            for x in node.input:
                vt = types.get(x)
                if x and vt is None:
                    return None  # its function depends on types not known here
                input_types.append(onnx.helper.make_tensor_type_proto(
                    vt.elem_type, vt.shape) if x else onnx.TypeProto())
            fn.ParseFromString(schema.get_context_dependent_function_with_opset_version(
                max(dependent), node.SerializeToString(),
                [t.SerializeToString() for t in input_types]))
        else:
            return None
    except Exception:
        return None
    if len(node.input) > len(fn.input) or len(node.output) > len(fn.output):
        return None  # a body generated for other inputs (types not known here)
    given = {a.name for a in node.attribute}
    for name, attr in schema.attributes.items():
        if name not in given and attr.default_value.name:
            node.attribute.append(attr.default_value)
    return fn


def _expand_functions(proto: onnx.ModelProto, opset: int, types: dict,
                      expand: Callable[[str], bool]) -> bool:
    """Replaces each node of an op that `expand` selects by the body of the
    ONNX function defining it (SwiGLU, CausalConvWithState, ...), as the
    `_expanded` node tests spell them out. Returns whether any was."""
    work = onnx.ModelProto()
    work.CopyFrom(proto)
    functions = []
    for i, node in enumerate(work.graph.node):
        if node.domain not in ("", "ai.onnx") or not expand(node.op_type):
            continue
        fn = _schema_function(node, opset, types)
        if fn is None:
            continue
        fn.domain, fn.name = _EXPANDED, f"{node.op_type}_{i}"
        node.domain, node.op_type = _EXPANDED, fn.name
        functions.append(fn)
    if not functions:
        return False
    work.functions.extend(functions)
    work.opset_import.append(onnx.helper.make_opsetid(_EXPANDED, 1))
    try:
        inlined = onnx.inliner.inline_local_functions(work)
    except Exception:
        return False  # the nodes stay, and the pre-flight check reports them
    proto.CopyFrom(inlined)
    del proto.opset_import[:]
    proto.opset_import.extend(o for o in inlined.opset_import if o.domain != _EXPANDED)
    return True


def load(model, *, dynamic_dims=None, expand: Optional[Callable[[str], bool]] = None,
         layers: bool = False) -> LoadedModel:
    """Reads and validates `model`, and infers every value's type. Nodes of
    ops `expand` selects (those SITS has no converter for) are replaced by
    their ONNX function body where the op has one. With `layers`, a run of
    repeated layers is found first and only one of them is checked and
    inferred (`LoadedModel.layers`; see `_layers`)."""
    proto, path = read_model(model)
    _check_initializer_sizes(proto)
    external = None
    if path is not None and any(t.data_location == onnx.TensorProto.EXTERNAL
                                for t in proto.graph.initializer):
        external = ExternalData(os.path.dirname(os.path.abspath(path)), path)
        for t in proto.graph.initializer:
            if t.data_location == onnx.TensorProto.EXTERNAL:
                external.check(t)
                # Small ones go into the checked and inferred skeleton.
                if int(np.prod(t.dims, dtype=np.int64)) <= _SKELETON_LIMIT:
                    external.inline(t)
    opsets = {}
    for o in proto.opset_import:
        opsets["" if o.domain == "ai.onnx" else o.domain] = int(o.version)
    opset = opsets.get("")
    if opset is None:
        raise _fail("the model imports no ai.onnx opset")
    if opset < MIN_OPSET:
        # onnx.version_converter crashes the process on some models the
        # checker refuses (an attribute of the wrong type): check first.
        _check_model(_skeleton(proto, opsets, {}))
        proto = _upgrade(proto, opset)
        opsets[""] = opset = MIN_OPSET
    if opset > MAX_OPSET:
        raise _fail(f"the model uses ai.onnx opset {opset}; SITS reads opsets "
                    f"{MIN_OPSET} to {MAX_OPSET}")
    if dynamic_dims is not None and not isinstance(dynamic_dims, Mapping):
        raise _fail("dynamic_dims must be a mapping from symbolic dimension names "
                    f"to sizes (or None), got {type(dynamic_dims).__name__}")
    plan = find_layers(proto.graph) if layers else None
    if plan is not None:
        proto = reduced(proto, plan)
    skel = _skeleton(proto, opsets, dynamic_dims or {})
    _check_model(skel)
    types = _infer_with_runtime_axes(skel, opset)
    if expand is not None and _expand_functions(proto, opset, types, expand):
        if plan is not None:
            raise NoLayers("ops are expanded into their function bodies")
        skel = _skeleton(proto, opsets, dynamic_dims or {})
        types = _infer_with_runtime_axes(skel, opset)
    for t in proto.graph.initializer:
        types[t.name] = ValueType(t.data_type, tuple(int(d) for d in t.dims))
    return LoadedModel(model=proto, opset=opset, opsets=opsets, types=types, path=path,
                       skeleton=skel, external=external, layers=plan)


def _infer_with_runtime_axes(skel: onnx.ModelProto, opset: int) -> dict:
    """`_infer`, and again where it left the output of a Reduce* with axes
    computed at run time untyped: ONNX gives such an output no shape,
    though its rank follows from the input's (and the number of axes
    without keepdims). Its extents, 1 or the input's as the axes decide,
    are left unknown, and inference carries on past it."""
    from ._ops_reduction import AXES_INPUT_SINCE

    types = _infer(skel)
    g = skel.graph
    constant = {t.name for t in g.initializer}
    constant.update(o for n in g.node if n.op_type == "Constant" for o in n.output)
    hints = []
    for n in g.node:
        since = AXES_INPUT_SINCE.get(n.op_type)
        if (n.domain or "") not in ("", "ai.onnx") or since is None or opset < since or \
                len(n.input) < 2 or not n.input[1] or n.input[1] in constant:
            continue
        x, y, axes = types.get(n.input[0]), types.get(n.output[0]), types.get(n.input[1])
        if x is None or x.shape is None or (y is not None and y.shape is not None):
            continue
        keepdims = next((a for a in n.attribute if a.name == "keepdims"), None)
        if keepdims is not None and keepdims.ref_attr_name:
            continue
        if keepdims is None or keepdims.i:
            shape = [1 if d == 1 else None for d in x.shape]
        elif axes is not None and axes.shape and isinstance(axes.shape[0], int):
            shape = [None] * (len(x.shape) - axes.shape[0])
        else:
            continue
        hints.append(onnx.helper.make_tensor_value_info(n.output[0], x.elem_type, shape))
    if not hints:
        return types
    g.value_info.extend(hints)
    return _infer(skel)


def _check_model(skel: onnx.ModelProto) -> None:
    """onnx.checker on a skeleton, its refusal as a CompileError."""
    try:
        onnx.checker.check_model(skel)
    except onnx.checker.ValidationError as e:
        raise _fail("invalid ONNX model (onnx.checker)", str(e).strip().splitlines()[0]
                    if str(e).strip() else repr(e)) from None
    except Exception as e:
        raise _fail("invalid ONNX model (onnx.checker)", str(e)) from None


def _plain_inference(model) -> list:
    try:  # what fails here, the inference that follows reports
        return list(onnx.shape_inference.infer_shapes(model).graph.value_info)
    except Exception:
        return []


def _infer(skel: onnx.ModelProto, known: Optional[Mapping[str, ValueType]] = None) -> dict:
    """Value types of `skel`: ONNX's shape inference, then onnxruntime's
    symbolic inference where ONNX leaves an extent the inputs do not name.
    With `known` (the types of an earlier inference of the same graph,
    before import-time folding), each value keeps the better of the two and
    symbolic inference runs only if some extent is still not grounded in
    the inputs' names: on exported decoders it grounds everything the first
    time, and a second run costs as much as the first."""
    # The graph outputs' declared shapes are left out of inference and
    # reconciled with the computed ones afterwards (`_declared_outputs`):
    # merged in, a static extent declared on an output whose computed
    # extent follows a dynamic input (`dynamic_axes` on the inputs only,
    # a common export slip) would make the code assume it.
    declared = {o.name: _value_type(o) for o in skel.graph.output}
    g = skel.graph
    _check_sizes([(v.name, _value_type(v)) for v in list(g.input) + list(g.output)] +
                 [(t.name, ValueType(t.data_type, tuple(t.dims))) for t in g.initializer])
    _check_shape_inputs(skel)
    _check_axis_attributes(skel.graph)
    bare = onnx.ModelProto()
    bare.CopyFrom(skel)
    for out in bare.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    unpinned = _pin_resize_sizes(bare)
    # ONNX's data_prop holds a 1-D tensor's values as one dim each: not for long ones
    # (inputs, initializers, values inferred without it: 2 ms at 32 layers).
    long_1d = any(len(d) == 1 and isinstance(d[0], int) and d[0] > 1 << 20 for d in
                  [(_value_type(v) or ValueType(0, ())).shape or () for v in
                   list(g.input) + _plain_inference(bare)] + [tuple(t.dims) for t in g.initializer])
    try:
        inferred = onnx.shape_inference.infer_shapes(bare, strict_mode=True,
                                                     data_prop=not long_1d)
    except Exception as e:
        msg = str(e).strip()
        raise _fail("ONNX shape inference failed on the model",
                    msg.splitlines()[-1] if msg else repr(e)) from None
    types = {}
    ig = inferred.graph
    for vi in list(ig.input) + list(ig.value_info) + list(ig.output):
        vt = _value_type(vi)
        if vt is not None:
            types[vi.name] = vt
    types.update(unpinned)
    _forget_attention_zeros(g, types)
    # Extents the graph inputs name; any other symbolic or unknown extent
    # is worth asking symbolic inference about.
    inputs = {d for i in skel.graph.input for d in (_value_type(i) or ValueType(0, ())).shape or ()
              if isinstance(d, str)}
    if known is not None:
        for name, old in known.items():
            types[name] = _better(old, types.get(name), inputs)
    _check_sizes(types.items())
    if any(not _grounded_shape(t.shape, inputs) for t in types.values()):
        _refine_symbolic(bare, types, inputs)
        _check_sizes(types.items())
    conflicts = _declared_outputs(types, declared, inputs)
    if conflicts:
        # Inference without the declarations gets some ops wrong (Squeeze or
        # Split with run-time-looking axes); ONNX's inference with them
        # decides: it refuses a real contradiction.
        try:
            with_declared = onnx.shape_inference.infer_shapes(skel, strict_mode=True,
                                                              data_prop=not long_1d)
        except Exception as e:
            msg = str(e).strip()
            raise _fail(conflicts[0][1], msg.splitlines()[-1] if msg else repr(e)) from None
        outs = {o.name: _value_type(o) for o in with_declared.graph.output}
        for name, _ in conflicts:
            types[name] = outs.get(name) or declared[name]
    return types


def _pin_resize_sizes(model: onnx.ModelProto) -> dict:
    """ONNX's Resize inference (onnx 1.23) takes the dynamic length of a
    graph input `sizes` for 0 and fails: such a length is pinned, in
    `model` (inference's copy), to the count ONNX wants (the axes, else X's
    rank). Returns the inputs' own types, which the converter reads."""
    g = model.graph
    inputs = {i.name: i for i in g.input}
    own = {}
    for n in g.node:
        if n.op_type != "Resize" or (n.domain or "") not in ("", "ai.onnx") or len(n.input) < 4:
            continue
        vi, x = inputs.get(n.input[3]), inputs.get(n.input[0])
        vt, xt = (_value_type(vi) if vi else None), (_value_type(x) if x else None)
        axes = next((list(a.ints) for a in n.attribute if a.name == "axes"), None)
        count = len(axes) if axes is not None else (
            len(xt.shape) if xt is not None and xt.shape is not None else None)
        if (vt is None or vt.shape is None or len(vt.shape) != 1 or isinstance(vt.shape[0], int)
                or count is None):
            continue
        own[vi.name] = vt
        vi.type.tensor_type.shape.dim[0].dim_value = count
    return own


def _forget_attention_zeros(graph: onnx.GraphProto, types: dict) -> None:
    """ONNX's inference gives Attention's 3-D Y and its qk_matmul_output a
    0 extent where extents of the inputs are dynamic (onnx 1.23): such an
    extent, on an Attention none of whose inputs is empty, becomes unknown,
    and the converter computes it."""
    for n in graph.node:
        if n.op_type != "Attention" or (n.domain or "") not in ("", "ai.onnx"):
            continue
        if any(0 in (types[x].shape or ()) for x in n.input if x in types):
            continue
        for o in n.output:
            t = types.get(o)
            if t is not None and t.shape is not None and 0 in t.shape:
                types[o] = ValueType(t.elem_type, tuple(None if d == 0 else d for d in t.shape))


#: Inputs of ONNX ops that hold shapes, axes, pads or slice bounds: one
#: element per dimension of some tensor, so a few, and ONNX's shape
#: inference (Slice) and onnxruntime's symbolic inference (Reshape) work
#: per element of their declared extent, whether data is known or not.
_SHAPE_INPUTS = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3),
    "ConstantOfShape": (0,), "Resize": (1, 2, 3), "Upsample": (1,), "Split": (1,),
    "Squeeze": (1,), "Unsqueeze": (1,), "CenterCropPad": (1, 2), "Col2Im": (1, 2, 3),
    **{op: (1,) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
                           "ReduceSumSquare", "ReduceL1", "ReduceL2", "ReduceLogSum",
                           "ReduceLogSumExp")},
}
#: The most elements such an input may declare (a rank of 65536).
_MAX_SHAPE_INPUT = 1 << 16


def _check_shape_inputs(skel: onnx.ModelProto) -> None:
    """CompileError for a shape-like input (`_SHAPE_INPUTS`) that a graph
    input or initializer declares with more than _MAX_SHAPE_INPUT elements:
    inference would take memory and time in proportion (2^31 elements:
    tens of GB)."""
    g = skel.graph
    declared = {t.name: tuple(t.dims) for t in g.initializer}
    for i in g.input:
        vt = _value_type(i)
        if vt is not None and vt.shape is not None:
            declared[i.name] = vt.shape
    for n in g.node:
        if (n.domain or "") not in _STANDARD_DOMAINS:
            continue
        for k in _SHAPE_INPUTS.get(n.op_type, ()):
            if k >= len(n.input) or n.input[k] not in declared:
                continue
            static = [d for d in declared[n.input[k]] if isinstance(d, int)]
            if math.prod(static) > _MAX_SHAPE_INPUT:
                raise _fail(f"input {k} ('{n.input[k]}') of node '{n.name or n.op_type}' "
                            f"({n.op_type}) has the shape {list(declared[n.input[k]])}: it holds "
                            f"a shape, axes or bounds, at most {_MAX_SHAPE_INPUT} elements")


# Far above any tensor's rank; ONNX's shape inference crashes the process
# on some larger ones (LayerNormalization's statistics outputs at 2^31).
_MAX_AXIS = 1 << 16


def _check_axis_attributes(graph: onnx.GraphProto) -> None:
    """CompileError for an `axis`, `axes` or `batch_dims` attribute no rank
    can hold, in `graph` and the graphs its nodes hold, before ONNX's
    inference sees it (GatherND's inference crashes the process on a huge
    negative `batch_dims`)."""
    for n in graph.node:
        for a in n.attribute:
            if (a.name in ("axis", "axes", "batch_dims")
                    and (n.domain or "") in _STANDARD_DOMAINS):
                values = [a.i] if a.type == onnx.AttributeProto.INT else list(a.ints)
                bad = [v for v in values if abs(v) > _MAX_AXIS]
                if bad:
                    raise _fail(f"node '{n.name or n.op_type}' ({n.op_type}) has {a.name} = "
                                f"{bad[0]}: no tensor has that many dimensions")
            for sub in ([a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)):
                _check_axis_attributes(sub)


def _check_initializer_sizes(proto: onnx.ModelProto) -> None:
    """CompileError for an initializer whose dims declare more elements
    than its data can hold (less than one byte, or half a byte for 4-bit
    types, each): every later step would believe the dims. The check reads
    no data (protobuf's ByteSize)."""
    for t in proto.graph.initializer:
        if t.data_location == onnx.TensorProto.EXTERNAL:
            continue
        dims = [int(d) for d in t.dims]
        if any(d < 0 for d in dims):
            raise _fail(f"initializer '{t.name}' has a negative extent (dims {dims})")
        count = math.prod(dims)
        per_byte = 2 if t.data_type in _SUB_BYTE else 1
        if count > per_byte * t.ByteSize():
            raise _fail(f"initializer '{t.name}' declares {count} elements (dims {dims}) but "
                        f"holds {t.ByteSize()} bytes")
        if count <= _SKELETON_LIMIT:
            # Small ones are read now (cheap), as checking and inference
            # read them: their data must agree with their dims.
            initializer_array(t)


_SUB_BYTE = {getattr(onnx.TensorProto, n) for n in ("INT4", "UINT4", "FLOAT4E2M1", "INT2", "UINT2")
             if hasattr(onnx.TensorProto, n)}


def _check_sizes(values) -> None:
    """CompileError for a value with a negative extent or more than
    MAX_TENSOR_BYTES (symbolic inference would also build one symbol per
    element of such a shape input); `values` is (name, ValueType or None)
    pairs."""
    for name, vt in values:
        if vt is None or not vt.shape:
            continue
        static = [d for d in vt.shape if isinstance(d, int)]
        if any(d < 0 for d in static):
            raise _fail(f"'{name}' has a negative extent (shape {list(vt.shape)})",
                        "ONNX extents are >= 0; a dynamic one is a dim_param name")
        try:
            itemsize = max(np.dtype(onnx.helper.tensor_dtype_to_np_dtype(vt.elem_type)).itemsize, 1)
        except Exception:
            itemsize = 1
        size = itemsize * math.prod(static)
        if size > MAX_TENSOR_BYTES:
            raise _fail(f"'{name}' would hold {size} bytes (shape {list(vt.shape)}), more "
                        f"than the {MAX_TENSOR_BYTES >> 40} TiB SITS compiles for one tensor")


def _declared_outputs(types: dict, declared: Mapping[str, Optional[ValueType]],
                      inputs) -> list:
    """Reconciles each graph output's computed type with its declared one,
    per extent: a computed extent written in the inputs' names stays (the
    runtime sizes the output from the inputs), whatever the declaration
    says; a declared extent (static or named) stands in for a computed one
    that is unknown. Returns (name, why) of the outputs whose computed
    static extents or rank contradict the declaration, left for the caller
    to settle."""
    conflicts = []
    for name, want in declared.items():
        got = types.get(name)
        if want is None or want.shape is None:
            continue
        if got is None or got.shape is None:
            types[name] = ValueType(got.elem_type if got else want.elem_type, want.shape)
            continue
        if len(got.shape) != len(want.shape):
            conflicts.append((name, f"graph output '{name}' is declared with rank "
                                    f"{len(want.shape)} but computed with rank {len(got.shape)}"))
            continue
        clash = [axis for axis, (g, w) in enumerate(zip(got.shape, want.shape))
                 if isinstance(g, int) and isinstance(w, int) and g != w]
        if clash:
            axis = clash[0]
            conflicts.append((name, f"graph output '{name}' is declared with extent "
                                    f"{want.shape[axis]} in dimension {axis} but the graph "
                                    f"computes {got.shape[axis]}"))
            continue
        types[name] = ValueType(got.elem_type, tuple(
            g if isinstance(g, int) or (isinstance(g, str) and _grounded(g, inputs)) or w is None
            else w for g, w in zip(got.shape, want.shape)))
    return conflicts


def _grounded(d, inputs) -> bool:
    """A static extent, or one written in the graph inputs' extent names."""
    if isinstance(d, int):
        return True
    return isinstance(d, str) and all(
        t in inputs for t in re.findall(r"[A-Za-z_][A-Za-z_0-9]*", d))


def _grounded_shape(shape, inputs) -> bool:
    return shape is not None and all(_grounded(d, inputs) for d in shape)


def _better(old: Optional[ValueType], new: Optional[ValueType], inputs) -> Optional[ValueType]:
    """The more informative of two inferred types of one value: per extent,
    static over grounded symbolic over anything else."""
    if new is None or new.shape is None:
        return old if old is not None else new
    if old is None or old.shape is None or len(old.shape) != len(new.shape):
        return new

    def rank(d):
        return 2 if isinstance(d, int) else 1 if _grounded(d, inputs) else 0
    return ValueType(new.elem_type, tuple(n if rank(n) >= rank(o) else o
                                          for o, n in zip(old.shape, new.shape)))


_SYMBOLIC: list = []


def _symbolic_shape_inference():
    """onnxruntime's SymbolicShapeInference class, or None without
    onnxruntime. Its module is loaded from its file on its own: importing it
    as `onnxruntime.tools.symbolic_shape_infer` runs `onnxruntime.tools`,
    which imports torch when torch is installed (4 s, for nothing here)."""
    if not _SYMBOLIC:
        cls = None
        try:
            import importlib.util
            import sys

            spec = importlib.util.find_spec("onnxruntime")
            roots = list(spec.submodule_search_locations or []) if spec else []
            path = os.path.join(roots[0], "tools", "symbolic_shape_infer.py") if roots else ""
            if os.path.isfile(path):
                name = "_sits_onnxruntime_symbolic_shape_infer"
                module_spec = importlib.util.spec_from_file_location(name, path)
                module = importlib.util.module_from_spec(module_spec)
                sys.modules[name] = module
                try:
                    module_spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[name]
                    raise
                cls = module.SymbolicShapeInference
        except Exception:
            cls = None
        _SYMBOLIC.append(cls)
    return _SYMBOLIC[0]


def symbolic_inference_available() -> bool:
    """Whether onnxruntime's symbolic shape inference can be used."""
    return _symbolic_shape_inference() is not None


def _refine_symbolic(skel: onnx.ModelProto, types: dict, inputs: set) -> None:
    """Exported decoders compute reshape targets from Shape/Gather/Concat of
    dynamic extents, which ONNX's data propagation loses (`unk__N`).
    onnxruntime's symbolic inference (sympy) carries them as expressions
    such as `batch*seq`; where it knows more, its shapes replace ONNX's.
    Without onnxruntime, ONNX's shapes stay as they are."""
    SymbolicShapeInference = _symbolic_shape_inference()  # noqa: N806
    if SymbolicShapeInference is None:
        return
    # Declared output extents are left out: merged with the inferred
    # expressions, they would rename them (`total` for `past + seq`)
    # wherever they meet.
    bare = onnx.ModelProto()
    bare.CopyFrom(skel)
    for out in bare.graph.output:
        if out.type.HasField("tensor_type"):
            out.type.tensor_type.ClearField("shape")
    # The steps of SymbolicShapeInference.infer_shapes, which on a partial
    # result writes a model file into the working directory and raises: a
    # partial result is still worth having, and nothing is written. No
    # auto_merge: it would take extents that broadcast (`a` against `c`) to
    # be equal, where either may be 1 at run time.
    try:
        inference = SymbolicShapeInference(2**31 - 1, False, False, 0)
        inference._preprocess(bare)
        while inference.run_:
            inference._infer_impl()
        inference._update_output_from_vi()
        inferred = inference.out_mp_
    except Exception:
        return
    # An ONNX extent that the graph inputs do not name (`unk__3`, or an
    # output's declared `total`) is replaced by symbolic inference's when
    # that one is written in the inputs' names (`past + seq`); a value ONNX
    # did not type takes symbolic inference's type when all of it is.
    def grounded(d):
        return _grounded(d, inputs)

    guessed = _guessed_by_symbolic(skel.graph)
    ig = inferred.graph
    for vi in list(ig.value_info) + list(ig.output):
        vt = _value_type(vi)
        old = types.get(vi.name)
        if vt is None or vt.shape is None or vi.name in guessed:
            continue
        if old is None or old.shape is None:
            if all(map(grounded, vt.shape)):
                types[vi.name] = vt
            continue
        if len(old.shape) != len(vt.shape):
            continue
        merged = tuple(n if not grounded(o) and grounded(n) else o
                       for o, n in zip(old.shape, vt.shape))
        if merged != old.shape:
            types[vi.name] = ValueType(old.elem_type, merged)


def _guessed_by_symbolic(graph: onnx.GraphProto) -> set:
    """Values whose symbolic types are guesses: a Split whose lengths are
    computed at run time is taken to split evenly (wrong for lengths such as
    [8, 0]), and so is everything computed from its outputs."""
    known = {t.name for t in graph.initializer}
    known.update(o for n in graph.node if n.op_type == "Constant" for o in n.output)
    guessed: set = set()
    for n in graph.node:  # topologically sorted (the checker's rule)
        if ((n.op_type == "Split" and len(n.input) > 1 and n.input[1]
             and n.input[1] not in known) or any(x in guessed for x in n.input)):
            guessed.update(o for o in n.output if o)
    return guessed


def reinfer(loaded: LoadedModel, folded: Mapping[str, np.ndarray],
            known: Optional[Mapping[str, ValueType]] = None) -> dict:
    """Shape inference again, with the values folded at import time given to
    ONNX as initializers (and their producers removed), so shapes that
    depend on them (e.g. an Expand to a computed shape) become static.
    `known`: the types so far (see `_infer`)."""
    skel = onnx.ModelProto()
    skel.CopyFrom(loaded.skeleton)
    g = skel.graph
    keep = [n for n in g.node if not all((not o) or o in folded for o in n.output)]
    del g.node[:]
    g.node.extend(keep)
    existing = {t.name for t in g.initializer} | {i.name for i in g.input}
    for name, a in folded.items():
        if name in existing:
            continue
        a = np.asarray(a)
        tensor = None
        if a.size <= _SKELETON_LIMIT:
            try:
                tensor = numpy_helper.from_array(a, name)
            except Exception:
                tensor = None
        if tensor is not None:
            g.initializer.append(tensor)
        else:
            et = onnx.helper.np_dtype_to_tensor_dtype(a.dtype)
            g.input.append(onnx.helper.make_tensor_value_info(name, et, list(a.shape)))
    return _infer(skel, known)
