// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// sits.activation: one elementwise generic per op, computed in f32 or wider.
// GELU is 0.5 x erfc(-x / sqrt 2) (= 0.5 x (1 + erf(x / sqrt 2)) without
// the cancellation of 1 + erf for negative x); the tanh approximation is
// x sigmoid(2 sqrt(2 / pi) (x + 0.044715 x^3)) for the same reason.

// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @relu
//  CHECK-SAME: (%[[X:.+]]: tensor<8x16xf32>)
//       CHECK:   %[[E:.+]] = tensor.empty() : tensor<8x16xf32>
//       CHECK:   %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ID]]], iterator_types = ["parallel", "parallel"]}
//  CHECK-SAME:       ins(%[[X]] : tensor<8x16xf32>) outs(%[[E]] : tensor<8x16xf32>)
//       CHECK:   ^bb0(%[[IN:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
//       CHECK:     %[[R:.+]] = arith.maximumf %[[IN]], %[[ZERO]] : f32
//       CHECK:     linalg.yield %[[R]] : f32
//       CHECK:   return %[[Y]]
func.func @relu(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %y = sits.activation <relu> %x : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// -----

// CHECK-LABEL: func.func @gelu_bf16
//       CHECK:   ^bb0(%[[IN:.+]]: bf16, %{{.+}}: bf16):
//       CHECK:     %[[X:.+]] = arith.extf %[[IN]] : bf16 to f32
//       CHECK:     %[[C:.+]] = arith.constant -0.707106769 : f32
//       CHECK:     %[[A:.+]] = arith.mulf %[[X]], %[[C]] : f32
//       CHECK:     %[[ERFC:.+]] = math.erfc %[[A]] : f32
//       CHECK:     %[[HALF:.+]] = arith.constant 5.000000e-01 : f32
//       CHECK:     %[[HX:.+]] = arith.mulf %[[HALF]], %[[X]] : f32
//       CHECK:     %[[G:.+]] = arith.mulf %[[HX]], %[[ERFC]] : f32
//       CHECK:     %[[T:.+]] = arith.truncf %[[G]] : f32 to bf16
//       CHECK:     linalg.yield %[[T]] : bf16
func.func @gelu_bf16(%x: tensor<?x768xbf16>) -> tensor<?x768xbf16> {
  %y = sits.activation <gelu> %x : tensor<?x768xbf16>
  return %y : tensor<?x768xbf16>
}

// -----

// CHECK-LABEL: func.func @gelu_tanh
//       CHECK:   ^bb0(%[[X:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[X2:.+]] = arith.mulf %[[X]], %[[X]] : f32
//       CHECK:     %[[X3:.+]] = arith.mulf %[[X2]], %[[X]] : f32
//       CHECK:     arith.constant 4.471500e-02 : f32
//       CHECK:     arith.constant 1.59576917 : f32
//       CHECK:     %[[NEG:.+]] = arith.negf %{{.+}} : f32
//       CHECK:     %[[EXP:.+]] = math.exp %[[NEG]] : f32
//       CHECK:     %[[DEN:.+]] = arith.addf %{{.+}}, %[[EXP]] : f32
//       CHECK:     %[[SIG:.+]] = arith.divf %{{.+}}, %[[DEN]] : f32
//       CHECK:     %[[Y:.+]] = arith.mulf %[[X]], %[[SIG]] : f32
//       CHECK:     linalg.yield %[[Y]] : f32
//   CHECK-NOT:   math.tanh
func.func @gelu_tanh(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = sits.activation <gelu_tanh> %x : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @silu_sigmoid_tanh
//       CHECK:   linalg.generic
//       CHECK:   ^bb0(%[[X:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[NEG:.+]] = arith.negf %[[X]] : f32
//       CHECK:     %[[EXP:.+]] = math.exp %[[NEG]] : f32
//       CHECK:     %[[DEN:.+]] = arith.addf %{{.+}}, %[[EXP]] : f32
//       CHECK:     %[[SIG:.+]] = arith.divf %{{.+}}, %[[DEN]] : f32
//       CHECK:     %[[Y:.+]] = arith.mulf %[[X]], %[[SIG]] : f32
//       CHECK:     linalg.yield %[[Y]] : f32
//       CHECK:   linalg.generic
//       CHECK:   ^bb0(%[[X:.+]]: f32, %{{.+}}: f32):
//       CHECK:     arith.negf %[[X]] : f32
//       CHECK:     math.exp
//       CHECK:     %[[SIG:.+]] = arith.divf
//       CHECK:     linalg.yield %[[SIG]] : f32
//       CHECK:   linalg.generic
//       CHECK:   ^bb0(%[[X:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[T:.+]] = math.tanh %[[X]] : f32
//       CHECK:     linalg.yield %[[T]] : f32
func.func @silu_sigmoid_tanh(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %a = sits.activation <silu> %x : tensor<4xf32>
  %b = sits.activation <sigmoid> %x : tensor<4xf32>
  %c = sits.activation <tanh> %x : tensor<4xf32>
  return %a, %b, %c : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
