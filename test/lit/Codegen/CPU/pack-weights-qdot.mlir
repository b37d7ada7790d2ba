// RUN: sits-opt %s --sits-convert-to-linalg=integer-dot=true --canonicalize | sits-opt --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v4},sits-cpu-pack-weights)' | FileCheck %s

// The weight re-layouts of the integer dot-product form run at compile time
// on constant codes: byte (nb, o, j, b) of "qdot_i8" is code(4o + b, 16nb + j)
// + 128, and of "qdot_i4" code(8o + b) + 8 in the low nibble and
// code(8o + 4 + b) + 8 in the high one. Column j of these codes is
// 16k + j - 32 (INT8) and (k + j) % 16 - 8 (INT4).

// CHECK-LABEL: func.func @int8
//   CHECK-NOT:   sits.weight_layout
//       CHECK:   %[[P:.+]] = arith.constant dense<{{\[\[\[\[}}96, 112, -128, -112], [97, 113, -127, -111], [98, 114, -126, -110]{{.*}}[111, 127, -113, -97]]]]> : tensor<1x1x16x4xi8>
//       CHECK:   linalg.generic {{.+}} ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : {{.+}}) {{.+}} attrs =  {sits.ukernel = "qdot_i8"}
func.func @int8(%x: tensor<?x4xf32>) -> tensor<?x16xf32> {
  %w = arith.constant dense<[[-32, -31, -30, -29, -28, -27, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17], [-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]> : tensor<4x16xi8>
  %s = arith.constant dense<0.5> : tensor<16xf32>
  %y = sits.qmatmul %x, %w, %s {axis = 1 : i64} : (tensor<?x4xf32>, tensor<4x16xi8>, tensor<16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// CHECK-LABEL: func.func @int4
//   CHECK-NOT:   sits.weight_layout
//       CHECK:   %[[P:.+]] = arith.constant dense<{{\[\[\[\[\[}}64, 81], [98, 115]], {{\[\[}}81, 98], [115, -124]]{{.*}}{{\[\[}}63, 64], [81, 98]]]]]> : tensor<1x1x16x2x2xi8>
//       CHECK:   linalg.generic {{.+}} ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : {{.+}}) {{.+}} attrs =  {sits.ukernel = "qdot_i4"}
func.func @int4(%x: tensor<?x8xf32>) -> tensor<?x16xf32> {
  %w = arith.constant dense<[[-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7], [-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8], [-6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7], [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6], [-4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5], [-3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4], [-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3], [-1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2]]> : tensor<8x16xi4, #sits.packed<storage = i8, axis = 0>>
  %s = arith.constant dense<0.25> : tensor<1x16xf32>
  %y = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 8 : i64} : (tensor<?x8xf32>, tensor<8x16xi4, #sits.packed<storage = i8, axis = 0>>, tensor<1x16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}

// Codes passed to a layer function by each call: every call passes its own
// re-laid-out constant, and the function reads that new argument.
// CHECK-LABEL: func.func private @layer
//  CHECK-SAME:   (%{{.+}}: tensor<?x4xf32>, %[[PACKED:.+]]: tensor<1x1x16x4xi8>)
//   CHECK-NOT:   sits.weight_layout
//       CHECK:   tensor.expand_shape %[[PACKED]]
//       CHECK:   sits.ukernel = "qdot_i8"
// CHECK-LABEL: func.func @calls
//       CHECK:   %[[A:.+]] = arith.constant dense<{{\[\[\[\[}}96, 112, -128, -112]{{.*}}> : tensor<1x1x16x4xi8>
//       CHECK:   call @layer(%{{.+}}, %[[A]])
//       CHECK:   %[[B:.+]] = arith.constant dense<{{\[\[\[\[}}-96, -112, -128, 112]{{.*}}> : tensor<1x1x16x4xi8>
//       CHECK:   call @layer(%{{.+}}, %[[B]])
func.func private @layer(%x: tensor<?x4xf32>, %w: tensor<4x16xi8>) -> tensor<?x16xf32> {
  %s = arith.constant dense<0.5> : tensor<16xf32>
  %y = sits.qmatmul %x, %w, %s {axis = 1 : i64} : (tensor<?x4xf32>, tensor<4x16xi8>, tensor<16xf32>) -> tensor<?x16xf32>
  return %y : tensor<?x16xf32>
}
func.func @calls(%x: tensor<?x4xf32>) -> (tensor<?x16xf32>, tensor<?x16xf32>) {
  %a = arith.constant dense<[[-32, -31, -30, -29, -28, -27, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17], [-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]> : tensor<4x16xi8>
  %b = arith.constant dense<[[32, 31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17], [16, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1], [0, -1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11, -12, -13, -14, -15], [-16, -17, -18, -19, -20, -21, -22, -23, -24, -25, -26, -27, -28, -29, -30, -31]]> : tensor<4x16xi8>
  %0 = call @layer(%x, %a) : (tensor<?x4xf32>, tensor<4x16xi8>) -> tensor<?x16xf32>
  %1 = call @layer(%x, %b) : (tensor<?x4xf32>, tensor<4x16xi8>) -> tensor<?x16xf32>
  return %0, %1 : tensor<?x16xf32>, tensor<?x16xf32>
}
