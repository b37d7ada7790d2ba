// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.dequantize.

func.func @result_element_type(%q: tensor<16x32xi8>, %s: tensor<f32>) -> tensor<16x32xf16> {
  // expected-error @+1 {{'sits.dequantize' op result element type 'f16' differs from the scale's 'f32'}}
  %0 = sits.dequantize %q, %s : (tensor<16x32xi8>, tensor<f32>) -> tensor<16x32xf16>
  return %0 : tensor<16x32xf16>
}

// -----

func.func @shape(%q: tensor<16x32xi8>, %s: tensor<f32>) -> tensor<32x16xf32> {
  // expected-error @+1 {{'sits.dequantize' op input shape [16, 32] differs from result shape [32, 16]}}
  %0 = sits.dequantize %q, %s : (tensor<16x32xi8>, tensor<f32>) -> tensor<32x16xf32>
  return %0 : tensor<32x16xf32>
}

// -----

// The logical shape of a packed tensor is what counts, not its storage.
func.func @packed_shape(%q: tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>, %s: tensor<f32>) -> tensor<64x32xf32> {
  // expected-error @+1 {{input shape [64, 64] differs from result shape [64, 32]}}
  %0 = sits.dequantize %q, %s : (tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>, tensor<f32>) -> tensor<64x32xf32>
  return %0 : tensor<64x32xf32>
}

// -----

func.func @zero_point_element_type(%q: tensor<64x64xi4>, %s: tensor<64xf32>, %z: tensor<64xi8>) -> tensor<64x64xf32> {
  // expected-error @+1 {{'sits.dequantize' op zero point element type 'i8' differs from the quantized element type 'i4'}}
  %0 = sits.dequantize %q, %s, %z {axis = 0 : i64} : (tensor<64x64xi4>, tensor<64xf32>, tensor<64xi8>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// -----

func.func @axis_out_of_range(%q: tensor<768x3072xi8>, %s: tensor<768xf32>) -> tensor<768x3072xf32> {
  // expected-error @+1 {{'sits.dequantize' op axis -3 is out of range for a tensor of rank 2}}
  %0 = sits.dequantize %q, %s {axis = -3 : i64} : (tensor<768x3072xi8>, tensor<768xf32>) -> tensor<768x3072xf32>
  return %0 : tensor<768x3072xf32>
}

// -----

func.func @block_size_zero(%q: tensor<64x64xi4>, %s: tensor<64x2xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{'sits.dequantize' op block_size must be positive, got 0}}
  %0 = sits.dequantize %q, %s {axis = 1 : i64, block_size = 0 : i64} : (tensor<64x64xi4>, tensor<64x2xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// -----

func.func @per_tensor_with_axis(%q: tensor<64x64xi8>, %s: tensor<f32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{'sits.dequantize' op a per-tensor (0-D) scale takes no axis or block_size}}
  %0 = sits.dequantize %q, %s {axis = 0 : i64} : (tensor<64x64xi8>, tensor<f32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// -----

func.func @per_group_without_axis(%q: tensor<64x64xi4>, %s: tensor<64x2xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{'sits.dequantize' op a per-group scale needs an axis}}
  %0 = sits.dequantize %q, %s {block_size = 32 : i64} : (tensor<64x64xi4>, tensor<64x2xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// -----

func.func @per_group_rank(%q: tensor<64x64xi4>, %s: tensor<2xf32>) -> tensor<64x64xf32> {
  // expected-error @+1 {{'sits.dequantize' op a per-group scale must have the quantized tensor's rank 2, got [2]}}
  %0 = sits.dequantize %q, %s {axis = 1 : i64, block_size = 32 : i64} : (tensor<64x64xi4>, tensor<2xf32>) -> tensor<64x64xf32>
  return %0 : tensor<64x64xf32>
}

// -----

// Groups along axis 0 of a [4096, 4096] packed weight: 32 groups of 128.
func.func @per_group_shape(%q: tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, %s: tensor<4096x32xf16>) -> tensor<4096x4096xf16> {
  // expected-error @+1 {{'sits.dequantize' op per-group scale of shape [4096, 32] does not match a tensor of shape [4096, 4096] in groups of 128 along axis 0}}
  %0 = sits.dequantize %q, %s {axis = 0 : i64, block_size = 128 : i64}
      : (tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>, tensor<4096x32xf16>) -> tensor<4096x4096xf16>
  return %0 : tensor<4096x4096xf16>
}

// -----

func.func @per_channel_without_axis(%q: tensor<768x3072xi8>, %s: tensor<768xf32>) -> tensor<768x3072xf32> {
  // expected-error @+1 {{'sits.dequantize' op a per-channel (1-D) scale needs an axis}}
  %0 = sits.dequantize %q, %s : (tensor<768x3072xi8>, tensor<768xf32>) -> tensor<768x3072xf32>
  return %0 : tensor<768x3072xf32>
}

// -----

func.func @per_channel_extent(%q: tensor<768x3072xi8>, %s: tensor<768xf32>) -> tensor<768x3072xf32> {
  // expected-error @+1 {{'sits.dequantize' op per-channel scale has [768] elements but axis 1 has extent [3072]}}
  %0 = sits.dequantize %q, %s {axis = 1 : i64} : (tensor<768x3072xi8>, tensor<768xf32>) -> tensor<768x3072xf32>
  return %0 : tensor<768x3072xf32>
}

// -----

func.func @scale_rank_3(%q: tensor<2x3x4xi8>, %s: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'sits.dequantize' op scale must be 0-D (per tensor), 1-D with an axis (per channel), or of the quantized tensor's rank with an axis and a block_size (per group); got [2, 3, 4]}}
  %0 = sits.dequantize %q, %s {axis = 0 : i64} : (tensor<2x3x4xi8>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @zero_point_shape(%q: tensor<768x3072xi8>, %s: tensor<768xf32>, %z: tensor<1x768xi8>) -> tensor<768x3072xf32> {
  // expected-error @+1 {{'sits.dequantize' op zero point shape [1, 768] differs from scale shape [768]}}
  %0 = sits.dequantize %q, %s, %z {axis = 0 : i64} : (tensor<768x3072xi8>, tensor<768xf32>, tensor<1x768xi8>) -> tensor<768x3072xf32>
  return %0 : tensor<768x3072xf32>
}

// -----

// ODS type constraints: the input is a quantized type, the result a float.
func.func @float_input(%q: tensor<16x32xf16>, %s: tensor<f32>) -> tensor<16x32xf32> {
  // expected-error @+1 {{'sits.dequantize' op operand #0 must be ranked tensor of 2-16 bit integer or fp8 (E4M3FN, E5M2) values, but got 'tensor<16x32xf16>'}}
  %0 = sits.dequantize %q, %s : (tensor<16x32xf16>, tensor<f32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

func.func @integer_result(%q: tensor<16x32xi8>, %s: tensor<f32>) -> tensor<16x32xi32> {
  // expected-error @+1 {{'sits.dequantize' op result #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<16x32xi32>'}}
  %0 = sits.dequantize %q, %s : (tensor<16x32xi8>, tensor<f32>) -> tensor<16x32xi32>
  return %0 : tensor<16x32xi32>
}

// -----

// A dynamic scale does not hide a zero point that contradicts the tensor.
func.func @zero_point_vs_tensor(%q: tensor<6x8xi8>, %s: tensor<?xf32>, %z: tensor<5xi8>) -> tensor<6x8xf32> {
  // expected-error @+1 {{'sits.dequantize' op per-channel zero point has [5] elements but axis 0 has extent [6]}}
  %0 = sits.dequantize %q, %s, %z {axis = 0 : i64} : (tensor<6x8xi8>, tensor<?xf32>, tensor<5xi8>) -> tensor<6x8xf32>
  return %0 : tensor<6x8xf32>
}

// -----

func.func @per_group_zero_point(%q: tensor<64x8xi4>, %s: tensor<?x8xf32>, %z: tensor<3x8xi4>) -> tensor<64x8xf32> {
  // expected-error @+1 {{'sits.dequantize' op per-group zero point of shape [3, 8] does not match a tensor of shape [64, 8] in groups of 32 along axis 0}}
  %0 = sits.dequantize %q, %s, %z {axis = 0 : i64, block_size = 32 : i64} : (tensor<64x8xi4>, tensor<?x8xf32>, tensor<3x8xi4>) -> tensor<64x8xf32>
  return %0 : tensor<64x8xf32>
}
