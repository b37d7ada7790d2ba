// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg=integer-dot=true | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s --check-prefix=OFF

// OFF-NOT: sits.ukernel
// OFF-NOT: sits.weight_layout

// Signed INT4 grouped along K: the rows are quantized per group of 32 (the
// largest magnitude, INT8 codes, scales), the codes re-laid out for the
// kernel (a reduction or-ing the two nibbles of each byte) and one
// contraction over (m, nb, j, g, o, h, b) marked for sitsRuntimeQDot.
// CHECK-DAG: #[[CODES4:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d3, d4, d5, d6)>
// CHECK-DAG: #[[W4:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d1, d3, d4, d2, d6)>
// CHECK-DAG: #[[SX4:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d3)>
// CHECK-DAG: #[[SW4:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d3, d1, d2)>
// CHECK-DAG: #[[Y4:.+]] = affine_map<(d0, d1, d2, d3, d4, d5, d6) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @int4
//  CHECK-SAME:   (%[[X:.+]]: tensor<?x64xf32>, %[[W:.+]]: tensor<32x32xi8>, %[[S:.+]]: tensor<2x32xf32>)
//       CHECK:   %[[XG:.+]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [%{{.+}}, 2, 32]
//       CHECK:   %[[AMAX:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[XG]] : tensor<?x2x32xf32>)
//       CHECK:     math.absf
//       CHECK:     arith.maximumf
//       CHECK:   %[[Q:.+]] = linalg.generic {{.+}} ins(%[[XG]], %[[AMAX]] : tensor<?x2x32xf32>, tensor<?x2xf32>) outs(%{{.+}} : tensor<?x2x32xi8>)
//       CHECK:     math.roundeven
//       CHECK:     arith.fptosi %{{.+}} : f32 to i8
//       CHECK:   %[[SX:.+]] = linalg.generic {{.+}} ins(%[[AMAX]] : tensor<?x2xf32>)
//       CHECK:     arith.divf
//       CHECK:   %[[WV:.+]] = tensor.expand_shape %[[W]] {{\[}}[0, 1, 2], [3, 4]] output_shape [8, 2, 2, 2, 16]
//       CHECK:   %[[L:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%[[WV]] : tensor<8x2x2x2x16xi8>) outs(%{{.+}} : tensor<2x8x16x2x2xi8>) attrs =  {sits.weight_layout = "qdot_i4"}
//       CHECK:   %[[LC:.+]] = tensor.collapse_shape %[[L]] {{\[}}[0], [1], [2], [3, 4]] : tensor<2x8x16x2x2xi8> into tensor<2x8x16x4xi8>
//       CHECK:   %[[LG:.+]] = tensor.expand_shape %[[LC]] {{\[}}[0], [1, 2], [3], [4]] output_shape [2, 2, 4, 16, 4]
//       CHECK:   %[[SWV:.+]] = tensor.expand_shape %[[S]] {{\[}}[0], [1, 2]] output_shape [2, 2, 16]
//       CHECK:   %[[QV:.+]] = tensor.expand_shape %[[Q]] {{\[}}[0], [1], [2, 3, 4]] output_shape [%{{.+}}, 2, 4, 2, 4]
//       CHECK:   %[[ACC:.+]] = linalg.generic {indexing_maps = [#[[CODES4]], #[[W4]], #[[SX4]], #[[SW4]], #[[Y4]]], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction", "reduction"]} ins(%[[QV]], %[[LG]], %[[SX]], %[[SWV]] : tensor<?x2x4x2x4xi8>, tensor<2x2x4x16x4xi8>, tensor<?x2xf32>, tensor<2x2x16xf32>) outs(%{{.+}} : tensor<?x2x16xf32>) attrs =  {sits.ukernel = "qdot_i4"}
//       CHECK:   tensor.collapse_shape %[[ACC]] {{\[}}[0], [1, 2]] : tensor<?x2x16xf32> into tensor<?x32xf32>
func.func @int4(%x: tensor<?x64xf32>, %w: tensor<64x32xi4, #sits.packed<storage = i8, axis = 0>>, %s: tensor<2x32xf32>) -> tensor<?x32xf32> {
  %0 = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 32 : i64} : (tensor<?x64xf32>, tensor<64x32xi4, #sits.packed<storage = i8, axis = 0>>, tensor<2x32xf32>) -> tensor<?x32xf32>
  return %0 : tensor<?x32xf32>
}

// -----

// INT8 per output channel with a rank-3 input: the leading dimensions fold
// into M, the activation groups are 128 elements of K (the largest of 128,
// 64, ... dividing it), the codes are flipped to unsigned in a [N/16, K/4,
// 16, 4] layout, the per-column scale is read as [N/16, 16], and the
// bias and activation follow as the epilogue.
// CHECK-DAG: #[[SW8:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d2)>
// CHECK-LABEL: func.func @int8
//       CHECK:   tensor.collapse_shape %{{.+}} {{\[}}[0, 1], [2]] : tensor<2x3x256xf32> into tensor<6x256xf32>
//       CHECK:   tensor.expand_shape %{{.+}} {{\[}}[0], [1, 2]] output_shape [6, 2, 128]
//       CHECK:   linalg.generic {{.+}} ins(%{{.+}} : tensor<64x4x2x16xi8>) outs(%{{.+}} : tensor<2x64x16x4xi8>) attrs =  {sits.weight_layout = "qdot_i8"}
//       CHECK:     arith.xori %{{.+}}, %{{.+}} : i8
//       CHECK:   linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}, #{{.+}}, #[[SW8]], #{{.+}}], {{.+}} ins(%{{.+}} : tensor<6x2x32x4xi8>, tensor<2x2x32x16x4xi8>, tensor<6x2xf32>, tensor<2x16xf32>) outs(%{{.+}} : tensor<6x2x16xf32>) attrs =  {sits.ukernel = "qdot_i8"}
//       CHECK:     arith.subi
//       CHECK:   linalg.generic
//       CHECK:     arith.addf
//       CHECK:     arith.maximumf
func.func @int8(%x: tensor<2x3x256xf32>, %w: tensor<256x32xi8>, %s: tensor<32xf32>, %b: tensor<32xf32>) -> tensor<2x3x32xf32> {
  %0 = sits.qmatmul %x, %w, %s bias(%b) {axis = 1 : i64, activation = #sits.activation<relu>} : (tensor<2x3x256xf32>, tensor<256x32xi8>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x3x32xf32>
  return %0 : tensor<2x3x32xf32>
}

// -----

// Forms the kernel does not take keep the default lowering: zero points,
// unsigned codes, transposed codes, N not a multiple of 16, a per-tensor
// scale, a group that is not a multiple of 8 (INT4).
// CHECK-LABEL: func.func @left
//   CHECK-NOT:   sits.ukernel
//       CHECK:   return
func.func @left(%x: tensor<4x64xf32>, %w: tensor<64x32xi4, #sits.packed<storage = i8, axis = 0>>, %s: tensor<2x32xf32>, %z: tensor<2x32xi4>,
                %wu: tensor<64x32xui4, #sits.packed<storage = i8, axis = 0>>, %wt: tensor<32x64xi8>, %st: tensor<32x2xf32>,
                %w8: tensor<64x24xi8>, %s8: tensor<24xf32>, %w9: tensor<64x32xi8>, %s9: tensor<f32>, %s4: tensor<16x32xf32>)
    -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x24xf32>, tensor<4x32xf32>, tensor<4x32xf32>) {
  %0 = sits.qmatmul %x, %w, %s zero_point(%z) {axis = 0 : i64, block_size = 32 : i64} : (tensor<4x64xf32>, tensor<64x32xi4, #sits.packed<storage = i8, axis = 0>>, tensor<2x32xf32>, tensor<2x32xi4>) -> tensor<4x32xf32>
  %1 = sits.qmatmul %x, %wu, %s {axis = 0 : i64, block_size = 32 : i64} : (tensor<4x64xf32>, tensor<64x32xui4, #sits.packed<storage = i8, axis = 0>>, tensor<2x32xf32>) -> tensor<4x32xf32>
  %2 = sits.qmatmul %x, %wt, %st {axis = 1 : i64, block_size = 32 : i64, transpose_weight} : (tensor<4x64xf32>, tensor<32x64xi8>, tensor<32x2xf32>) -> tensor<4x32xf32>
  %3 = sits.qmatmul %x, %w8, %s8 {axis = 1 : i64} : (tensor<4x64xf32>, tensor<64x24xi8>, tensor<24xf32>) -> tensor<4x24xf32>
  %4 = sits.qmatmul %x, %w9, %s9 : (tensor<4x64xf32>, tensor<64x32xi8>, tensor<f32>) -> tensor<4x32xf32>
  %5 = sits.qmatmul %x, %w, %s4 {axis = 0 : i64, block_size = 4 : i64} : (tensor<4x64xf32>, tensor<64x32xi4, #sits.packed<storage = i8, axis = 0>>, tensor<16x32xf32>) -> tensor<4x32xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x24xf32>, tensor<4x32xf32>, tensor<4x32xf32>
}
