// RUN: sits-opt %s --split-input-file --sits-fold-weight-transposes | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-fold-weight-transposes --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// A constant used transposed is stored transposed: the data moves, the
// flag goes.
// CHECK-LABEL: func.func @linear
//       CHECK:   %[[W:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
//       CHECK:   sits.matmul %{{.+}}, %[[W]] : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
// STATS: (S) 1 num-folded
func.func @linear(%x: tensor<4x3xf32>) -> tensor<4x2xf32> {
  %w = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// A constant with another user, a non-constant rhs and an untransposed rhs
// are left alone.
// CHECK-LABEL: func.func @left_alone
//       CHECK:   sits.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>)
//       CHECK:   sits.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>)
//       CHECK:   sits.matmul %{{.+}}, %{{.+}} : (tensor<4x3xf32>, tensor<3x2xf32>)
func.func @left_alone(%x: tensor<4x3xf32>, %v: tensor<2x3xf32>, %u: tensor<3x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<2x3xf32>) {
  %w = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %a = sits.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %b = sits.matmul %x, %v {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %c = sits.matmul %x, %u : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
  return %a, %b, %c, %w : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<2x3xf32>
}

// -----

// A layer outlined into a private function: each call passes the transpose
// of its own weight as a new argument, appended, and the old one goes with
// the constants only it read.
// CHECK-LABEL: func.func private @layer
//  CHECK-SAME:   (%[[X:.+]]: tensor<4x3xf32>, %[[S:.+]]: f32, %[[WT:.+]]: tensor<3x2xf32>)
//       CHECK:   sits.matmul %[[X]], %[[WT]] : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
// CHECK-LABEL: func.func @layers
//  CHECK-SAME:   (%[[IN:.+]]: tensor<4x3xf32>)
//   CHECK-NOT:   tensor<2x3xf32>
//       CHECK:   %[[W0:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
//  CHECK-NEXT:   call @layer(%[[IN]], %{{.+}}, %[[W0]]) : (tensor<4x3xf32>, f32, tensor<3x2xf32>) -> tensor<4x2xf32>
//       CHECK:   %[[W1:.+]] = arith.constant dense<{{\[}}[7.000000e+00, 1.000000e+01], [8.000000e+00, 1.100000e+01], [9.000000e+00, 1.200000e+01]]> : tensor<3x2xf32>
//  CHECK-NEXT:   call @layer(%[[IN]], %{{.+}}, %[[W1]])
//       CHECK:   %[[W2:.+]] = arith.constant dense<{{\[}}[0.000000e+00, 3.000000e+00], [1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00]]> : tensor<3x2xf32>
//  CHECK-NEXT:   call @layer(%[[IN]], %{{.+}}, %[[W2]])
//   CHECK-NOT:   tensor<2x3xf32>
// STATS: (S) 1 num-folded
func.func private @layer(%x: tensor<4x3xf32>, %w: tensor<2x3xf32>, %s: f32) -> tensor<4x2xf32> {
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
func.func @layers(%x: tensor<4x3xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>) {
  %s = arith.constant 1.0 : f32
  %w0 = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %h0 = call @layer(%x, %w0, %s) : (tensor<4x3xf32>, tensor<2x3xf32>, f32) -> tensor<4x2xf32>
  %w1 = arith.constant dense<[[7.0, 8.0, 9.0], [10.0, 11.0, 12.0]]> : tensor<2x3xf32>
  %h1 = call @layer(%x, %w1, %s) : (tensor<4x3xf32>, tensor<2x3xf32>, f32) -> tensor<4x2xf32>
  %w2 = arith.constant dense<[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]> : tensor<2x3xf32>
  %h2 = call @layer(%x, %w2, %s) : (tensor<4x3xf32>, tensor<2x3xf32>, f32) -> tensor<4x2xf32>
  return %h0, %h1, %h2 : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>
}

// -----

// Arguments whose constants are not known on every path are left alone: a
// call passing a non-constant, a public function (callable from outside),
// a function referenced other than by calls (a function value), and an argument with another
// use (both layouts would then be live).
// CHECK-LABEL: func.func private @some_constant
//       CHECK:   sits.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>)
// CHECK-LABEL: func.func @public
//       CHECK:   sits.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>)
// CHECK-LABEL: func.func private @referenced
//       CHECK:   sits.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>)
// CHECK-LABEL: func.func private @second_use
//       CHECK:   sits.matmul %{{.+}}, %{{.+}} {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>)
// CHECK-LABEL: func.func @callers
//   CHECK-NOT:   tensor<3x2xf32>
// STATS: (S) 0 num-folded
func.func private @some_constant(%x: tensor<4x3xf32>, %w: tensor<2x3xf32>) -> tensor<4x2xf32> {
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
func.func @public(%x: tensor<4x3xf32>, %w: tensor<2x3xf32>) -> tensor<4x2xf32> {
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
func.func private @referenced(%x: tensor<4x3xf32>, %w: tensor<2x3xf32>) -> tensor<4x2xf32> {
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}
func.func private @second_use(%x: tensor<4x3xf32>, %w: tensor<2x3xf32>) -> (tensor<4x2xf32>, tensor<2x3xf32>) {
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  return %y, %w : tensor<4x2xf32>, tensor<2x3xf32>
}
func.func @callers(%x: tensor<4x3xf32>, %v: tensor<2x3xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<2x3xf32>) {
  %w = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %a = call @some_constant(%x, %w) : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %b = call @some_constant(%x, %v) : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %c = call @public(%x, %w) : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %d = call @referenced(%x, %w) : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %ref = func.constant @referenced : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %d2 = func.call_indirect %ref(%x, %w) : (tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<4x2xf32>
  %e, %f = call @second_use(%x, %w) : (tensor<4x3xf32>, tensor<2x3xf32>) -> (tensor<4x2xf32>, tensor<2x3xf32>)
  return %a, %b, %c, %d, %d2, %e, %f : tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<4x2xf32>, tensor<2x3xf32>
}

// -----

// A sits.qmatmul over [N, K] codes (onnxruntime's MatMulNBits): the codes
// and the per-group scales [N, K/G] are transposed together and the axis
// follows (K is now axis 0). Packed codes, whose words run along K, stay.
// CHECK-LABEL: func.func @qmatmul
//   CHECK-DAG:   %[[W:.+]] = arith.constant dense<{{\[}}[1, 3], [2, 4]]> : tensor<2x2xi8>
//   CHECK-DAG:   %[[S:.+]] = arith.constant dense<{{\[}}[5.000000e-01, 2.500000e-01]]> : tensor<1x2xf32>
//       CHECK:   sits.qmatmul %{{.+}}, %[[W]], %[[S]] {axis = 0 : i64, block_size = 2 : i64} : (tensor<4x2xf32>, tensor<2x2xi8>, tensor<1x2xf32>)
//       CHECK:   sits.qmatmul %{{.+}}, %{{.+}}, %{{.+}} {axis = 1 : i64, block_size = 2 : i64, transpose_weight} : (tensor<4x2xf32>, tensor<2x2xi4, #sits.packed<storage = i8, axis = 1>>, tensor<2x1xf32>)
// STATS: (S) 1 num-folded
func.func @qmatmul(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>) {
  %w = arith.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi8>
  %s = arith.constant dense<[[0.5], [0.25]]> : tensor<2x1xf32>
  %y = sits.qmatmul %x, %w, %s {axis = 1 : i64, block_size = 2 : i64, transpose_weight} : (tensor<4x2xf32>, tensor<2x2xi8>, tensor<2x1xf32>) -> tensor<4x2xf32>
  %p = arith.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi4, #sits.packed<storage = i8, axis = 1>>
  %s2 = arith.constant dense<[[0.5], [0.25]]> : tensor<2x1xf32>
  %z = sits.qmatmul %x, %p, %s2 {axis = 1 : i64, block_size = 2 : i64, transpose_weight} : (tensor<4x2xf32>, tensor<2x2xi4, #sits.packed<storage = i8, axis = 1>>, tensor<2x1xf32>) -> tensor<4x2xf32>
  return %y, %z : tensor<4x2xf32>, tensor<4x2xf32>
}
