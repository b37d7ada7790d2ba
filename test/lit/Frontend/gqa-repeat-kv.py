# Grouped-query attention exported with Llama's repeat_kv: K and V with 2
# heads each repeated for 2 query heads, Reshape(Expand(Unsqueeze(kv, 2),
# [B, 2, 2, T, D]), [B, 4, T, D]), then attention over 4 query heads. The
# importer reads K and V unrepeated: `sits.attention` takes 4 query heads and
# 2 key/value heads (query head h reads kv head h / 2, the op's grouping)
# and the repeat is never materialized.
#
# RUN: %python %s %t.gqa.onnx gqa && %python -m sits_mlir.frontend.onnx %t.gqa.onnx | FileCheck %s --check-prefix=GQA
#
# Heads repeated in the other order ([kv0, kv1, kv0, kv1]: query head h reads
# kv head h % 2) by Unsqueeze(kv, 1) or by Tile are not the op's grouping:
# the repeated K/V are materialized and the attention reads 4 kv heads.
# RUN: %python %s %t.interleaved.onnx interleaved && %python -m sits_mlir.frontend.onnx %t.interleaved.onnx | FileCheck %s --check-prefix=INTERLEAVED
# RUN: %python %s %t.tile.onnx tile && %python -m sits_mlir.frontend.onnx %t.tile.onnx | FileCheck %s --check-prefix=TILE

# GQA-LABEL: func.func @main(%arg0: tensor<1x4x6x8xf32>, %arg1: tensor<1x2x6x8xf32>, %arg2: tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>
# GQA-NOT:   tensor.expand_shape
# GQA-NOT:   linalg.broadcast
# GQA-NOT:   linalg.generic
# GQA-NOT:   tensor.collapse_shape
# GQA-NOT:   sits.softmax
# GQA-NEXT:  %[[Y:.*]] = sits.attention %arg0, %arg1, %arg2 : (tensor<1x4x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x4x6x8xf32>
# GQA-NEXT:  return %[[Y]]

# INTERLEAVED-LABEL: func.func @main
# INTERLEAVED:       linalg.broadcast ins(%{{.*}} : tensor<1x2x6x8xf32>) outs(%{{.*}} : tensor<1x2x2x6x8xf32>) dimensions = [1]
# INTERLEAVED-NEXT:  %[[K:.*]] = tensor.collapse_shape {{.*}} into tensor<1x4x6x8xf32>
# INTERLEAVED:       linalg.broadcast ins(%{{.*}} : tensor<1x2x6x8xf32>) outs(%{{.*}} : tensor<1x2x2x6x8xf32>) dimensions = [1]
# INTERLEAVED-NEXT:  %[[V:.*]] = tensor.collapse_shape {{.*}} into tensor<1x4x6x8xf32>
# INTERLEAVED:       sits.attention %arg0, %[[K]], %[[V]] : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>) -> tensor<1x4x6x8xf32>

# TILE-LABEL: func.func @main
# TILE:       %[[K:.*]] = linalg.generic
# TILE:         arith.remui
# TILE:         tensor.extract %arg1[{{.*}}] : tensor<1x2x6x8xf32>
# TILE:       } -> tensor<1x4x6x8xf32>
# TILE:       %[[V:.*]] = linalg.generic
# TILE:         arith.remui
# TILE:         tensor.extract %arg2[{{.*}}] : tensor<1x2x6x8xf32>
# TILE:       } -> tensor<1x4x6x8xf32>
# TILE:       sits.attention %arg0, %[[K]], %[[V]] : (tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>, tensor<1x4x6x8xf32>) -> tensor<1x4x6x8xf32>

import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

path, variant = sys.argv[1], sys.argv[2]
B, H, HKV, T, D = 1, 4, 2, 6, 8
N_REP = H // HKV


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


nodes, inits = [], []
for x in "kv":
    if variant == "tile":
        nodes.append(h.make_node("Tile", [x, "repeats"], [f"{x}_rep"], name=f"{x}_tile"))
    else:
        axis = "axis2" if variant == "gqa" else "axis1"
        nodes += [h.make_node("Unsqueeze", [x, axis], [f"{x}_u"], name=f"{x}_unsqueeze"),
                  h.make_node("Expand", [f"{x}_u", "expanded"], [f"{x}_e"], name=f"{x}_expand"),
                  h.make_node("Reshape", [f"{x}_e", "repeated"], [f"{x}_rep"], name=f"{x}_reshape")]
if variant == "tile":
    inits.append(const("repeats", np.array([1, N_REP, 1, 1], np.int64)))
else:
    inits += [const("axis1", np.array([1], np.int64)), const("axis2", np.array([2], np.int64)),
              const("expanded", np.array([B, HKV, N_REP, T, D], np.int64)),
              const("repeated", np.array([B, H, T, D], np.int64))]
nodes += [h.make_node("Transpose", ["k_rep"], ["kt"], perm=[0, 1, 3, 2], name="k_t"),
          h.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
          h.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale"),
          h.make_node("Softmax", ["scaled"], ["probs"], axis=-1, name="softmax"),
          h.make_node("MatMul", ["probs", "v_rep"], ["y"], name="pv")]
inits.append(const("scale", np.array(1 / np.sqrt(D), np.float32)))
graph = h.make_graph(
    nodes, "gqa_" + variant,
    [h.make_tensor_value_info("q", TP.FLOAT, [B, H, T, D]),
     h.make_tensor_value_info("k", TP.FLOAT, [B, HKV, T, D]),
     h.make_tensor_value_info("v", TP.FLOAT, [B, HKV, T, D])],
    [h.make_tensor_value_info("y", TP.FLOAT, [B, H, T, D])], inits)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model)
onnx.save(model, path)
