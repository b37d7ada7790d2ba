// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.quantize, including each quantization-parameter
// rule (per tensor, per channel, per group).

func.func @shape(%x: tensor<16x32xf32>, %s: tensor<f32>) -> tensor<16x16xi8> {
  // expected-error @+1 {{'sits.quantize' op input shape [16, 32] differs from result shape [16, 16]}}
  %0 = sits.quantize %x, %s : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x16xi8>
  return %0 : tensor<16x16xi8>
}

// -----

func.func @rank(%x: tensor<16x32xf32>, %s: tensor<f32>) -> tensor<512xi8> {
  // expected-error @+1 {{input shape [16, 32] differs from result shape [512]}}
  %0 = sits.quantize %x, %s : (tensor<16x32xf32>, tensor<f32>) -> tensor<512xi8>
  return %0 : tensor<512xi8>
}

// -----

func.func @zero_point_element_type(%x: tensor<16x32xf32>, %s: tensor<f32>, %z: tensor<ui8>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op zero point element type 'ui8' differs from the quantized element type 'i8'}}
  %0 = sits.quantize %x, %s, %z : (tensor<16x32xf32>, tensor<f32>, tensor<ui8>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

func.func @axis_out_of_range(%x: tensor<16x32xf32>, %s: tensor<32xf32>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op axis 2 is out of range for a tensor of rank 2}}
  %0 = sits.quantize %x, %s {axis = 2 : i64} : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

func.func @block_size_negative(%x: tensor<16x32xf32>, %s: tensor<16x1xf32>) -> tensor<16x32xi4> {
  // expected-error @+1 {{'sits.quantize' op block_size must be positive, got -32}}
  %0 = sits.quantize %x, %s {axis = 1 : i64, block_size = -32 : i64} : (tensor<16x32xf32>, tensor<16x1xf32>) -> tensor<16x32xi4>
  return %0 : tensor<16x32xi4>
}

// -----

func.func @per_tensor_with_block_size(%x: tensor<16x32xf32>, %s: tensor<f32>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op a per-tensor (0-D) scale takes no axis or block_size}}
  %0 = sits.quantize %x, %s {block_size = 32 : i64} : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

func.func @per_group_without_axis(%x: tensor<16x32xf32>, %s: tensor<16x1xf32>) -> tensor<16x32xi4> {
  // expected-error @+1 {{'sits.quantize' op a per-group scale needs an axis}}
  %0 = sits.quantize %x, %s {block_size = 32 : i64} : (tensor<16x32xf32>, tensor<16x1xf32>) -> tensor<16x32xi4>
  return %0 : tensor<16x32xi4>
}

// -----

func.func @per_group_rank(%x: tensor<16x32xf32>, %s: tensor<1x16x1xf32>) -> tensor<16x32xi4> {
  // expected-error @+1 {{'sits.quantize' op a per-group scale must have the quantized tensor's rank 2, got [1, 16, 1]}}
  %0 = sits.quantize %x, %s {axis = 1 : i64, block_size = 32 : i64} : (tensor<16x32xf32>, tensor<1x16x1xf32>) -> tensor<16x32xi4>
  return %0 : tensor<16x32xi4>
}

// -----

// 1024 / 32 = 32 groups along axis 1, not 33 (the last group is not partial).
func.func @per_group_shape(%w: tensor<4096x1024xf32>, %s: tensor<4096x33xf32>) -> tensor<4096x1024xi4> {
  // expected-error @+1 {{'sits.quantize' op per-group scale of shape [4096, 33] does not match a tensor of shape [4096, 1024] in groups of 32 along axis 1}}
  %0 = sits.quantize %w, %s {axis = 1 : i64, block_size = 32 : i64} : (tensor<4096x1024xf32>, tensor<4096x33xf32>) -> tensor<4096x1024xi4>
  return %0 : tensor<4096x1024xi4>
}

// -----

// ceil(100 / 32) = 4 groups: a partial last group still gets its own scale.
func.func @per_group_partial(%w: tensor<100x8xf32>, %s: tensor<3x8xf32>) -> tensor<100x8xi8> {
  // expected-error @+1 {{per-group scale of shape [3, 8] does not match a tensor of shape [100, 8] in groups of 32 along axis 0}}
  %0 = sits.quantize %w, %s {axis = 0 : i64, block_size = 32 : i64} : (tensor<100x8xf32>, tensor<3x8xf32>) -> tensor<100x8xi8>
  return %0 : tensor<100x8xi8>
}

// -----

func.func @per_channel_without_axis(%x: tensor<16x32xf32>, %s: tensor<32xf32>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op a per-channel (1-D) scale needs an axis}}
  %0 = sits.quantize %x, %s : (tensor<16x32xf32>, tensor<32xf32>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

func.func @per_channel_extent(%x: tensor<16x32xf32>, %s: tensor<16xf32>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op per-channel scale has [16] elements but axis 1 has extent [32]}}
  %0 = sits.quantize %x, %s {axis = -1 : i64} : (tensor<16x32xf32>, tensor<16xf32>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

func.func @scale_rank_2_without_block_size(%x: tensor<16x32xf32>, %s: tensor<16x32xf32>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op scale must be 0-D (per tensor), 1-D with an axis (per channel), or of the quantized tensor's rank with an axis and a block_size (per group); got [16, 32]}}
  %0 = sits.quantize %x, %s : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

func.func @zero_point_shape(%x: tensor<16x32xf32>, %s: tensor<32xf32>, %z: tensor<16xi8>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op zero point shape [16] differs from scale shape [32]}}
  %0 = sits.quantize %x, %s, %z {axis = 1 : i64} : (tensor<16x32xf32>, tensor<32xf32>, tensor<16xi8>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

// ODS type constraints: the result is a quantized type, the input a float.
func.func @float_result(%x: tensor<16x32xf32>, %s: tensor<f32>) -> tensor<16x32xf16> {
  // expected-error @+1 {{'sits.quantize' op result #0 must be ranked tensor of 2-16 bit integer or fp8 (E4M3FN, E5M2) values, but got 'tensor<16x32xf16>'}}
  %0 = sits.quantize %x, %s : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x32xf16>
  return %0 : tensor<16x32xf16>
}

// -----

func.func @i1_result(%x: tensor<16x32xf32>, %s: tensor<f32>) -> tensor<16x32xi1> {
  // expected-error @+1 {{result #0 must be ranked tensor of 2-16 bit integer or fp8 (E4M3FN, E5M2) values, but got 'tensor<16x32xi1>'}}
  %0 = sits.quantize %x, %s : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x32xi1>
  return %0 : tensor<16x32xi1>
}

// -----

func.func @other_fp8_result(%x: tensor<16x32xf32>, %s: tensor<f32>) -> tensor<16x32xf8E4M3FNUZ> {
  // expected-error @+1 {{result #0 must be ranked tensor of 2-16 bit integer or fp8 (E4M3FN, E5M2) values, but got 'tensor<16x32xf8E4M3FNUZ>'}}
  %0 = sits.quantize %x, %s : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x32xf8E4M3FNUZ>
  return %0 : tensor<16x32xf8E4M3FNUZ>
}

// -----

func.func @integer_input(%x: tensor<16x32xi32>, %s: tensor<f32>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<16x32xi32>'}}
  %0 = sits.quantize %x, %s : (tensor<16x32xi32>, tensor<f32>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

func.func @float_zero_point(%x: tensor<16x32xf32>, %s: tensor<f32>, %z: tensor<f32>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op operand #2 must be ranked tensor of 2-16 bit integer or fp8 (E4M3FN, E5M2) values, but got 'tensor<f32>'}}
  %0 = sits.quantize %x, %s, %z : (tensor<16x32xf32>, tensor<f32>, tensor<f32>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

func.func @scale_element_type(%x: tensor<16x32xf32>, %s: tensor<f16>) -> tensor<16x32xi8> {
  // expected-error @+1 {{'sits.quantize' op scale element type 'f16' differs from the input's 'f32'}}
  %0 = sits.quantize %x, %s : (tensor<16x32xf32>, tensor<f16>) -> tensor<16x32xi8>
  return %0 : tensor<16x32xi8>
}

// -----

// A static input extent is checked even when the result's is dynamic.
func.func @static_input_dynamic_result(%x: tensor<6x8xf32>, %s: tensor<5xf32>) -> tensor<?x8xi8> {
  // expected-error @+1 {{per-channel scale has [5] elements but axis 0 has extent [6]}}
  %0 = sits.quantize %x, %s {axis = 0 : i64} : (tensor<6x8xf32>, tensor<5xf32>) -> tensor<?x8xi8>
  return %0 : tensor<?x8xi8>
}

// -----

func.func @fp8_zero_point(%x: tensor<16x32xf32>, %s: tensor<f32>, %z: tensor<f8E4M3FN>) -> tensor<16x32xf8E4M3FN> {
  // expected-error @+1 {{'sits.quantize' op fp8 quantization takes no zero point}}
  %0 = sits.quantize %x, %s, %z : (tensor<16x32xf32>, tensor<f32>, tensor<f8E4M3FN>) -> tensor<16x32xf8E4M3FN>
  return %0 : tensor<16x32xf8E4M3FN>
}
