// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// sits.qmatmul: a generic dequantizes the weight (unpacking sub-word fields,
// per-group scales and zero points) into the input's element type; it feeds
// the matmul directly, so producer fusion can later move it into the
// contraction. transpose_weight is a transposed indexing map. Group-wise
// weights whose zero points are not packed take the grouped form below
// (@qmatmul_nbits), whose maps are all projections and so tile and fuse.

// GPTQ: int4 [K, N] packed along K, a scale and a zero point (packed along N)
// per 128 rows, bias + SiLU.
// CHECK-DAG: #[[$W:.+]] = affine_map<(d0, d1) -> (d0 floordiv 2, d1)>
// CHECK-DAG: #[[$S:.+]] = affine_map<(d0, d1) -> (d0 floordiv 128, d1)>
// CHECK-DAG: #[[$Z:.+]] = affine_map<(d0, d1) -> (d0 floordiv 128, d1 floordiv 2)>
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @qmatmul_gptq
//  CHECK-SAME: (%[[X:.+]]: tensor<8x4096xf16>, %[[W:.+]]: tensor<2048x11008xi8>, %[[S:.+]]: tensor<32x11008xf16>, %[[Z:.+]]: tensor<32x5504xi8>, %[[B:.+]]: tensor<11008xf16>)
//       CHECK:   %[[DQ:.+]] = linalg.generic {indexing_maps = [#[[$W]], #[[$S]], #[[$Z]], #[[$ID]]], iterator_types = ["parallel", "parallel"]}
//  CHECK-SAME:       ins(%[[W]], %[[S]], %[[Z]] : tensor<2048x11008xi8>, tensor<32x11008xf16>, tensor<32x5504xi8>) outs(%{{.+}} : tensor<4096x11008xf16>)
//       CHECK:   ^bb0(%[[WI:.+]]: i8, %[[SI:.+]]: f16, %[[ZI:.+]]: i8, %{{.+}}: f16):
//       CHECK:     %[[K:.+]] = linalg.index 0 : index
//       CHECK:     arith.remui %[[K]]
//       CHECK:     %[[WS:.+]] = arith.shrui %[[WI]], %{{.+}} : i8
//       CHECK:     %[[W4:.+]] = arith.trunci %[[WS]] : i8 to i4
//       CHECK:     %[[W32:.+]] = arith.extsi %[[W4]] : i4 to i32
//       CHECK:     %[[N:.+]] = linalg.index 1 : index
//       CHECK:     arith.remui %[[N]]
//       CHECK:     %[[ZS:.+]] = arith.shrui %[[ZI]], %{{.+}} : i8
//       CHECK:     %[[Z4:.+]] = arith.trunci %[[ZS]] : i8 to i4
//       CHECK:     %[[Z32:.+]] = arith.extsi %[[Z4]] : i4 to i32
//       CHECK:     %[[D:.+]] = arith.subi %[[W32]], %[[Z32]] : i32
//       CHECK:     %[[DF:.+]] = arith.sitofp %[[D]] : i32 to f32
//       CHECK:     %[[SF:.+]] = arith.extf %[[SI]] : f16 to f32
//       CHECK:     %[[V:.+]] = arith.mulf %[[DF]], %[[SF]] : f32
//       CHECK:     %[[H:.+]] = arith.truncf %[[V]] : f32 to f16
//       CHECK:     linalg.yield %[[H]] : f16
//       CHECK:   %[[ACC:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<8x11008xf32>)
//       CHECK:   %[[MM:.+]] = linalg.matmul ins(%[[X]], %[[DQ]] : tensor<8x4096xf16>, tensor<4096x11008xf16>) outs(%[[ACC]] : tensor<8x11008xf32>)
//       CHECK:   %[[Y:.+]] = linalg.generic
//  CHECK-SAME:       ins(%[[MM]], %[[B]] : tensor<8x11008xf32>, tensor<11008xf16>) outs(%{{.+}} : tensor<8x11008xf16>)
//       CHECK:     math.exp
//       CHECK:     arith.truncf %{{.+}} : f32 to f16
//       CHECK:   return %[[Y]]
func.func @qmatmul_gptq(%x: tensor<8x4096xf16>, %w: tensor<4096x11008xi4, #sits.packed<storage = i8, axis = 0>>, %s: tensor<32x11008xf16>,
                        %z: tensor<32x11008xi4, #sits.packed<storage = i8, axis = 1>>, %b: tensor<11008xf16>) -> tensor<8x11008xf16> {
  %y = sits.qmatmul %x, %w, %s zero_point(%z) bias(%b) {axis = 0 : i64, block_size = 128 : i64, activation = #sits.activation<silu>}
      : (tensor<8x4096xf16>, tensor<4096x11008xi4, #sits.packed<storage = i8, axis = 0>>, tensor<32x11008xf16>,
         tensor<32x11008xi4, #sits.packed<storage = i8, axis = 1>>, tensor<11008xf16>) -> tensor<8x11008xf16>
  return %y : tensor<8x11008xf16>
}

// -----

// MatMulNBits: uint4 [N, K] packed along K, transpose_weight, rank-3 input
// folded into M. K splits into [groups, words, fields] so that every access
// is a projection: the dequantization is elementwise (fields are shifted out
// of the word by the field loop), and the contraction reduces over three K
// loops instead of reading a dequantized [K, N] weight.
// CHECK-DAG: #[[$WT:.+]] = affine_map<(d0, d1, d2, d3) -> (d3, d0, d1)>
// CHECK-DAG: #[[$ST:.+]] = affine_map<(d0, d1, d2, d3) -> (d3, d0)>
// CHECK-DAG: #[[$X:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d3, d4)>
// CHECK-DAG: #[[$D:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d2, d3, d4, d1)>
// CHECK-LABEL: func.func @qmatmul_nbits
//  CHECK-SAME: (%[[X:.+]]: tensor<1x16x4096xf32>, %[[W:.+]]: tensor<1024x2048xi8>, %[[S:.+]]: tensor<1024x32xf32>)
//       CHECK:   %[[XC:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<1x16x4096xf32> into tensor<16x4096xf32>
//       CHECK:   %[[WE:.+]] = tensor.expand_shape %[[W]] {{\[}}[0], [1, 2]] output_shape [1024, 32, 64]
//       CHECK:   %[[DQ:.+]] = linalg.generic {indexing_maps = [#[[$WT]], #[[$ST]], #{{.+}}], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
//  CHECK-SAME:       ins(%[[WE]], %[[S]] : tensor<1024x32x64xi8>, tensor<1024x32xf32>) outs(%{{.+}} : tensor<32x64x2x1024xf32>)
//       CHECK:     linalg.index 2
//       CHECK:     arith.shli
//       CHECK:     arith.shrui
//       CHECK:   %[[XE:.+]] = tensor.expand_shape %[[XC]] {{\[}}[0], [1, 2, 3]] output_shape [16, 32, 64, 2]
//       CHECK:   %[[MM:.+]] = linalg.generic {indexing_maps = [#[[$X]], #[[$D]], #{{.+}}], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction"]}
//  CHECK-SAME:       ins(%[[XE]], %[[DQ]] : tensor<16x32x64x2xf32>, tensor<32x64x2x1024xf32>)
//   CHECK-NOT:   linalg.transpose
//       CHECK:   %[[Y:.+]] = tensor.expand_shape %[[MM]] {{\[}}[0, 1], [2]] output_shape [1, 16, 1024]
//       CHECK:   return %[[Y]]
func.func @qmatmul_nbits(%x: tensor<1x16x4096xf32>, %w: tensor<1024x4096xui4, #sits.packed<storage = i8, axis = 1>>, %s: tensor<1024x32xf32>) -> tensor<1x16x1024xf32> {
  %y = sits.qmatmul %x, %w, %s {axis = 1 : i64, block_size = 128 : i64, transpose_weight}
      : (tensor<1x16x4096xf32>, tensor<1024x4096xui4, #sits.packed<storage = i8, axis = 1>>, tensor<1024x32xf32>) -> tensor<1x16x1024xf32>
  return %y : tensor<1x16x1024xf32>
}

// -----

// Per-channel int8 with dynamic sizes: the scale is constant along K, so
// the contraction reads the i8 codes themselves (linalg.matmul widens them
// with its signed cast) and the scale multiplies the accumulated result.
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$CH:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @qmatmul_int8_dynamic
//  CHECK-SAME: (%[[X:.+]]: tensor<?x?xf32>, %[[W:.+]]: tensor<?x?xi8>, %[[S:.+]]: tensor<?xf32>)
//       CHECK:   %[[ACC:.+]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<?x?xf32>, tensor<?x?xi8>)
//       CHECK:   linalg.generic {indexing_maps = [#[[$ID]], #[[$CH]], #[[$ID]]]
//  CHECK-SAME:       ins(%[[ACC]], %[[S]] : tensor<?x?xf32>, tensor<?xf32>)
//       CHECK:     arith.mulf
//   CHECK-NOT:   linalg.generic
func.func @qmatmul_int8_dynamic(%x: tensor<?x?xf32>, %w: tensor<?x?xi8>, %s: tensor<?xf32>) -> tensor<?x?xf32> {
  %y = sits.qmatmul %x, %w, %s {axis = 1 : i64} : (tensor<?x?xf32>, tensor<?x?xi8>, tensor<?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
