// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.conv: 1-D, 2-D and 3-D, strides, asymmetric padding,
// dilations, groups (depthwise), bias and epilogue.

// The 7x7 stride-2 stem of ResNet-18 with batch norm folded into it.
func.func @resnet_stem(%x: tensor<1x3x112x112xf32>, %w: tensor<64x3x7x7xf32>, %b: tensor<64xf32>) -> tensor<1x64x56x56xf32> {
  %y = sits.conv %x, %w bias(%b) {strides = array<i64: 2, 2>,
                                  padding = array<i64: 3, 3, 3, 3>,
                                  activation = #sits.activation<relu>}
      : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  return %y : tensor<1x64x56x56xf32>
}
// CHECK-LABEL: func.func @resnet_stem
//  CHECK-SAME: (%[[X:.+]]: tensor<1x3x112x112xf32>, %[[W:.+]]: tensor<64x3x7x7xf32>, %[[B:.+]]: tensor<64xf32>)
//       CHECK:   %[[Y:.+]] = sits.conv %[[X]], %[[W]] bias(%[[B]])
//  CHECK-SAME:     activation = #sits.activation<relu>
//  CHECK-SAME:     padding = array<i64: 3, 3, 3, 3>
//  CHECK-SAME:     strides = array<i64: 2, 2>
//  CHECK-SAME:     : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
//       CHECK:   return %[[Y]]

// -----

// Defaults (stride 1, no padding, dilation 1, one group) are not printed.
func.func @defaults(%x: tensor<1x8x10x10xf32>, %w: tensor<16x8x3x3xf32>) -> tensor<1x16x8x8xf32> {
  %y = sits.conv %x, %w {groups = 1 : i64, activation = #sits.activation<none>}
      : (tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x8x8xf32>
  return %y : tensor<1x16x8x8xf32>
}
// CHECK-LABEL: func.func @defaults
//  CHECK-SAME: (%[[X:.+]]: tensor<1x8x10x10xf32>, %[[W:.+]]: tensor<16x8x3x3xf32>)
//       CHECK:   sits.conv %[[X]], %[[W]] : (tensor<1x8x10x10xf32>, tensor<16x8x3x3xf32>) -> tensor<1x16x8x8xf32>

// -----

// Asymmetric padding (begins then ends) and dilation:
// H: (10 + 1 + 2 - 2*(3-1) - 1) / 1 + 1 = 9, W: (10 + 0 + 0 - 1*(3-1) - 1) / 2 + 1 = 4.
func.func @asymmetric_dilated(%x: tensor<2x4x10x10xf16>, %w: tensor<4x4x3x3xf16>) -> tensor<2x4x9x4xf16> {
  %y = sits.conv %x, %w {strides = array<i64: 1, 2>, padding = array<i64: 1, 0, 2, 0>,
                         dilations = array<i64: 2, 1>}
      : (tensor<2x4x10x10xf16>, tensor<4x4x3x3xf16>) -> tensor<2x4x9x4xf16>
  return %y : tensor<2x4x9x4xf16>
}
// CHECK-LABEL: func.func @asymmetric_dilated
//       CHECK:   sits.conv
//  CHECK-SAME:     dilations = array<i64: 2, 1>
//  CHECK-SAME:     padding = array<i64: 1, 0, 2, 0>
//  CHECK-SAME:     strides = array<i64: 1, 2>
//  CHECK-SAME:     -> tensor<2x4x9x4xf16>

// -----

// Depthwise 3x3: groups = C, filter [C, 1, 3, 3].
func.func @depthwise(%x: tensor<1x32x16x16xbf16>, %w: tensor<32x1x3x3xbf16>) -> tensor<1x32x16x16xbf16> {
  %y = sits.conv %x, %w {groups = 32 : i64, padding = array<i64: 1, 1, 1, 1>}
      : (tensor<1x32x16x16xbf16>, tensor<32x1x3x3xbf16>) -> tensor<1x32x16x16xbf16>
  return %y : tensor<1x32x16x16xbf16>
}
// CHECK-LABEL: func.func @depthwise
//       CHECK:   sits.conv %{{[^ ]+}}, %{{[^ ]+}} {groups = 32 : i64, padding = array<i64: 1, 1, 1, 1>}
//  CHECK-SAME:     : (tensor<1x32x16x16xbf16>, tensor<32x1x3x3xbf16>) -> tensor<1x32x16x16xbf16>

// -----

// Grouped (not depthwise): 8 input channels in 2 groups of 4.
func.func @grouped(%x: tensor<1x8x5x5xf32>, %w: tensor<6x4x1x1xf32>) -> tensor<1x6x5x5xf32> {
  %y = sits.conv %x, %w {groups = 2 : i64} : (tensor<1x8x5x5xf32>, tensor<6x4x1x1xf32>) -> tensor<1x6x5x5xf32>
  return %y : tensor<1x6x5x5xf32>
}
// CHECK-LABEL: func.func @grouped
//       CHECK:   sits.conv {{.+}} {groups = 2 : i64} : (tensor<1x8x5x5xf32>, tensor<6x4x1x1xf32>) -> tensor<1x6x5x5xf32>

// -----

func.func @conv1d(%x: tensor<4x16x100xf32>, %w: tensor<32x16x5xf32>, %b: tensor<32xf32>) -> tensor<4x32x49xf32> {
  %y = sits.conv %x, %w bias(%b) {strides = array<i64: 2>, padding = array<i64: 0, 1>,
                                  activation = #sits.activation<gelu_tanh>}
      : (tensor<4x16x100xf32>, tensor<32x16x5xf32>, tensor<32xf32>) -> tensor<4x32x49xf32>
  return %y : tensor<4x32x49xf32>
}
// CHECK-LABEL: func.func @conv1d
//       CHECK:   sits.conv {{.+}} bias({{.+}}) {activation = #sits.activation<gelu_tanh>, padding = array<i64: 0, 1>, strides = array<i64: 2>}
//  CHECK-SAME:     : (tensor<4x16x100xf32>, tensor<32x16x5xf32>, tensor<32xf32>) -> tensor<4x32x49xf32>

// -----

func.func @conv3d(%x: tensor<1x2x8x8x8xf64>, %w: tensor<4x2x3x3x3xf64>) -> tensor<1x4x4x4x4xf64> {
  %y = sits.conv %x, %w {strides = array<i64: 2, 2, 2>, padding = array<i64: 1, 1, 1, 1, 1, 1>,
                         dilations = array<i64: 1, 1, 1>, activation = #sits.activation<sigmoid>}
      : (tensor<1x2x8x8x8xf64>, tensor<4x2x3x3x3xf64>) -> tensor<1x4x4x4x4xf64>
  return %y : tensor<1x4x4x4x4xf64>
}
// CHECK-LABEL: func.func @conv3d
//       CHECK:   sits.conv
//  CHECK-SAME:     activation = #sits.activation<sigmoid>
//  CHECK-SAME:     dilations = array<i64: 1, 1, 1>
//  CHECK-SAME:     padding = array<i64: 1, 1, 1, 1, 1, 1>
//  CHECK-SAME:     strides = array<i64: 2, 2, 2>
//  CHECK-SAME:     -> tensor<1x4x4x4x4xf64>
