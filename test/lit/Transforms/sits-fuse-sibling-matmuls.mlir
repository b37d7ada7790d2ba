// RUN: sits-opt %s --split-input-file --sits-fuse-sibling-matmuls | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-fuse-sibling-matmuls --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: sits-opt %s --split-input-file --sits-fuse-sibling-matmuls=defer-join=true | FileCheck %s --check-prefix=DEFER

// Q, K and V of one input: one matmul by the weights side by side (each
// row of the new constant is the three rows one after the other), and each
// result its column range.

// CHECK-LABEL: func.func @qkv
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x4xf32>)
//       CHECK:   %[[W:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00, -1.000000e+00, -2.000000e+00, 5.000000e-01, 1.500000e+00], [5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00, -3.000000e+00, -4.000000e+00, 2.500000e+00, 3.500000e+00], [9.000000e+00, 1.000000e+01, 1.100000e+01, 1.200000e+01, -5.000000e+00, -6.000000e+00, 4.500000e+00, 5.500000e+00], [1.300000e+01, 1.400000e+01, 1.500000e+01, 1.600000e+01, -7.000000e+00, -8.000000e+00, 6.500000e+00, 7.500000e+00]]> : tensor<4x8xf32>
//       CHECK:   %[[Y:.+]] = sits.matmul %[[X]], %[[W]] : (tensor<?x4xf32>, tensor<4x8xf32>) -> tensor<?x8xf32>
//       CHECK:   %[[B:.+]] = tensor.dim %[[Y]], %{{.+}} : tensor<?x8xf32>
//       CHECK:   %[[Q:.+]] = tensor.extract_slice %[[Y]][0, 0] [%[[B]], 4] [1, 1] : tensor<?x8xf32> to tensor<?x4xf32>
//       CHECK:   %[[K:.+]] = tensor.extract_slice %[[Y]][0, 4] [%[[B]], 2] [1, 1] : tensor<?x8xf32> to tensor<?x2xf32>
//       CHECK:   %[[V:.+]] = tensor.extract_slice %[[Y]][0, 6] [%[[B]], 2] [1, 1] : tensor<?x8xf32> to tensor<?x2xf32>
//   CHECK-NOT:   sits.matmul
//       CHECK:   return %[[Q]], %[[K]], %[[V]]
func.func @qkv(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x2xf32>, tensor<?x2xf32>) {
  %wq = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0]]> : tensor<4x4xf32>
  %wk = arith.constant dense<[[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0], [-7.0, -8.0]]> : tensor<4x2xf32>
  %wv = arith.constant dense<[[0.5, 1.5], [2.5, 3.5], [4.5, 5.5], [6.5, 7.5]]> : tensor<4x2xf32>
  %q = sits.matmul %x, %wq : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %k = sits.matmul %x, %wk : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %v = sits.matmul %x, %wv : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  return %q, %k, %v : tensor<?x4xf32>, tensor<?x2xf32>, tensor<?x2xf32>
}

// STATS: 3 num-fused

// With defer-join, no joined copy: the weights are joined by a
// tensor.concat of their constants, which the weight packing reads.
// DEFER-LABEL: func.func @qkv
//       DEFER:   %[[WQ:.+]] = arith.constant {{.+}} : tensor<4x4xf32>
//       DEFER:   %[[WK:.+]] = arith.constant {{.+}} : tensor<4x2xf32>
//       DEFER:   %[[WV:.+]] = arith.constant {{.+}} : tensor<4x2xf32>
//       DEFER:   %[[W:.+]] = tensor.concat dim(1) %[[WQ]], %[[WK]], %[[WV]] : (tensor<4x4xf32>, tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x8xf32>
//       DEFER:   sits.matmul %{{.+}}, %[[W]] : (tensor<?x4xf32>, tensor<4x8xf32>) -> tensor<?x8xf32>
//   DEFER-NOT:   sits.matmul

// -----

// A sibling's constant defined after the first sibling moves up to the
// join, which is where the first one was.
// CHECK-LABEL: func.func @late_constant
//       CHECK:   arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00, 5.000000e+00], [3.000000e+00, 4.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// DEFER-LABEL: func.func @late_constant
//       DEFER:   %[[A:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
//       DEFER:   %[[B:.+]] = arith.constant dense<{{\[}}[5.000000e+00], [6.000000e+00]]> : tensor<2x1xf32>
//       DEFER:   %[[W:.+]] = tensor.concat dim(1) %[[A]], %[[B]]
//       DEFER:   sits.matmul %{{.+}}, %[[W]]
func.func @late_constant(%x: tensor<1x2xf32>) -> (tensor<1x2xf32>, tensor<1x1xf32>) {
  %wa = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %a = sits.matmul %x, %wa : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  %wb = arith.constant dense<[[5.0], [6.0]]> : tensor<2x1xf32>
  %b = sits.matmul %x, %wb : (tensor<1x2xf32>, tensor<2x1xf32>) -> tensor<1x1xf32>
  return %a, %b : tensor<1x2xf32>, tensor<1x1xf32>
}

// STATS: 2 num-fused

// -----

// Transposed weights ([N, K]) join along their rows; biases join too, a
// splat (a zero bias) as its values. The rank-3 input keeps its batch
// dimensions in the slices.

// CHECK-LABEL: func.func @transposed_with_bias
//       CHECK:   %[[W:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00], [5.000000e+00, 6.000000e+00], [7.000000e+00, 8.000000e+00]]> : tensor<4x2xf32>
//       CHECK:   %[[BIAS:.+]] = arith.constant dense<[1.000000e-01, 2.000000e-01, 0.000000e+00, 0.000000e+00]> : tensor<4xf32>
//       CHECK:   %[[Y:.+]] = sits.matmul %{{.+}}, %[[W]] bias(%[[BIAS]]) {transpose_rhs} : (tensor<2x5x2xf32>, tensor<4x2xf32>, tensor<4xf32>) -> tensor<2x5x4xf32>
//       CHECK:   tensor.extract_slice %[[Y]][0, 0, 0] [2, 5, 2] [1, 1, 1] : tensor<2x5x4xf32> to tensor<2x5x2xf32>
//       CHECK:   tensor.extract_slice %[[Y]][0, 0, 2] [2, 5, 2] [1, 1, 1] : tensor<2x5x4xf32> to tensor<2x5x2xf32>
// Transposed weights are joined at once with defer-join too.
// DEFER-LABEL: func.func @transposed_with_bias
//       DEFER:   %[[W:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00], [5.000000e+00, 6.000000e+00], [7.000000e+00, 8.000000e+00]]> : tensor<4x2xf32>
//       DEFER:   sits.matmul %{{.+}}, %[[W]] bias(%{{.+}}) {transpose_rhs}
func.func @transposed_with_bias(%x: tensor<2x5x2xf32>) -> (tensor<2x5x2xf32>, tensor<2x5x2xf32>) {
  %wa = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %ba = arith.constant dense<[0.1, 0.2]> : tensor<2xf32>
  %wb = arith.constant dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf32>
  %bb = arith.constant dense<0.0> : tensor<2xf32>
  %a = sits.matmul %x, %wa bias(%ba) {transpose_rhs} : (tensor<2x5x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x5x2xf32>
  %b = sits.matmul %x, %wb bias(%bb) {transpose_rhs} : (tensor<2x5x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<2x5x2xf32>
  return %a, %b : tensor<2x5x2xf32>, tensor<2x5x2xf32>
}

// STATS: 2 num-fused

// -----

// What does not join: a weight used twice, a weight that is not a
// constant, a different epilogue, a bias on one side only, another input.
// Two of the five still pair up (%a and %e).

// CHECK-LABEL: func.func @not_siblings
//       CHECK:   %[[AE:.+]] = sits.matmul %[[X:[^,]+]], %{{.+}} : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
//       CHECK:   sits.matmul %[[X]], %[[SHARED:.+]] : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
//       CHECK:   sits.matmul %[[X]], %{{.+}} : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
//       CHECK:   sits.matmul %[[X]], %{{.+}} {activation = #sits.activation<relu>}
//       CHECK:   sits.matmul %[[X]], %{{.+}} bias(%{{.+}})
//       CHECK:   sits.matmul %{{.+}}, %[[SHARED]]
func.func @not_siblings(%x: tensor<1x2xf32>, %y: tensor<1x2xf32>, %w: tensor<2x2xf32>)
    -> (tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>) {
  %c1 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %c2 = arith.constant dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf32>
  %c3 = arith.constant dense<[[9.0, 1.0], [2.0, 3.0]]> : tensor<2x2xf32>
  %c4 = arith.constant dense<[[4.0, 5.0], [6.0, 7.0]]> : tensor<2x2xf32>
  %c5 = arith.constant dense<[[8.0, 9.0], [1.0, 2.0]]> : tensor<2x2xf32>
  %bias = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %a = sits.matmul %x, %c1 : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  %shared = sits.matmul %x, %c2 : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  %arg = sits.matmul %x, %w : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  %relu = sits.matmul %x, %c3 {activation = #sits.activation<relu>} : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  %biased = sits.matmul %x, %c4 bias(%bias) : (tensor<1x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<1x2xf32>
  %other = sits.matmul %y, %c2 : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  %e = sits.matmul %x, %c5 : (tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<1x2xf32>
  return %a, %shared, %arg, %relu, %biased, %other, %e
      : tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>
}

// STATS: 2 num-fused
