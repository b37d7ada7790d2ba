// RUN: sits-opt %s --split-input-file --canonicalize | FileCheck %s

// Folders of the SITS dialect.

// `sits.activation <none>` is the identity and folds away.
// CHECK-LABEL: func.func @activation_none
//  CHECK-SAME: (%[[X:.+]]: tensor<8x16xf32>)
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[X]] : tensor<8x16xf32>
func.func @activation_none(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = sits.activation <none> %x : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// A chain of identities folds away completely, also on dynamic shapes.
// CHECK-LABEL: func.func @activation_none_chain
//  CHECK-SAME: (%[[X:.+]]: tensor<?x16xbf16>)
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[X]] : tensor<?x16xbf16>
func.func @activation_none_chain(%x: tensor<?x16xbf16>) -> tensor<?x16xbf16> {
  %0 = sits.activation <none> %x : tensor<?x16xbf16>
  %1 = sits.activation <none> %0 : tensor<?x16xbf16>
  return %1 : tensor<?x16xbf16>
}

// -----

// relu(relu(x)) == relu(x): the outer relu folds to the inner one.
// CHECK-LABEL: func.func @relu_relu
//  CHECK-SAME: (%[[X:.+]]: tensor<8x16xf32>)
//       CHECK:   %[[R:.+]] = sits.activation <relu> %[[X]] : tensor<8x16xf32>
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[R]] : tensor<8x16xf32>
func.func @relu_relu(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = sits.activation <relu> %x : tensor<8x16xf32>
  %1 = sits.activation <relu> %0 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// -----

// relu(relu(relu(x))) collapses to one relu; identities in between fold too.
// CHECK-LABEL: func.func @relu_chain
//  CHECK-SAME: (%[[X:.+]]: tensor<4xf16>)
//       CHECK:   %[[R:.+]] = sits.activation <relu> %[[X]] : tensor<4xf16>
//   CHECK-NOT:   sits.activation
//       CHECK:   return %[[R]], %[[R]]
func.func @relu_chain(%x: tensor<4xf16>) -> (tensor<4xf16>, tensor<4xf16>) {
  %0 = sits.activation <relu> %x : tensor<4xf16>
  %1 = sits.activation <none> %0 : tensor<4xf16>
  %2 = sits.activation <relu> %1 : tensor<4xf16>
  %3 = sits.activation <relu> %2 : tensor<4xf16>
  return %3, %0 : tensor<4xf16>, tensor<4xf16>
}

// -----

// Other pairs do not fold: gelu(relu), relu(gelu), silu(silu), tanh(tanh).
// CHECK-LABEL: func.func @no_fold_mixed
//  CHECK-SAME: (%[[X:.+]]: tensor<8xf32>)
//       CHECK:   %[[A:.+]] = sits.activation <relu> %[[X]]
//       CHECK:   %[[B:.+]] = sits.activation <gelu> %[[A]]
//       CHECK:   %[[C:.+]] = sits.activation <gelu> %[[X]]
//       CHECK:   %[[D:.+]] = sits.activation <relu> %[[C]]
//       CHECK:   %[[E:.+]] = sits.activation <silu> %[[X]]
//       CHECK:   %[[F:.+]] = sits.activation <silu> %[[E]]
//       CHECK:   %[[G:.+]] = sits.activation <tanh> %[[X]]
//       CHECK:   %[[H:.+]] = sits.activation <tanh> %[[G]]
//       CHECK:   return %[[B]], %[[D]], %[[F]], %[[H]]
func.func @no_fold_mixed(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %0 = sits.activation <relu> %x : tensor<8xf32>
  %1 = sits.activation <gelu> %0 : tensor<8xf32>
  %2 = sits.activation <gelu> %x : tensor<8xf32>
  %3 = sits.activation <relu> %2 : tensor<8xf32>
  %4 = sits.activation <silu> %x : tensor<8xf32>
  %5 = sits.activation <silu> %4 : tensor<8xf32>
  %6 = sits.activation <tanh> %x : tensor<8xf32>
  %7 = sits.activation <tanh> %6 : tensor<8xf32>
  return %1, %3, %5, %7 : tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// A relu epilogue on a contraction is not a sits.activation producer: the
// relu after it stays (canonicalization does not fuse or unfuse epilogues).
// CHECK-LABEL: func.func @relu_after_relu_epilogue
//       CHECK:   %[[M:.+]] = sits.matmul {{.+}} {activation = #sits.activation<relu>}
//       CHECK:   %[[R:.+]] = sits.activation <relu> %[[M]]
//       CHECK:   return %[[R]]
func.func @relu_after_relu_epilogue(%a: tensor<2x4xf32>, %b: tensor<4x4xf32>) -> tensor<2x4xf32> {
  %0 = sits.matmul %a, %b {activation = #sits.activation<relu>} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %1 = sits.activation <relu> %0 : tensor<2x4xf32>
  return %1 : tensor<2x4xf32>
}

// -----

// quantize(dequantize(q)) with the same scale, zero point, axis and
// block_size gives q back.
// CHECK-LABEL: func.func @requantize_per_tensor
//  CHECK-SAME: (%[[Q:.+]]: tensor<16x32xi8>, %[[S:.+]]: tensor<f32>, %[[ZP:.+]]: tensor<i8>)
//   CHECK-NOT:   sits.dequantize
//   CHECK-NOT:   sits.quantize
//       CHECK:   return %[[Q]] : tensor<16x32xi8>
func.func @requantize_per_tensor(%q: tensor<16x32xi8>, %s: tensor<f32>, %zp: tensor<i8>) -> tensor<16x32xi8> {
  %0 = sits.dequantize %q, %s, %zp : (tensor<16x32xi8>, tensor<f32>, tensor<i8>) -> tensor<16x32xf32>
  %1 = sits.quantize %0, %s, %zp : (tensor<16x32xf32>, tensor<f32>, tensor<i8>) -> tensor<16x32xi8>
  return %1 : tensor<16x32xi8>
}

// -----

// CHECK-LABEL: func.func @requantize_per_channel
//  CHECK-SAME: (%[[Q:.+]]: tensor<768x3072xi8>, %[[S:.+]]: tensor<768xf32>)
//   CHECK-NOT:   sits.quantize
//       CHECK:   return %[[Q]] : tensor<768x3072xi8>
func.func @requantize_per_channel(%q: tensor<768x3072xi8>, %s: tensor<768xf32>) -> tensor<768x3072xi8> {
  %0 = sits.dequantize %q, %s {axis = 0 : i64} : (tensor<768x3072xi8>, tensor<768xf32>) -> tensor<768x3072xf32>
  %1 = sits.quantize %0, %s {axis = 0 : i64} : (tensor<768x3072xf32>, tensor<768xf32>) -> tensor<768x3072xi8>
  return %1 : tensor<768x3072xi8>
}

// -----

// Per-group with a packed encoding: the quantized type (encoding included)
// matches, so it folds.
// CHECK-LABEL: func.func @requantize_per_group_packed
//  CHECK-SAME: (%[[Q:.+]]: tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>, %[[S:.+]]: tensor<2x64xf16>, %[[ZP:.+]]: tensor<2x64xi4>)
//   CHECK-NOT:   sits.quantize
//       CHECK:   return %[[Q]] : tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>
func.func @requantize_per_group_packed(%q: tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>,
                                       %s: tensor<2x64xf16>, %zp: tensor<2x64xi4>)
    -> tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>> {
  %0 = sits.dequantize %q, %s, %zp {axis = 0 : i64, block_size = 32 : i64}
      : (tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>, tensor<2x64xf16>, tensor<2x64xi4>) -> tensor<64x64xf16>
  %1 = sits.quantize %0, %s, %zp {axis = 0 : i64, block_size = 32 : i64}
      : (tensor<64x64xf16>, tensor<2x64xf16>, tensor<2x64xi4>) -> tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>
  return %1 : tensor<64x64xi4, #sits.packed<storage = i8, axis = 1>>
}

// -----

// A different scale value: no fold.
// CHECK-LABEL: func.func @no_fold_scale_differs
//  CHECK-SAME: (%[[Q:.+]]: tensor<16x32xi8>, %[[S0:.+]]: tensor<f32>, %[[S1:.+]]: tensor<f32>)
//       CHECK:   %[[D:.+]] = sits.dequantize %[[Q]], %[[S0]]
//       CHECK:   %[[R:.+]] = sits.quantize %[[D]], %[[S1]]
//       CHECK:   return %[[R]]
func.func @no_fold_scale_differs(%q: tensor<16x32xi8>, %s0: tensor<f32>, %s1: tensor<f32>) -> tensor<16x32xi8> {
  %0 = sits.dequantize %q, %s0 : (tensor<16x32xi8>, tensor<f32>) -> tensor<16x32xf32>
  %1 = sits.quantize %0, %s1 : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x32xi8>
  return %1 : tensor<16x32xi8>
}

// -----

// A different zero point value: no fold.
// CHECK-LABEL: func.func @no_fold_zero_point_differs
//  CHECK-SAME: (%[[Q:.+]]: tensor<16x32xi8>, %[[S:.+]]: tensor<f32>, %[[Z0:.+]]: tensor<i8>, %[[Z1:.+]]: tensor<i8>)
//       CHECK:   %[[D:.+]] = sits.dequantize %[[Q]], %[[S]], %[[Z0]]
//       CHECK:   %[[R:.+]] = sits.quantize %[[D]], %[[S]], %[[Z1]]
//       CHECK:   return %[[R]]
func.func @no_fold_zero_point_differs(%q: tensor<16x32xi8>, %s: tensor<f32>, %z0: tensor<i8>, %z1: tensor<i8>) -> tensor<16x32xi8> {
  %0 = sits.dequantize %q, %s, %z0 : (tensor<16x32xi8>, tensor<f32>, tensor<i8>) -> tensor<16x32xf32>
  %1 = sits.quantize %0, %s, %z1 : (tensor<16x32xf32>, tensor<f32>, tensor<i8>) -> tensor<16x32xi8>
  return %1 : tensor<16x32xi8>
}

// -----

// A zero point on one side only: no fold, in either direction.
// CHECK-LABEL: func.func @no_fold_zero_point_missing
//       CHECK:   %[[D0:.+]] = sits.dequantize %{{[^,]+}}, %{{[^,]+}}, %{{[^ ]+}} :
//       CHECK:   %[[R0:.+]] = sits.quantize %[[D0]], %{{[^ ]+}} :
//       CHECK:   %[[D1:.+]] = sits.dequantize %{{[^,]+}}, %{{[^ ]+}} :
//       CHECK:   %[[R1:.+]] = sits.quantize %[[D1]], %{{[^,]+}}, %{{[^ ]+}} :
//       CHECK:   return %[[R0]], %[[R1]]
func.func @no_fold_zero_point_missing(%q: tensor<16x32xi8>, %s: tensor<f32>, %z: tensor<i8>) -> (tensor<16x32xi8>, tensor<16x32xi8>) {
  %0 = sits.dequantize %q, %s, %z : (tensor<16x32xi8>, tensor<f32>, tensor<i8>) -> tensor<16x32xf32>
  %1 = sits.quantize %0, %s : (tensor<16x32xf32>, tensor<f32>) -> tensor<16x32xi8>
  %2 = sits.dequantize %q, %s : (tensor<16x32xi8>, tensor<f32>) -> tensor<16x32xf32>
  %3 = sits.quantize %2, %s, %z : (tensor<16x32xf32>, tensor<f32>, tensor<i8>) -> tensor<16x32xi8>
  return %1, %3 : tensor<16x32xi8>, tensor<16x32xi8>
}

// -----

// Same scale value, different axis (both valid for a square tensor): no fold.
// CHECK-LABEL: func.func @no_fold_axis_differs
//  CHECK-SAME: (%[[Q:.+]]: tensor<64x64xi8>, %[[S:.+]]: tensor<64xf32>)
//       CHECK:   %[[D:.+]] = sits.dequantize %[[Q]], %[[S]] {axis = 0 : i64}
//       CHECK:   %[[R:.+]] = sits.quantize %[[D]], %[[S]] {axis = 1 : i64}
//       CHECK:   return %[[R]]
func.func @no_fold_axis_differs(%q: tensor<64x64xi8>, %s: tensor<64xf32>) -> tensor<64x64xi8> {
  %0 = sits.dequantize %q, %s {axis = 0 : i64} : (tensor<64x64xi8>, tensor<64xf32>) -> tensor<64x64xf32>
  %1 = sits.quantize %0, %s {axis = 1 : i64} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xi8>
  return %1 : tensor<64x64xi8>
}

// -----

// Same scale value, different block_size (ceil(64 / 32) = ceil(64 / 63) = 2
// groups, so both verify): no fold.
// CHECK-LABEL: func.func @no_fold_block_size_differs
//  CHECK-SAME: (%[[Q:.+]]: tensor<64x8xi4>, %[[S:.+]]: tensor<2x8xf32>)
//       CHECK:   %[[D:.+]] = sits.dequantize %[[Q]], %[[S]] {axis = 0 : i64, block_size = 32 : i64}
//       CHECK:   %[[R:.+]] = sits.quantize %[[D]], %[[S]] {axis = 0 : i64, block_size = 63 : i64}
//       CHECK:   return %[[R]]
func.func @no_fold_block_size_differs(%q: tensor<64x8xi4>, %s: tensor<2x8xf32>) -> tensor<64x8xi4> {
  %0 = sits.dequantize %q, %s {axis = 0 : i64, block_size = 32 : i64} : (tensor<64x8xi4>, tensor<2x8xf32>) -> tensor<64x8xf32>
  %1 = sits.quantize %0, %s {axis = 0 : i64, block_size = 63 : i64} : (tensor<64x8xf32>, tensor<2x8xf32>) -> tensor<64x8xi4>
  return %1 : tensor<64x8xi4>
}

// -----

// A per-channel op and a per-group op of block_size 1 over a 1-D scale: the
// axis matches but block_size is present on one side only. No fold.
// CHECK-LABEL: func.func @no_fold_block_size_missing
//       CHECK:   %[[D:.+]] = sits.dequantize {{.+}} {axis = 0 : i64} :
//       CHECK:   %[[R:.+]] = sits.quantize %[[D]], {{.+}} {axis = 0 : i64, block_size = 1 : i64} :
//       CHECK:   return %[[R]]
func.func @no_fold_block_size_missing(%q: tensor<8xi8>, %s: tensor<8xf32>) -> tensor<8xi8> {
  %0 = sits.dequantize %q, %s {axis = 0 : i64} : (tensor<8xi8>, tensor<8xf32>) -> tensor<8xf32>
  %1 = sits.quantize %0, %s {axis = 0 : i64, block_size = 1 : i64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi8>
  return %1 : tensor<8xi8>
}

// -----

// Requantizing to another type (i8 -> i16, or a different packing) is not
// the identity: no fold.
// CHECK-LABEL: func.func @no_fold_type_differs
//       CHECK:   %[[D0:.+]] = sits.dequantize {{.+}} : (tensor<16xi8>, tensor<f32>) -> tensor<16xf32>
//       CHECK:   %[[R0:.+]] = sits.quantize %[[D0]], {{.+}} : (tensor<16xf32>, tensor<f32>) -> tensor<16xi16>
//       CHECK:   %[[D1:.+]] = sits.dequantize {{.+}} : (tensor<16xi4, #sits.packed<storage = i8, axis = 0>>, tensor<f32>) -> tensor<16xf32>
//       CHECK:   %[[R1:.+]] = sits.quantize %[[D1]], {{.+}} : (tensor<16xf32>, tensor<f32>) -> tensor<16xi4, #sits.packed<storage = i16, axis = 0>>
//       CHECK:   return %[[R0]], %[[R1]]
func.func @no_fold_type_differs(%q: tensor<16xi8>, %p: tensor<16xi4, #sits.packed<storage = i8, axis = 0>>, %s: tensor<f32>)
    -> (tensor<16xi16>, tensor<16xi4, #sits.packed<storage = i16, axis = 0>>) {
  %0 = sits.dequantize %q, %s : (tensor<16xi8>, tensor<f32>) -> tensor<16xf32>
  %1 = sits.quantize %0, %s : (tensor<16xf32>, tensor<f32>) -> tensor<16xi16>
  %2 = sits.dequantize %p, %s : (tensor<16xi4, #sits.packed<storage = i8, axis = 0>>, tensor<f32>) -> tensor<16xf32>
  %3 = sits.quantize %2, %s : (tensor<16xf32>, tensor<f32>) -> tensor<16xi4, #sits.packed<storage = i16, axis = 0>>
  return %1, %3 : tensor<16xi16>, tensor<16xi4, #sits.packed<storage = i16, axis = 0>>
}

// -----

// The other direction, dequantize(quantize(x)), loses precision and is kept.
// CHECK-LABEL: func.func @no_fold_dequantize_of_quantize
//  CHECK-SAME: (%[[X:.+]]: tensor<16xf32>, %[[S:.+]]: tensor<f32>)
//       CHECK:   %[[Q:.+]] = sits.quantize %[[X]], %[[S]]
//       CHECK:   %[[D:.+]] = sits.dequantize %[[Q]], %[[S]]
//       CHECK:   return %[[D]]
func.func @no_fold_dequantize_of_quantize(%x: tensor<16xf32>, %s: tensor<f32>) -> tensor<16xf32> {
  %0 = sits.quantize %x, %s : (tensor<16xf32>, tensor<f32>) -> tensor<16xi8>
  %1 = sits.dequantize %0, %s : (tensor<16xi8>, tensor<f32>) -> tensor<16xf32>
  return %1 : tensor<16xf32>
}

// -----

// A constant layer operand of sits.paged_attention becomes the attribute; any
// other operand stays.
// CHECK-LABEL: func.func @paged_attention_constant_layer
//  CHECK-SAME: %[[I:[^:]+]]: index)
//       CHECK:   %[[O:.+]], %{{.+}} = sits.paged_attention {{.+}} {layer = 1 : i64, scale = 2.500000e-01 : f64}
//       CHECK:   %{{.+}}, %[[P:.+]] = sits.paged_attention {{.+}} layer(%[[I]]) :
//       CHECK:   return %[[O]], %[[P]]
func.func @paged_attention_constant_layer(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x1x16xf32>,
                                          %pool: tensor<8x2x2x2x4x16xf32>, %t: tensor<1x2xi32>,
                                          %s: tensor<1x1xi64>, %l: tensor<1xi32>, %i: index)
    -> (tensor<1x4x1x16xf32>, tensor<8x2x2x2x4x16xf32>) {
  %c1 = arith.constant 1 : index
  %o, %p = sits.paged_attention %q, %k, %k, %pool, %t, %s, %l layer(%c1) {scale = 0.25 : f64}
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x2x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x2x2x2x4x16xf32>)
  %o1, %p1 = sits.paged_attention %q, %k, %k, %p, %t, %s, %l layer(%i)
      : (tensor<1x4x1x16xf32>, tensor<1x2x1x16xf32>, tensor<1x2x1x16xf32>, tensor<8x2x2x2x4x16xf32>, tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>)
      -> (tensor<1x4x1x16xf32>, tensor<8x2x2x2x4x16xf32>)
  return %o, %p1 : tensor<1x4x1x16xf32>, tensor<8x2x2x2x4x16xf32>
}
