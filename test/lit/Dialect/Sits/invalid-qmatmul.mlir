// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.qmatmul: its own shape checks, and the
// quantization parameters of the weight (shared with sits.dequantize).

func.func @input_rank_1(%x: tensor<64xf32>, %w: tensor<64x32xi8>, %s: tensor<f32>) -> tensor<32xf32> {
  // expected-error @+2 {{'sits.qmatmul' op input must have rank >= 2, got 1}}
  // expected-error @+1 {{'sits.qmatmul' op failed to infer returned types}}
  %0 = sits.qmatmul %x, %w, %s : (tensor<64xf32>, tensor<64x32xi8>, tensor<f32>) -> tensor<32xf32>
  return %0 : tensor<32xf32>
}

// -----

func.func @weight_rank_3(%x: tensor<2x64xf32>, %w: tensor<1x64x32xi8>, %s: tensor<f32>) -> tensor<2x32xf32> {
  // expected-error @+2 {{'sits.qmatmul' op weight must be 2-D, got rank 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.qmatmul %x, %w, %s : (tensor<2x64xf32>, tensor<1x64x32xi8>, tensor<f32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @contracting(%x: tensor<2x64xf32>, %w: tensor<32x64xi8>, %s: tensor<f32>) -> tensor<2x64xf32> {
  // expected-error @+2 {{'sits.qmatmul' op contracting dimensions differ: input has [64], weight has [32]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.qmatmul %x, %w, %s : (tensor<2x64xf32>, tensor<32x64xi8>, tensor<f32>) -> tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

// With transpose_weight the weight is [N, K].
func.func @contracting_transposed(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<f32>) -> tensor<2x64xf32> {
  // expected-error @+2 {{contracting dimensions differ: input has [64], weight has [32]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.qmatmul %x, %w, %s {transpose_weight} : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<f32>) -> tensor<2x64xf32>
  return %0 : tensor<2x64xf32>
}

// -----

func.func @bias_extent(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<f32>, %b: tensor<64xf32>) -> tensor<2x32xf32> {
  // expected-error @+2 {{'sits.qmatmul' op bias must be a 1-D tensor of [32] elements, got [64]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.qmatmul %x, %w, %s bias(%b) : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<f32>, tensor<64xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @bias_element_type(%x: tensor<2x64xf16>, %w: tensor<64x32xi8>, %s: tensor<f16>, %b: tensor<32xf32>) -> tensor<2x32xf16> {
  // expected-error @+2 {{'sits.qmatmul' op bias element type 'f32' differs from 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.qmatmul %x, %w, %s bias(%b) : (tensor<2x64xf16>, tensor<64x32xi8>, tensor<f16>, tensor<32xf32>) -> tensor<2x32xf16>
  return %0 : tensor<2x32xf16>
}

// -----

func.func @scale_element_type(%x: tensor<2x64xf16>, %w: tensor<64x32xi8>, %s: tensor<f32>) -> tensor<2x32xf16> {
  // expected-error @+1 {{'sits.qmatmul' op scale element type 'f32' differs from the input's 'f16'}}
  %0 = sits.qmatmul %x, %w, %s : (tensor<2x64xf16>, tensor<64x32xi8>, tensor<f32>) -> tensor<2x32xf16>
  return %0 : tensor<2x32xf16>
}

// -----

func.func @zero_point_element_type(%x: tensor<2x64xf32>, %w: tensor<64x32xi4>, %s: tensor<f32>, %z: tensor<i8>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op zero point element type 'i8' differs from the weight's 'i4'}}
  %0 = sits.qmatmul %x, %w, %s zero_point(%z) : (tensor<2x64xf32>, tensor<64x32xi4>, tensor<f32>, tensor<i8>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @axis_out_of_range(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<32xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op axis 2 is out of range for a tensor of rank 2}}
  %0 = sits.qmatmul %x, %w, %s {axis = 2 : i64} : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<32xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @axis_negative_out_of_range(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<32xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{axis -3 is out of range for a tensor of rank 2}}
  %0 = sits.qmatmul %x, %w, %s {axis = -3 : i64} : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<32xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @block_size_zero(%x: tensor<2x64xf32>, %w: tensor<64x32xi4>, %s: tensor<2x32xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op block_size must be positive, got 0}}
  %0 = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 0 : i64} : (tensor<2x64xf32>, tensor<64x32xi4>, tensor<2x32xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @per_tensor_with_axis(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<f32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op a per-tensor (0-D) scale takes no axis or block_size}}
  %0 = sits.qmatmul %x, %w, %s {axis = 1 : i64} : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<f32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @per_group_without_axis(%x: tensor<2x64xf32>, %w: tensor<64x32xi4>, %s: tensor<2x32xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op a per-group scale needs an axis}}
  %0 = sits.qmatmul %x, %w, %s {block_size = 32 : i64} : (tensor<2x64xf32>, tensor<64x32xi4>, tensor<2x32xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @per_group_scale_rank(%x: tensor<2x64xf32>, %w: tensor<64x32xi4>, %s: tensor<64xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op a per-group scale must have the quantized tensor's rank 2, got [64]}}
  %0 = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 32 : i64} : (tensor<2x64xf32>, tensor<64x32xi4>, tensor<64xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

// 4096 / 128 = 32 groups along K, not 16.
func.func @per_group_scale_shape(%x: tensor<8x4096xf16>, %w: tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>,
                                 %s: tensor<16x4096xf16>) -> tensor<8x4096xf16> {
  // expected-error @+1 {{'sits.qmatmul' op per-group scale of shape [16, 4096] does not match a tensor of shape [4096, 4096] in groups of 128 along axis 0}}
  %0 = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 128 : i64}
      : (tensor<8x4096xf16>, tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, tensor<16x4096xf16>) -> tensor<8x4096xf16>
  return %0 : tensor<8x4096xf16>
}

// -----

// The extent across the grouped axis must match too.
func.func @per_group_scale_other_dim(%x: tensor<2x64xf32>, %w: tensor<64x32xi4>, %s: tensor<2x16xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{per-group scale of shape [2, 16] does not match a tensor of shape [64, 32] in groups of 32 along axis 0}}
  %0 = sits.qmatmul %x, %w, %s {axis = -2 : i64, block_size = 32 : i64} : (tensor<2x64xf32>, tensor<64x32xi4>, tensor<2x16xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @per_channel_without_axis(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<32xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op a per-channel (1-D) scale needs an axis}}
  %0 = sits.qmatmul %x, %w, %s : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<32xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @per_channel_extent(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<32xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op per-channel scale has [32] elements but axis 0 has extent [64]}}
  %0 = sits.qmatmul %x, %w, %s {axis = 0 : i64} : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<32xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @scale_rank_2_without_block_size(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<64x32xf32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op scale must be 0-D (per tensor), 1-D with an axis (per channel), or of the quantized tensor's rank with an axis and a block_size (per group); got [64, 32]}}
  %0 = sits.qmatmul %x, %w, %s {axis = 0 : i64} : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<64x32xf32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @zero_point_shape(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<32xf32>, %z: tensor<i8>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op zero point shape [] differs from scale shape [32]}}
  %0 = sits.qmatmul %x, %w, %s zero_point(%z) {axis = 1 : i64} : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<32xf32>, tensor<i8>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @result_shape(%x: tensor<1x16x256xf32>, %w: tensor<512x256xi8>, %s: tensor<f32>) -> tensor<16x512xf32> {
  // expected-error @+2 {{'sits.qmatmul' op inferred type(s) 'tensor<1x16x512xf32>' are incompatible with return type(s) of operation 'tensor<16x512xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.qmatmul %x, %w, %s {transpose_weight} : (tensor<1x16x256xf32>, tensor<512x256xi8>, tensor<f32>) -> tensor<16x512xf32>
  return %0 : tensor<16x512xf32>
}

// -----

// ODS type constraints: the weight must be a quantized element type.
func.func @float_weight(%x: tensor<2x64xf32>, %w: tensor<64x32xf32>, %s: tensor<f32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{'sits.qmatmul' op operand #1 must be ranked tensor of 2-16 bit integer or fp8 (E4M3FN, E5M2) values, but got 'tensor<64x32xf32>'}}
  %0 = sits.qmatmul %x, %w, %s : (tensor<2x64xf32>, tensor<64x32xf32>, tensor<f32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @i32_weight(%x: tensor<2x64xf32>, %w: tensor<64x32xi32>, %s: tensor<f32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{operand #1 must be ranked tensor of 2-16 bit integer or fp8 (E4M3FN, E5M2) values, but got 'tensor<64x32xi32>'}}
  %0 = sits.qmatmul %x, %w, %s : (tensor<2x64xf32>, tensor<64x32xi32>, tensor<f32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}

// -----

func.func @integer_scale(%x: tensor<2x64xf32>, %w: tensor<64x32xi8>, %s: tensor<i32>) -> tensor<2x32xf32> {
  // expected-error @+1 {{operand #2 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<i32>'}}
  %0 = sits.qmatmul %x, %w, %s : (tensor<2x64xf32>, tensor<64x32xi8>, tensor<i32>) -> tensor<2x32xf32>
  return %0 : tensor<2x32xf32>
}
