// RUN: sits-opt %s --split-input-file --sits-prune --verify-diagnostics | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-prune=threshold=0.5 2>/dev/null | FileCheck %s --check-prefix=THRESHOLD
// RUN: sits-opt %s --split-input-file --sits-prune --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// Grouped-query attention (4 query heads, 2 key/value heads, head dim 1):
// query head h reads key/value head h / 2.

// Statistics of the first case (-split-input-file reports each).
// STATS: (S) 2 num-heads
// STATS: (S) 1 num-kv-heads

// Query heads 0 and 1 (the whole group of key/value head 0) have zero
// output rows: their query columns go and so does key/value head 0's value
// column. The keys are also returned and not zero: their columns stay and
// the attention reads key head 1 out of them.
// CHECK: sits.report.pruning = [{bytes = 80 : i64, indices = [0, 1], kept_for_groups = 0 : i64, kind = "attention_heads", kv_indices = [0], kv_removed = 1 : i64, kv_total = 2 : i64, op = "attn", removed = 2 : i64, threshold = 0.000000e+00 : f64, total = 4 : i64}
// CHECK-LABEL: func.func @gqa_group
//       CHECK:   %[[W:.+]] = arith.constant dense<{{\[}}[3.000000e+00, 4.000000e+00, 5.000000e+00, 6.000000e+00, 8.000000e+00], {{.+}}]> : tensor<4x5xf32>
//       CHECK:   %[[QKV:.+]] = sits.matmul %{{.+}}, %[[W]] : (tensor<1x2x4xf32>, tensor<4x5xf32>) -> tensor<1x2x5xf32>
//   CHECK-DAG:   tensor.extract_slice %[[QKV]][0, 0, 0] [1, 2, 2] [1, 1, 1]
//   CHECK-DAG:   %[[K:.+]] = tensor.extract_slice %[[QKV]][0, 0, 2] [1, 2, 2] [1, 1, 1]
//   CHECK-DAG:   tensor.extract_slice %[[QKV]][0, 0, 4] [1, 2, 1] [1, 1, 1]
//   CHECK-DAG:   %[[KE:.+]] = tensor.expand_shape %[[K]] {{\[\[}}0], [1], [2, 3]] output_shape [1, 2, 2, 1]
//   CHECK-DAG:   %[[KH:.+]] = linalg.transpose ins(%[[KE]] : tensor<1x2x2x1xf32>)
//   CHECK-DAG:   %[[K1:.+]] = tensor.extract_slice %[[KH]][0, 1, 0, 0] [1, 1, 2, 1] [1, 1, 1, 1]
//       CHECK:   %[[A:.+]] = sits.attention %{{.+}}, %[[K1]], %{{.+}} {causal} : (tensor<1x2x2x1xf32>, tensor<1x1x2x1xf32>, tensor<1x1x2x1xf32>) -> tensor<1x2x2x1xf32>
//       CHECK:   %[[WO:.+]] = arith.constant dense<{{\[}}[3.000000e+00, 3.000000e+00, 3.000000e+00, 3.000000e+00], [4.000000e+00, 4.000000e+00, 4.000000e+00, 4.000000e+00]]> : tensor<2x4xf32>
//       CHECK:   %[[Y:.+]] = sits.matmul %{{.+}}, %[[WO]] : (tensor<1x2x2xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
//       CHECK:   return %[[Y]], %[[KH]]
func.func @gqa_group(%x: tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x1xf32>) {
  %w = arith.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0], [17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0, 24.0], [25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0, 32.0]]> : tensor<4x8xf32>
  %qkv = sits.matmul %x, %w : (tensor<1x2x4xf32>, tensor<4x8xf32>) -> tensor<1x2x8xf32>
  %q = tensor.extract_slice %qkv[0, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x8xf32> to tensor<1x2x4xf32>
  %k = tensor.extract_slice %qkv[0, 0, 4] [1, 2, 2] [1, 1, 1] : tensor<1x2x8xf32> to tensor<1x2x2xf32>
  %v = tensor.extract_slice %qkv[0, 0, 6] [1, 2, 2] [1, 1, 1] : tensor<1x2x8xf32> to tensor<1x2x2xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 4, 1] : tensor<1x2x4xf32> into tensor<1x2x4x1xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
  %eq = tensor.empty() : tensor<1x4x2x1xf32>
  %ekv = tensor.empty() : tensor<1x2x2x1xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x4x1xf32>) outs(%eq : tensor<1x4x2x1xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x2x1xf32>) outs(%ekv : tensor<1x2x2x1xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x2x1xf32>) outs(%ekv : tensor<1x2x2x1xf32>) permutation = [0, 2, 1, 3]
  %a = sits.attention %qh, %kh, %vh {causal} : (tensor<1x4x2x1xf32>, tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>) -> tensor<1x4x2x1xf32> loc("attn")
  %eo = tensor.empty() : tensor<1x2x4x1xf32>
  %at = linalg.transpose ins(%a : tensor<1x4x2x1xf32>) outs(%eo : tensor<1x2x4x1xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<[[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 3.0, 3.0], [4.0, 4.0, 4.0, 4.0]]> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y, %kh : tensor<1x2x4xf32>, tensor<1x2x2x1xf32>
}

// -----

// Query heads 1 and 3, one per group, have zero output rows: both groups
// keep one query head (the attention is then MHA), so both key/value heads
// stay. The query columns and bias lose the pruned heads.
// CHECK: kind = "attention_heads", kv_indices = [], kv_removed = 0 : i64, kv_total = 2 : i64, op = "attn", removed = 2 : i64
// CHECK-LABEL: func.func @gqa_balanced
//   CHECK-DAG:   %[[WQ:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 3.000000e+00], {{.+}}]> : tensor<4x2xf32>
//   CHECK-DAG:   %[[BQ:.+]] = arith.constant dense<[1.000000e+00, 3.000000e+00]> : tensor<2xf32>
//   CHECK-DAG:   sits.matmul %{{.+}}, %[[WQ]] bias(%[[BQ]]) : (tensor<1x2x4xf32>, tensor<4x2xf32>, tensor<2xf32>) -> tensor<1x2x2xf32>
//   CHECK-DAG:   sits.matmul %{{.+}} : (tensor<1x2x4xf32>, tensor<4x2xf32>) -> tensor<1x2x2xf32>
//       CHECK:   sits.attention {{.+}} : (tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>) -> tensor<1x2x2x1xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<1x2x2xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
func.func @gqa_balanced(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %wq = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]> : tensor<4x4xf32>
  %bq = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %wk = arith.constant dense<2.0> : tensor<4x2xf32>
  %wv = arith.constant dense<[[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0]]> : tensor<4x2xf32>
  %q = sits.matmul %x, %wq bias(%bq) : (tensor<1x2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
  %k = sits.matmul %x, %wk : (tensor<1x2x4xf32>, tensor<4x2xf32>) -> tensor<1x2x2xf32>
  %v = sits.matmul %x, %wv : (tensor<1x2x4xf32>, tensor<4x2xf32>) -> tensor<1x2x2xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 4, 1] : tensor<1x2x4xf32> into tensor<1x2x4x1xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
  %eq = tensor.empty() : tensor<1x4x2x1xf32>
  %ekv = tensor.empty() : tensor<1x2x2x1xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x4x1xf32>) outs(%eq : tensor<1x4x2x1xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x2x1xf32>) outs(%ekv : tensor<1x2x2x1xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x2x1xf32>) outs(%ekv : tensor<1x2x2x1xf32>) permutation = [0, 2, 1, 3]
  %a = sits.attention %qh, %kh, %vh {causal} : (tensor<1x4x2x1xf32>, tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>) -> tensor<1x4x2x1xf32> loc("attn")
  %eo = tensor.empty() : tensor<1x2x4x1xf32>
  %at = linalg.transpose ins(%a : tensor<1x4x2x1xf32>) outs(%eo : tensor<1x2x4x1xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [3.0, 3.0, 3.0, 3.0], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}

// -----

// Key/value head 1's value column is zero: its query heads 2 and 3 average
// zero vectors, and the whole group goes.
// CHECK: indices = [2, 3], {{.+}}kv_indices = [1], kv_removed = 1 : i64
// CHECK-LABEL: func.func @gqa_zero_value_head
//   CHECK-DAG:   sits.matmul %{{.+}} : (tensor<1x2x4xf32>, tensor<4x2xf32>) -> tensor<1x2x2xf32>
//   CHECK-DAG:   %[[WV:.+]] = arith.constant dense<{{\[}}[1.000000e+00], [2.000000e+00], [3.000000e+00], [4.000000e+00]]> : tensor<4x1xf32>
//   CHECK-DAG:   sits.matmul %{{.+}}, %[[WV]] : (tensor<1x2x4xf32>, tensor<4x1xf32>) -> tensor<1x2x1xf32>
//       CHECK:   sits.attention {{.+}} : (tensor<1x2x2x1xf32>, tensor<1x1x2x1xf32>, tensor<1x1x2x1xf32>) -> tensor<1x2x2x1xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<1x2x2xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
func.func @gqa_zero_value_head(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %wq = arith.constant dense<1.0> : tensor<4x4xf32>
  %wk = arith.constant dense<2.0> : tensor<4x2xf32>
  %wv = arith.constant dense<[[1.0, 0.0], [2.0, 0.0], [3.0, 0.0], [4.0, 0.0]]> : tensor<4x2xf32>
  %q = sits.matmul %x, %wq : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %k = sits.matmul %x, %wk : (tensor<1x2x4xf32>, tensor<4x2xf32>) -> tensor<1x2x2xf32>
  %v = sits.matmul %x, %wv : (tensor<1x2x4xf32>, tensor<4x2xf32>) -> tensor<1x2x2xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 4, 1] : tensor<1x2x4xf32> into tensor<1x2x4x1xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
  %eq = tensor.empty() : tensor<1x4x2x1xf32>
  %ekv = tensor.empty() : tensor<1x2x2x1xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x4x1xf32>) outs(%eq : tensor<1x4x2x1xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x2x1xf32>) outs(%ekv : tensor<1x2x2x1xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x2x1xf32>) outs(%ekv : tensor<1x2x2x1xf32>) permutation = [0, 2, 1, 3]
  %a = sits.attention %qh, %kh, %vh {causal} : (tensor<1x4x2x1xf32>, tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>) -> tensor<1x4x2x1xf32> loc("attn")
  %eo = tensor.empty() : tensor<1x2x4x1xf32>
  %at = linalg.transpose ins(%a : tensor<1x4x2x1xf32>) outs(%eo : tensor<1x2x4x1xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<3.0> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}

// -----

// Multi-query attention (one key/value head): any query heads can go; the
// key/value head stays.
// CHECK: indices = [1, 2], {{.+}}kv_indices = [], kv_removed = 0 : i64, kv_total = 1 : i64
// CHECK-LABEL: func.func @mqa
//   CHECK-DAG:   %[[WQ:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 4.000000e+00], {{.+}}]> : tensor<4x2xf32>
//   CHECK-DAG:   sits.matmul %{{.+}}, %[[WQ]] : (tensor<1x2x4xf32>, tensor<4x2xf32>) -> tensor<1x2x2xf32>
//       CHECK:   sits.attention {{.+}} : (tensor<1x2x2x1xf32>, tensor<1x1x2x1xf32>, tensor<1x1x2x1xf32>) -> tensor<1x2x2x1xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<1x2x2xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
func.func @mqa(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %wq = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]]> : tensor<4x4xf32>
  %wk = arith.constant dense<2.0> : tensor<4x1xf32>
  %wv = arith.constant dense<3.0> : tensor<4x1xf32>
  %q = sits.matmul %x, %wq : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %k = sits.matmul %x, %wk : (tensor<1x2x4xf32>, tensor<4x1xf32>) -> tensor<1x2x1xf32>
  %v = sits.matmul %x, %wv : (tensor<1x2x4xf32>, tensor<4x1xf32>) -> tensor<1x2x1xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 4, 1] : tensor<1x2x4xf32> into tensor<1x2x4x1xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 1, 1] : tensor<1x2x1xf32> into tensor<1x2x1x1xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 1, 1] : tensor<1x2x1xf32> into tensor<1x2x1x1xf32>
  %eq = tensor.empty() : tensor<1x4x2x1xf32>
  %ekv = tensor.empty() : tensor<1x1x2x1xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x4x1xf32>) outs(%eq : tensor<1x4x2x1xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x1x1xf32>) outs(%ekv : tensor<1x1x2x1xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x1x1xf32>) outs(%ekv : tensor<1x1x2x1xf32>) permutation = [0, 2, 1, 3]
  %a = sits.attention %qh, %kh, %vh {causal} : (tensor<1x4x2x1xf32>, tensor<1x1x2x1xf32>, tensor<1x1x2x1xf32>) -> tensor<1x4x2x1xf32> loc("attn")
  %eo = tensor.empty() : tensor<1x2x4x1xf32>
  %at = linalg.transpose ins(%a : tensor<1x4x2x1xf32>) outs(%eo : tensor<1x2x4x1xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<[[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [4.0, 4.0, 4.0, 4.0]]> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}

// -----

// Multi-query attention whose one value head is zero: every query head
// averages zero vectors, and none would be left.
// CHECK-LABEL: func.func @mqa_zero_value
//       CHECK:   sits.attention {{.+}} -> tensor<1x4x2x1xf32>
func.func @mqa_zero_value(%x: tensor<1x2x4xf32>) -> tensor<1x2x4xf32> {
  %wq = arith.constant dense<1.0> : tensor<4x4xf32>
  %wk = arith.constant dense<2.0> : tensor<4x1xf32>
  %wv = arith.constant dense<0.0> : tensor<4x1xf32>
  %q = sits.matmul %x, %wq : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  %k = sits.matmul %x, %wk : (tensor<1x2x4xf32>, tensor<4x1xf32>) -> tensor<1x2x1xf32>
  %v = sits.matmul %x, %wv : (tensor<1x2x4xf32>, tensor<4x1xf32>) -> tensor<1x2x1xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 4, 1] : tensor<1x2x4xf32> into tensor<1x2x4x1xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 1, 1] : tensor<1x2x1xf32> into tensor<1x2x1x1xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 1, 1] : tensor<1x2x1xf32> into tensor<1x2x1x1xf32>
  %eq = tensor.empty() : tensor<1x4x2x1xf32>
  %ekv = tensor.empty() : tensor<1x1x2x1xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x4x1xf32>) outs(%eq : tensor<1x4x2x1xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x1x1xf32>) outs(%ekv : tensor<1x1x2x1xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x1x1xf32>) outs(%ekv : tensor<1x1x2x1xf32>) permutation = [0, 2, 1, 3]
  // expected-remark @+1 {{4 of 4 heads contribute nothing but are not pruned: the attention would have no head left}}
  %a = sits.attention %qh, %kh, %vh {causal} : (tensor<1x4x2x1xf32>, tensor<1x1x2x1xf32>, tensor<1x1x2x1xf32>) -> tensor<1x4x2x1xf32>
  %eo = tensor.empty() : tensor<1x2x4x1xf32>
  %at = linalg.transpose ins(%a : tensor<1x4x2x1xf32>) outs(%eo : tensor<1x2x4x1xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x4x1xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<3.0> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y : tensor<1x2x4xf32>
}

// -----

// 6 query heads, 2 key/value heads (groups {0, 1, 2} and {3, 4, 5}).
// Exactly: only head 1 contributes nothing; removing it would leave groups
// of 2 and 3 query heads, which the attention cannot express. Nothing is
// pruned (a remark says why).
// With threshold 0.5: heads 1, 3 and 4 (output rows 0, 0.25, 0.125) are
// prunable; group 0 keeps 2 heads, so group 1 keeps 2 too, putting back
// head 3 (the larger rows): heads 1 and 4 go.
// CHECK-LABEL: func.func @gqa_unbalanced
//       CHECK:   sits.attention {{.+}} -> tensor<1x6x2x1xf32>
// THRESHOLD: indices = [1, 4], kept_for_groups = 1 : i64, kind = "attention_heads", kv_indices = [], kv_removed = 0 : i64, kv_total = 2 : i64, op = {{.+}}, removed = 2 : i64, threshold = 5.000000e-01 : f64, total = 6 : i64
// THRESHOLD-LABEL: func.func @gqa_unbalanced
//       THRESHOLD:   sits.attention {{.+}} : (tensor<1x4x2x1xf32>, tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>) -> tensor<1x4x2x1xf32>
//       THRESHOLD:   arith.constant dense<{{\[}}[1.000000e+00, 1.000000e+00], [1.000000e+00, 1.000000e+00], [2.500000e-01, 2.500000e-01], [1.000000e+00, 1.000000e+00]]> : tensor<4x2xf32>
func.func @gqa_unbalanced(%x: tensor<1x2x2xf32>) -> tensor<1x2x2xf32> {
  %wq = arith.constant dense<1.0> : tensor<2x6xf32>
  %wk = arith.constant dense<2.0> : tensor<2x2xf32>
  %wv = arith.constant dense<3.0> : tensor<2x2xf32>
  %q = sits.matmul %x, %wq : (tensor<1x2x2xf32>, tensor<2x6xf32>) -> tensor<1x2x6xf32>
  %k = sits.matmul %x, %wk : (tensor<1x2x2xf32>, tensor<2x2xf32>) -> tensor<1x2x2xf32>
  %v = sits.matmul %x, %wv : (tensor<1x2x2xf32>, tensor<2x2xf32>) -> tensor<1x2x2xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 6, 1] : tensor<1x2x6xf32> into tensor<1x2x6x1xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 2, 1] : tensor<1x2x2xf32> into tensor<1x2x2x1xf32>
  %eq = tensor.empty() : tensor<1x6x2x1xf32>
  %ekv = tensor.empty() : tensor<1x2x2x1xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x6x1xf32>) outs(%eq : tensor<1x6x2x1xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x2x1xf32>) outs(%ekv : tensor<1x2x2x1xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x2x1xf32>) outs(%ekv : tensor<1x2x2x1xf32>) permutation = [0, 2, 1, 3]
  // expected-remark @+1 {{1 of 6 heads contribute nothing but are not pruned: removing them would leave key/value heads with different numbers of query heads (query head h reads key/value head h / (Hq / Hkv))}}
  %a = sits.attention %qh, %kh, %vh {causal} : (tensor<1x6x2x1xf32>, tensor<1x2x2x1xf32>, tensor<1x2x2x1xf32>) -> tensor<1x6x2x1xf32>
  %eo = tensor.empty() : tensor<1x2x6x1xf32>
  %at = linalg.transpose ins(%a : tensor<1x6x2x1xf32>) outs(%eo : tensor<1x2x6x1xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x6x1xf32> into tensor<1x2x6xf32>
  %wo = arith.constant dense<[[1.0, 1.0], [0.0, 0.0], [1.0, 1.0], [0.25, 0.25], [0.125, 0.125], [1.0, 1.0]]> : tensor<6x2xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x6xf32>, tensor<6x2xf32>) -> tensor<1x2x2xf32>
  return %y : tensor<1x2x2xf32>
}

// -----

// Decode against a KV cache with grouped-query attention: query heads 0
// and 1 (group 0) go, and the attention reads key/value head 1 of the past
// and of the new keys and values.
// CHECK-LABEL: func.func @gqa_cache
//  CHECK-SAME:     (%[[X:.+]]: tensor<1x1x2xf32>, %[[PK:.+]]: tensor<1x2x3x1xf32>, %[[PV:.+]]: tensor<1x2x3x1xf32>)
//   CHECK-DAG:   %[[K:.+]] = sits.matmul %[[X]], %{{.+}} : (tensor<1x1x2xf32>, tensor<2x1xf32>) -> tensor<1x1x1xf32>
//   CHECK-DAG:   %[[KE:.+]] = tensor.expand_shape %[[K]]
//   CHECK-DAG:   %[[KH:.+]] = linalg.transpose ins(%[[KE]] : tensor<1x1x1x1xf32>)
//   CHECK-DAG:   %[[PK1:.+]] = tensor.extract_slice %[[PK]][0, 1, 0, 0] [1, 1, 3, 1] [1, 1, 1, 1]
//   CHECK-DAG:   %[[KLIVE:.+]] = tensor.concat dim(2) %[[PK1]], %[[KH]] : (tensor<1x1x3x1xf32>, tensor<1x1x1x1xf32>) -> tensor<1x1x4x1xf32>
//   CHECK-DAG:   %[[PV1:.+]] = tensor.extract_slice %[[PV]][0, 1, 0, 0] [1, 1, 3, 1] [1, 1, 1, 1]
//       CHECK:   sits.attention %{{.+}}, %[[KLIVE]], %{{.+}} : (tensor<1x2x1x1xf32>, tensor<1x1x4x1xf32>, tensor<1x1x4x1xf32>) -> tensor<1x2x1x1xf32>
func.func @gqa_cache(%x: tensor<1x1x2xf32>, %pk: tensor<1x2x3x1xf32>, %pv: tensor<1x2x3x1xf32>) -> tensor<1x1x2xf32> {
  %wq = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %wk = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %wv = arith.constant dense<[[5.0, 6.0], [7.0, 8.0]]> : tensor<2x2xf32>
  %q = sits.matmul %x, %wq : (tensor<1x1x2xf32>, tensor<2x4xf32>) -> tensor<1x1x4xf32>
  %k = sits.matmul %x, %wk : (tensor<1x1x2xf32>, tensor<2x2xf32>) -> tensor<1x1x2xf32>
  %v = sits.matmul %x, %wv : (tensor<1x1x2xf32>, tensor<2x2xf32>) -> tensor<1x1x2xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 1, 4, 1] : tensor<1x1x4xf32> into tensor<1x1x4x1xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 1, 2, 1] : tensor<1x1x2xf32> into tensor<1x1x2x1xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 1, 2, 1] : tensor<1x1x2xf32> into tensor<1x1x2x1xf32>
  %eq = tensor.empty() : tensor<1x4x1x1xf32>
  %ekv = tensor.empty() : tensor<1x2x1x1xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x1x4x1xf32>) outs(%eq : tensor<1x4x1x1xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x1x2x1xf32>) outs(%ekv : tensor<1x2x1x1xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x1x2x1xf32>) outs(%ekv : tensor<1x2x1x1xf32>) permutation = [0, 2, 1, 3]
  %kc = tensor.concat dim(2) %pk, %kh : (tensor<1x2x3x1xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x1xf32>
  %vc = tensor.concat dim(2) %pv, %vh : (tensor<1x2x3x1xf32>, tensor<1x2x1x1xf32>) -> tensor<1x2x4x1xf32>
  %a = sits.attention %qh, %kc, %vc : (tensor<1x4x1x1xf32>, tensor<1x2x4x1xf32>, tensor<1x2x4x1xf32>) -> tensor<1x4x1x1xf32>
  %eo = tensor.empty() : tensor<1x1x4x1xf32>
  %at = linalg.transpose ins(%a : tensor<1x4x1x1xf32>) outs(%eo : tensor<1x1x4x1xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x1x4x1xf32> into tensor<1x1x4xf32>
  %wo = arith.constant dense<[[0.0, 0.0], [0.0, 0.0], [1.0, 2.0], [3.0, 4.0]]> : tensor<4x2xf32>
  %y = sits.matmul %c, %wo : (tensor<1x1x4xf32>, tensor<4x2xf32>) -> tensor<1x1x2xf32>
  return %y : tensor<1x1x2xf32>
}
