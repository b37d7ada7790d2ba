// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.qconv: INT8 filter codes with one scale per output
// channel, sits.conv's attributes and epilogue.

func.func @stem(%x: tensor<1x3x112x112xf32>, %w: tensor<64x3x7x7xi8>, %s: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<1x64x56x56xf32> {
  %y = sits.qconv %x, %w, %s bias(%b) {strides = array<i64: 2, 2>,
                                       padding = array<i64: 3, 3, 3, 3>,
                                       activation = #sits.activation<relu>}
      : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xi8>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  return %y : tensor<1x64x56x56xf32>
}
// CHECK-LABEL: func.func @stem
//  CHECK-SAME: (%[[X:.+]]: tensor<1x3x112x112xf32>, %[[W:.+]]: tensor<64x3x7x7xi8>, %[[S:.+]]: tensor<64xf32>, %[[B:.+]]: tensor<64xf32>)
//       CHECK:   %[[Y:.+]] = sits.qconv %[[X]], %[[W]], %[[S]] bias(%[[B]])
//  CHECK-SAME:     activation = #sits.activation<relu>
//  CHECK-SAME:     padding = array<i64: 3, 3, 3, 3>
//  CHECK-SAME:     strides = array<i64: 2, 2>
//  CHECK-SAME:     : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xi8>, tensor<64xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
//       CHECK:   return %[[Y]]

// -----

// Depthwise 1-D with a dynamic batch; the result shape is inferred as for
// sits.conv.
func.func @depthwise(%x: tensor<?x8x16xf16>, %w: tensor<8x1x3xi8>, %s: tensor<8xf16>) -> tensor<?x8x14xf16> {
  %y = sits.qconv %x, %w, %s {groups = 8 : i64}
      : (tensor<?x8x16xf16>, tensor<8x1x3xi8>, tensor<8xf16>) -> tensor<?x8x14xf16>
  return %y : tensor<?x8x14xf16>
}
// CHECK-LABEL: func.func @depthwise
//       CHECK:   sits.qconv %{{.+}}, %{{.+}}, %{{.+}} {groups = 8 : i64} : (tensor<?x8x16xf16>, tensor<8x1x3xi8>, tensor<8xf16>) -> tensor<?x8x14xf16>
