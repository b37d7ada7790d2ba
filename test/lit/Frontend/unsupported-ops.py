# A model with nodes SITS cannot import: the CLI prints one error listing
# every unsupported node at once (op type, node name, domain, opset and why),
# no traceback and no IR, and exits with status 1.
#
# RUN: %python %s %t.onnx
# RUN: not %python -m sits_mlir.frontend.onnx %t.onnx 2>&1 | FileCheck %s --implicit-check-not=Traceback
# RUN: not %python -m sits_mlir.frontend.onnx %t.onnx 2>/dev/null | count 0
#
# RUN: not %python -m sits_mlir.frontend.onnx %t.missing.onnx 2>&1 | FileCheck %s --check-prefix=MISSING --implicit-check-not=Traceback
# RUN: not %python -m sits_mlir.frontend.onnx %t.onnx --dynamic-dim nope=1 2>&1 | FileCheck %s --check-prefix=DIM --implicit-check-not=Traceback

# CHECK:      sits-import-onnx: error: the model has 2 unsupported nodes; nothing was imported
# CHECK-NEXT:   node 'unique' (Unique, opset 17): the result shape depends on run-time data
# CHECK-NEXT:   node 'custom' (com.example.Frobnicate, opset 1): unknown op (domain 'com.example' is not supported)
# CHECK-NOT:  module

# MISSING:     sits-import-onnx: error: cannot read ONNX model '{{.*}}missing.onnx': no such file

# DIM:     sits-import-onnx: error: dynamic_dims names 'nope', which no graph input has; symbolic dimensions are: batch

import sys

import onnx
from onnx import TensorProto as TP
from onnx import helper as h

nodes = [h.make_node("Relu", ["x"], ["r"], name="relu"),
         h.make_node("Unique", ["r"], ["u"], name="unique", sorted=1),
         h.make_node("Frobnicate", ["u"], ["y"], name="custom", domain="com.example")]
graph = h.make_graph(nodes, "unsupported", [h.make_tensor_value_info("x", TP.FLOAT, ["batch", 8])],
                     [h.make_tensor_value_info("y", TP.FLOAT, ["n"])])
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("com.example", 1)],
                     ir_version=8)
onnx.save(model, sys.argv[1])
