// A weight-only-quantized Llama MLP (f16 activations, batch 8): INT4 weights
// packed two per byte with one scale and zero point per 128 elements of K
// (GPTQ layout [K, N] for the gate, ONNX MatMulNBits layout [N, K] for the
// up projection), run by sits.qmatmul; and an INT8 down projection with
// per-output-channel scales, dequantized with sits.dequantize and multiplied
// by sits.matmul.
//
// RUN: sits-opt %s -o %t.mlir
// RUN: sits-opt %t.mlir -o %t.2.mlir
// RUN: diff %t.mlir %t.2.mlir
// RUN: sits-opt %s --mlir-print-op-generic | sits-opt -o %t.generic.mlir
// RUN: diff %t.mlir %t.generic.mlir
// RUN: sits-opt %s --emit-bytecode | sits-opt -o %t.bytecode.mlir
// RUN: diff %t.mlir %t.bytecode.mlir
// RUN: FileCheck %s --input-file=%t.mlir
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-fuse-epilogue))' | FileCheck %s --check-prefix=FUSED

#int4_k = #sits.packed<storage = i8, axis = 0>
#int4_n = #sits.packed<storage = i8, axis = 1>
module attributes {sits.target = #sits.target<"sm_90">} {
  func.func @woq_mlp(%x: tensor<8x4096xf16>,
                     %w_gate: tensor<4096x11008xi4, #int4_k>, %s_gate: tensor<32x11008xf16>, %z_gate: tensor<32x11008xi4>,
                     %w_up: tensor<11008x4096xui4, #int4_n>, %s_up: tensor<11008x32xf16>, %z_up: tensor<11008x32xui4, #int4_n>,
                     %w_down_q: tensor<4096x11008xi8>, %s_down: tensor<4096xf16>, %z_down: tensor<4096xi8>,
                     %b_down: tensor<4096xf16>) -> tensor<8x4096xf16> {
    %gate = sits.qmatmul %x, %w_gate, %s_gate zero_point(%z_gate) {axis = 0 : i64, block_size = 128 : i64}
        : (tensor<8x4096xf16>, tensor<4096x11008xi4, #int4_k>, tensor<32x11008xf16>, tensor<32x11008xi4>)
        -> tensor<8x11008xf16>
    %gate_act = sits.activation <silu> %gate : tensor<8x11008xf16>
    %up = sits.qmatmul %x, %w_up, %s_up zero_point(%z_up) {axis = 1 : i64, block_size = 128 : i64, transpose_weight}
        : (tensor<8x4096xf16>, tensor<11008x4096xui4, #int4_n>, tensor<11008x32xf16>, tensor<11008x32xui4, #int4_n>)
        -> tensor<8x11008xf16>
    %h = arith.mulf %gate_act, %up : tensor<8x11008xf16>
    %w_down = sits.dequantize %w_down_q, %s_down, %z_down {axis = 0 : i64}
        : (tensor<4096x11008xi8>, tensor<4096xf16>, tensor<4096xi8>) -> tensor<4096x11008xf16>
    %y = sits.matmul %h, %w_down bias(%b_down) {transpose_rhs}
        : (tensor<8x11008xf16>, tensor<4096x11008xf16>, tensor<4096xf16>) -> tensor<8x4096xf16>
    return %y : tensor<8x4096xf16>
  }
}

// CHECK: module attributes {sits.target = #sits.target<"sm_90">}
// CHECK-LABEL: func.func @woq_mlp
//  CHECK-SAME: (%[[X:[^:]+]]: tensor<8x4096xf16>,
//  CHECK-SAME: %[[WG:[^:]+]]: tensor<4096x11008xi4, #sits.packed<storage = i8, axis = 0>>, %[[SG:[^:]+]]: tensor<32x11008xf16>, %[[ZG:[^:]+]]: tensor<32x11008xi4>,
//  CHECK-SAME: %[[WU:[^:]+]]: tensor<11008x4096xui4, #sits.packed<storage = i8, axis = 1>>, %[[SU:[^:]+]]: tensor<11008x32xf16>, %[[ZU:[^:]+]]: tensor<11008x32xui4, #sits.packed<storage = i8, axis = 1>>,
//  CHECK-SAME: %[[WDQ:[^:]+]]: tensor<4096x11008xi8>, %[[SD:[^:]+]]: tensor<4096xf16>, %[[ZD:[^:]+]]: tensor<4096xi8>,
//  CHECK-SAME: %[[BD:[^:]+]]: tensor<4096xf16>)
//       CHECK:   %[[GATE:.+]] = sits.qmatmul %[[X]], %[[WG]], %[[SG]] zero_point(%[[ZG]]) {axis = 0 : i64, block_size = 128 : i64}
//  CHECK-SAME:     -> tensor<8x11008xf16>
//       CHECK:   %[[GA:.+]] = sits.activation <silu> %[[GATE]]
//       CHECK:   %[[UP:.+]] = sits.qmatmul %[[X]], %[[WU]], %[[SU]] zero_point(%[[ZU]]) {axis = 1 : i64, block_size = 128 : i64, transpose_weight}
//  CHECK-SAME:     -> tensor<8x11008xf16>
//       CHECK:   %[[H:.+]] = arith.mulf %[[GA]], %[[UP]] : tensor<8x11008xf16>
//       CHECK:   %[[WD:.+]] = sits.dequantize %[[WDQ]], %[[SD]], %[[ZD]] {axis = 0 : i64}
//  CHECK-SAME:     : (tensor<4096x11008xi8>, tensor<4096xf16>, tensor<4096xi8>) -> tensor<4096x11008xf16>
//       CHECK:   %[[Y:.+]] = sits.matmul %[[H]], %[[WD]] bias(%[[BD]]) {transpose_rhs}
//  CHECK-SAME:     -> tensor<8x4096xf16>
//       CHECK:   return %[[Y]]

// The SiLU fuses into the quantized gate projection.
// FUSED-LABEL: func.func @woq_mlp
//       FUSED:   %[[GATE:.+]] = sits.qmatmul {{.+}} {activation = #sits.activation<silu>, axis = 0 : i64, block_size = 128 : i64}
//   FUSED-NOT:   sits.activation
//       FUSED:   arith.mulf %[[GATE]],
