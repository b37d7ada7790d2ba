// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.rms_norm.

// Llama's RMSNorm.
func.func @llama(%x: tensor<1x16x4096xf16>, %g: tensor<4096xf16>) -> tensor<1x16x4096xf16> {
  %y = sits.rms_norm %x, %g {epsilon = 1.0e-06 : f64}
      : (tensor<1x16x4096xf16>, tensor<4096xf16>) -> tensor<1x16x4096xf16>
  return %y : tensor<1x16x4096xf16>
}
// CHECK-LABEL: func.func @llama
//  CHECK-SAME: (%[[X:.+]]: tensor<1x16x4096xf16>, %[[G:.+]]: tensor<4096xf16>)
//       CHECK:   %[[Y:.+]] = sits.rms_norm %[[X]], %[[G]] {epsilon = 9.9999999999999995E-7 : f64}
//  CHECK-SAME:     : (tensor<1x16x4096xf16>, tensor<4096xf16>) -> tensor<1x16x4096xf16>
//       CHECK:   return %[[Y]]

// -----

// Defaults (axis -1, epsilon 1e-5) are not printed.
func.func @defaults(%x: tensor<8x64xbf16>, %g: tensor<64xbf16>) -> tensor<8x64xbf16> {
  %y = sits.rms_norm %x, %g {axis = -1 : i64, epsilon = 1.0e-05 : f64} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
  return %y : tensor<8x64xbf16>
}
// CHECK-LABEL: func.func @defaults
//       CHECK:   sits.rms_norm %{{.+}}, %{{[^ ]+}} : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>

// -----

// Normalizing over everything (axis 0) of a rank-2 tensor.
func.func @whole_tensor(%x: tensor<4x8xf32>, %g: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = sits.rms_norm %x, %g {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}
// CHECK-LABEL: func.func @whole_tensor
//       CHECK:   sits.rms_norm {{.+}} {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
