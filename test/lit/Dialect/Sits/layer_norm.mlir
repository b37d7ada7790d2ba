// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.layer_norm: with and without bias, default and explicit
// axis (negative and positive) and epsilon.

func.func @gpt2(%x: tensor<1x128x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>) -> tensor<1x128x768xf32> {
  %y = sits.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f64}
      : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
  return %y : tensor<1x128x768xf32>
}
// The epsilon equals the default, so it is not printed.
// CHECK-LABEL: func.func @gpt2
//  CHECK-SAME: (%[[X:.+]]: tensor<1x128x768xf32>, %[[G:[^:]+]]: tensor<768xf32>, %[[B:[^:]+]]: tensor<768xf32>)
//       CHECK:   %[[Y:.+]] = sits.layer_norm %[[X]], %[[G]], %[[B]] :
//  CHECK-SAME:     (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
//       CHECK:   return %[[Y]]

// -----

func.func @no_bias(%x: tensor<2x16xf16>, %g: tensor<16xf16>) -> tensor<2x16xf16> {
  %y = sits.layer_norm %x, %g {epsilon = 9.9999999999999998E-13 : f64}
      : (tensor<2x16xf16>, tensor<16xf16>) -> tensor<2x16xf16>
  return %y : tensor<2x16xf16>
}
// CHECK-LABEL: func.func @no_bias
//  CHECK-SAME: (%[[X:.+]]: tensor<2x16xf16>, %[[G:.+]]: tensor<16xf16>)
//       CHECK:   sits.layer_norm %[[X]], %[[G]] {epsilon = 9.9999999999999998E-13 : f64} : (tensor<2x16xf16>, tensor<16xf16>) -> tensor<2x16xf16>

// -----

// Normalizing over the two trailing dimensions, axis given from the front
// and from the back.
func.func @multi_dim(%x: tensor<4x8x16xbf16>, %g: tensor<8x16xbf16>, %b: tensor<8x16xbf16>) -> (tensor<4x8x16xbf16>, tensor<4x8x16xbf16>) {
  %0 = sits.layer_norm %x, %g, %b {axis = 1 : i64} : (tensor<4x8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8x16xbf16>
  %1 = sits.layer_norm %x, %g, %b {axis = -2 : i64, epsilon = 0.0 : f64} : (tensor<4x8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8x16xbf16>
  return %0, %1 : tensor<4x8x16xbf16>, tensor<4x8x16xbf16>
}
// CHECK-LABEL: func.func @multi_dim
//       CHECK:   sits.layer_norm {{.+}} {axis = 1 : i64} : (tensor<4x8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8x16xbf16>
//       CHECK:   sits.layer_norm {{.+}} {axis = -2 : i64, epsilon = 0.000000e+00 : f64} : (tensor<4x8x16xbf16>, tensor<8x16xbf16>, tensor<8x16xbf16>) -> tensor<4x8x16xbf16>

// -----

// The default axis (-1) is elided when spelled out.
func.func @default_axis(%x: tensor<3x5xf64>, %g: tensor<5xf64>) -> tensor<3x5xf64> {
  %y = sits.layer_norm %x, %g {axis = -1 : i64} : (tensor<3x5xf64>, tensor<5xf64>) -> tensor<3x5xf64>
  return %y : tensor<3x5xf64>
}
// CHECK-LABEL: func.func @default_axis
//       CHECK:   sits.layer_norm
//   CHECK-NOT:   axis
//  CHECK-SAME:   : (tensor<3x5xf64>, tensor<5xf64>) -> tensor<3x5xf64>
