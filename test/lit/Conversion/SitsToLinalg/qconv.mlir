// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg --linalg-generalize-named-ops | FileCheck %s --check-prefix=BODY

// sits.qconv lowers as sits.conv with the INT8 filter read as it is (the
// convolution widens each code in its body), then the accumulator times the
// per-output-channel scale, then the bias + activation epilogue.

// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$CH:.+]] = affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-LABEL: func.func @qconv2d
//  CHECK-SAME: (%[[X:.+]]: tensor<1x3x8x8xf32>, %[[W:.+]]: tensor<4x3x3x3xi8>, %[[S:.+]]: tensor<4xf32>, %[[B:.+]]: tensor<4xf32>)
//       CHECK:   %[[P:.+]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 1]
//       CHECK:   %[[ACC:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<1x4x4x4xf32>)
//       CHECK:   %[[C:.+]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
//  CHECK-SAME:       ins(%[[P]], %[[W]] : tensor<1x3x10x10xf32>, tensor<4x3x3x3xi8>) outs(%[[ACC]] : tensor<1x4x4x4xf32>)
//       CHECK:   %[[SC:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$CH]], #[[$ID]]]
//  CHECK-SAME:       ins(%[[C]], %[[S]] : tensor<1x4x4x4xf32>, tensor<4xf32>)
//       CHECK:     arith.mulf
//       CHECK:   %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$CH]], #[[$ID]]]
//  CHECK-SAME:       ins(%[[SC]], %[[B]] : tensor<1x4x4x4xf32>, tensor<4xf32>)
//       CHECK:     arith.addf
//       CHECK:     arith.maximumf
//       CHECK:   return %[[Y]]
// BODY-LABEL: func.func @qconv2d
//       BODY:   linalg.generic
//       BODY:   ^bb0(%[[IN:.+]]: f32, %[[CODE:.+]]: i8, %[[OUT:.+]]: f32):
//       BODY:     %[[WIDE:.+]] = arith.sitofp %[[CODE]] : i8 to f32
//       BODY:     %[[PROD:.+]] = arith.mulf %[[IN]], %[[WIDE]] : f32
//       BODY:     arith.addf %[[OUT]], %[[PROD]] : f32
func.func @qconv2d(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xi8>, %s: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<1x4x4x4xf32> {
  %y = sits.qconv %x, %w, %s bias(%b) {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, activation = #sits.activation<relu>}
      : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  return %y : tensor<1x4x4x4xf32>
}

// -----

// Two groups in 2-D: the named grouped convolution on [G, O/G, ...] views,
// the scale viewed as [G, O/G] like the bias.
// CHECK-DAG: #[[$ID5:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$GF:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2)>
// CHECK-LABEL: func.func @qconv2d_grouped
//  CHECK-SAME: (%[[X:.+]]: tensor<1x4x6x6xf32>, %[[W:.+]]: tensor<6x2x3x3xi8>, %[[S:.+]]: tensor<6xf32>)
//       CHECK:   %[[WG:.+]] = tensor.expand_shape %[[W]] {{\[}}[0, 1], [2], [3], [4]] output_shape [2, 3, 2, 3, 3] : tensor<6x2x3x3xi8> into tensor<2x3x2x3x3xi8>
//       CHECK:   %[[C:.+]] = linalg.conv_2d_ngchw_gfchw
//  CHECK-SAME:       ins(%{{.+}}, %[[WG]] : tensor<1x2x2x6x6xf32>, tensor<2x3x2x3x3xi8>)
//       CHECK:   %[[SG:.+]] = tensor.expand_shape %[[S]] {{\[}}[0, 1]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
//       CHECK:   %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID5]], #[[$GF]], #[[$ID5]]]
//  CHECK-SAME:       ins(%[[C]], %[[SG]] : tensor<1x2x3x4x4xf32>, tensor<2x3xf32>)
//       CHECK:     arith.mulf
//       CHECK:   tensor.collapse_shape %[[Y]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x2x3x4x4xf32> into tensor<1x6x4x4xf32>
func.func @qconv2d_grouped(%x: tensor<1x4x6x6xf32>, %w: tensor<6x2x3x3xi8>, %s: tensor<6xf32>) -> tensor<1x6x4x4xf32> {
  %y = sits.qconv %x, %w, %s {groups = 2 : i64}
      : (tensor<1x4x6x6xf32>, tensor<6x2x3x3xi8>, tensor<6xf32>) -> tensor<1x6x4x4xf32>
  return %y : tensor<1x6x4x4xf32>
}

// -----

// Grouped 1-D (a generic): f16 activations and codes widen to the f32
// accumulator; the f16 scale too, and one cast to f16 comes last.
// CHECK-LABEL: func.func @qconv1d_grouped_f16
//       CHECK:   linalg.generic
//  CHECK-SAME:       ins(%{{.+}}, %{{.+}} : tensor<1x2x2x8xf16>, tensor<2x2x2x3xi8>) outs(%{{.+}} : tensor<1x2x2x6xf32>)
//       CHECK:   ^bb0(%[[IN:.+]]: f16, %[[CODE:.+]]: i8, %[[OUT:.+]]: f32):
//       CHECK:     %[[WIDE:.+]] = arith.sitofp %[[CODE]] : i8 to f32
//       CHECK:     %[[X32:.+]] = arith.extf %[[IN]] : f16 to f32
//       CHECK:     %[[PROD:.+]] = arith.mulf %[[X32]], %[[WIDE]] : f32
//       CHECK:     arith.addf %[[OUT]], %[[PROD]] : f32
//       CHECK:   linalg.generic
//  CHECK-SAME:       ins(%{{.+}}, %{{.+}} : tensor<1x2x2x6xf32>, tensor<2x2xf16>) outs(%{{.+}} : tensor<1x2x2x6xf32>)
//       CHECK:     arith.extf %{{.+}} : f16 to f32
//       CHECK:     arith.mulf
//       CHECK:     arith.truncf %{{.+}} : f32 to f16
func.func @qconv1d_grouped_f16(%x: tensor<1x4x8xf16>, %w: tensor<4x2x3xi8>, %s: tensor<4xf16>) -> tensor<1x4x6xf16> {
  %y = sits.qconv %x, %w, %s {groups = 2 : i64}
      : (tensor<1x4x8xf16>, tensor<4x2x3xi8>, tensor<4xf16>) -> tensor<1x4x6xf16>
  return %y : tensor<1x4x6xf16>
}
