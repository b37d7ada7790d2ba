// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.softmax.

func.func @scores(%s: tensor<1x12x128x128xf32>) -> tensor<1x12x128x128xf32> {
  %p = sits.softmax %s {axis = -1 : i64} : tensor<1x12x128x128xf32>
  return %p : tensor<1x12x128x128xf32>
}
// The default axis is elided.
// CHECK-LABEL: func.func @scores
//  CHECK-SAME: (%[[S:.+]]: tensor<1x12x128x128xf32>)
//       CHECK:   %[[P:.+]] = sits.softmax %[[S]] : tensor<1x12x128x128xf32>
//       CHECK:   return %[[P]]

// -----

func.func @axes(%x: tensor<2x3x4xf16>) -> (tensor<2x3x4xf16>, tensor<2x3x4xf16>, tensor<2x3x4xf16>) {
  %0 = sits.softmax %x {axis = 0 : i64} : tensor<2x3x4xf16>
  %1 = sits.softmax %x {axis = 2 : i64} : tensor<2x3x4xf16>
  %2 = sits.softmax %x {axis = -3 : i64} : tensor<2x3x4xf16>
  return %0, %1, %2 : tensor<2x3x4xf16>, tensor<2x3x4xf16>, tensor<2x3x4xf16>
}
// CHECK-LABEL: func.func @axes
//       CHECK:   sits.softmax %{{.+}} {axis = 0 : i64} : tensor<2x3x4xf16>
//       CHECK:   sits.softmax %{{.+}} {axis = 2 : i64} : tensor<2x3x4xf16>
//       CHECK:   sits.softmax %{{.+}} {axis = -3 : i64} : tensor<2x3x4xf16>

// -----

func.func @types(%a: tensor<8xbf16>, %b: tensor<8xf64>) -> (tensor<8xbf16>, tensor<8xf64>) {
  %0 = sits.softmax %a : tensor<8xbf16>
  %1 = sits.softmax %b : tensor<8xf64>
  return %0, %1 : tensor<8xbf16>, tensor<8xf64>
}
// CHECK-LABEL: func.func @types
//       CHECK:   sits.softmax %{{.+}} : tensor<8xbf16>
//       CHECK:   sits.softmax %{{.+}} : tensor<8xf64>
