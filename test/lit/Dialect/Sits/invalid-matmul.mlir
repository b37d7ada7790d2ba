// RUN: sits-opt %s --split-input-file --verify-diagnostics

// Every diagnostic of sits.matmul. Errors found by shape inference are
// followed by InferTypeOpInterface's "failed to infer returned types".

func.func @lhs_rank_1(%a: tensor<16xf32>, %b: tensor<16x32xf32>) -> tensor<32xf32> {
  // expected-error @+2 {{'sits.matmul' op operands must have rank >= 2, got 1 and 2}}
  // expected-error @+1 {{'sits.matmul' op failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<16xf32>, tensor<16x32xf32>) -> tensor<32xf32>
  return %0 : tensor<32xf32>
}

// -----

func.func @rhs_rank_0(%a: tensor<8x16xf32>, %b: tensor<f32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{operands must have rank >= 2, got 2 and 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<f32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// Only the rhs may be narrower (stored weights), never the lhs.
func.func @element_types_differ(%a: tensor<8x16xf16>, %b: tensor<16x32xf32>) -> tensor<8x32xf16> {
  // expected-error @+2 {{'sits.matmul' op operand element types differ: 'f16' vs 'f32' (the rhs may only be a narrower float the lhs type holds exactly)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf16>, tensor<16x32xf32>) -> tensor<8x32xf16>
  return %0 : tensor<8x32xf16>
}

// -----

// bf16 does not hold every f16 value.
func.func @rhs_not_exact(%a: tensor<8x16xbf16>, %b: tensor<16x32xf16>) -> tensor<8x32xbf16> {
  // expected-error @+2 {{operand element types differ: 'bf16' vs 'f16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<8x16xbf16>, tensor<16x32xf16>) -> tensor<8x32xbf16>
  return %0 : tensor<8x32xbf16>
}

// -----

func.func @contracting_differ(%a: tensor<8x16xf32>, %b: tensor<8x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+2 {{'sits.matmul' op contracting dimensions differ: lhs has [16], rhs has [8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

// The transposes change which dimension contracts: q @ k without
// transpose_rhs contracts 64 against 128.
func.func @contracting_differ_transpose(%q: tensor<1x12x128x64xf32>, %k: tensor<1x12x128x64xf32>) -> tensor<1x12x128x128xf32> {
  // expected-error @+2 {{contracting dimensions differ: lhs has [64], rhs has [128]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %q, %k : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x128x128xf32>
  return %0 : tensor<1x12x128x128xf32>
}

// -----

func.func @contracting_differ_transpose_lhs(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<16x32xf32> {
  // expected-error @+2 {{contracting dimensions differ: lhs has [8], rhs has [16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b {transpose_lhs} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  return %0 : tensor<16x32xf32>
}

// -----

func.func @batch_no_broadcast(%a: tensor<3x8x16xf32>, %b: tensor<4x16x32xf32>) -> tensor<4x8x32xf32> {
  // expected-error @+2 {{'sits.matmul' op batch dimensions [3] and [4] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<3x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
}

// -----

func.func @batch_no_broadcast_rank(%a: tensor<2x3x8x16xf32>, %b: tensor<2x16x32xf32>) -> tensor<2x3x8x32xf32> {
  // expected-error @+2 {{batch dimensions [2, 3] and [2] do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<2x3x8x16xf32>, tensor<2x16x32xf32>) -> tensor<2x3x8x32xf32>
  return %0 : tensor<2x3x8x32xf32>
}

// -----

func.func @bias_rank(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %bias: tensor<1x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+2 {{'sits.matmul' op bias must be a 1-D tensor of [32] elements, got [1, 32]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b bias(%bias) : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<1x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

// The bias has N (columns of the result) elements, here N = 8 after the
// transpose of rhs.
func.func @bias_extent(%a: tensor<4x16xf32>, %b: tensor<8x16xf32>, %bias: tensor<16xf32>) -> tensor<4x8xf32> {
  // expected-error @+2 {{bias must be a 1-D tensor of [8] elements, got [16]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b bias(%bias) {transpose_rhs} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<16xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

func.func @bias_element_type(%a: tensor<8x16xbf16>, %b: tensor<16x32xbf16>, %bias: tensor<32xf32>) -> tensor<8x32xbf16> {
  // expected-error @+2 {{'sits.matmul' op bias element type 'f32' differs from 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b bias(%bias) : (tensor<8x16xbf16>, tensor<16x32xbf16>, tensor<32xf32>) -> tensor<8x32xbf16>
  return %0 : tensor<8x32xbf16>
}

// -----

// InferTypeOpInterface: the declared result conflicts with the inferred one.
func.func @result_shape(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x31xf32> {
  // expected-error @+2 {{'sits.matmul' op inferred type(s) 'tensor<8x32xf32>' are incompatible with return type(s) of operation 'tensor<8x31xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x31xf32>
  return %0 : tensor<8x31xf32>
}

// -----

func.func @result_rank(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<1x8x32xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<8x32xf32>' are incompatible with return type(s) of operation 'tensor<1x8x32xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<1x8x32xf32>
  return %0 : tensor<1x8x32xf32>
}

// -----

func.func @result_element_type(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf16> {
  // expected-error @+2 {{inferred type(s) 'tensor<8x32xf32>' are incompatible with return type(s) of operation 'tensor<8x32xf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf16>
  return %0 : tensor<8x32xf16>
}

// -----

// A dynamic inferred extent is compatible with a static declared one, but
// two different static extents are not.
func.func @result_dynamic_conflict(%a: tensor<?x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x64xf32> {
  // expected-error @+2 {{inferred type(s) 'tensor<?x32xf32>' are incompatible with return type(s) of operation 'tensor<8x64xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<?x16xf32>, tensor<16x32xf32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

// The result carries no encoding.
func.func @result_encoding(%a: tensor<8x16xf16>, %b: tensor<16x32xf16>) -> tensor<8x32xf16, #sits.packed<storage = i32, axis = 1>> {
  // expected-error @+2 {{inferred type(s) 'tensor<8x32xf16>' are incompatible with return type(s) of operation 'tensor<8x32xf16, #sits.packed<storage = i32, axis = 1>>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf16>, tensor<16x32xf16>) -> tensor<8x32xf16, #sits.packed<storage = i32, axis = 1>>
  return %0 : tensor<8x32xf16, #sits.packed<storage = i32, axis = 1>>
}

// -----

// ODS type constraints: float tensors only, ranked only.
func.func @integer_operand(%a: tensor<8x16xi32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'sits.matmul' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<8x16xi32>'}}
  %0 = sits.matmul %a, %b : (tensor<8x16xi32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @unranked_operand(%a: tensor<8x16xf32>, %b: tensor<*xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'sits.matmul' op operand #1 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<*xf32>'}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<*xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @fp8_bias(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>, %bias: tensor<32xf8E4M3FN>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'sits.matmul' op operand #2 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<32xf8E4M3FN>'}}
  %0 = sits.matmul %a, %b bias(%bias) : (tensor<8x16xf32>, tensor<16x32xf32>, tensor<32xf8E4M3FN>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

func.func @vector_result(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> vector<8x32xf32> {
  // expected-error @+1 {{'sits.matmul' op result #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'vector<8x32xf32>'}}
  %0 = sits.matmul %a, %b : (tensor<8x16xf32>, tensor<16x32xf32>) -> vector<8x32xf32>
  return %0 : vector<8x32xf32>
}

// -----

func.func @bad_activation_attr(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'sits.matmul' op attribute 'activation' failed to satisfy constraint: An elementwise activation function}}
  %0 = sits.matmul %a, %b {activation = "relu"} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

// A static bias pins a dynamic output-channel extent: the declared result
// cannot contradict it.
func.func @bias_refines_dynamic_n(%a: tensor<2x3xf32>, %b: tensor<3x?xf32>, %c: tensor<5xf32>) -> tensor<2x4xf32> {
  // expected-error @+2 {{'sits.matmul' op inferred type(s) 'tensor<2x5xf32>' are incompatible with return type(s) of operation 'tensor<2x4xf32>'}}
  // expected-error @+1 {{'sits.matmul' op failed to infer returned types}}
  %0 = sits.matmul %a, %b bias(%c) : (tensor<2x3xf32>, tensor<3x?xf32>, tensor<5xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}
