// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.softmax.

func.func @axis_out_of_range(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'sits.softmax' op axis 3 is out of range for an input of rank 3}}
  %0 = sits.softmax %x {axis = 3 : i64} : tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

func.func @axis_negative_out_of_range(%x: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
  // expected-error @+1 {{'sits.softmax' op axis -4 is out of range for an input of rank 3}}
  %0 = sits.softmax %x {axis = -4 : i64} : tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// -----

// A 0-D tensor has no axis, not even the default -1.
func.func @rank_0(%x: tensor<f32>) -> tensor<f32> {
  // expected-error @+1 {{'sits.softmax' op axis -1 is out of range for an input of rank 0}}
  %0 = sits.softmax %x : tensor<f32>
  return %0 : tensor<f32>
}

// -----

// ODS: SameOperandsAndResultType (reachable through the generic form only).
func.func @result_type(%x: tensor<8x16xf32>) -> tensor<8x16xf16> {
  // expected-error @+1 {{'sits.softmax' op requires the same type for all operands and results}}
  %0 = "sits.softmax"(%x) <{axis = -1 : i64}> : (tensor<8x16xf32>) -> tensor<8x16xf16>
  return %0 : tensor<8x16xf16>
}

// -----

// ODS type constraints.
func.func @integer_input(%x: tensor<8x16xi32>) -> tensor<8x16xi32> {
  // expected-error @+1 {{'sits.softmax' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<8x16xi32>'}}
  %0 = sits.softmax %x : tensor<8x16xi32>
  return %0 : tensor<8x16xi32>
}

// -----

func.func @axis_not_integer(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'sits.softmax' op attribute 'axis' failed to satisfy constraint: 64-bit signless integer attribute}}
  %0 = sits.softmax %x {axis = 1 : i32} : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
