// RUN: sits-opt %s --split-input-file | FileCheck %s
// RUN: sits-opt %s --split-input-file | sits-opt --split-input-file | FileCheck %s

// Round trip of sits.quantize at each granularity.

func.func @per_tensor(%x: tensor<16x32xf32>, %s: tensor<f32>, %zp: tensor<i8>) -> tensor<16x32xi8> {
  %q = sits.quantize %x, %s, %zp : (tensor<16x32xf32>, tensor<f32>, tensor<i8>) -> tensor<16x32xi8>
  return %q : tensor<16x32xi8>
}
// CHECK-LABEL: func.func @per_tensor
//  CHECK-SAME: (%[[X:.+]]: tensor<16x32xf32>, %[[S:.+]]: tensor<f32>, %[[ZP:.+]]: tensor<i8>)
//       CHECK:   %[[Q:.+]] = sits.quantize %[[X]], %[[S]], %[[ZP]] : (tensor<16x32xf32>, tensor<f32>, tensor<i8>) -> tensor<16x32xi8>
//       CHECK:   return %[[Q]]

// -----

func.func @per_channel(%x: tensor<768x3072xf32>, %s: tensor<768xf32>) -> tensor<768x3072xi8> {
  %q = sits.quantize %x, %s {axis = 0 : i64} : (tensor<768x3072xf32>, tensor<768xf32>) -> tensor<768x3072xi8>
  return %q : tensor<768x3072xi8>
}
// CHECK-LABEL: func.func @per_channel
//  CHECK-SAME: (%[[X:.+]]: tensor<768x3072xf32>, %[[S:.+]]: tensor<768xf32>)
//       CHECK:   sits.quantize %[[X]], %[[S]] {axis = 0 : i64} : (tensor<768x3072xf32>, tensor<768xf32>) -> tensor<768x3072xi8>

// -----

// Blocked INT4: 32 groups of 32 along axis 1.
func.func @per_group(%w: tensor<4096x1024xf32>, %s: tensor<4096x32xf32>, %zp: tensor<4096x32xi4>) -> tensor<4096x1024xi4> {
  %q = sits.quantize %w, %s, %zp {axis = 1 : i64, block_size = 32 : i64}
      : (tensor<4096x1024xf32>, tensor<4096x32xf32>, tensor<4096x32xi4>) -> tensor<4096x1024xi4>
  return %q : tensor<4096x1024xi4>
}
// CHECK-LABEL: func.func @per_group
//  CHECK-SAME: (%[[W:.+]]: tensor<4096x1024xf32>, %[[S:.+]]: tensor<4096x32xf32>, %[[ZP:.+]]: tensor<4096x32xi4>)
//       CHECK:   sits.quantize %[[W]], %[[S]], %[[ZP]] {axis = 1 : i64, block_size = 32 : i64}
//  CHECK-SAME:     : (tensor<4096x1024xf32>, tensor<4096x32xf32>, tensor<4096x32xi4>) -> tensor<4096x1024xi4>

// -----

// A last, partial group: ceil(100 / 32) = 4 scales along axis 0, with a
// negative axis on the scale side.
func.func @partial_group(%w: tensor<100x8xf16>, %s: tensor<4x8xf16>) -> tensor<100x8xui8> {
  %q = sits.quantize %w, %s {axis = -2 : i64, block_size = 32 : i64}
      : (tensor<100x8xf16>, tensor<4x8xf16>) -> tensor<100x8xui8>
  return %q : tensor<100x8xui8>
}
// CHECK-LABEL: func.func @partial_group
//       CHECK:   sits.quantize {{.+}} {axis = -2 : i64, block_size = 32 : i64} : (tensor<100x8xf16>, tensor<4x8xf16>) -> tensor<100x8xui8>

// -----

// fp8 results (no zero point) and a packed INT4 result.
func.func @fp8_and_packed(%x: tensor<8x64xbf16>, %s: tensor<bf16>, %w: tensor<64x64xf32>, %sw: tensor<64xf32>)
    -> (tensor<8x64xf8E4M3FN>, tensor<8x64xf8E5M2>, tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>) {
  %0 = sits.quantize %x, %s : (tensor<8x64xbf16>, tensor<bf16>) -> tensor<8x64xf8E4M3FN>
  %1 = sits.quantize %x, %s : (tensor<8x64xbf16>, tensor<bf16>) -> tensor<8x64xf8E5M2>
  %2 = sits.quantize %w, %sw {axis = 1 : i64}
      : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>
  return %0, %1, %2 : tensor<8x64xf8E4M3FN>, tensor<8x64xf8E5M2>, tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>
}
// CHECK-LABEL: func.func @fp8_and_packed
//       CHECK:   sits.quantize {{.+}} : (tensor<8x64xbf16>, tensor<bf16>) -> tensor<8x64xf8E4M3FN>
//       CHECK:   sits.quantize {{.+}} : (tensor<8x64xbf16>, tensor<bf16>) -> tensor<8x64xf8E5M2>
//       CHECK:   sits.quantize {{.+}} {axis = 1 : i64} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>
