// RUN: sits-opt %s --split-input-file --verify-diagnostics

// sits.activation has no verifier of its own: these are the ODS and parser
// diagnostics for it and for #sits.activation.

func.func @unknown_kind(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+2 {{expected ::mlir::sits::ActivationKind to be one of: none, relu, gelu, gelu_tanh, silu, sigmoid, tanh}}
  // expected-error @+1 {{failed to parse Sits_ActivationAttr parameter 'value' which is to be a `::mlir::sits::ActivationKind`}}
  %0 = sits.activation <swish> %x : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

func.func @unknown_kind_in_epilogue(%a: tensor<8x16xf32>, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  // expected-error @+2 {{expected ::mlir::sits::ActivationKind to be one of: none, relu, gelu, gelu_tanh, silu, sigmoid, tanh}}
  // expected-error @+1 {{failed to parse Sits_ActivationAttr parameter 'value' which is to be a `::mlir::sits::ActivationKind`}}
  %0 = sits.matmul %a, %b {activation = #sits.activation<leaky_relu>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

// ODS: SameOperandsAndResultType (reachable through the generic form only).
func.func @result_type(%x: tensor<8x16xf32>) -> tensor<8x32xf32> {
  // expected-error @+1 {{'sits.activation' op requires the same type for all operands and results}}
  %0 = "sits.activation"(%x) <{kind = #sits.activation<relu>}> : (tensor<8x16xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// -----

// ODS type constraints.
func.func @integer_input(%x: tensor<8x16xi8>) -> tensor<8x16xi8> {
  // expected-error @+1 {{'sits.activation' op operand #0 must be ranked tensor of 16-bit float or bfloat16 type or 32-bit float or 64-bit float values, but got 'tensor<8x16xi8>'}}
  %0 = sits.activation <relu> %x : tensor<8x16xi8>
  return %0 : tensor<8x16xi8>
}

// -----

// The custom form parses a ranked tensor type.
func.func @unranked_input(%x: tensor<*xf32>) -> tensor<*xf32> {
  // expected-error @+1 {{custom op 'sits.activation' invalid kind of type specified: expected builtin.tensor, but found 'tensor<*xf32>'}}
  %0 = sits.activation <relu> %x : tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @missing_kind(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{'sits.activation' op requires attribute 'kind'}}
  %0 = "sits.activation"(%x) : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}
