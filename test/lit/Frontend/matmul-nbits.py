# com.microsoft MatMulNBits (onnxruntime's block-quantized weights: B is
# [N, K/block, block·bits/8] bytes, scales [N, K/block]) imports as one
# `sits.qmatmul` over the unpacked [N, K] weights (`transpose_weight`), one
# scale per block of `block_size` along K (`axis = 1`); nothing is
# dequantized in the IR.
#
# int4: 4-bit weights with packed zero points and a bias; the zero point is
# folded into the int8 weights, so the op has no zero_point operand.
# RUN: %python %s %t.int4.onnx int4 && %python -m sits_mlir.frontend.onnx %t.int4.onnx | FileCheck %s --check-prefix=INT4
# The printed module, weights included, parses back (also in the generic form).
# RUN: %python -m sits_mlir.frontend.onnx %t.int4.onnx --generic | sits-opt | FileCheck %s --check-prefix=INT4
#
# int8: 8-bit weights stay unsigned (ui8) with their ui8 zero points.
# RUN: %python %s %t.int8.onnx int8 && %python -m sits_mlir.frontend.onnx %t.int8.onnx | FileCheck %s --check-prefix=INT8
#
# float-zp: float zero points fold into f32 weights at import: a plain sits.matmul.
# RUN: %python %s %t.float-zp.onnx float-zp && %python -m sits_mlir.frontend.onnx %t.float-zp.onnx | FileCheck %s --check-prefix=FLOATZP

# INT4-LABEL: func.func @main(%arg0: tensor<3x128xf32>) -> tensor<3x32xf32>
# INT4-DAG:   %[[W:.*]] = arith.constant dense_resource<B> : tensor<32x128xi8>
# INT4-DAG:   %[[S:.*]] = arith.constant dense_resource<scales> : tensor<32x4xf32>
# INT4-DAG:   %[[B:.*]] = arith.constant dense<{{.*}}> : tensor<32xf32>
# INT4-NOT:   sits.dequantize
# INT4-NOT:   sits.matmul
# INT4:       %[[Y:.*]] = sits.qmatmul %arg0, %[[W]], %[[S]] bias(%[[B]]) {axis = 1 : i64, block_size = 32 : i64, float_input, transpose_weight} : (tensor<3x128xf32>, tensor<32x128xi8>, tensor<32x4xf32>, tensor<32xf32>) -> tensor<3x32xf32>
# INT4-NEXT:  return %[[Y]]

# INT8-LABEL: func.func @main(%arg0: tensor<3x64xf32>) -> tensor<3x8xf32>
# INT8-DAG:   %[[W:.*]] = arith.constant dense_resource<B> : tensor<8x64xui8>
# INT8-DAG:   %[[S:.*]] = arith.constant dense<{{.*}}> : tensor<8x4xf32>
# INT8-DAG:   %[[Z:.*]] = arith.constant dense<{{.*}}> : tensor<8x4xui8>
# INT8-NOT:   sits.dequantize
# INT8:       %[[Y:.*]] = sits.qmatmul %arg0, %[[W]], %[[S]] zero_point(%[[Z]]) {axis = 1 : i64, block_size = 16 : i64, float_input, transpose_weight} : (tensor<3x64xf32>, tensor<8x64xui8>, tensor<8x4xf32>, tensor<8x4xui8>) -> tensor<3x8xf32>
# INT8-NEXT:  return %[[Y]]

# FLOATZP-LABEL: func.func @main(%arg0: tensor<3x128xf32>) -> tensor<3x32xf32>
# FLOATZP-NOT:   sits.qmatmul
# FLOATZP:       %[[W:.*]] = arith.constant dense_resource<{{.*}}> : tensor<128x32xf32>
# FLOATZP-NEXT:  %[[Y:.*]] = sits.matmul %arg0, %[[W]] : (tensor<3x128xf32>, tensor<128x32xf32>) -> tensor<3x32xf32>
# FLOATZP-NEXT:  return %[[Y]]

import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

path, variant = sys.argv[1], sys.argv[2]
k, n, bs, bits = (64, 8, 16, 8) if variant == "int8" else (128, 32, 32, 4)
rng = np.random.default_rng(0)


def pack(values):
    """[N, K'] values to bytes, lowest bits first (onnxruntime's layout)."""
    v = values.astype(np.uint8)
    return v if bits == 8 else (v[:, 0::2] | (v[:, 1::2] << 4)).astype(np.uint8)


blocks = -(-k // bs)
q = rng.integers(0, 1 << bits, size=(n, blocks * bs))
scales = (rng.random((n, blocks)) * 0.05 + 0.01).astype(np.float32)
inits = [numpy_helper.from_array(pack(q).reshape(n, blocks, bs * bits // 8), "B"),
         numpy_helper.from_array(scales.reshape(-1), "scales")]
inputs = ["A", "B", "scales", "zp"]
if variant == "float-zp":
    zp = (rng.random((n, blocks)) * (1 << bits)).astype(np.float32)
    inits.append(numpy_helper.from_array(zp.reshape(-1), "zp"))
else:
    zp = rng.integers(0, 1 << bits, size=(n, blocks + (blocks % 2 if bits == 4 else 0)))
    inits.append(numpy_helper.from_array(pack(zp).reshape(-1), "zp"))
if variant == "int4":
    inputs += ["", "bias"]  # no g_idx
    inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias"))
node = h.make_node("MatMulNBits", inputs, ["Y"], domain="com.microsoft", K=k, N=n,
                   bits=bits, block_size=bs, name="nbits")
graph = h.make_graph([node], "matmul_nbits", [h.make_tensor_value_info("A", TP.FLOAT, [3, k])],
                     [h.make_tensor_value_info("Y", TP.FLOAT, [3, n])], inits)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 21),
                                           h.make_opsetid("com.microsoft", 1)])
onnx.save(model, path)
