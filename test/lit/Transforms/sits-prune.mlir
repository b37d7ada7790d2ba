// RUN: sits-opt %s --split-input-file --sits-prune | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-prune=structured=false | FileCheck %s --check-prefix=UNSTRUCTURED

// Weight-only subgraphs become constants: a transpose (evaluated here), a
// reshape and an elementwise product (their folders).
// CHECK-LABEL: func.func @fold
//   CHECK-DAG:   %[[T:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
//   CHECK-DAG:   %[[E:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
//   CHECK-DAG:   %[[M:.+]] = arith.constant dense<[2.000000e+00, 6.000000e+00]> : tensor<2xf32>
//   CHECK-NOT:   linalg.transpose
//   CHECK-NOT:   tensor.expand_shape
//   CHECK-NOT:   arith.mulf
//       CHECK:   return %[[T]], %[[E]], %[[M]]
func.func @fold() -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32>) {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %e = tensor.empty() : tensor<2x2xf32>
  %t = linalg.transpose ins(%w : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) permutation = [1, 0]
  %flat = arith.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %x = tensor.expand_shape %flat [[0, 1]] output_shape [2, 2] : tensor<4xf32> into tensor<2x2xf32>
  %a = arith.constant dense<[1.0, 3.0]> : tensor<2xf32>
  %two = arith.constant dense<2.0> : tensor<2xf32>
  %m = arith.mulf %a, %two : tensor<2xf32>
  return %t, %x, %m : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2xf32>
}

// -----

// Identities go; what they computed is their input.
// CHECK-LABEL: func.func @identities
//  CHECK-SAME:     (%[[X:.+]]: tensor<2x4xf32>)
//   CHECK-NOT:   arith.
//   CHECK-NOT:   linalg.
//   CHECK-NOT:   tensor.
//   CHECK-NOT:   sits.
//       CHECK:   return %[[X]] : tensor<2x4xf32>
func.func @identities(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %one = arith.constant dense<1.0> : tensor<2x4xf32>
  %zero = arith.constant dense<0.0> : tensor<2x4xf32>
  %a = arith.mulf %x, %one : tensor<2x4xf32>
  %b = arith.addf %zero, %a : tensor<2x4xf32>
  %c = arith.subf %b, %zero : tensor<2x4xf32>
  %d = arith.divf %c, %one : tensor<2x4xf32>
  %e = tensor.empty() : tensor<2x4xf32>
  %f = linalg.transpose ins(%d : tensor<2x4xf32>) outs(%e : tensor<2x4xf32>) permutation = [0, 1]
  %g = sits.activation <none> %f : tensor<2x4xf32>
  %h = tensor.extract_slice %g[0, 0] [2, 4] [1, 1] : tensor<2x4xf32> to tensor<2x4xf32>
  %i = tensor.cast %h : tensor<2x4xf32> to tensor<2x4xf32>
  return %i : tensor<2x4xf32>
}

// -----

// A reshape between equal dynamic types is not an identity: its shape is
// data ([2, 3, 4] to [2, 6, 2]).
// CHECK-LABEL: func.func @dynamic_reshape
//       CHECK:   %[[R:.+]] = tensor.reshape
//       CHECK:   return %[[R]]
func.func @dynamic_reshape(%x: tensor<?x?x?xf32>, %s: tensor<3xi64>) -> tensor<?x?x?xf32> {
  %r = tensor.reshape %x(%s) : (tensor<?x?x?xf32>, tensor<3xi64>) -> tensor<?x?x?xf32>
  return %r : tensor<?x?x?xf32>
}

// -----

// SITS ops' identities come from their folders: relu(relu(x)) is relu(x),
// quantize(dequantize(q)) with the same parameters is q.
// CHECK-LABEL: func.func @sits_folders
//  CHECK-SAME:     (%[[X:.+]]: tensor<2x4xf32>, %[[Q:.+]]: tensor<2x4xi8>
//       CHECK:   %[[R:.+]] = sits.activation <relu> %[[X]]
//   CHECK-NOT:   sits.activation
//   CHECK-NOT:   sits.quantize
//       CHECK:   return %[[R]], %[[Q]]
func.func @sits_folders(%x: tensor<2x4xf32>, %q: tensor<2x4xi8>, %s: tensor<f32>) -> (tensor<2x4xf32>, tensor<2x4xi8>) {
  %a = sits.activation <relu> %x : tensor<2x4xf32>
  %b = sits.activation <relu> %a : tensor<2x4xf32>
  %d = sits.dequantize %q, %s : (tensor<2x4xi8>, tensor<f32>) -> tensor<2x4xf32>
  %r = sits.quantize %d, %s : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xi8>
  return %b, %r : tensor<2x4xf32>, tensor<2x4xi8>
}

// -----

// Dead code goes, including ops that only fed it.
// CHECK-LABEL: func.func @dead
//   CHECK-NOT:   sits.matmul
//       CHECK:   return %arg0
func.func @dead(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %y = sits.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %z = sits.activation <gelu> %y : tensor<2x4xf32>
  return %x : tensor<2x4xf32>
}

// -----

// FFN channel 1 is read by a zero row of %w2: column 1 of %w1 and %b1 and
// row 1 of %w2 go.
// CHECK-LABEL: func.func @ffn_zero_rows
//   CHECK-DAG:   %[[W1:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 3.000000e+00], [4.000000e+00, 6.000000e+00]]> : tensor<2x2xf32>
//   CHECK-DAG:   %[[B1:.+]] = arith.constant dense<[1.000000e+00, 3.000000e+00]> : tensor<2xf32>
//       CHECK:   %[[H:.+]] = sits.matmul %{{.+}}, %[[W1]] bias(%[[B1]]) {activation = #sits.activation<gelu>} : (tensor<8x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<8x2xf32>
//       CHECK:   %[[W2:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 2.000000e+00], [5.000000e+00, 6.000000e+00]]> : tensor<2x2xf32>
//       CHECK:   sits.matmul %[[H]], %[[W2]] : (tensor<8x2xf32>, tensor<2x2xf32>) -> tensor<8x2xf32>
// UNSTRUCTURED-LABEL: func.func @ffn_zero_rows
//       UNSTRUCTURED:   -> tensor<8x3xf32>
func.func @ffn_zero_rows(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w1 = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %b1 = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %w2 = arith.constant dense<[[1.0, 2.0], [0.0, 0.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %h = sits.matmul %x, %w1 bias(%b1) {activation = #sits.activation<gelu>} : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %y = sits.matmul %h, %w2 : (tensor<8x3xf32>, tensor<3x2xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// -----

// Weights stored transposed (Gemm transB): channel 0 has zero input weights
// and relu(-1) = 0, so it is nothing; channel 2 has zero input weights and
// relu(2) = 2, a constant whose contribution 2 * [5, 6] joins the bias.
// CHECK-LABEL: func.func @ffn_constant_channels
//   CHECK-DAG:   %[[W1:.+]] = arith.constant dense<{{\[}}[2.000000e+00, 5.000000e+00]]> : tensor<1x2xf32>
//   CHECK-DAG:   %[[B1:.+]] = arith.constant dense<1.000000e+00> : tensor<1xf32>
//       CHECK:   %[[H:.+]] = sits.matmul %{{.+}}, %[[W1]] bias(%[[B1]]) {transpose_rhs} : (tensor<8x2xf32>, tensor<1x2xf32>, tensor<1xf32>) -> tensor<8x1xf32>
//       CHECK:   %[[R:.+]] = sits.activation <relu> %[[H]] : tensor<8x1xf32>
//   CHECK-DAG:   %[[W2:.+]] = arith.constant dense<{{\[}}[3.000000e+00], [4.000000e+00]]> : tensor<2x1xf32>
//   CHECK-DAG:   %[[B2:.+]] = arith.constant dense<[1.000000e+01, 1.200000e+01]> : tensor<2xf32>
//       CHECK:   sits.matmul %[[R]], %[[W2]] bias(%[[B2]]) {transpose_rhs} : (tensor<8x1xf32>, tensor<2x1xf32>, tensor<2xf32>) -> tensor<8x2xf32>
func.func @ffn_constant_channels(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w1 = arith.constant dense<[[0.0, 0.0], [2.0, 5.0], [0.0, 0.0]]> : tensor<3x2xf32>
  %b1 = arith.constant dense<[-1.0, 1.0, 2.0]> : tensor<3xf32>
  %w2 = arith.constant dense<[[7.0, 3.0, 5.0], [8.0, 4.0, 6.0]]> : tensor<2x3xf32>
  %h = sits.matmul %x, %w1 bias(%b1) {transpose_rhs} : (tensor<8x2xf32>, tensor<3x2xf32>, tensor<3xf32>) -> tensor<8x3xf32>
  %r = sits.activation <relu> %h : tensor<8x3xf32>
  %y = sits.matmul %r, %w2 {transpose_rhs} : (tensor<8x3xf32>, tensor<2x3xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// -----

// Convolution channels: channel 1 of %c1 is read by zero filter slices of
// %c2 and goes. Channel 2 has a zero filter but relu(bias) = 3, and %c2
// pads: near the border it would add less than inside, so it stays.
// CHECK-LABEL: func.func @conv_channels
//   CHECK-DAG:   %[[F1:.+]] = arith.constant dense<{{.+}}> : tensor<2x1x1x1xf32>
//   CHECK-DAG:   %[[B1:.+]] = arith.constant dense<[1.000000e+00, 3.000000e+00]> : tensor<2xf32>
//       CHECK:   %[[C1:.+]] = sits.conv %{{.+}}, %[[F1]] bias(%[[B1]]) {activation = #sits.activation<relu>} : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>, tensor<2xf32>) -> tensor<1x2x4x4xf32>
//       CHECK:   %[[F2:.+]] = arith.constant dense<1.000000e+00> : tensor<1x2x3x3xf32>
//       CHECK:   sits.conv %[[C1]], %[[F2]] {padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x4x4xf32>, tensor<1x2x3x3xf32>) -> tensor<1x1x4x4xf32>
func.func @conv_channels(%x: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %f1 = arith.constant dense<[[[[1.0]]], [[[2.0]]], [[[0.0]]]]> : tensor<3x1x1x1xf32>
  %b1 = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %f2 = arith.constant dense<[[[[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]],
                               [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
                               [[1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]]]> : tensor<1x3x3x3xf32>
  %c1 = sits.conv %x, %f1 bias(%b1) {activation = #sits.activation<relu>} : (tensor<1x1x4x4xf32>, tensor<3x1x1x1xf32>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  %c2 = sits.conv %c1, %f2 {padding = array<i64: 1, 1, 1, 1>} : (tensor<1x3x4x4xf32>, tensor<1x3x3x3xf32>) -> tensor<1x1x4x4xf32>
  return %c2 : tensor<1x1x4x4xf32>
}

// -----

// Head 1 has zero rows in the output projection. Queries and values lose
// its columns; the keys are also returned (a KV cache) and are not zero, so
// their columns stay and the attention reads head 0 out of them.
// CHECK-LABEL: func.func @attention_heads
//       CHECK:   %[[W:.+]] = arith.constant dense<1.000000e+00> : tensor<4x8xf32>
//       CHECK:   %[[QKV:.+]] = sits.matmul %{{.+}}, %[[W]] : (tensor<1x2x4xf32>, tensor<4x8xf32>) -> tensor<1x2x8xf32>
//   CHECK-DAG:   %[[Q:.+]] = tensor.extract_slice %[[QKV]][0, 0, 0] [1, 2, 2] [1, 1, 1]
//   CHECK-DAG:   %[[K:.+]] = tensor.extract_slice %[[QKV]][0, 0, 2] [1, 2, 4] [1, 1, 1]
//   CHECK-DAG:   %[[V:.+]] = tensor.extract_slice %[[QKV]][0, 0, 6] [1, 2, 2] [1, 1, 1]
//   CHECK-DAG:   %[[KE:.+]] = tensor.expand_shape %[[K]] {{\[\[}}0], [1], [2, 3]] output_shape [1, 2, 2, 2]
//   CHECK-DAG:   %[[KH:.+]] = linalg.transpose ins(%[[KE]] : tensor<1x2x2x2xf32>)
//   CHECK-DAG:   %[[K0:.+]] = tensor.extract_slice %[[KH]][0, 0, 0, 0] [1, 1, 2, 2] [1, 1, 1, 1]
//       CHECK:   %[[A:.+]] = sits.attention %{{.+}}, %[[K0]], %{{.+}} {causal} : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
//       CHECK:   %[[AT:.+]] = linalg.transpose ins(%[[A]] : tensor<1x1x2x2xf32>)
//       CHECK:   %[[C:.+]] = tensor.collapse_shape %[[AT]] {{\[\[}}0], [1], [2, 3]] : tensor<1x2x1x2xf32> into tensor<1x2x2xf32>
//       CHECK:   %[[WO:.+]] = arith.constant dense<{{.+}}> : tensor<2x4xf32>
//       CHECK:   %[[Y:.+]] = sits.matmul %[[C]], %[[WO]] : (tensor<1x2x2xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
//       CHECK:   return %[[Y]], %[[KH]]
func.func @attention_heads(%x: tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>) {
  %w = arith.constant dense<1.0> : tensor<4x12xf32>
  %qkv = sits.matmul %x, %w : (tensor<1x2x4xf32>, tensor<4x12xf32>) -> tensor<1x2x12xf32>
  %q = tensor.extract_slice %qkv[0, 0, 0] [1, 2, 4] [1, 1, 1] : tensor<1x2x12xf32> to tensor<1x2x4xf32>
  %k = tensor.extract_slice %qkv[0, 0, 4] [1, 2, 4] [1, 1, 1] : tensor<1x2x12xf32> to tensor<1x2x4xf32>
  %v = tensor.extract_slice %qkv[0, 0, 8] [1, 2, 4] [1, 1, 1] : tensor<1x2x12xf32> to tensor<1x2x4xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %e = tensor.empty() : tensor<1x2x2x2xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %a = sits.attention %qh, %kh, %vh {causal} : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %at = linalg.transpose ins(%a : tensor<1x2x2x2xf32>) outs(%e : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x2x2xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<[[2.0, 2.0, 2.0, 2.0], [2.0, 2.0, 2.0, 2.0], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y, %kh : tensor<1x2x4xf32>, tensor<1x2x2x2xf32>
}

// -----

// Head 0's query, key and value columns and biases are all zero (separate
// projections). The returned keys and values are rebuilt with zeros for it,
// so all its columns go.
// CHECK-LABEL: func.func @attention_zero_head
//   CHECK-DAG:   %[[ZERO:.+]] = arith.constant dense<0.000000e+00> : tensor<1x1x2x2xf32>
//   CHECK-DAG:   %[[WK:.+]] = arith.constant dense<{{\[}}[2.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00], [5.000000e+00, 6.000000e+00], [7.000000e+00, 8.000000e+00]]> : tensor<4x2xf32>
//   CHECK-DAG:   %[[BK:.+]] = arith.constant dense<[2.000000e+00, 1.000000e+00]> : tensor<2xf32>
//   CHECK-DAG:   %[[K:.+]] = sits.matmul %{{.+}}, %[[WK]] bias(%[[BK]]) : {{.+}} -> tensor<1x2x2xf32>
//   CHECK-DAG:   %[[KE:.+]] = tensor.expand_shape %[[K]]
//   CHECK-DAG:   %[[KH:.+]] = linalg.transpose ins(%[[KE]] : tensor<1x2x1x2xf32>) outs(%{{.+}} : tensor<1x1x2x2xf32>) permutation = [0, 2, 1, 3]
//   CHECK-DAG:   %[[KALL:.+]] = tensor.concat dim(1) %[[ZERO]], %[[KH]] : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x2x2x2xf32>
//       CHECK:   sits.attention {{.+}} -> tensor<1x1x2x2xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<1x2x2xf32>, tensor<2x4xf32>) -> tensor<1x2x4xf32>
//       CHECK:   return %{{.+}}, %[[KALL]], %{{.+}} : tensor<1x2x4xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
func.func @attention_zero_head(%x: tensor<1x2x4xf32>) -> (tensor<1x2x4xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) {
  %wq = arith.constant dense<[[0.0, 0.0, 1.0, 2.0], [0.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 6.0], [0.0, 0.0, 7.0, 8.0]]> : tensor<4x4xf32>
  %wk = arith.constant dense<[[0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 6.0], [0.0, 0.0, 7.0, 8.0]]> : tensor<4x4xf32>
  %wv = arith.constant dense<[[0.0, 0.0, 3.0, 2.0], [0.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 6.0], [0.0, 0.0, 7.0, 8.0]]> : tensor<4x4xf32>
  %bq = arith.constant dense<[0.0, 0.0, 1.0, 1.0]> : tensor<4xf32>
  %bk = arith.constant dense<[0.0, 0.0, 2.0, 1.0]> : tensor<4xf32>
  %bv = arith.constant dense<[0.0, 0.0, 3.0, 1.0]> : tensor<4xf32>
  %e3 = tensor.empty() : tensor<1x2x2x2xf32>
  %q = sits.matmul %x, %wq bias(%bq) : (tensor<1x2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
  %k = sits.matmul %x, %wk bias(%bk) : (tensor<1x2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
  %v = sits.matmul %x, %wv bias(%bv) : (tensor<1x2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<1x2x4xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 2, 2, 2] : tensor<1x2x4xf32> into tensor<1x2x2x2xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x2x2x2xf32>) outs(%e3 : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x2x2x2xf32>) outs(%e3 : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x2x2x2xf32>) outs(%e3 : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %a = sits.attention %qh, %kh, %vh : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>) -> tensor<1x2x2x2xf32>
  %at = linalg.transpose ins(%a : tensor<1x2x2x2xf32>) outs(%e3 : tensor<1x2x2x2xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x2x2x2xf32> into tensor<1x2x4xf32>
  %wo = arith.constant dense<3.0> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x2x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4xf32>
  return %y, %kh, %vh : tensor<1x2x4xf32>, tensor<1x2x2x2xf32>, tensor<1x2x2x2xf32>
}

// -----

// A zero channel whose producer weights another matmul also reads stays:
// a pruned copy next to the original would add bytes.
// CHECK-LABEL: func.func @shared_weights
//       CHECK:   sits.matmul {{.+}} -> tensor<8x3xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<8x3xf32>, tensor<3x2xf32>) -> tensor<8x2xf32>
func.func @shared_weights(%x: tensor<8x2xf32>) -> (tensor<8x2xf32>, tensor<8x3xf32>) {
  %w1 = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %w2 = arith.constant dense<[[1.0, 2.0], [0.0, 0.0], [5.0, 6.0]]> : tensor<3x2xf32>
  %h = sits.matmul %x, %w1 : (tensor<8x2xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  %y = sits.matmul %h, %w2 : (tensor<8x3xf32>, tensor<3x2xf32>) -> tensor<8x2xf32>
  %z = sits.matmul %x, %w1 {activation = #sits.activation<relu>} : (tensor<8x2xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  return %y, %z : tensor<8x2xf32>, tensor<8x3xf32>
}

// -----

// Weights held as resources fold too, into a resource.
// CHECK-LABEL: func.func @fold_resource
//       CHECK:   %[[T:.+]] = arith.constant dense_resource<w.t> : tensor<2x2xf32>
//       CHECK:   return %[[T]]
//       CHECK: w.t: "0x400000000000803F000040400000004000008040"
func.func @fold_resource() -> tensor<2x2xf32> {
  %w = arith.constant dense_resource<w> : tensor<2x2xf32>
  %e = tensor.empty() : tensor<2x2xf32>
  %t = linalg.transpose ins(%w : tensor<2x2xf32>) outs(%e : tensor<2x2xf32>) permutation = [1, 0]
  return %t : tensor<2x2xf32>
}
{-#
  dialect_resources: {
    builtin: {
      w: "0x040000000000803F000000400000404000008040"
    }
  }
#-}

// -----

// Decode against a KV cache: keys and values are the past heads joined with
// this step's. Head 0 contributes nothing, so its columns go and the
// attention reads head 1 of the past and of the new heads.
// CHECK-LABEL: func.func @attention_cache
//  CHECK-SAME:     (%[[X:.+]]: tensor<1x1x4xf32>, %[[PK:.+]]: tensor<1x2x3x2xf32>, %[[PV:.+]]: tensor<1x2x3x2xf32>)
//   CHECK-DAG:   %[[WK:.+]] = arith.constant dense<{{\[}}[2.000000e+00, 2.000000e+00], {{.+}}]> : tensor<4x2xf32>
//   CHECK-DAG:   %[[K:.+]] = sits.matmul %[[X]], %[[WK]] : (tensor<1x1x4xf32>, tensor<4x2xf32>) -> tensor<1x1x2xf32>
//   CHECK-DAG:   %[[KE:.+]] = tensor.expand_shape %[[K]]
//   CHECK-DAG:   %[[KH:.+]] = linalg.transpose ins(%[[KE]] : tensor<1x1x1x2xf32>) outs(%{{.+}} : tensor<1x1x1x2xf32>)
//   CHECK-DAG:   %[[PK1:.+]] = tensor.extract_slice %[[PK]][0, 1, 0, 0] [1, 1, 3, 2] [1, 1, 1, 1]
//   CHECK-DAG:   %[[KLIVE:.+]] = tensor.concat dim(2) %[[PK1]], %[[KH]] : (tensor<1x1x3x2xf32>, tensor<1x1x1x2xf32>) -> tensor<1x1x4x2xf32>
//       CHECK:   sits.attention %{{.+}}, %[[KLIVE]], %{{.+}} : (tensor<1x1x1x2xf32>, tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32>) -> tensor<1x1x1x2xf32>
//       CHECK:   return %{{.+}} : tensor<1x1x4xf32>
func.func @attention_cache(%x: tensor<1x1x4xf32>, %pk: tensor<1x2x3x2xf32>, %pv: tensor<1x2x3x2xf32>) -> tensor<1x1x4xf32> {
  %wq = arith.constant dense<[[0.0, 0.0, 1.0, 2.0], [0.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 6.0], [0.0, 0.0, 7.0, 8.0]]> : tensor<4x4xf32>
  %wk = arith.constant dense<[[0.0, 0.0, 2.0, 2.0], [0.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 6.0], [0.0, 0.0, 7.0, 8.0]]> : tensor<4x4xf32>
  %wv = arith.constant dense<[[0.0, 0.0, 3.0, 2.0], [0.0, 0.0, 3.0, 4.0], [0.0, 0.0, 5.0, 6.0], [0.0, 0.0, 7.0, 8.0]]> : tensor<4x4xf32>
  %e = tensor.empty() : tensor<1x2x1x2xf32>
  %q = sits.matmul %x, %wq : (tensor<1x1x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4xf32>
  %k = sits.matmul %x, %wk : (tensor<1x1x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4xf32>
  %v = sits.matmul %x, %wv : (tensor<1x1x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4xf32>
  %q4 = tensor.expand_shape %q [[0], [1], [2, 3]] output_shape [1, 1, 2, 2] : tensor<1x1x4xf32> into tensor<1x1x2x2xf32>
  %k4 = tensor.expand_shape %k [[0], [1], [2, 3]] output_shape [1, 1, 2, 2] : tensor<1x1x4xf32> into tensor<1x1x2x2xf32>
  %v4 = tensor.expand_shape %v [[0], [1], [2, 3]] output_shape [1, 1, 2, 2] : tensor<1x1x4xf32> into tensor<1x1x2x2xf32>
  %qh = linalg.transpose ins(%q4 : tensor<1x1x2x2xf32>) outs(%e : tensor<1x2x1x2xf32>) permutation = [0, 2, 1, 3]
  %kh = linalg.transpose ins(%k4 : tensor<1x1x2x2xf32>) outs(%e : tensor<1x2x1x2xf32>) permutation = [0, 2, 1, 3]
  %vh = linalg.transpose ins(%v4 : tensor<1x1x2x2xf32>) outs(%e : tensor<1x2x1x2xf32>) permutation = [0, 2, 1, 3]
  %kc = tensor.concat dim(2) %pk, %kh : (tensor<1x2x3x2xf32>, tensor<1x2x1x2xf32>) -> tensor<1x2x4x2xf32>
  %vc = tensor.concat dim(2) %pv, %vh : (tensor<1x2x3x2xf32>, tensor<1x2x1x2xf32>) -> tensor<1x2x4x2xf32>
  %a = sits.attention %qh, %kc, %vc : (tensor<1x2x1x2xf32>, tensor<1x2x4x2xf32>, tensor<1x2x4x2xf32>) -> tensor<1x2x1x2xf32>
  %e2 = tensor.empty() : tensor<1x1x2x2xf32>
  %at = linalg.transpose ins(%a : tensor<1x2x1x2xf32>) outs(%e2 : tensor<1x1x2x2xf32>) permutation = [0, 2, 1, 3]
  %c = tensor.collapse_shape %at [[0], [1], [2, 3]] : tensor<1x1x2x2xf32> into tensor<1x1x4xf32>
  %wo = arith.constant dense<3.0> : tensor<4x4xf32>
  %y = sits.matmul %c, %wo : (tensor<1x1x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4xf32>
  return %y : tensor<1x1x4xf32>
}
