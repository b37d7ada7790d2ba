// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg --verify-diagnostics

// What sits-convert-to-linalg cannot lower is reported at the op, and the
// pass fails before rewriting anything.

func.func @packed_float_matmul(%x: tensor<8x16xf16>, %w: tensor<16x8xf16, #sits.packed<storage = i32, axis = 1>>) -> tensor<8x8xf16> {
  // expected-error @+1 {{'sits.matmul' op cannot be lowered to linalg: operand #1 of type 'tensor<16x8xf16, #sits.packed<storage = i32, axis = 1>>' is packed; only the quantized operands of sits.dequantize, sits.quantize and sits.qmatmul may carry a #sits.packed encoding}}
  %y = sits.matmul %x, %w : (tensor<8x16xf16>, tensor<16x8xf16, #sits.packed<storage = i32, axis = 1>>) -> tensor<8x8xf16>
  return %y : tensor<8x8xf16>
}

// -----

func.func @packed_float_activation(%x: tensor<8xf16, #sits.packed<storage = i32, axis = 0>>) -> tensor<8xf16, #sits.packed<storage = i32, axis = 0>> {
  // expected-error @+1 {{'sits.activation' op cannot be lowered to linalg: operand #0}}
  %y = sits.activation <relu> %x : tensor<8xf16, #sits.packed<storage = i32, axis = 0>>
  return %y : tensor<8xf16, #sits.packed<storage = i32, axis = 0>>
}

// -----

func.func @packed_float_result(%q: tensor<8xi8>, %s: tensor<f16>) -> tensor<8xf16, #sits.packed<storage = i32, axis = 0>> {
  // expected-error @+1 {{'sits.dequantize' op cannot be lowered to linalg: result #0 of type 'tensor<8xf16, #sits.packed<storage = i32, axis = 0>>' is packed; only the result of sits.quantize may carry a #sits.packed encoding}}
  %y = sits.dequantize %q, %s : (tensor<8xi8>, tensor<f16>) -> tensor<8xf16, #sits.packed<storage = i32, axis = 0>>
  return %y : tensor<8xf16, #sits.packed<storage = i32, axis = 0>>
}

// -----

// Constants are repacked from dense elements (or reinterpreted from a dense
// resource); anything else cannot be.
func.func @sparse_packed_constant() -> tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>> {
  // expected-error @+1 {{'arith.constant' op cannot be converted by sits-convert-to-linalg: its 'tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>' value is neither dense elements nor a dense resource}}
  %c = arith.constant sparse<[[0, 1]], [3]> : tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>
  return %c : tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>
}

// -----

// Slicing packed storage would need sub-word offsets.
func.func @packed_slice(%w: tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>) -> tensor<4x4xi4, #sits.packed<storage = i8, axis = 1>> {
  // expected-error @+1 {{'tensor.extract_slice' op cannot be converted by sits-convert-to-linalg: it uses 'tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>', a #sits.packed tensor, which only SITS ops, function signatures, calls, returns and constants may use}}
  %s = tensor.extract_slice %w[0, 0] [4, 4] [1, 1] : tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>> to tensor<4x4xi4, #sits.packed<storage = i8, axis = 1>>
  return %s : tensor<4x4xi4, #sits.packed<storage = i8, axis = 1>>
}

// -----

// An unsigned tensor in an op that is not retyped (only tensor-dialect ops
// without regions are).
func.func @unsigned_in_linalg(%x: tensor<4x4xui8>, %init: tensor<4x4xui8>) -> tensor<4x4xui8> {
  // expected-error @+1 {{'linalg.transpose' op cannot be converted by sits-convert-to-linalg: it uses 'tensor<4x4xui8>', a tensor of signed or unsigned integers, which only SITS ops, function signatures, calls, returns, constants and tensor ops without regions may use}}
  %t = linalg.transpose ins(%x : tensor<4x4xui8>) outs(%init : tensor<4x4xui8>) permutation = [1, 0]
  return %t : tensor<4x4xui8>
}

// -----

// Every offending op is reported, not only the first.
func.func @several(%w: tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>, %u: tensor<4xui8>) -> (tensor<8x4xi4, #sits.packed<storage = i8, axis = 1>>, tensor<4xui8>) {
  %shape = arith.constant dense<[8, 4]> : tensor<2xindex>
  // expected-error @+1 {{'tensor.cast' op cannot be converted by sits-convert-to-linalg: it uses 'tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>', a #sits.packed tensor}}
  %c = tensor.cast %w : tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>> to tensor<?x8xi4, #sits.packed<storage = i8, axis = 1>>
  // expected-error @+1 {{'tensor.reshape' op cannot be converted by sits-convert-to-linalg: it uses 'tensor<?x8xi4, #sits.packed<storage = i8, axis = 1>>', a #sits.packed tensor}}
  %r = tensor.reshape %c(%shape) : (tensor<?x8xi4, #sits.packed<storage = i8, axis = 1>>, tensor<2xindex>) -> tensor<8x4xi4, #sits.packed<storage = i8, axis = 1>>
  // expected-error @+1 {{'scf.execute_region' op cannot be converted by sits-convert-to-linalg: it uses 'tensor<4xui8>'}}
  %e = scf.execute_region -> tensor<4xui8> {
    scf.yield %u : tensor<4xui8>
  }
  return %r, %e : tensor<8x4xi4, #sits.packed<storage = i8, axis = 1>>, tensor<4xui8>
}
