// RUN: sits-opt %s --split-input-file --sits-prune --verify-diagnostics | FileCheck %s
// RUN: not sits-opt %s --sits-prune=threshold=-1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// NEGATIVE: error: sits-prune: 'threshold' must be a finite number >= 0, got -1

// Every channel contributes nothing: the pass says so and leaves the IR.
// CHECK-LABEL: func.func @all_channels
//       CHECK:   -> tensor<8x2xf32>
func.func @all_channels(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w1 = arith.constant dense<[[1.0, 2.0], [4.0, 5.0]]> : tensor<2x2xf32>
  %w2 = arith.constant dense<0.0> : tensor<2x2xf32>
  // expected-remark @+1 {{all 2 channels contribute nothing; not pruned}}
  %h = sits.matmul %x, %w1 : (tensor<8x2xf32>, tensor<2x2xf32>) -> tensor<8x2xf32>
  %y = sits.matmul %h, %w2 : (tensor<8x2xf32>, tensor<2x2xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// -----

// Head 1 has zero value weights, but the attention's output is returned
// directly: no output projection to shrink.
// CHECK-LABEL: func.func @no_output_projection
//       CHECK:   sits.attention {{.+}} -> tensor<1x2x2x2xf32>
func.func @no_output_projection(%x: tensor<1x2x4xf32>, %q: tensor<1x2x2x2xf32>, %k: tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32> {
  %w = arith.constant dense<[[1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %v = sits.matmul %x, %w : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %vh = linalg.transpose ins(%v4 : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  // expected-remark @+1 {{1 of 2 heads contribute nothing but are not pruned: the output is not read by a recognised output projection}}
  %a = sits.attention %q, %k, %vh : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  return %a : tensor<1x2x2x2xf32>
}

// -----

// Head 1 has zero rows in the output projection, but the queries and keys
// are function arguments: nothing to rewrite them from.
// CHECK-LABEL: func.func @unrecognised_projections
//       CHECK:   sits.attention {{.+}} -> tensor<1x2x2x2xf32>
func.func @unrecognised_projections(%q: tensor<1x2x2x2xf32>, %k: tensor<1x2x2x2xf32>, %v: tensor<1x2x2x2xf32>) -> tensor<1x2x4xf32> {
  // expected-remark @+1 {{1 of 2 heads contribute nothing but are not pruned: the query, key and value are not recognised head projections}}
  %a = sits.attention %q, %k, %v : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %at = linalg.transpose ins(%a : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x2x2xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<[[2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}
