// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.matmul: plain, bias, epilogue, transposes, batch
// broadcasting and every float element type.

func.func @plain(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}
// CHECK-LABEL: func.func @plain
//  CHECK-SAME: (%[[A:.+]]: tensor<8x16xf32>, %[[B:.+]]: tensor<16x32xf32>)
//       CHECK:   %[[R:.+]] = sits.matmul %[[A]], %[[B]] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
//       CHECK:   return %[[R]]

// -----

// The default activation `none` is elided by the printer.
func.func @default_activation(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %0 = sits.matmul %a, %b {activation = #sits.activation<none>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}
// CHECK-LABEL: func.func @default_activation
//       CHECK:   sits.matmul
//   CHECK-NOT:   activation
//  CHECK-SAME:   : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>

// -----

func.func @bias_gelu(%x: tensor<8x1024xf32>, %w: tensor<1024x4096xf32>, %b: tensor<4096xf32>) -> tensor<8x4096xf32> {
  %h = sits.matmul %x, %w bias(%b) {activation = #sits.activation<gelu>}
      : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
  return %h : tensor<8x4096xf32>
}
// CHECK-LABEL: func.func @bias_gelu
//  CHECK-SAME: (%[[X:.+]]: tensor<8x1024xf32>, %[[W:.+]]: tensor<1024x4096xf32>, %[[B:.+]]: tensor<4096xf32>)
//       CHECK:   %[[H:.+]] = sits.matmul %[[X]], %[[W]] bias(%[[B]]) {activation = #sits.activation<gelu>}
//  CHECK-SAME:     : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
//       CHECK:   return %[[H]]

// -----

// q @ k^T of a GPT-2 head group.
func.func @transpose_rhs(%q: tensor<1x12x128x64xf32>, %k: tensor<1x12x128x64xf32>) -> tensor<1x12x128x128xf32> {
  %s = sits.matmul %q, %k {transpose_rhs}
      : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x128x128xf32>
  return %s : tensor<1x12x128x128xf32>
}
// CHECK-LABEL: func.func @transpose_rhs
//  CHECK-SAME: (%[[Q:.+]]: tensor<1x12x128x64xf32>, %[[K:.+]]: tensor<1x12x128x64xf32>)
//       CHECK:   sits.matmul %[[Q]], %[[K]] {transpose_rhs}
//   CHECK-NOT:   transpose_lhs
//  CHECK-SAME:     -> tensor<1x12x128x128xf32>

// -----

// lhs^T: [K, M] -> M = 8, K = 16.
func.func @transpose_lhs(%a: tensor<16x8xf16>, %b: tensor<16x32xf16>) -> tensor<8x32xf16> {
  %0 = sits.matmul %a, %b {transpose_lhs} : (tensor<16x8xf16>, tensor<16x32xf16>) -> tensor<8x32xf16>
  return %0 : tensor<8x32xf16>
}
// CHECK-LABEL: func.func @transpose_lhs
//  CHECK-SAME: (%[[A:.+]]: tensor<16x8xf16>, %[[B:.+]]: tensor<16x32xf16>)
//       CHECK:   sits.matmul %[[A]], %[[B]] {transpose_lhs}
//  CHECK-SAME:     : (tensor<16x8xf16>, tensor<16x32xf16>) -> tensor<8x32xf16>

// -----

func.func @transpose_both(%a: tensor<16x8xbf16>, %b: tensor<32x16xbf16>, %bias: tensor<32xbf16>) -> tensor<8x32xbf16> {
  %0 = sits.matmul %a, %b bias(%bias) {transpose_lhs, transpose_rhs, activation = #sits.activation<silu>}
      : (tensor<16x8xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>
  return %0 : tensor<8x32xbf16>
}
// CHECK-LABEL: func.func @transpose_both
//  CHECK-SAME: (%[[A:.+]]: tensor<16x8xbf16>, %[[B:.+]]: tensor<32x16xbf16>, %[[BIAS:.+]]: tensor<32xbf16>)
//       CHECK:   sits.matmul %[[A]], %[[B]] bias(%[[BIAS]])
//  CHECK-SAME:     activation = #sits.activation<silu>
//  CHECK-SAME:     transpose_lhs
//  CHECK-SAME:     transpose_rhs
//  CHECK-SAME:     : (tensor<16x8xbf16>, tensor<32x16xbf16>, tensor<32xbf16>) -> tensor<8x32xbf16>

// -----

// A rank-2 weight multiplies every batch of a rank-3 activation; batch
// dimensions of extent 1 broadcast.
func.func @batch_broadcast(%x: tensor<4x128x768xf64>, %w: tensor<768x768xf64>,
                           %a: tensor<1x3x8x16xf64>, %b: tensor<5x1x16x4xf64>)
    -> (tensor<4x128x768xf64>, tensor<5x3x8x4xf64>) {
  %0 = sits.matmul %x, %w : (tensor<4x128x768xf64>, tensor<768x768xf64>) -> tensor<4x128x768xf64>
  %1 = sits.matmul %a, %b : (tensor<1x3x8x16xf64>, tensor<5x1x16x4xf64>) -> tensor<5x3x8x4xf64>
  return %0, %1 : tensor<4x128x768xf64>, tensor<5x3x8x4xf64>
}
// CHECK-LABEL: func.func @batch_broadcast
//  CHECK-SAME: (%[[X:.+]]: tensor<4x128x768xf64>, %[[W:.+]]: tensor<768x768xf64>, %[[A:.+]]: tensor<1x3x8x16xf64>, %[[B:.+]]: tensor<5x1x16x4xf64>)
//   CHECK-DAG:   %[[R0:.+]] = sits.matmul %[[X]], %[[W]] : (tensor<4x128x768xf64>, tensor<768x768xf64>) -> tensor<4x128x768xf64>
//   CHECK-DAG:   %[[R1:.+]] = sits.matmul %[[A]], %[[B]] : (tensor<1x3x8x16xf64>, tensor<5x1x16x4xf64>) -> tensor<5x3x8x4xf64>
//       CHECK:   return %[[R0]], %[[R1]]

// -----

// Every activation kind prints back under its own name.
func.func @all_activations(%a: tensor<2x4xf32>, %b: tensor<4x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = sits.matmul %a, %b {activation = #sits.activation<relu>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = sits.matmul %a, %b {activation = #sits.activation<gelu>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %2 = sits.matmul %a, %b {activation = #sits.activation<gelu_tanh>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %3 = sits.matmul %a, %b {activation = #sits.activation<silu>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %4 = sits.matmul %a, %b {activation = #sits.activation<sigmoid>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %5 = sits.matmul %a, %b {activation = #sits.activation<tanh>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
// CHECK-LABEL: func.func @all_activations
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<relu>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<gelu>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<gelu_tanh>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<silu>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<sigmoid>}
//       CHECK:   sits.matmul {{.+}} {activation = #sits.activation<tanh>}

// -----

// fp16 weights of an f32 model: the result has the lhs's type.
func.func @narrow_rhs(%a: tensor<?x16xf32>, %b: tensor<16x32xf16>) -> tensor<?x32xf32> {
  %0 = sits.matmul %a, %b : (tensor<?x16xf32>, tensor<16x32xf16>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}
// CHECK-LABEL: func.func @narrow_rhs
//       CHECK:   sits.matmul
//  CHECK-SAME:     : (tensor<?x16xf32>, tensor<16x32xf16>) -> tensor<?x32xf32>
