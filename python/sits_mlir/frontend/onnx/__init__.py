"""The ONNX frontend: an ONNX model in, a module in the SITS dialect out.

```python
from sits_mlir.frontend.onnx import import_model, check

problems = check("model.onnx")          # every unsupported node, nothing raised
imported = import_model("model.onnx")   # raises one CompileError listing them all
print(imported.module)
```

What the module looks like (the contract with SITS→linalg lowering):

* one public `func.func @main`, one argument per graph input (initializers
  excluded) and one result per graph output, in graph order; ranked tensors,
  `?` for dynamic extents; no target attribute;
* every op carries `loc("<ONNX node name>")` (or `loc("<op_type>_<index>")`
  for unnamed nodes); an op fused from several nodes carries the name of its
  result's node (the contraction's for MatMul+bias and Conv+BatchNorm);
  constants carry their initializer's or producer's name; the module,
  `@main` and its return carry the graph's name;
* constants above 64 elements are `dense_resource` blobs whose aligned
  buffers live in `ImportedModel.weights`; smaller ones and splats are inline;
  initializers in ONNX external data are mapped from their files, and used
  in place when 64-byte aligned (no copy in memory);
* semantic ops are SITS ops (`sits.matmul`, `sits.conv`, `sits.attention`,
  `sits.layer_norm`, `sits.rms_norm`, `sits.softmax`, `sits.activation`,
  `sits.quantize`, `sits.dequantize`); everything else is `arith`/`math` on
  same-shape tensors (broadcasts are explicit `linalg.broadcast`s),
  `tensor` reshapes/slices/concats/pads, `linalg.transpose`/`reduce`/`fill`/
  `pooling_nchw_{max,sum}` and `linalg.generic` + `tensor.extract` (Gather,
  Tile, Trilu). `SUPPORTED_OPS` lists every ONNX op type; README.md next
  to this file has the op-by-op table.

Shapes come from ONNX shape inference (strict, with data propagation);
values computable at import time (shape arithmetic, constant masks, ...) are
folded there.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Mapping, Optional, Union

from ...errors import CompileError
from ._importer import ImportedModel, Importer, TensorSpec
from ._layers import NoLayers
from ._load import MAX_OPSET, MIN_OPSET, load
from ._ops import CONVERTERS

if TYPE_CHECKING:
    import onnx

__all__ = ["import_model", "check", "ImportedModel", "TensorSpec", "SUPPORTED_OPS",
           "MIN_OPSET", "MAX_OPSET"]

#: (domain, op_type) pairs the frontend can import (some with restrictions
#: on attributes, dtypes or static shapes, which `check` reports).
SUPPORTED_OPS = frozenset({k for k, c in CONVERTERS.items() if c.supported} | {
    # Evaluated at import time (Shape/Size also when run-time extents are
    # static; of dynamic extents they are emitted).
    ("", "Constant"), ("", "Range")})

#: A path to an .onnx file, its bytes, or an onnx.ModelProto.
ModelLike = Union[str, "os.PathLike[str]", bytes, "onnx.ModelProto"]  # noqa: F821


def _validate_target(target: str):
    from ... import targets

    try:
        targets.lookup(target)
    except targets.UnknownTargetError as e:
        raise CompileError(str(e)) from None


def _summary(problems) -> str:
    n = len(problems)
    return (f"the model has {n} unsupported node{'s' if n != 1 else ''}; "
            f"nothing was imported")


def check(model: ModelLike, target: str = "cpu", *,
          dynamic_dims: Optional[Mapping[str, Optional[int]]] = None) -> list:
    """Pre-flight check: every node of `model` SITS cannot compile.

    Returns a list of `UnsupportedNode` (empty when the whole model is
    supported), each with the node's op type, name, domain and opset and a
    one-line reason (unknown op, unsupported attribute value or element type,
    data-dependent output shape, ...). Raises `CompileError` only when
    `model` cannot be read at all (no such file, not ONNX, rejected by
    `onnx.checker`, unsupported opset, unknown target).
    """
    _validate_target(target)
    loaded = load(model, dynamic_dims=dynamic_dims, expand=_without_converter)
    return Importer(loaded).preflight()


def _without_converter(op_type: str) -> bool:
    """Ops imported through their ONNX function body: those without a
    converter of their own."""
    c = CONVERTERS.get(("", op_type))
    return c is None or not c.supported


def import_model(model: ModelLike, *, context=None,
                 dynamic_dims: Optional[Mapping[str, Optional[int]]] = None,
                 shared_layers: bool = True, quantize_tables: bool = False) -> ImportedModel:
    """Imports an ONNX model into the SITS dialect.

    `model` is a path to an `.onnx` file (external data next to it is read),
    the file's bytes, or an `onnx.ModelProto`; ai.onnx opsets 13 to 23.
    `context` is the `ir.Context` to build in (default: the current one if
    a context is active, else a new one).
    `dynamic_dims` maps symbolic input dimensions (ONNX `dim_param` names) to
    fixed sizes before shape inference, e.g. `{"batch": 1}`; a None value
    (or a dimension not named) stays dynamic (`?`).

    Runs the pre-flight check first and raises one `CompileError` listing
    every unsupported node (see `check`) before any IR is built.

    With `quantize_tables` (compiling with INT8 or INT4 weights), large
    float tables that a Gather reads rows of at run time (embedding tables)
    are stored as INT8 rows with a scale per row, widened after the gather.

    With `shared_layers`, a transformer's repeated layers are checked,
    inferred and emitted once and their copies cloned in the IR (the module
    is the same, each op named by its own layer's node), so that import
    time hardly grows with the depth. Where the repeat cannot be shared, or
    anything fails, the model is imported node by node.
    """
    if shared_layers:
        try:
            loaded = load(model, dynamic_dims=dynamic_dims, expand=_without_converter,
                          layers=True)
        except (NoLayers, CompileError):
            loaded = None  # the model is read again below, and errors name every node
        if loaded is not None and loaded.layers is None:
            return _import(loaded, context, quantize_tables)
        if loaded is not None:
            try:
                importer = Importer(loaded, quantize_tables=quantize_tables)
                importer.check_layers()
                if not importer.preflight():
                    return importer.build(context)
            except (NoLayers, CompileError):
                pass
    loaded = load(model, dynamic_dims=dynamic_dims, expand=_without_converter)
    return _import(loaded, context, quantize_tables)


def _import(loaded, context, quantize_tables: bool = False) -> ImportedModel:
    importer = Importer(loaded, quantize_tables=quantize_tables)
    problems = importer.preflight()
    if problems:
        raise CompileError(_summary(problems), problems)
    return importer.build(context)
