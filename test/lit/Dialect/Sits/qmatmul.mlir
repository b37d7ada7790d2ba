// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.qmatmul: per-tensor, per-channel and per-group scales,
// zero points, bias, packed INT4 weights, transposed weights and fp8.

// INT4 weights, one scale per 128 consecutive K elements of each column.
func.func @int4_per_group(%x: tensor<8x4096xf16>,
                          %w: tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>,
                          %s: tensor<32x4096xf16>) -> tensor<8x4096xf16> {
  %y = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 128 : i64}
      : (tensor<8x4096xf16>, tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>,
         tensor<32x4096xf16>) -> tensor<8x4096xf16>
  return %y : tensor<8x4096xf16>
}
// CHECK-LABEL: func.func @int4_per_group
//  CHECK-SAME: (%[[X:.+]]: tensor<8x4096xf16>, %[[W:.+]]: tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, %[[S:.+]]: tensor<32x4096xf16>)
//       CHECK:   %[[Y:.+]] = sits.qmatmul %[[X]], %[[W]], %[[S]] {axis = 0 : i64, block_size = 128 : i64}
//  CHECK-SAME:     : (tensor<8x4096xf16>, tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32x4096xf16>) -> tensor<8x4096xf16>
//       CHECK:   return %[[Y]]

// -----

// ONNX MatMulNBits layout: weight [N, K], groups of 32 along K (axis 1),
// uint4 zero points packed two per byte, bias and a fused SiLU.
func.func @matmulnbits(%x: tensor<1x16x256xf32>,
                       %w: tensor<512x256xui4, #sits.packed<storage = i8, axis = 1>>,
                       %s: tensor<512x8xf32>,
                       %zp: tensor<512x8xui4, #sits.packed<storage = i8, axis = 1>>,
                       %b: tensor<512xf32>) -> tensor<1x16x512xf32> {
  %y = sits.qmatmul %x, %w, %s zero_point(%zp) bias(%b)
      {axis = 1 : i64, block_size = 32 : i64, transpose_weight, activation = #sits.activation<silu>}
      : (tensor<1x16x256xf32>, tensor<512x256xui4, #sits.packed<storage = i8, axis = 1>>, tensor<512x8xf32>,
         tensor<512x8xui4, #sits.packed<storage = i8, axis = 1>>, tensor<512xf32>) -> tensor<1x16x512xf32>
  return %y : tensor<1x16x512xf32>
}
// CHECK-LABEL: func.func @matmulnbits
//  CHECK-SAME: (%[[X:.+]]: tensor<1x16x256xf32>, %[[W:.+]]: tensor<512x256xui4, #sits.packed<storage = i8, axis = 1>>, %[[S:.+]]: tensor<512x8xf32>, %[[ZP:.+]]: tensor<512x8xui4, #sits.packed<storage = i8, axis = 1>>, %[[B:.+]]: tensor<512xf32>)
//       CHECK:   sits.qmatmul %[[X]], %[[W]], %[[S]] zero_point(%[[ZP]]) bias(%[[B]])
//  CHECK-SAME:     activation = #sits.activation<silu>
//  CHECK-SAME:     axis = 1 : i64
//  CHECK-SAME:     block_size = 32 : i64
//  CHECK-SAME:     transpose_weight
//  CHECK-SAME:     -> tensor<1x16x512xf32>

// -----

// Per-channel INT8 (one scale per output column) with an int8 zero point.
func.func @int8_per_channel(%x: tensor<4x768xf32>, %w: tensor<768x3072xi8>, %s: tensor<3072xf32>,
                            %zp: tensor<3072xi8>) -> tensor<4x3072xf32> {
  %y = sits.qmatmul %x, %w, %s zero_point(%zp) {axis = 1 : i64}
      : (tensor<4x768xf32>, tensor<768x3072xi8>, tensor<3072xf32>, tensor<3072xi8>) -> tensor<4x3072xf32>
  return %y : tensor<4x3072xf32>
}
// CHECK-LABEL: func.func @int8_per_channel
//  CHECK-SAME: (%[[X:.+]]: tensor<4x768xf32>, %[[W:.+]]: tensor<768x3072xi8>, %[[S:.+]]: tensor<3072xf32>, %[[ZP:.+]]: tensor<3072xi8>)
//       CHECK:   sits.qmatmul %[[X]], %[[W]], %[[S]] zero_point(%[[ZP]]) {axis = 1 : i64}
//   CHECK-NOT:   bias
//  CHECK-SAME:     : (tensor<4x768xf32>, tensor<768x3072xi8>, tensor<3072xf32>, tensor<3072xi8>) -> tensor<4x3072xf32>

// -----

// Per-tensor fp8 (E4M3FN) weights with only a bias.
func.func @fp8_per_tensor(%x: tensor<2x64xbf16>, %w: tensor<64x128xf8E4M3FN>, %s: tensor<bf16>,
                          %b: tensor<128xbf16>) -> tensor<2x128xbf16> {
  %y = sits.qmatmul %x, %w, %s bias(%b)
      : (tensor<2x64xbf16>, tensor<64x128xf8E4M3FN>, tensor<bf16>, tensor<128xbf16>) -> tensor<2x128xbf16>
  return %y : tensor<2x128xbf16>
}
// CHECK-LABEL: func.func @fp8_per_tensor
//  CHECK-SAME: (%[[X:.+]]: tensor<2x64xbf16>, %[[W:.+]]: tensor<64x128xf8E4M3FN>, %[[S:.+]]: tensor<bf16>, %[[B:.+]]: tensor<128xbf16>)
//       CHECK:   sits.qmatmul %[[X]], %[[W]], %[[S]] bias(%[[B]]) :
//   CHECK-NOT:   zero_point
//  CHECK-SAME:     (tensor<2x64xbf16>, tensor<64x128xf8E4M3FN>, tensor<bf16>, tensor<128xbf16>) -> tensor<2x128xbf16>

// -----

// The other quantized element types: i2, i16, ui2, ui8, ui16, f8E5M2.
func.func @element_types(%x: tensor<2x16xf32>, %s: tensor<f32>,
                         %w0: tensor<16x8xi2>, %w1: tensor<16x8xi16>, %w2: tensor<16x8xui2>,
                         %w3: tensor<16x8xui8>, %w4: tensor<16x8xui16>, %w5: tensor<16x8xf8E5M2>)
    -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>) {
  %0 = sits.qmatmul %x, %w0, %s : (tensor<2x16xf32>, tensor<16x8xi2>, tensor<f32>) -> tensor<2x8xf32>
  %1 = sits.qmatmul %x, %w1, %s : (tensor<2x16xf32>, tensor<16x8xi16>, tensor<f32>) -> tensor<2x8xf32>
  %2 = sits.qmatmul %x, %w2, %s : (tensor<2x16xf32>, tensor<16x8xui2>, tensor<f32>) -> tensor<2x8xf32>
  %3 = sits.qmatmul %x, %w3, %s : (tensor<2x16xf32>, tensor<16x8xui8>, tensor<f32>) -> tensor<2x8xf32>
  %4 = sits.qmatmul %x, %w4, %s : (tensor<2x16xf32>, tensor<16x8xui16>, tensor<f32>) -> tensor<2x8xf32>
  %5 = sits.qmatmul %x, %w5, %s : (tensor<2x16xf32>, tensor<16x8xf8E5M2>, tensor<f32>) -> tensor<2x8xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x8xf32>
}
// CHECK-LABEL: func.func @element_types
//       CHECK:   sits.qmatmul {{.+}} : (tensor<2x16xf32>, tensor<16x8xi2>, tensor<f32>) -> tensor<2x8xf32>
//       CHECK:   sits.qmatmul {{.+}} : (tensor<2x16xf32>, tensor<16x8xi16>, tensor<f32>) -> tensor<2x8xf32>
//       CHECK:   sits.qmatmul {{.+}} : (tensor<2x16xf32>, tensor<16x8xui2>, tensor<f32>) -> tensor<2x8xf32>
//       CHECK:   sits.qmatmul {{.+}} : (tensor<2x16xf32>, tensor<16x8xui8>, tensor<f32>) -> tensor<2x8xf32>
//       CHECK:   sits.qmatmul {{.+}} : (tensor<2x16xf32>, tensor<16x8xui16>, tensor<f32>) -> tensor<2x8xf32>
//       CHECK:   sits.qmatmul {{.+}} : (tensor<2x16xf32>, tensor<16x8xf8E5M2>, tensor<f32>) -> tensor<2x8xf32>
