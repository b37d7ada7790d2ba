// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-fuse-epilogue))' | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-fuse-epilogue | FileCheck %s

// sits-fuse-epilogue folds a sits.activation into the epilogue of the
// contraction (sits.matmul, sits.conv, sits.qmatmul) that produces its input,
// when that contraction has no activation yet and the activation is its only
// user.

// CHECK-LABEL: func.func @matmul_gelu
//  CHECK-SAME: (%[[X:.+]]: tensor<8x1024xf32>, %[[W:.+]]: tensor<1024x4096xf32>, %[[B:.+]]: tensor<4096xf32>)
//       CHECK:   %[[M:.+]] = sits.matmul %[[X]], %[[W]] bias(%[[B]]) {activation = #sits.activation<gelu>}
//  CHECK-SAME:     : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[M]]
func.func @matmul_gelu(%x: tensor<8x1024xf32>, %w: tensor<1024x4096xf32>, %b: tensor<4096xf32>) -> tensor<8x4096xf32> {
  %0 = sits.matmul %x, %w bias(%b) : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
  %1 = sits.activation <gelu> %0 : tensor<8x4096xf32>
  return %1 : tensor<8x4096xf32>
}

// -----

// Other attributes of the contraction are kept.
// CHECK-LABEL: func.func @matmul_transposed_silu
//  CHECK-SAME: (%[[A:.+]]: tensor<2x16x64xbf16>, %[[B:.+]]: tensor<128x64xbf16>)
//       CHECK:   %[[M:.+]] = sits.matmul %[[A]], %[[B]] {activation = #sits.activation<silu>, transpose_rhs}
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[M]]
func.func @matmul_transposed_silu(%a: tensor<2x16x64xbf16>, %b: tensor<128x64xbf16>) -> tensor<2x16x128xbf16> {
  %0 = sits.matmul %a, %b {transpose_rhs} : (tensor<2x16x64xbf16>, tensor<128x64xbf16>) -> tensor<2x16x128xbf16>
  %1 = sits.activation <silu> %0 : tensor<2x16x128xbf16>
  return %1 : tensor<2x16x128xbf16>
}

// -----

// CHECK-LABEL: func.func @conv_relu
//  CHECK-SAME: (%[[X:.+]]: tensor<1x3x112x112xf32>, %[[W:.+]]: tensor<64x3x7x7xf32>, %[[B:.+]]: tensor<64xf32>)
//       CHECK:   %[[C:.+]] = sits.conv %[[X]], %[[W]] bias(%[[B]])
//  CHECK-SAME:     {activation = #sits.activation<relu>, padding = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>}
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[C]]
func.func @conv_relu(%x: tensor<1x3x112x112xf32>, %w: tensor<64x3x7x7xf32>, %b: tensor<64xf32>) -> tensor<1x64x56x56xf32> {
  %0 = sits.conv %x, %w bias(%b) {strides = array<i64: 2, 2>, padding = array<i64: 3, 3, 3, 3>}
      : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  %1 = sits.activation <relu> %0 : tensor<1x64x56x56xf32>
  return %1 : tensor<1x64x56x56xf32>
}

// -----

// CHECK-LABEL: func.func @qmatmul_silu
//  CHECK-SAME: (%[[X:.+]]: tensor<8x4096xf16>, %[[W:.+]]: tensor<4096x11008xi4, #sits.packed<storage = i8, axis = 0>>, %[[S:.+]]: tensor<32x11008xf16>)
//       CHECK:   %[[Q:.+]] = sits.qmatmul %[[X]], %[[W]], %[[S]] {activation = #sits.activation<silu>, axis = 0 : i64, block_size = 128 : i64}
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[Q]]
func.func @qmatmul_silu(%x: tensor<8x4096xf16>, %w: tensor<4096x11008xi4, #sits.packed<storage = i8, axis = 0>>,
                        %s: tensor<32x11008xf16>) -> tensor<8x11008xf16> {
  %0 = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 128 : i64}
      : (tensor<8x4096xf16>, tensor<4096x11008xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32x11008xf16>) -> tensor<8x11008xf16>
  %1 = sits.activation <silu> %0 : tensor<8x11008xf16>
  return %1 : tensor<8x11008xf16>
}

// -----

// Every activation kind other than `none` fuses.
// CHECK-LABEL: func.func @all_kinds
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<relu>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<gelu>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<gelu_tanh>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<silu>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<sigmoid>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<tanh>}
//   CHECK-NOT:   sits.activation
//       CHECK:   return
func.func @all_kinds(%a: tensor<2x4xf32>, %b: tensor<4x4xf32>)
    -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = sits.matmul %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = sits.activation <relu> %0 : tensor<2x4xf32>
  %2 = sits.matmul %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %3 = sits.activation <gelu> %2 : tensor<2x4xf32>
  %4 = sits.matmul %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %5 = sits.activation <gelu_tanh> %4 : tensor<2x4xf32>
  %6 = sits.matmul %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %7 = sits.activation <silu> %6 : tensor<2x4xf32>
  %8 = sits.matmul %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %9 = sits.activation <sigmoid> %8 : tensor<2x4xf32>
  %10 = sits.matmul %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %11 = sits.activation <tanh> %10 : tensor<2x4xf32>
  return %1, %3, %5, %7, %9, %11 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// Fusion inside nested regions: the pass walks the whole function.
// CHECK-LABEL: func.func @nested_region
//       CHECK:   scf.if
//       CHECK:     %[[M:.+]] = sits.matmul {{.+}} {activation = #sits.activation<relu>}
//   CHECK-NOT:     sits.activation
//       CHECK:     scf.yield %[[M]]
func.func @nested_region(%c: i1, %a: tensor<2x4xf32>, %b: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %r = scf.if %c -> tensor<2x4xf32> {
    %0 = sits.matmul %a, %b : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %1 = sits.activation <relu> %0 : tensor<2x4xf32>
    scf.yield %1 : tensor<2x4xf32>
  } else {
    scf.yield %a : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// Negative: the contraction's result has another user (the residual add
// needs the value before the activation).
// CHECK-LABEL: func.func @other_users
//  CHECK-SAME: (%[[X:.+]]: tensor<8x64xf32>, %[[W:.+]]: tensor<64x64xf32>)
//       CHECK:   %[[M:.+]] = sits.matmul %[[X]], %[[W]] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
//       CHECK:   %[[A:.+]] = sits.activation <relu> %[[M]]
//       CHECK:   %[[S:.+]] = arith.addf %[[A]], %[[M]]
//       CHECK:   return %[[S]]
func.func @other_users(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %0 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %1 = sits.activation <relu> %0 : tensor<8x64xf32>
  %2 = arith.addf %1, %0 : tensor<8x64xf32>
  return %2 : tensor<8x64xf32>
}

// -----

// Negative: two activations of the same contraction; neither may fuse.
// CHECK-LABEL: func.func @two_activations
//       CHECK:   %[[M:.+]] = sits.matmul
//   CHECK-NOT:     activation =
//  CHECK-SAME:     -> tensor<8x64xf32>
//   CHECK-DAG:   %[[A:.+]] = sits.activation <relu> %[[M]]
//   CHECK-DAG:   %[[B:.+]] = sits.activation <gelu> %[[M]]
//       CHECK:   return %[[A]], %[[B]]
func.func @two_activations(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %0 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %1 = sits.activation <relu> %0 : tensor<8x64xf32>
  %2 = sits.activation <gelu> %0 : tensor<8x64xf32>
  return %1, %2 : tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// Negative: the producer already applies an activation.
// CHECK-LABEL: func.func @producer_has_activation
//       CHECK:   %[[C:.+]] = sits.conv {{.+}} {activation = #sits.activation<gelu>}
//       CHECK:   %[[A:.+]] = sits.activation <relu> %[[C]]
//       CHECK:   return %[[A]]
func.func @producer_has_activation(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32> {
  %0 = sits.conv %x, %w {activation = #sits.activation<gelu>} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %1 = sits.activation <relu> %0 : tensor<1x8x6x6xf32>
  return %1 : tensor<1x8x6x6xf32>
}

// -----

// Negative: activations not fed by a contraction (a block argument,
// sits.layer_norm, sits.attention, arith).
// CHECK-LABEL: func.func @not_a_contraction
//  CHECK-SAME: (%[[X:.+]]: tensor<1x4x8x16xf32>, %[[G:.+]]: tensor<16xf32>)
//       CHECK:   %[[A0:.+]] = sits.activation <relu> %[[X]]
//       CHECK:   %[[N:.+]] = sits.layer_norm
//       CHECK:   %[[A1:.+]] = sits.activation <gelu> %[[N]]
//       CHECK:   %[[T:.+]] = sits.attention
//       CHECK:   %[[A2:.+]] = sits.activation <silu> %[[T]]
//       CHECK:   %[[S:.+]] = arith.addf
//       CHECK:   %[[A3:.+]] = sits.activation <tanh> %[[S]]
//       CHECK:   return %[[A0]], %[[A1]], %[[A2]], %[[A3]]
func.func @not_a_contraction(%x: tensor<1x4x8x16xf32>, %g: tensor<16xf32>)
    -> (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) {
  %0 = sits.activation <relu> %x : tensor<1x4x8x16xf32>
  %1 = sits.layer_norm %x, %g : (tensor<1x4x8x16xf32>, tensor<16xf32>) -> tensor<1x4x8x16xf32>
  %2 = sits.activation <gelu> %1 : tensor<1x4x8x16xf32>
  %3 = sits.attention %x, %x, %x {causal} : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  %4 = sits.activation <silu> %3 : tensor<1x4x8x16xf32>
  %5 = arith.addf %x, %x : tensor<1x4x8x16xf32>
  %6 = sits.activation <tanh> %5 : tensor<1x4x8x16xf32>
  return %0, %2, %4, %6 : tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>
}

// -----

// Chained activations: only the first fuses; the second then reads a
// contraction that already has an activation, and stays.
// CHECK-LABEL: func.func @chained
//       CHECK:   %[[M:.+]] = sits.matmul {{.+}} {activation = #sits.activation<relu>}
//       CHECK:   %[[A:.+]] = sits.activation <tanh> %[[M]]
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[A]]
func.func @chained(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %0 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %1 = sits.activation <relu> %0 : tensor<8x64xf32>
  %2 = sits.activation <tanh> %1 : tensor<8x64xf32>
  return %2 : tensor<8x64xf32>
}

// -----

// Negative: the identity is not fused (canonicalization folds it away).
// CHECK-LABEL: func.func @identity
//       CHECK:   %[[M:.+]] = sits.matmul
//   CHECK-NOT:     activation =
//  CHECK-SAME:     -> tensor<8x64xf32>
//       CHECK:   %[[A:.+]] = sits.activation <none> %[[M]]
//       CHECK:   return %[[A]]
func.func @identity(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %0 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %1 = sits.activation <none> %0 : tensor<8x64xf32>
  return %1 : tensor<8x64xf32>
}
