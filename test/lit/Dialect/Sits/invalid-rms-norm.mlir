// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.rms_norm (shared with sits.layer_norm, reported
// under the rms_norm name).

func.func @axis_out_of_range(%x: tensor<1x16x4096xf16>, %g: tensor<4096xf16>) -> tensor<1x16x4096xf16> {
  // expected-error @+2 {{'sits.rms_norm' op axis 3 is out of range for an input of rank 3}}
  // expected-error @+1 {{'sits.rms_norm' op failed to infer returned types}}
  %0 = sits.rms_norm %x, %g {axis = 3 : i64} : (tensor<1x16x4096xf16>, tensor<4096xf16>) -> tensor<1x16x4096xf16>
  return %0 : tensor<1x16x4096xf16>
}

// -----

func.func @scale_shape(%x: tensor<1x16x4096xf16>, %g: tensor<11008xf16>) -> tensor<1x16x4096xf16> {
  // expected-error @+2 {{'sits.rms_norm' op scale must have the normalized shape [4096], got [11008]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.rms_norm %x, %g : (tensor<1x16x4096xf16>, tensor<11008xf16>) -> tensor<1x16x4096xf16>
  return %0 : tensor<1x16x4096xf16>
}

// -----

func.func @scale_shape_axis(%x: tensor<4x8x16xf32>, %g: tensor<16xf32>) -> tensor<4x8x16xf32> {
  // expected-error @+2 {{scale must have the normalized shape [4, 8, 16], got [16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.rms_norm %x, %g {axis = -3 : i64} : (tensor<4x8x16xf32>, tensor<16xf32>) -> tensor<4x8x16xf32>
  return %0 : tensor<4x8x16xf32>
}

// -----

func.func @scale_element_type(%x: tensor<1x16x4096xf16>, %g: tensor<4096xbf16>) -> tensor<1x16x4096xf16> {
  // expected-error @+2 {{'sits.rms_norm' op scale element type 'bf16' differs from 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.rms_norm %x, %g : (tensor<1x16x4096xf16>, tensor<4096xbf16>) -> tensor<1x16x4096xf16>
  return %0 : tensor<1x16x4096xf16>
}

// -----

func.func @epsilon_negative(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+2 {{'sits.rms_norm' op epsilon must be finite and non-negative, got -1.000000e+00}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.rms_norm %x, %g {epsilon = -1.0 : f64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @result_shape(%x: tensor<?x8xf32>, %g: tensor<8xf32>) -> tensor<2x9xf32> {
  // expected-error @+2 {{'sits.rms_norm' op inferred type(s) 'tensor<?x8xf32>' are incompatible with return type(s) of operation 'tensor<2x9xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.rms_norm %x, %g : (tensor<?x8xf32>, tensor<8xf32>) -> tensor<2x9xf32>
  return %0 : tensor<2x9xf32>
}

// -----

// ODS: rms_norm takes no bias operand.
func.func @bias_operand(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{expected ':'}}
  %0 = sits.rms_norm %x, %g, %g : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @bias_operand_generic(%x: tensor<2x8xf32>, %g: tensor<8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sits.rms_norm' op expected 2 operands, but found 3}}
  %0 = "sits.rms_norm"(%x, %g, %g) : (tensor<2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @integer_scale(%x: tensor<2x8xf32>, %g: tensor<8xi8>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'sits.rms_norm' op operand #1 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<8xi8>'}}
  %0 = sits.rms_norm %x, %g : (tensor<2x8xf32>, tensor<8xi8>) -> tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}
