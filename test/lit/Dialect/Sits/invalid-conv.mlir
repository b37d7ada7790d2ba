// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.conv.

func.func @input_rank_2(%x: tensor<1x3xf32>, %w: tensor<8x3xf32>) -> tensor<1x8xf32> {
  // expected-error @+2 {{'sits.conv' op input must be [N, C, D1, ..., Dk] with 1 <= k <= 3, got rank 2}}
  // expected-error @+1 {{'sits.conv' op failed to infer returned types}}
  %0 = sits.conv %x, %w : (tensor<1x3xf32>, tensor<8x3xf32>) -> tensor<1x8xf32>
  return %0 : tensor<1x8xf32>
}

// -----

func.func @input_rank_6(%x: tensor<1x3x4x4x4x4xf32>, %w: tensor<8x3x1x1x1x1xf32>) -> tensor<1x8x4x4x4x4xf32> {
  // expected-error @+2 {{input must be [N, C, D1, ..., Dk] with 1 <= k <= 3, got rank 6}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w : (tensor<1x3x4x4x4x4xf32>, tensor<8x3x1x1x1x1xf32>) -> tensor<1x8x4x4x4x4xf32>
  return %0 : tensor<1x8x4x4x4x4xf32>
}

// -----

func.func @filter_rank(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'sits.conv' op filter rank 3 differs from input rank 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w : (tensor<1x3x8x8xf32>, tensor<8x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @element_types(%x: tensor<1x3x8x8xf16>, %w: tensor<8x3x3x3xbf16>) -> tensor<1x8x6x6xf16> {
  // expected-error @+2 {{'sits.conv' op operand element types differ: 'f16' vs 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w : (tensor<1x3x8x8xf16>, tensor<8x3x3x3xbf16>) -> tensor<1x8x6x6xf16>
  return %0 : tensor<1x8x6x6xf16>
}

// -----

func.func @strides_count(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x3x3xf32> {
  // expected-error @+2 {{'sits.conv' op expected 2 strides, 2 dilations and 4 padding values for 2 spatial dimensions}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {strides = array<i64: 2>} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x3x3xf32>
  return %0 : tensor<1x8x3x3xf32>
}

// -----

// Padding has 2k entries (all begins, then all ends), not k.
func.func @padding_count(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x8x8xf32> {
  // expected-error @+2 {{expected 2 strides, 2 dilations and 4 padding values for 2 spatial dimensions}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {padding = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x8x8xf32>
  return %0 : tensor<1x8x8x8xf32>
}

// -----

func.func @dilations_count(%x: tensor<1x3x8x8x8xf32>, %w: tensor<8x3x3x3x3xf32>) -> tensor<1x8x6x6x6xf32> {
  // expected-error @+2 {{expected 3 strides, 3 dilations and 6 padding values for 3 spatial dimensions}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {dilations = array<i64: 1, 1>} : (tensor<1x3x8x8x8xf32>, tensor<8x3x3x3x3xf32>) -> tensor<1x8x6x6x6xf32>
  return %0 : tensor<1x8x6x6x6xf32>
}

// -----

func.func @zero_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'sits.conv' op strides and dilations must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {strides = array<i64: 1, 0>} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @negative_dilation(%x: tensor<1x3x8xf32>, %w: tensor<8x3x3xf32>) -> tensor<1x8x6xf32> {
  // expected-error @+2 {{strides and dilations must be positive}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {dilations = array<i64: -1>} : (tensor<1x3x8xf32>, tensor<8x3x3xf32>) -> tensor<1x8x6xf32>
  return %0 : tensor<1x8x6xf32>
}

// -----

func.func @negative_padding(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'sits.conv' op padding must be non-negative}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {padding = array<i64: 0, 0, -1, 0>} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @zero_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'sits.conv' op groups must be positive, got 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {groups = 0 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @negative_groups(%x: tensor<1x4x8x8xf32>, %w: tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{groups must be positive, got -2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {groups = -2 : i64} : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @output_channels_groups(%x: tensor<1x6x8x8xf32>, %w: tensor<8x2x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'sits.conv' op output channels 8 are not divisible by groups 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {groups = 3 : i64} : (tensor<1x6x8x8xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @input_channels(%x: tensor<1x4x8x8xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'sits.conv' op input has [4] channels but the filter expects [3] ([3] per group x 1 groups)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w : (tensor<1x4x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

// A depthwise filter [C, 1, K, K] needs groups = C.
func.func @depthwise_without_groups(%x: tensor<1x32x8x8xf32>, %w: tensor<32x1x3x3xf32>) -> tensor<1x32x6x6xf32> {
  // expected-error @+2 {{input has [32] channels but the filter expects [1] ([1] per group x 1 groups)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w : (tensor<1x32x8x8xf32>, tensor<32x1x3x3xf32>) -> tensor<1x32x6x6xf32>
  return %0 : tensor<1x32x6x6xf32>
}

// -----

func.func @grouped_channels(%x: tensor<1x8x8x8xf32>, %w: tensor<8x2x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{input has [8] channels but the filter expects [4] ([2] per group x 2 groups)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {groups = 2 : i64} : (tensor<1x8x8x8xf32>, tensor<8x2x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @kernel_too_large(%x: tensor<1x3x8x2xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x6x1xf32> {
  // expected-error @+2 {{'sits.conv' op spatial dimension 1 of extent 2 (padded to 2) is smaller than the dilated kernel extent 3}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w : (tensor<1x3x8x2xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x1xf32>
  return %0 : tensor<1x8x6x1xf32>
}

// -----

// Dilation 4 stretches a 3-tap kernel over 9 positions; padding 1 + 1 does
// not make 6 enough.
func.func @dilated_kernel_too_large(%x: tensor<1x3x6xf32>, %w: tensor<8x3x3xf32>) -> tensor<1x8x1xf32> {
  // expected-error @+2 {{spatial dimension 0 of extent 6 (padded to 8) is smaller than the dilated kernel extent 9}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {dilations = array<i64: 4>, padding = array<i64: 1, 1>} : (tensor<1x3x6xf32>, tensor<8x3x3xf32>) -> tensor<1x8x1xf32>
  return %0 : tensor<1x8x1xf32>
}

// -----

func.func @bias_extent(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'sits.conv' op bias must be a 1-D tensor of [8] elements, got [3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w bias(%b) : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>, tensor<3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @bias_element_type(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf64>) -> tensor<1x8x6x6xf32> {
  // expected-error @+2 {{'sits.conv' op bias element type 'f64' differs from 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w bias(%b) : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>, tensor<8xf64>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

// InferTypeOpInterface: (112 + 3 + 3 - 7) / 2 + 1 = 56, not 55.
func.func @result_shape(%x: tensor<1x3x112x112xf32>, %w: tensor<64x3x7x7xf32>) -> tensor<1x64x55x55xf32> {
  // expected-error @+2 {{'sits.conv' op inferred type(s) 'tensor<1x64x56x56xf32>' are incompatible with return type(s) of operation 'tensor<1x64x55x55xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.conv %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 3, 3, 3, 3>}
      : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xf32>) -> tensor<1x64x55x55xf32>
  return %0 : tensor<1x64x55x55xf32>
}

// -----

// ODS type constraints.
func.func @integer_input(%x: tensor<1x3x8x8xi8>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+1 {{'sits.conv' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<1x3x8x8xi8>'}}
  %0 = sits.conv %x, %w : (tensor<1x3x8x8xi8>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @strides_not_array(%x: tensor<1x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32> {
  // expected-error @+1 {{'sits.conv' op attribute 'strides' failed to satisfy constraint: i64 dense array attribute}}
  %0 = sits.conv %x, %w {strides = [1, 1]} : (tensor<1x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<1x8x6x6xf32>
  return %0 : tensor<1x8x6x6xf32>
}

// -----

func.func @zero_kernel(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x0x3xf32>) -> tensor<1x4x9x6xf32> {
  // expected-error @+2 {{'sits.conv' op filter spatial extents must be positive, got [0, 3]}}
  // expected-error @+1 {{'sits.conv' op failed to infer returned types}}
  %0 = sits.conv %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x0x3xf32>) -> tensor<1x4x9x6xf32>
  return %0 : tensor<1x4x9x6xf32>
}
