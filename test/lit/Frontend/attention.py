# Scaled dot-product attention as exporters write it (Q/K/V projections,
# heads split by Reshape + Transpose, MatMul(Q, Kᵀ), a scale, Softmax over
# the keys, MatMul with V) imports as one `sits.attention`: no softmax and
# no score matmul remain, and the Transpose to Kᵀ is folded (the op reads K
# as [B, H, T, D], the heads split of its projection).
#
# RUN: %python %s %t.onnx div && %python -m sits_mlir.frontend.onnx %t.onnx | FileCheck %s
# RUN: %python %s %t.default.onnx mul && %python -m sits_mlir.frontend.onnx %t.default.onnx | FileCheck %s --check-prefix=DEFAULT
#
# The fused op carries the location of the node producing its result (the P·V MatMul).
# RUN: %python -m sits_mlir.frontend.onnx %t.onnx --debug-info | FileCheck %s --check-prefix=LOC
#
# A softmax over another axis than the keys' is no attention: the ops stay.
# RUN: %python %s %t.axis.onnx softmax-axis-2 && %python -m sits_mlir.frontend.onnx %t.axis.onnx | FileCheck %s --check-prefix=AXIS

# CHECK-LABEL: func.func @main(%arg0: tensor<1x6x16xf32>) -> tensor<1x2x6x8xf32>
# CHECK:       sits.matmul %arg0, %{{.*}} : (tensor<1x6x16xf32>, tensor<16x16xf32>) -> tensor<1x6x16xf32>
# CHECK:       %[[Q:.*]] = linalg.transpose ins(%{{.*}} : tensor<1x6x2x8xf32>) outs(%{{.*}} : tensor<1x2x6x8xf32>) permutation = [0, 2, 1, 3]
# CHECK:       sits.matmul %arg0, %{{.*}} : (tensor<1x6x16xf32>, tensor<16x16xf32>) -> tensor<1x6x16xf32>
# CHECK:       %[[K:.*]] = linalg.transpose ins(%{{.*}} : tensor<1x6x2x8xf32>) outs(%{{.*}} : tensor<1x2x6x8xf32>) permutation = [0, 2, 1, 3]
# CHECK:       sits.matmul %arg0, %{{.*}} : (tensor<1x6x16xf32>, tensor<16x16xf32>) -> tensor<1x6x16xf32>
# CHECK:       %[[V:.*]] = linalg.transpose ins(%{{.*}} : tensor<1x6x2x8xf32>) outs(%{{.*}} : tensor<1x2x6x8xf32>) permutation = [0, 2, 1, 3]
# CHECK-NOT:   sits.matmul
# CHECK-NOT:   arith.divf
# CHECK-NOT:   sits.softmax
# CHECK-NEXT:  %[[Y:.*]] = sits.attention %[[Q]], %[[K]], %[[V]] {scale = 5.000000e-01 : f64} : (tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
# CHECK-NEXT:  return %[[Y]]

# LOC:       sits.attention {{.*}} loc(#[[PV:loc[0-9]+]])
# LOC:       #[[PV]] = loc("pv")

# DEFAULT-LABEL: func.func @main
# DEFAULT:       %[[Q:.*]] = linalg.transpose {{.*}} permutation = [0, 2, 1, 3]
# DEFAULT:       %[[K:.*]] = linalg.transpose {{.*}} permutation = [0, 2, 1, 3]
# DEFAULT:       %[[V:.*]] = linalg.transpose {{.*}} permutation = [0, 2, 1, 3]
# DEFAULT-NOT:   arith.mulf
# DEFAULT-NEXT:  %[[Y:.*]] = sits.attention %[[Q]], %[[K]], %[[V]] : (tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
# DEFAULT-NEXT:  return %[[Y]]

# AXIS-LABEL: func.func @main
# AXIS-NOT:   sits.attention
# AXIS:       %[[KT:.*]] = linalg.transpose {{.*}} permutation = [0, 1, 3, 2]
# AXIS:       %[[S:.*]] = sits.matmul %{{.*}}, %[[KT]] : (tensor<1x2x6x8xf32>, tensor<1x2x8x6xf32>) -> tensor<1x2x6x6xf32>
# AXIS:       %[[SS:.*]] = arith.divf %[[S]]
# AXIS:       %[[P:.*]] = sits.softmax %[[SS]] {axis = 2 : i64}
# AXIS:       sits.matmul %[[P]], %{{.*}} : (tensor<1x2x6x6xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
# AXIS-NOT:   sits.attention

import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

B, T, H, D = 1, 6, 2, 8
E = H * D
path, variant = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(0)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


inits = [const(f"w{x}", (rng.standard_normal((E, E)) / np.sqrt(E)).astype(np.float32))
         for x in "qkv"]
inits += [const("heads", np.array([B, T, H, D], np.int64))]
nodes = []
for x in "qkv":
    nodes += [h.make_node("MatMul", ["x", f"w{x}"], [f"{x}_proj"], name=f"{x}_proj"),
              h.make_node("Reshape", [f"{x}_proj", "heads"], [f"{x}_split"], name=f"{x}_split"),
              h.make_node("Transpose", [f"{x}_split"], [x], perm=[0, 2, 1, 3], name=f"{x}_heads")]
nodes += [h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="k_t"),
          h.make_node("MatMul", ["q", "kt"], ["scores"], name="qk")]
if variant == "mul":
    # Mul by 1/sqrt(D): the op's default scale, so no `scale` attribute.
    inits.append(const("c", np.array(1 / np.sqrt(D), np.float32)))
    nodes.append(h.make_node("Mul", ["scores", "c"], ["scaled"], name="scale"))
else:
    inits.append(const("c", np.array(2.0, np.float32)))
    nodes.append(h.make_node("Div", ["scores", "c"], ["scaled"], name="scale"))
axis = 2 if variant == "softmax-axis-2" else -1
nodes += [h.make_node("Softmax", ["scaled"], ["probs"], axis=axis, name="softmax"),
          h.make_node("MatMul", ["probs", "v"], ["y"], name="pv")]
graph = h.make_graph(nodes, "attention", [h.make_tensor_value_info("x", TP.FLOAT, [B, T, E])],
                     [h.make_tensor_value_info("y", TP.FLOAT, [B, H, T, D])], inits)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model)
onnx.save(model, path)
