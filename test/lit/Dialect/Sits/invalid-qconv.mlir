// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.qconv: its scale, its filter type, and the
// shape checks it shares with sits.conv.

func.func @scale_per_tensor(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xi8>, %s: tensor<f32>) -> tensor<1x3x2x2xf32> {
  // expected-error @+1 {{'sits.qconv' op scale must have one element per output channel ([3]), got []}}
  %y = sits.qconv %x, %w, %s : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xi8>, tensor<f32>) -> tensor<1x3x2x2xf32>
  return %y : tensor<1x3x2x2xf32>
}

// -----

func.func @scale_extent(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xi8>, %s: tensor<2xf32>) -> tensor<1x3x2x2xf32> {
  // expected-error @+1 {{'sits.qconv' op scale must have one element per output channel ([3]), got [2]}}
  %y = sits.qconv %x, %w, %s : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xi8>, tensor<2xf32>) -> tensor<1x3x2x2xf32>
  return %y : tensor<1x3x2x2xf32>
}

// -----

func.func @scale_type(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xi8>, %s: tensor<3xf16>) -> tensor<1x3x2x2xf32> {
  // expected-error @+1 {{'sits.qconv' op scale element type 'f16' differs from the input's 'f32'}}
  %y = sits.qconv %x, %w, %s : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xi8>, tensor<3xf16>) -> tensor<1x3x2x2xf32>
  return %y : tensor<1x3x2x2xf32>
}

// -----

func.func @float_filter(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>, %s: tensor<3xf32>) -> tensor<1x3x2x2xf32> {
  // expected-error @+1 {{'sits.qconv' op operand #1 must be ranked tensor of 8-bit signless integer values}}
  %y = sits.qconv %x, %w, %s : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>, tensor<3xf32>) -> tensor<1x3x2x2xf32>
  return %y : tensor<1x3x2x2xf32>
}

// -----

func.func @int4_filter(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xi4>, %s: tensor<3xf32>) -> tensor<1x3x2x2xf32> {
  // expected-error @+1 {{'sits.qconv' op operand #1 must be ranked tensor of 8-bit signless integer values}}
  %y = sits.qconv %x, %w, %s : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xi4>, tensor<3xf32>) -> tensor<1x3x2x2xf32>
  return %y : tensor<1x3x2x2xf32>
}

// -----

func.func @channels(%x: tensor<1x4x4x4xf32>, %w: tensor<3x2x3x3xi8>, %s: tensor<3xf32>) -> tensor<1x3x2x2xf32> {
  // expected-error @+2 {{'sits.qconv' op input has [4] channels but the filter expects [2] ([2] per group x 1 groups)}}
  // expected-error @+1 {{'sits.qconv' op failed to infer returned types}}
  %y = sits.qconv %x, %w, %s : (tensor<1x4x4x4xf32>, tensor<3x2x3x3xi8>, tensor<3xf32>) -> tensor<1x3x2x2xf32>
  return %y : tensor<1x3x2x2xf32>
}

// -----

func.func @result_shape(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xi8>, %s: tensor<3xf32>) -> tensor<1x3x4x4xf32> {
  // expected-error @+2 {{'sits.qconv' op inferred type(s) 'tensor<1x3x2x2xf32>' are incompatible with return type(s) of operation 'tensor<1x3x4x4xf32>'}}
  // expected-error @+1 {{'sits.qconv' op failed to infer returned types}}
  %y = sits.qconv %x, %w, %s : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xi8>, tensor<3xf32>) -> tensor<1x3x4x4xf32>
  return %y : tensor<1x3x4x4xf32>
}
