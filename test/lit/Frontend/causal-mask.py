# Causal masks the importer proves causal: the attention becomes
# `sits.attention {causal}` without a `mask` operand, and the mask (a constant,
# or the ops computing it at run time) disappears from the IR. Masks that are
# not exactly the bottom-right-aligned causal mask stay a `mask(...)`.
#
# constant: an additive [T, T] constant, 0 on and below the diagonal, -inf above.
# RUN: %python %s %t.constant.onnx constant && %python -m sits_mlir.frontend.onnx %t.constant.onnx | FileCheck %s --check-prefix=CONSTANT
#
# top-left: a constant [Tq, Tk] upper-triangular mask with Tq < Tk, aligned top-left
# (query i sees keys 0..i): not `causal`, which is bottom-right aligned.
# RUN: %python %s %t.top-left.onnx top-left && %python -m sits_mlir.frontend.onnx %t.top-left.onnx | FileCheck %s --check-prefix=TOPLEFT
#
# trilu: Trilu(ConstantOfShape([seq, seq], -inf), k=1) built from the run-time sequence length.
# RUN: %python %s %t.trilu.onnx trilu && %python -m sits_mlir.frontend.onnx %t.trilu.onnx | FileCheck %s --check-prefix=TRILU
#
# positions: transformers' mask over a KV cache, computed from positions
# (Where(LessOrEqual(Range(0, past + seq), Range(0, seq) + past), 0, min)),
# proven causal symbolically; --dynamic-dim pins the batch.
# RUN: %python %s %t.positions.onnx positions && %python -m sits_mlir.frontend.onnx %t.positions.onnx | FileCheck %s --check-prefix=POSITIONS
# RUN: %python -m sits_mlir.frontend.onnx %t.positions.onnx --dynamic-dim batch=1 | FileCheck %s --check-prefix=PINNED
#
# off-by-one: the same with Less (a query does not see itself): not causal.
# RUN: %python %s %t.off-by-one.onnx off-by-one && %python -m sits_mlir.frontend.onnx %t.off-by-one.onnx | FileCheck %s --check-prefix=OFFBYONE

# CONSTANT-LABEL: func.func @main(%arg0: tensor<1x2x6x8xf32>, %arg1: tensor<1x2x6x8xf32>, %arg2: tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
# CONSTANT-NOT:   arith.constant
# CONSTANT-NOT:   arith.addf
# CONSTANT-NOT:   sits.softmax
# CONSTANT-NEXT:  %[[Y:.*]] = sits.attention %arg0, %arg1, %arg2 {causal} : (tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>) -> tensor<1x2x6x8xf32>
# CONSTANT-NEXT:  return %[[Y]]

# TOPLEFT-LABEL: func.func @main
# TOPLEFT:       %[[MASK:.*]] = arith.constant dense<{{.*}}> : tensor<1x1x2x6xf32>
# TOPLEFT-NOT:   sits.softmax
# TOPLEFT:       sits.attention %arg0, %arg1, %arg2 mask(%[[MASK]]) : (tensor<1x2x2x8xf32>, tensor<1x2x6x8xf32>, tensor<1x2x6x8xf32>, tensor<1x1x2x6xf32>) -> tensor<1x2x2x8xf32>

# TRILU-LABEL: func.func @main(%arg0: tensor<1x2x?x8xf32>, %arg1: tensor<1x2x?x8xf32>, %arg2: tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32>
# TRILU-NOT:   linalg.generic
# TRILU-NOT:   linalg.fill
# TRILU-NOT:   sits.softmax
# TRILU-NEXT:  %[[Y:.*]] = sits.attention %arg0, %arg1, %arg2 {causal} : (tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>, tensor<1x2x?x8xf32>) -> tensor<1x2x?x8xf32>
# TRILU-NEXT:  return %[[Y]]

# POSITIONS-LABEL: func.func @main(%arg0: tensor<?x4x?x8xf32>, %arg1: tensor<?x4x?x8xf32>, %arg2: tensor<?x4x?x8xf32>, %arg3: tensor<?x4x?x8xf32>, %arg4: tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
# POSITIONS-NEXT:  %[[K:.*]] = tensor.concat dim(2) %arg1, %arg2
# POSITIONS-NEXT:  %[[V:.*]] = tensor.concat dim(2) %arg3, %arg4
# POSITIONS-NOT:   arith.cmpi
# POSITIONS-NOT:   arith.select
# POSITIONS-NOT:   linalg.generic
# POSITIONS-NOT:   sits.softmax
# POSITIONS-NEXT:  %[[Y:.*]] = sits.attention %arg0, %[[K]], %[[V]] {causal} : (tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>, tensor<?x4x?x8xf32>) -> tensor<?x4x?x8xf32>
# POSITIONS-NEXT:  return %[[Y]]

# PINNED-LABEL: func.func @main(%arg0: tensor<1x4x?x8xf32>, %arg1: tensor<1x4x?x8xf32>, %arg2: tensor<1x4x?x8xf32>, %arg3: tensor<1x4x?x8xf32>, %arg4: tensor<1x4x?x8xf32>) -> tensor<1x4x?x8xf32>
# PINNED:       sits.attention %arg0, %{{.*}}, %{{.*}} {causal} : (tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>, tensor<1x4x?x8xf32>) -> tensor<1x4x?x8xf32>

# OFFBYONE-LABEL: func.func @main
# OFFBYONE:       arith.cmpi slt
# OFFBYONE:       %[[MASK:.*]] = arith.select
# OFFBYONE-NOT:   sits.softmax
# OFFBYONE:       sits.attention %arg0, %{{.*}}, %{{.*}} mask(%[[MASK]]) : ({{.*}}, tensor<1x1x?x?xf32>) -> tensor<?x4x?x8xf32>

import sys

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

path, variant = sys.argv[1], sys.argv[2]
D = 8


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def attention(mask_nodes, mask_inits, mask):
    """Transpose(K) → MatMul(Q, Kᵀ) → Mul 1/√D → Add mask → Softmax → MatMul V."""
    nodes = mask_nodes + [
        h.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2], name="k_t"),
        h.make_node("MatMul", ["q", "kt"], ["scores"], name="qk"),
        h.make_node("Mul", ["scores", "scale"], ["scaled"], name="scale"),
        h.make_node("Add", ["scaled", mask], ["masked"], name="mask"),
        h.make_node("Softmax", ["masked"], ["probs"], axis=-1, name="softmax"),
        h.make_node("MatMul", ["probs", "v"], ["y"], name="pv")]
    inits = mask_inits + [const("scale", np.array(1 / np.sqrt(D), np.float32))]
    return nodes, inits


def float_input(name, shape):
    return h.make_tensor_value_info(name, TP.FLOAT, shape)


if variant in ("constant", "top-left"):
    tq, tk = (6, 6) if variant == "constant" else (2, 6)
    mask = np.triu(np.full((1, 1, tq, tk), -np.inf, np.float32), 1)
    nodes, inits = attention([], [const("causal_mask", mask)], "causal_mask")
    inputs = [float_input("q", [1, 2, tq, D]), float_input("k", [1, 2, tk, D]),
              float_input("v", [1, 2, tk, D])]
    outputs = [float_input("y", [1, 2, tq, D])]
elif variant == "trilu":
    # [seq, seq] from Q's run-time shape, as torch exports a causal mask
    # for a dynamic sequence length.
    mask_nodes = [h.make_node("Shape", ["q"], ["q_shape"], name="q_shape"),
                  h.make_node("Gather", ["q_shape", "two"], ["seq"], axis=0, name="seq"),
                  h.make_node("Unsqueeze", ["seq", "axis0"], ["seq1"], name="seq1"),
                  h.make_node("Concat", ["seq1", "seq1"], ["mask_shape"], axis=0, name="mask_shape"),
                  h.make_node("ConstantOfShape", ["mask_shape"], ["ninf"], name="ninf",
                              value=const("", np.array([-np.inf], np.float32))),
                  h.make_node("Trilu", ["ninf", "one"], ["causal_mask"], upper=1, name="triu")]
    mask_inits = [const("two", np.array(2, np.int64)), const("axis0", np.array([0], np.int64)),
                  const("one", np.array(1, np.int64))]
    nodes, inits = attention(mask_nodes, mask_inits, "causal_mask")
    inputs = [float_input(x, [1, 2, "seq", D]) for x in "qkv"]
    outputs = [float_input("y", [1, 2, "seq", D])]
else:
    # A decoder step over a KV cache as transformers exports it (eager
    # attention, no attention-mask input): query [batch, 4, seq, D], past K/V
    # [batch, 4, past, D], new K/V [batch, 4, seq, D].
    n = h.make_node
    compare = "Less" if variant == "off-by-one" else "LessOrEqual"
    mask_nodes = [
        n("Concat", ["past_k", "k_new"], ["k"], axis=2, name="k_cache"),
        n("Concat", ["past_v", "v_new"], ["v"], axis=2, name="v_cache"),
        n("Shape", ["past_k"], ["pk_shape"], name="pk_shape"),
        n("Gather", ["pk_shape", "two"], ["past_len"], name="past_len"),
        n("Shape", ["q"], ["q_shape"], name="q_shape"),
        n("Gather", ["q_shape", "two"], ["seq_len"], name="seq_len"),
        n("Add", ["past_len", "seq_len"], ["total"], name="total"),
        n("Range", ["zero", "seq_len", "one"], ["q_range"], name="q_range"),
        n("Range", ["zero", "total", "one"], ["k_pos"], name="k_pos"),
        n("Add", ["q_range", "past_len"], ["q_pos"], name="q_pos"),
        n("Unsqueeze", ["q_pos", "axes_q"], ["q4"], name="q4"),
        n("Unsqueeze", ["k_pos", "axes_k"], ["k4"], name="k4"),
        n(compare, ["k4", "q4"], ["allowed"], name="allowed"),
        n("Where", ["allowed", "fzero", "fmin"], ["causal_mask"], name="causal_mask")]
    mask_inits = [const("zero", np.array(0, np.int64)), const("one", np.array(1, np.int64)),
                  const("two", np.array(2, np.int64)),
                  const("axes_q", np.array([0, 1, 3], np.int64)),
                  const("axes_k", np.array([0, 1, 2], np.int64)),
                  const("fzero", np.array(0.0, np.float32)),
                  const("fmin", np.array(np.finfo(np.float32).min, np.float32))]
    nodes, inits = attention(mask_nodes, mask_inits, "causal_mask")
    inputs = [float_input("q", ["batch", 4, "seq", D])]
    for x in "kv":
        inputs += [float_input(f"past_{x}", ["batch", 4, "past", D]),
                   float_input(f"{x}_new", ["batch", 4, "seq", D])]
    outputs = [float_input("y", ["batch", 4, "seq", D])]

graph = h.make_graph(nodes, "causal_" + variant.replace("-", "_"), inputs, outputs, inits)
model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], ir_version=8)
onnx.checker.check_model(model)
onnx.save(model, path)
