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

// -----

// Head 0 contributes nothing, but the KV cache the keys come from is also
// returned: the attention would have to read a copy of its live heads.
// CHECK-LABEL: func.func @returned_cache
//       CHECK:   sits.attention {{.+}} -> tensor<1x2x1x2xf32>
func.func @returned_cache(%x: tensor<1x1x4xf32>, %pk: tensor<1x2x3x2xf32>, %v: tensor<1x2x3x2xf32>) -> (tensor<1x1x4xf32>, tensor<1x2x4x2xf32>) {
  %w = arith.constant dense<1.0> : tensor<4x8xf32>
  %e = tensor.empty() : tensor<1x2x1x2xf32>
  %qk = sits.matmul %x, %w : (tensor<1x1x4xf32>, tensor<4x8xf32>) -> tensor<1x1x8xf32>
  %q = tensor.extract_slice %qk[0, 0, 0] [1, 1, 4] [1, 1, 1] : tensor<1x1x8xf32> to tensor<1x1x4xf32>
  %k = tensor.extract_slice %qk[0, 0, 4] [1, 1, 4] [1, 1, 1] : tensor<1x1x8xf32> to tensor<1x1x4xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 1, 2, 2] : tensor<1x1x4xf32> into tensor<1x1x2x2xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 1, 2, 2] : tensor<1x1x4xf32> into tensor<1x1x2x2xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x1x2x2xf32>) outs(%e : tensor<1x2x1x2xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x1x2x2xf32>) outs(%e : tensor<1x2x1x2xf32>) permutation = [0, 2, 1, 3]
  %kc = tensor.concat dim(2) %pk, %kh : (tensor<1x2x3x2xf32>, tensor<1x2x1x2xf32>) -> tensor<1x2x4x2xf32>
  %wv = arith.constant dense<[[0.0, 0.0, 1.0, 2.0], [0.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 6.0], [0.0, 0.0, 7.0, 8.0]]> : tensor<4x4xf32>
  %vn = sits.matmul %x, %wv : (tensor<1x1x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4xf32>
  %v4 = tensor.expand_shape %vn [[0], [1], [2, 3]] output_shape [1, 1, 2, 2] : tensor<1x1x4xf32> into tensor<1x1x2x2xf32>
  %vh = linalg.transpose ins(%v4 : tensor<1x1x2x2xf32>) outs(%e : tensor<1x2x1x2xf32>) permutation = [0, 2, 1, 3]
  %vc = tensor.concat dim(2) %v, %vh : (tensor<1x2x3x2xf32>, tensor<1x2x1x2xf32>) -> tensor<1x2x4x2xf32>
  // expected-remark @+1 {{1 of 2 heads contribute nothing but are not pruned: the keys or values are read from a KV cache that is also returned}}
  %a = sits.attention %qh, %kc, %vc : (tensor<1x2x1x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x1x2xf32>
  %e2 = tensor.empty() : tensor<1x1x2x2xf32>
  %at = linalg.transpose ins(%a : tensor<1x2x1x2xf32>) outs(%e2 : tensor<1x1x2x2xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x1x2x2xf32> into tensor<1x1x4xf32>
  %wo = arith.constant dense<3.0> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x1x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4xf32>
  return %y, %kc : tensor<1x1x4xf32>, tensor<1x2x4x2xf32>
}
