// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// The type converter: a #sits.packed tensor becomes its storage (extent along
// the packing axis divided by the packing factor, element = storage word),
// and signed/unsigned integer tensors become signless ones, in function
// signatures (declarations included), calls, returns, constants and
// tensor-dialect ops.

// CHECK-LABEL: func.func private @external
//  CHECK-SAME: (tensor<4x4xi8>, tensor<3xi8>) -> tensor<3xi8>
// CHECK-LABEL: func.func @boundaries
//  CHECK-SAME: (%[[W:.+]]: tensor<4x4xi8>, %[[U:.+]]: tensor<3xi8>) -> (tensor<4x4xi8>, tensor<3xi8>)
//       CHECK:   %[[R:.+]] = call @external(%[[W]], %[[U]]) : (tensor<4x4xi8>, tensor<3xi8>) -> tensor<3xi8>
//       CHECK:   return %[[W]], %[[R]] : tensor<4x4xi8>, tensor<3xi8>
func.func private @external(tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>, tensor<3xui8>) -> tensor<3xui8>

func.func @boundaries(%w: tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>, %u: tensor<3xui8>)
    -> (tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>, tensor<3xui8>) {
  %r = call @external(%w, %u) : (tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>, tensor<3xui8>) -> tensor<3xui8>
  return %w, %r : tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>, tensor<3xui8>
}

// -----

// Dynamic extents stay dynamic; i2 packs four to a byte, along axis 0.
// CHECK-LABEL: func.func @dynamic_and_i2
//  CHECK-SAME: (%{{.+}}: tensor<?x16xi8>, %{{.+}}: tensor<2x?xi8>) -> tensor<2x?xi8>
func.func @dynamic_and_i2(%a: tensor<?x16xi4, #sits.packed<storage = i8, axis = 0>>, %b: tensor<8x?xi2, #sits.packed<storage = i8, axis = 0>>)
    -> tensor<8x?xi2, #sits.packed<storage = i8, axis = 0>> {
  return %b : tensor<8x?xi2, #sits.packed<storage = i8, axis = 0>>
}

// -----

// Dense constants are repacked (first element in the low bits: [1, -2] is
// 0xE1 = -31); splats stay splats; unsigned values keep their bits; a dense
// resource is reinterpreted as its storage words without a copy.
// CHECK-LABEL: func.func @constants
//  CHECK-SAME: () -> (tensor<2x2xi8>, tensor<2x2xi8>, tensor<3xi8>, tensor<4x4xi8>)
//   CHECK-DAG:   %[[P:.+]] = arith.constant dense<{{\[}}[-31, -61], [-121, 80]]> : tensor<2x2xi8>
//   CHECK-DAG:   %[[S:.+]] = arith.constant dense<-1> : tensor<2x2xi8>
//   CHECK-DAG:   %[[U:.+]] = arith.constant dense<[1, -56, -1]> : tensor<3xi8>
//   CHECK-DAG:   %[[R:.+]] = arith.constant dense_resource<blob> : tensor<4x4xi8>
//       CHECK:   return %[[P]], %[[S]], %[[U]], %[[R]]
func.func @constants() -> (tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>, tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>,
                           tensor<3xui8>, tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>) {
  %p = arith.constant dense<[[1, -2, 3, -4], [7, -8, 0, 5]]> : tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>
  %s = arith.constant dense<-1> : tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>
  %u = arith.constant dense<[1, 200, 255]> : tensor<3xui8>
  %r = arith.constant dense_resource<blob> : tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>
  return %p, %s, %u, %r : tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>, tensor<2x4xi4, #sits.packed<storage = i8, axis = 1>>,
                          tensor<3xui8>, tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>
}

{-#
  dialect_resources: {
    builtin: {
      blob: "0x0100000000112233445566778899AABBCCDDEEFF"
    }
  }
#-}

// -----

// A tensor op between two SITS ops is retyped in place.
// CHECK-LABEL: func.func @tensor_ops
//       CHECK:   %[[Q:.+]] = linalg.generic
//       CHECK:     arith.fptoui %{{.+}} : f32 to i8
//       CHECK:   %[[C:.+]] = tensor.collapse_shape %[[Q]] {{\[}}[0, 1]] : tensor<2x6xi8> into tensor<12xi8>
//       CHECK:   linalg.generic
//  CHECK-SAME:       ins(%[[C]], %{{.+}} : tensor<12xi8>, tensor<f32>)
//       CHECK:     arith.extui %{{.+}} : i8 to i32
//   CHECK-NOT:   ui8
func.func @tensor_ops(%x: tensor<2x6xf32>, %s: tensor<f32>) -> tensor<12xf32> {
  %q = sits.quantize %x, %s : (tensor<2x6xf32>, tensor<f32>) -> tensor<2x6xui8>
  %c = tensor.collapse_shape %q [[0, 1]] : tensor<2x6xui8> into tensor<12xui8>
  %y = sits.dequantize %c, %s : (tensor<12xui8>, tensor<f32>) -> tensor<12xf32>
  return %y : tensor<12xf32>
}
