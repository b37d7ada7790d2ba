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
