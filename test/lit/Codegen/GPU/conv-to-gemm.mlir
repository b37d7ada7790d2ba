// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-conv-to-gemm))' | FileCheck %s

// A padded 3x3 convolution: the zero padding is read by the gather (zeros
// outside the image), the filter is viewed as a [F, C*KH*KW] matrix and the
// GEMM writes NCHW directly.

// CHECK-LABEL: func.func @conv3x3_padded
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<1x8x16x16xf32>, %[[W:[a-z0-9]+]]: tensor<32x8x3x3xf32>)
//   CHECK-NOT:   tensor.pad
//       CHECK:   %[[I:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]
//  CHECK-SAME:     outs(%{{.+}} : tensor<1x72x16x16xf32>)
//       CHECK:     arith.cmpi sge
//       CHECK:     arith.cmpi slt
//       CHECK:     tensor.extract %[[X]]
//       CHECK:     arith.select
//       CHECK:   %[[F:.+]] = tensor.collapse_shape %[[W]] {{\[}}[0], [1, 2, 3]] : tensor<32x8x3x3xf32> into tensor<32x72xf32>
//       CHECK:   linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
//  CHECK-SAME:     ins(%[[I]], %[[F]] : tensor<1x72x16x16xf32>, tensor<32x72xf32>)
//  CHECK-SAME:     outs(%{{.+}} : tensor<1x32x16x16xf32>)
//       CHECK:     arith.mulf
//       CHECK:     arith.addf
//   CHECK-NOT:   linalg.conv_2d_nchw_fchw
func.func @conv3x3_padded(%x: tensor<1x8x16x16xf32>, %w: tensor<32x8x3x3xf32>) -> tensor<1x32x16x16xf32> {
  %zero = arith.constant 0.0 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %zero : f32
  } : tensor<1x8x16x16xf32> to tensor<1x8x18x18xf32>
  %e = tensor.empty() : tensor<1x32x16x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x16x16xf32>) -> tensor<1x32x16x16xf32>
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%p, %w : tensor<1x8x18x18xf32>, tensor<32x8x3x3xf32>) outs(%f : tensor<1x32x16x16xf32>) -> tensor<1x32x16x16xf32>
  return %y : tensor<1x32x16x16xf32>
}

// -----

// A pointwise (1x1, stride 1, unpadded) convolution reads its input as the
// GEMM's operand: no gather.

// CHECK-LABEL: func.func @conv1x1
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<1x64x7x7xf32>, %[[W:[a-z0-9]+]]: tensor<128x64x1x1xf32>,
//   CHECK-NOT:   tensor.extract
//       CHECK:   %[[F:.+]] = tensor.collapse_shape %[[W]]
//       CHECK:   linalg.generic
//  CHECK-SAME:     ins(%[[X]], %[[F]] : tensor<1x64x7x7xf32>, tensor<128x64xf32>)
func.func @conv1x1(%x: tensor<1x64x7x7xf32>, %w: tensor<128x64x1x1xf32>, %init: tensor<1x128x7x7xf32>) -> tensor<1x128x7x7xf32> {
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
         ins(%x, %w : tensor<1x64x7x7xf32>, tensor<128x64x1x1xf32>) outs(%init : tensor<1x128x7x7xf32>) -> tensor<1x128x7x7xf32>
  return %y : tensor<1x128x7x7xf32>
}

// -----

// A strided 1x1 convolution (a ResNet shortcut) gathers every other pixel.

// CHECK-LABEL: func.func @conv1x1_stride2
//       CHECK:   linalg.generic
//  CHECK-SAME:     outs(%{{.+}} : tensor<1x64x4x4xf32>)
//       CHECK:     %[[OH:.+]] = linalg.index 2
//       CHECK:     arith.muli %[[OH]], %c2
//   CHECK-NOT:     arith.select
//       CHECK:     tensor.extract
//       CHECK:   linalg.generic
//  CHECK-SAME:     outs(%{{.+}} : tensor<1x32x4x4xf32>)
func.func @conv1x1_stride2(%x: tensor<1x64x8x8xf32>, %w: tensor<32x64x1x1xf32>, %init: tensor<1x32x4x4xf32>) -> tensor<1x32x4x4xf32> {
  %y = linalg.conv_2d_nchw_fchw {dilations = dense<1> : tensor<2xi64>, strides = dense<2> : tensor<2xi64>}
         ins(%x, %w : tensor<1x64x8x8xf32>, tensor<32x64x1x1xf32>) outs(%init : tensor<1x32x4x4xf32>) -> tensor<1x32x4x4xf32>
  return %y : tensor<1x32x4x4xf32>
}
