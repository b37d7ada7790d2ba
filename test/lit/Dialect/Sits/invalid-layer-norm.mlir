// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.layer_norm (all found by shape inference).

func.func @axis_out_of_range(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf32> {
  // expected-error @+2 {{'sits.layer_norm' op axis 2 is out of range for an input of rank 2}}
  // expected-error @+1 {{'sits.layer_norm' op failed to infer returned types}}
  %0 = sits.layer_norm %x, %g {axis = 2 : i64} : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

func.func @axis_negative_out_of_range(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf32> {
  // expected-error @+2 {{axis -3 is out of range for an input of rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g {axis = -3 : i64} : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

// A 0-D input has no dimension to normalize over.
func.func @rank_0(%x: tensor<f32>, %g: tensor<f32>) -> tensor<f32> {
  // expected-error @+2 {{axis -1 is out of range for an input of rank 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

func.func @scale_shape(%x: tensor<1x128x768xf32>, %g: tensor<128xf32>) -> tensor<1x128x768xf32> {
  // expected-error @+2 {{'sits.layer_norm' op scale must have the normalized shape [768], got [128]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g : (tensor<1x128x768xf32>, tensor<128xf32>) -> tensor<1x128x768xf32>
  return %0 : tensor<1x128x768xf32>
}

// -----

// With axis = 1 the scale covers [128, 768], not only [768].
func.func @scale_rank(%x: tensor<1x128x768xf32>, %g: tensor<768xf32>) -> tensor<1x128x768xf32> {
  // expected-error @+2 {{scale must have the normalized shape [128, 768], got [768]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g {axis = 1 : i64} : (tensor<1x128x768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
  return %0 : tensor<1x128x768xf32>
}

// -----

func.func @bias_shape(%x: tensor<1x128x768xf32>, %g: tensor<768xf32>, %b: tensor<1x768xf32>) -> tensor<1x128x768xf32> {
  // expected-error @+2 {{'sits.layer_norm' op bias must have the normalized shape [768], got [1, 768]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g, %b : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<1x768xf32>) -> tensor<1x128x768xf32>
  return %0 : tensor<1x128x768xf32>
}

// -----

// A static scale pins the dynamic normalized extent, so a bias of another
// static extent conflicts with it.
func.func @bias_conflicts_with_scale(%x: tensor<2x?xf32>, %g: tensor<4xf32>, %b: tensor<5xf32>) -> tensor<2x?xf32> {
  // expected-error @+2 {{bias must have the normalized shape [4], got [5]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g, %b : (tensor<2x?xf32>, tensor<4xf32>, tensor<5xf32>) -> tensor<2x?xf32>
  return %0 : tensor<2x?xf32>
}

// -----

func.func @scale_element_type(%x: tensor<2x16xf16>, %g: tensor<16xf32>) -> tensor<2x16xf16> {
  // expected-error @+2 {{'sits.layer_norm' op scale element type 'f32' differs from 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g : (tensor<2x16xf16>, tensor<16xf32>) -> tensor<2x16xf16>
  return %0 : tensor<2x16xf16>
}

// -----

func.func @bias_element_type(%x: tensor<2x16xf16>, %g: tensor<16xf16>, %b: tensor<16xbf16>) -> tensor<2x16xf16> {
  // expected-error @+2 {{'sits.layer_norm' op bias element type 'bf16' differs from 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g, %b : (tensor<2x16xf16>, tensor<16xf16>, tensor<16xbf16>) -> tensor<2x16xf16>
  return %0 : tensor<2x16xf16>
}

// -----

func.func @epsilon_negative(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf32> {
  // expected-error @+2 {{'sits.layer_norm' op epsilon must be finite and non-negative, got -1.000000e-05}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g {epsilon = -1.0e-05 : f64} : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

func.func @epsilon_nan(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf32> {
  // expected-error @+2 {{epsilon must be finite and non-negative, got nan}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g {epsilon = 0x7FF8000000000000 : f64} : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

func.func @epsilon_infinite(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf32> {
  // expected-error @+2 {{epsilon must be finite and non-negative, got INF}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g {epsilon = 0x7FF0000000000000 : f64} : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}

// -----

// InferTypeOpInterface: the result has the input's type.
func.func @result_type(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf16> {
  // expected-error @+2 {{'sits.layer_norm' op inferred type(s) 'tensor<2x16xf32>' are incompatible with return type(s) of operation 'tensor<2x16xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf16>
  return %0 : tensor<2x16xf16>
}

// -----

func.func @result_shape(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<16x2xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<2x16xf32>' are incompatible with return type(s) of operation 'tensor<16x2xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.layer_norm %x, %g : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<16x2xf32>
  return %0 : tensor<16x2xf32>
}

// -----

// ODS type constraints.
func.func @integer_input(%x: tensor<2x16xi32>, %g: tensor<16xf32>) -> tensor<2x16xi32> {
  // expected-error @+1 {{'sits.layer_norm' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<2x16xi32>'}}
  %0 = sits.layer_norm %x, %g : (tensor<2x16xi32>, tensor<16xf32>) -> tensor<2x16xi32>
  return %0 : tensor<2x16xi32>
}

// -----

func.func @epsilon_f32(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf32> {
  // expected-error @+1 {{'sits.layer_norm' op attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute}}
  %0 = sits.layer_norm %x, %g {epsilon = 1.0e-05 : f32} : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  return %0 : tensor<2x16xf32>
}
