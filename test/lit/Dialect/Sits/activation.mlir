// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.activation with every kind. (Parsing alone does not
// fold, so `<none>` and relu(relu) survive; canonicalize.mlir folds them.)

func.func @kinds(%x: tensor<8x4096xf32>) -> (tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>) {
  %0 = sits.activation <none> %x : tensor<8x4096xf32>
  %1 = sits.activation <relu> %x : tensor<8x4096xf32>
  %2 = sits.activation <gelu> %x : tensor<8x4096xf32>
  %3 = sits.activation <gelu_tanh> %x : tensor<8x4096xf32>
  %4 = sits.activation <silu> %x : tensor<8x4096xf32>
  %5 = sits.activation <sigmoid> %x : tensor<8x4096xf32>
  %6 = sits.activation <tanh> %x : tensor<8x4096xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>, tensor<8x4096xf32>
}
// CHECK-LABEL: func.func @kinds
//  CHECK-SAME: (%[[X:.+]]: tensor<8x4096xf32>)
//       CHECK:   %[[A0:.+]] = sits.activation <none> %[[X]] : tensor<8x4096xf32>
//       CHECK:   %[[A1:.+]] = sits.activation <relu> %[[X]] : tensor<8x4096xf32>
//       CHECK:   %[[A2:.+]] = sits.activation <gelu> %[[X]] : tensor<8x4096xf32>
//       CHECK:   %[[A3:.+]] = sits.activation <gelu_tanh> %[[X]] : tensor<8x4096xf32>
//       CHECK:   %[[A4:.+]] = sits.activation <silu> %[[X]] : tensor<8x4096xf32>
//       CHECK:   %[[A5:.+]] = sits.activation <sigmoid> %[[X]] : tensor<8x4096xf32>
//       CHECK:   %[[A6:.+]] = sits.activation <tanh> %[[X]] : tensor<8x4096xf32>
//       CHECK:   return %[[A0]], %[[A1]], %[[A2]], %[[A3]], %[[A4]], %[[A5]], %[[A6]]

// -----

func.func @chain(%x: tensor<2x3xf16>, %y: tensor<4xbf16>, %z: tensor<f64>) -> (tensor<2x3xf16>, tensor<4xbf16>, tensor<f64>) {
  %0 = sits.activation <relu> %x : tensor<2x3xf16>
  %1 = sits.activation <relu> %0 : tensor<2x3xf16>
  %2 = sits.activation <silu> %y : tensor<4xbf16>
  %3 = sits.activation <tanh> %z : tensor<f64>
  return %1, %2, %3 : tensor<2x3xf16>, tensor<4xbf16>, tensor<f64>
}
// CHECK-LABEL: func.func @chain
//       CHECK:   %[[R0:.+]] = sits.activation <relu> %{{.+}} : tensor<2x3xf16>
//       CHECK:   %[[R1:.+]] = sits.activation <relu> %[[R0]] : tensor<2x3xf16>
//       CHECK:   sits.activation <silu> %{{.+}} : tensor<4xbf16>
//       CHECK:   sits.activation <tanh> %{{.+}} : tensor<f64>
//       CHECK:   return %[[R1]]
