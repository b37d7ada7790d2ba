// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// sits.conv: zero padding as tensor.pad, then linalg.conv_{1d_ncw_fcw,
// 2d_nchw_fchw,3d_ncdhw_fcdhw} with strides and dilations; groups > 1 run on
// [N, G, C/G, ...] / [G, O/G, C/G, ...] views (linalg.conv_2d_ngchw_gfchw in
// 2-D, a grouped generic in 1-D and 3-D); bias + activation epilogue.

// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$CH:.+]] = affine_map<(d0, d1, d2, d3) -> (d1)>
// CHECK-LABEL: func.func @conv2d_stride_pad_bias_relu
//  CHECK-SAME: (%[[X:.+]]: tensor<1x3x112x112xf32>, %[[W:.+]]: tensor<64x3x7x7xf32>, %[[B:.+]]: tensor<64xf32>)
//       CHECK:   %[[P:.+]] = tensor.pad %[[X]] low[0, 0, 3, 3] high[0, 0, 3, 3]
//       CHECK:     tensor.yield %{{.+}} : f32
//       CHECK:   } : tensor<1x3x112x112xf32> to tensor<1x3x118x118xf32>
//       CHECK:   %[[ACC:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<1x64x56x56xf32>)
//       CHECK:   %[[C:.+]] = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
//  CHECK-SAME:       ins(%[[P]], %[[W]] : tensor<1x3x118x118xf32>, tensor<64x3x7x7xf32>) outs(%[[ACC]] : tensor<1x64x56x56xf32>)
//       CHECK:   %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$CH]], #[[$ID]]]
//  CHECK-SAME:       ins(%[[C]], %[[B]] : tensor<1x64x56x56xf32>, tensor<64xf32>)
//       CHECK:     arith.addf
//       CHECK:     arith.maximumf
//       CHECK:   return %[[Y]]
func.func @conv2d_stride_pad_bias_relu(%x: tensor<1x3x112x112xf32>, %w: tensor<64x3x7x7xf32>, %b: tensor<64xf32>) -> tensor<1x64x56x56xf32> {
  %y = sits.conv %x, %w bias(%b) {strides = array<i64: 2, 2>, padding = array<i64: 3, 3, 3, 3>, activation = #sits.activation<relu>}
      : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>) -> tensor<1x64x56x56xf32>
  return %y : tensor<1x64x56x56xf32>
}

// -----

// Two groups, dilation 2: NGCHW views, bias [O] viewed as [G, O/G], the
// result collapsed back to [N, O, H, W] after the epilogue.
// CHECK-DAG: #[[$ID5:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$GF:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2)>
// CHECK-LABEL: func.func @conv2d_grouped
//  CHECK-SAME: (%[[X:.+]]: tensor<1x4x8x8xf32>, %[[W:.+]]: tensor<6x2x3x3xf32>, %[[B:.+]]: tensor<6xf32>)
//       CHECK:   %[[P:.+]] = tensor.pad %[[X]] low[0, 0, 1, 1] high[0, 0, 1, 1]
//       CHECK:   %[[XG:.+]] = tensor.expand_shape %[[P]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 2, 2, 10, 10] : tensor<1x4x10x10xf32> into tensor<1x2x2x10x10xf32>
//       CHECK:   %[[WG:.+]] = tensor.expand_shape %[[W]] {{\[}}[0, 1], [2], [3], [4]] output_shape [2, 3, 2, 3, 3] : tensor<6x2x3x3xf32> into tensor<2x3x2x3x3xf32>
//       CHECK:   %[[C:.+]] = linalg.conv_2d_ngchw_gfchw {dilations = dense<2> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
//  CHECK-SAME:       ins(%[[XG]], %[[WG]] : tensor<1x2x2x10x10xf32>, tensor<2x3x2x3x3xf32>) outs(%{{.+}} : tensor<1x2x3x3x3xf32>)
//       CHECK:   %[[BG:.+]] = tensor.expand_shape %[[B]] {{\[}}[0, 1]] output_shape [2, 3] : tensor<6xf32> into tensor<2x3xf32>
//       CHECK:   %[[E:.+]] = linalg.generic {indexing_maps = [#[[$ID5]], #[[$GF]], #[[$ID5]]]
//  CHECK-SAME:       ins(%[[C]], %[[BG]] : tensor<1x2x3x3x3xf32>, tensor<2x3xf32>)
//       CHECK:   %[[Y:.+]] = tensor.collapse_shape %[[E]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x2x3x3x3xf32> into tensor<1x6x3x3xf32>
//       CHECK:   return %[[Y]]
func.func @conv2d_grouped(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>) -> tensor<1x6x3x3xf32> {
  %y = sits.conv %x, %w bias(%b) {groups = 2 : i64, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>}
      : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<1x6x3x3xf32>
  return %y : tensor<1x6x3x3xf32>
}

// -----

// CHECK-LABEL: func.func @conv1d
//   CHECK-NOT:   tensor.pad
//       CHECK:   linalg.conv_1d_ncw_fcw {dilations = dense<2> : tensor<1xi64>, strides = dense<3> : tensor<1xi64>}
//  CHECK-SAME:       ins(%{{.+}}, %{{.+}} : tensor<2x3x16xf32>, tensor<8x3x3xf32>) outs(%{{.+}} : tensor<2x8x4xf32>)
func.func @conv1d(%x: tensor<2x3x16xf32>, %w: tensor<8x3x3xf32>) -> tensor<2x8x4xf32> {
  %y = sits.conv %x, %w {strides = array<i64: 3>, dilations = array<i64: 2>} : (tensor<2x3x16xf32>, tensor<8x3x3xf32>) -> tensor<2x8x4xf32>
  return %y : tensor<2x8x4xf32>
}

// -----

// Depthwise 1-D: a grouped-convolution generic, loops (n, g, f, e, c, w),
// the input read at e * stride + w * dilation.
// CHECK-DAG: #[[$IN:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d3 * 2 + d5 * 2)>
// CHECK-DAG: #[[$FI:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d2, d4, d5)>
// CHECK-DAG: #[[$OU:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @conv1d_depthwise
//  CHECK-SAME: (%[[X:.+]]: tensor<1x4x9xf32>, %[[W:.+]]: tensor<4x1x3xf32>)
//       CHECK:   %[[XG:.+]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2], [3]] output_shape [1, 4, 1, 9]
//       CHECK:   %[[WG:.+]] = tensor.expand_shape %[[W]] {{\[}}[0, 1], [2], [3]] output_shape [4, 1, 1, 3]
//       CHECK:   %[[C:.+]] = linalg.generic {indexing_maps = [#[[$IN]], #[[$FI]], #[[$OU]]],
//  CHECK-SAME:       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction", "reduction"]}
//  CHECK-SAME:       ins(%[[XG]], %[[WG]] : tensor<1x4x1x9xf32>, tensor<4x1x1x3xf32>) outs(%{{.+}} : tensor<1x4x1x3xf32>)
//       CHECK:   %[[Y:.+]] = tensor.collapse_shape %[[C]] {{\[}}[0], [1, 2], [3]] : tensor<1x4x1x3xf32> into tensor<1x4x3xf32>
//       CHECK:   return %[[Y]]
func.func @conv1d_depthwise(%x: tensor<1x4x9xf32>, %w: tensor<4x1x3xf32>) -> tensor<1x4x3xf32> {
  %y = sits.conv %x, %w {groups = 4 : i64, strides = array<i64: 2>, dilations = array<i64: 2>} : (tensor<1x4x9xf32>, tensor<4x1x3xf32>) -> tensor<1x4x3xf32>
  return %y : tensor<1x4x3xf32>
}

// -----

// bf16 3-D: f32 accumulation, one truncation in the epilogue.
// CHECK-LABEL: func.func @conv3d_bf16
//       CHECK:   %[[C:.+]] = linalg.conv_3d_ncdhw_fcdhw
//  CHECK-SAME:       ins(%{{.+}}, %{{.+}} : tensor<1x2x4x4x4xbf16>, tensor<3x2x2x2x2xbf16>) outs(%{{.+}} : tensor<1x3x3x3x3xf32>)
//       CHECK:   linalg.generic
//  CHECK-SAME:       ins(%[[C]] : tensor<1x3x3x3x3xf32>) outs(%{{.+}} : tensor<1x3x3x3x3xbf16>)
//       CHECK:     math.tanh %{{.+}} : f32
//       CHECK:     arith.truncf %{{.+}} : f32 to bf16
func.func @conv3d_bf16(%x: tensor<1x2x4x4x4xbf16>, %w: tensor<3x2x2x2x2xbf16>) -> tensor<1x3x3x3x3xbf16> {
  %y = sits.conv %x, %w {activation = #sits.activation<tanh>} : (tensor<1x2x4x4x4xbf16>, tensor<3x2x2x2x2xbf16>) -> tensor<1x3x3x3x3xbf16>
  return %y : tensor<1x3x3x3x3xbf16>
}

// -----

// Dynamic spatial extents: (padded - dilated kernel) / stride + 1 on index
// values.
// CHECK-LABEL: func.func @conv_dynamic
//  CHECK-SAME: (%[[X:.+]]: tensor<?x3x?x?xf32>, %[[W:.+]]: tensor<64x3x7x7xf32>)
//       CHECK:   %[[P:.+]] = tensor.pad %[[X]] low[0, 0, 3, 3] high[0, 0, 3, 3]
//       CHECK:   } : tensor<?x3x?x?xf32> to tensor<?x3x?x?xf32>
//       CHECK:   %[[N:.+]] = tensor.dim %[[P]], %{{.+}} : tensor<?x3x?x?xf32>
//       CHECK:   %[[H:.+]] = tensor.dim %[[P]], %{{.+}} : tensor<?x3x?x?xf32>
//       CHECK:   %[[HS:.+]] = arith.subi %[[H]], %{{.+}} : index
//       CHECK:   %[[HD:.+]] = arith.divui %[[HS]], %{{.+}} : index
//       CHECK:   %[[OH:.+]] = arith.addi %[[HD]], %{{.+}} : index
//       CHECK:   %[[E:.+]] = tensor.empty(%[[N]], %[[OH]], %{{.+}}) : tensor<?x64x?x?xf32>
//       CHECK:   linalg.conv_2d_nchw_fchw
//  CHECK-SAME:       ins(%[[P]], %[[W]] : tensor<?x3x?x?xf32>, tensor<64x3x7x7xf32>) outs(%{{.+}} : tensor<?x64x?x?xf32>)
func.func @conv_dynamic(%x: tensor<?x3x?x?xf32>, %w: tensor<64x3x7x7xf32>) -> tensor<?x64x?x?xf32> {
  %y = sits.conv %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 3, 3, 3, 3>}
      : (tensor<?x3x?x?xf32>, tensor<64x3x7x7xf32>) -> tensor<?x64x?x?xf32>
  return %y : tensor<?x64x?x?xf32>
}

// -----

// Grouped with dynamic channels: the filter's dynamic output channels are
// cast to the static extent the result type fixes before being split.
// CHECK-LABEL: func.func @conv_grouped_dynamic
//  CHECK-SAME: (%[[X:.+]]: tensor<1x?x8x8xf32>, %[[W:.+]]: tensor<?x?x3x3xf32>)
//       CHECK:   %[[CG:.+]] = tensor.dim %[[W]], %{{.+}} : tensor<?x?x3x3xf32>
//       CHECK:   tensor.expand_shape %[[X]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 4, %[[CG]], 8, 8] : tensor<1x?x8x8xf32> into tensor<1x4x?x8x8xf32>
//       CHECK:   %[[WS:.+]] = tensor.cast %[[W]] : tensor<?x?x3x3xf32> to tensor<16x?x3x3xf32>
//       CHECK:   tensor.expand_shape %[[WS]] {{\[}}[0, 1], [2], [3], [4]] output_shape [4, 4, %[[CG]], 3, 3]
//       CHECK:   linalg.conv_2d_ngchw_gfchw
//  CHECK-SAME:       outs(%{{.+}} : tensor<1x4x4x6x6xf32>)
func.func @conv_grouped_dynamic(%x: tensor<1x?x8x8xf32>, %w: tensor<?x?x3x3xf32>) -> tensor<1x16x6x6xf32> {
  %y = sits.conv %x, %w {groups = 4 : i64} : (tensor<1x?x8x8xf32>, tensor<?x?x3x3xf32>) -> tensor<1x16x6x6xf32>
  return %y : tensor<1x16x6x6xf32>
}
