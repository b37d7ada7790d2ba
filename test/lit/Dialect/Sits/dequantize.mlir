// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.dequantize at each granularity, with packed inputs.

// Per-channel INT8 with a zero point (the doc example).
func.func @per_channel(%q: tensor<768x3072xi8>, %s: tensor<768xf32>, %zp: tensor<768xi8>) -> tensor<768x3072xf32> {
  %w = sits.dequantize %q, %s, %zp {axis = 0 : i64}
      : (tensor<768x3072xi8>, tensor<768xf32>, tensor<768xi8>) -> tensor<768x3072xf32>
  return %w : tensor<768x3072xf32>
}
// CHECK-LABEL: func.func @per_channel
//  CHECK-SAME: (%[[Q:.+]]: tensor<768x3072xi8>, %[[S:.+]]: tensor<768xf32>, %[[ZP:.+]]: tensor<768xi8>)
//       CHECK:   %[[W:.+]] = sits.dequantize %[[Q]], %[[S]], %[[ZP]] {axis = 0 : i64}
//  CHECK-SAME:     : (tensor<768x3072xi8>, tensor<768xf32>, tensor<768xi8>) -> tensor<768x3072xf32>
//       CHECK:   return %[[W]]

// -----

func.func @per_tensor(%q: tensor<4x4xui8>, %s: tensor<f16>) -> tensor<4x4xf16> {
  %w = sits.dequantize %q, %s : (tensor<4x4xui8>, tensor<f16>) -> tensor<4x4xf16>
  return %w : tensor<4x4xf16>
}
// CHECK-LABEL: func.func @per_tensor
//  CHECK-SAME: (%[[Q:.+]]: tensor<4x4xui8>, %[[S:.+]]: tensor<f16>)
//       CHECK:   sits.dequantize %[[Q]], %[[S]] : (tensor<4x4xui8>, tensor<f16>) -> tensor<4x4xf16>

// -----

// Packed INT4, one scale per 128 elements of K (axis 0) of each column.
func.func @packed_per_group(%q: tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>,
                            %s: tensor<32x4096xf16>,
                            %zp: tensor<32x4096xi4>) -> tensor<4096x4096xf16> {
  %w = sits.dequantize %q, %s, %zp {axis = 0 : i64, block_size = 128 : i64}
      : (tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32x4096xf16>, tensor<32x4096xi4>)
      -> tensor<4096x4096xf16>
  return %w : tensor<4096x4096xf16>
}
// CHECK-LABEL: func.func @packed_per_group
//  CHECK-SAME: (%[[Q:.+]]: tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, %[[S:.+]]: tensor<32x4096xf16>, %[[ZP:.+]]: tensor<32x4096xi4>)
//       CHECK:   sits.dequantize %[[Q]], %[[S]], %[[ZP]] {axis = 0 : i64, block_size = 128 : i64}
//  CHECK-SAME:     : (tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32x4096xf16>, tensor<32x4096xi4>) -> tensor<4096x4096xf16>

// -----

// Other storage words and element types: 2-bit in i32, 4-bit in i16, unpacked i16 and fp8.
func.func @more_types(%a: tensor<64xui2, #sits.packed<storage = i32, axis = 0>>, %b: tensor<8x8xi16>,
                      %c: tensor<8x8xf8E5M2>, %d: tensor<2x16xi4, #sits.packed<storage = i16, axis = 1>>,
                      %s: tensor<bf16>, %s2: tensor<2xbf16>)
    -> (tensor<64xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<2x16xbf16>) {
  %0 = sits.dequantize %a, %s : (tensor<64xui2, #sits.packed<storage = i32, axis = 0>>, tensor<bf16>) -> tensor<64xbf16>
  %1 = sits.dequantize %b, %s : (tensor<8x8xi16>, tensor<bf16>) -> tensor<8x8xbf16>
  %2 = sits.dequantize %c, %s : (tensor<8x8xf8E5M2>, tensor<bf16>) -> tensor<8x8xbf16>
  %3 = sits.dequantize %d, %s2 {axis = 0 : i64} : (tensor<2x16xi4, #sits.packed<storage = i16, axis = 1>>, tensor<2xbf16>) -> tensor<2x16xbf16>
  return %0, %1, %2, %3 : tensor<64xbf16>, tensor<8x8xbf16>, tensor<8x8xbf16>, tensor<2x16xbf16>
}
// CHECK-LABEL: func.func @more_types
//       CHECK:   sits.dequantize {{.+}} : (tensor<64xui2, #sits.packed<storage = i32, axis = 0>>, tensor<bf16>) -> tensor<64xbf16>
//       CHECK:   sits.dequantize {{.+}} : (tensor<8x8xi16>, tensor<bf16>) -> tensor<8x8xbf16>
//       CHECK:   sits.dequantize {{.+}} : (tensor<8x8xf8E5M2>, tensor<bf16>) -> tensor<8x8xbf16>
//       CHECK:   sits.dequantize {{.+}} {axis = 0 : i64} : (tensor<2x16xi4, #sits.packed<storage = i16, axis = 1>>, tensor<2xbf16>) -> tensor<2x16xbf16>
