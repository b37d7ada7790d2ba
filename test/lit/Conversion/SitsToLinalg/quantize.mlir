// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// sits.quantize / sits.dequantize: one elementwise generic each, the scale
// and zero point read through maps selecting the granularity (per tensor: no
// index; per channel: the axis; per group: the axis divided by block_size).
// Unsigned integers become signless (the lowering keeps their signedness:
// fptoui, extui); #sits.packed tensors become their storage words.

// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$CH:.+]] = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @quantize_per_channel_i8
//  CHECK-SAME: (%[[X:.+]]: tensor<16x64xf32>, %[[S:.+]]: tensor<16xf32>) -> tensor<16x64xi8>
//       CHECK:   %[[Q:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$CH]], #[[$ID]]], iterator_types = ["parallel", "parallel"]}
//  CHECK-SAME:       ins(%[[X]], %[[S]] : tensor<16x64xf32>, tensor<16xf32>) outs(%{{.+}} : tensor<16x64xi8>)
//       CHECK:   ^bb0(%[[XI:.+]]: f32, %[[SI:.+]]: f32, %{{.+}}: i8):
//       CHECK:     %[[V:.+]] = arith.divf %[[XI]], %[[SI]] : f32
//       CHECK:     %[[R:.+]] = math.roundeven %[[V]] : f32
//       CHECK:     %[[LO:.+]] = arith.constant -1.280000e+02 : f32
//       CHECK:     %[[C1:.+]] = arith.maxnumf %[[R]], %[[LO]] : f32
//       CHECK:     %[[HI:.+]] = arith.constant 1.270000e+02 : f32
//       CHECK:     %[[C2:.+]] = arith.minnumf %[[C1]], %[[HI]] : f32
//       CHECK:     %[[I:.+]] = arith.fptosi %[[C2]] : f32 to i8
//       CHECK:     linalg.yield %[[I]] : i8
//       CHECK:   return %[[Q]]
func.func @quantize_per_channel_i8(%x: tensor<16x64xf32>, %s: tensor<16xf32>) -> tensor<16x64xi8> {
  %q = sits.quantize %x, %s {axis = 0 : i64} : (tensor<16x64xf32>, tensor<16xf32>) -> tensor<16x64xi8>
  return %q : tensor<16x64xi8>
}

// -----

// Unsigned with a zero point: the signature becomes signless i8.
// CHECK-DAG: #[[$NONE:.+]] = affine_map<(d0) -> ()>
// CHECK-LABEL: func.func @quantize_per_tensor_ui8
//  CHECK-SAME: (%[[X:.+]]: tensor<64xf16>, %[[S:.+]]: tensor<f16>, %[[Z:.+]]: tensor<i8>) -> tensor<64xi8>
//       CHECK:   linalg.generic {indexing_maps = [#{{.+}}, #[[$NONE]], #[[$NONE]], #{{.+}}]
//  CHECK-SAME:       ins(%[[X]], %[[S]], %[[Z]] : tensor<64xf16>, tensor<f16>, tensor<i8>) outs(%{{.+}} : tensor<64xi8>)
//       CHECK:   ^bb0(%[[XI:.+]]: f16, %[[SI:.+]]: f16, %[[ZI:.+]]: i8, %{{.+}}: i8):
//       CHECK:     %[[XF:.+]] = arith.extf %[[XI]] : f16 to f32
//       CHECK:     %[[SF:.+]] = arith.extf %[[SI]] : f16 to f32
//       CHECK:     %[[V:.+]] = arith.divf %[[XF]], %[[SF]] : f32
//       CHECK:     %[[R:.+]] = math.roundeven %[[V]] : f32
//       CHECK:     %[[Z32:.+]] = arith.extui %[[ZI]] : i8 to i32
//       CHECK:     %[[ZF:.+]] = arith.sitofp %[[Z32]] : i32 to f32
//       CHECK:     %[[RZ:.+]] = arith.addf %[[R]], %[[ZF]] : f32
//       CHECK:     arith.constant 0.000000e+00 : f32
//       CHECK:     arith.maxnumf %[[RZ]]
//       CHECK:     arith.constant 2.550000e+02 : f32
//       CHECK:     %[[C:.+]] = arith.minnumf
//       CHECK:     arith.fptoui %[[C]] : f32 to i8
func.func @quantize_per_tensor_ui8(%x: tensor<64xf16>, %s: tensor<f16>, %z: tensor<ui8>) -> tensor<64xui8> {
  %q = sits.quantize %x, %s, %z : (tensor<64xf16>, tensor<f16>, tensor<ui8>) -> tensor<64xui8>
  return %q : tensor<64xui8>
}

// -----

// Per group of 32 along axis 1, i4 with an i4 zero point.
// CHECK-DAG: #[[$GRP:.+]] = affine_map<(d0, d1) -> (d0, d1 floordiv 32)>
// CHECK-LABEL: func.func @quantize_per_group_i4
//       CHECK:   linalg.generic {indexing_maps = [#{{.+}}, #[[$GRP]], #[[$GRP]], #{{.+}}]
//  CHECK-SAME:       outs(%{{.+}} : tensor<4x128xi4>)
//       CHECK:     arith.extsi %{{.+}} : i4 to i32
//       CHECK:     arith.constant -8.000000e+00 : f32
//       CHECK:     arith.constant 7.000000e+00 : f32
//       CHECK:     arith.fptosi %{{.+}} : f32 to i4
func.func @quantize_per_group_i4(%x: tensor<4x128xf32>, %s: tensor<4x4xf32>, %z: tensor<4x4xi4>) -> tensor<4x128xi4> {
  %q = sits.quantize %x, %s, %z {axis = 1 : i64, block_size = 32 : i64}
      : (tensor<4x128xf32>, tensor<4x4xf32>, tensor<4x4xi4>) -> tensor<4x128xi4>
  return %q : tensor<4x128xi4>
}

// -----

// Into packed i4: the input is viewed as [K, N / 2, 2] and each pair of
// fields is OR-reduced into one byte, the first in the low bits.
// CHECK-DAG: #[[$IN3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$S3:.+]] = affine_map<(d0, d1, d2) -> ()>
// CHECK-DAG: #[[$OUT3:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @quantize_packed
//  CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[S:.+]]: tensor<f32>) -> tensor<4x4xi8>
//       CHECK:   %[[XV:.+]] = tensor.expand_shape %[[X]] {{\[}}[0], [1, 2]] output_shape [4, 4, 2] : tensor<4x8xf32> into tensor<4x4x2xf32>
//       CHECK:   %[[ZERO:.+]] = arith.constant 0 : i8
//       CHECK:   %[[INIT:.+]] = linalg.fill ins(%[[ZERO]] : i8) outs(%{{.+}} : tensor<4x4xi8>)
//       CHECK:   %[[P:.+]] = linalg.generic {indexing_maps = [#[[$IN3]], #[[$S3]], #[[$OUT3]]], iterator_types = ["parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[XV]], %[[S]] : tensor<4x4x2xf32>, tensor<f32>) outs(%[[INIT]] : tensor<4x4xi8>)
//       CHECK:   ^bb0(%{{.+}}: f32, %{{.+}}: f32, %[[WORD:.+]]: i8):
//       CHECK:     %[[Q:.+]] = arith.fptosi %{{.+}} : f32 to i4
//       CHECK:     %[[Q8:.+]] = arith.extui %[[Q]] : i4 to i8
//       CHECK:     %[[F:.+]] = linalg.index 2 : index
//       CHECK:     %[[F8:.+]] = arith.index_castui %[[F]] : index to i8
//       CHECK:     %[[SH:.+]] = arith.muli %[[F8]], %{{.+}} : i8
//       CHECK:     %[[FIELD:.+]] = arith.shli %[[Q8]], %[[SH]] : i8
//       CHECK:     %[[R:.+]] = arith.ori %[[WORD]], %[[FIELD]] : i8
//       CHECK:     linalg.yield %[[R]] : i8
//       CHECK:   return %[[P]] : tensor<4x4xi8>
func.func @quantize_packed(%x: tensor<4x8xf32>, %s: tensor<f32>) -> tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>> {
  %q = sits.quantize %x, %s : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>
  return %q : tensor<4x8xi4, #sits.packed<storage = i8, axis = 1>>
}

// -----

// fp8: no rounding step, saturation to the largest finite value (NaN
// propagates through minimumf/maximumf), arith.truncf.
// CHECK-LABEL: func.func @quantize_fp8
//       CHECK:     %[[V:.+]] = arith.divf
//       CHECK:     %[[MAX:.+]] = arith.constant 4.480000e+02 : f32
//       CHECK:     %[[MIN:.+]] = arith.constant -4.480000e+02 : f32
//       CHECK:     %[[C1:.+]] = arith.minimumf %[[V]], %[[MAX]] : f32
//       CHECK:     %[[C2:.+]] = arith.maximumf %[[C1]], %[[MIN]] : f32
//       CHECK:     %[[F8:.+]] = arith.truncf %[[C2]] : f32 to f8E4M3FN
//       CHECK:     linalg.yield %[[F8]] : f8E4M3FN
//       CHECK:   arith.constant 5.734400e+04 : f32
//       CHECK:   arith.truncf %{{.+}} : f32 to f8E5M2
func.func @quantize_fp8(%x: tensor<8xf32>, %s: tensor<f32>) -> (tensor<8xf8E4M3FN>, tensor<8xf8E5M2>) {
  %a = sits.quantize %x, %s : (tensor<8xf32>, tensor<f32>) -> tensor<8xf8E4M3FN>
  %b = sits.quantize %x, %s : (tensor<8xf32>, tensor<f32>) -> tensor<8xf8E5M2>
  return %a, %b : tensor<8xf8E4M3FN>, tensor<8xf8E5M2>
}

// -----

// (q - zero_point) * scale with integer subtraction in i32.
// CHECK-LABEL: func.func @dequantize_per_channel_zero_point
//  CHECK-SAME: (%[[Q:.+]]: tensor<768x3072xi8>, %[[S:.+]]: tensor<768xf32>, %[[Z:.+]]: tensor<768xi8>)
//       CHECK:   %[[Y:.+]] = linalg.generic
//  CHECK-SAME:       ins(%[[Q]], %[[S]], %[[Z]] : tensor<768x3072xi8>, tensor<768xf32>, tensor<768xi8>) outs(%{{.+}} : tensor<768x3072xf32>)
//       CHECK:   ^bb0(%[[QI:.+]]: i8, %[[SI:.+]]: f32, %[[ZI:.+]]: i8, %{{.+}}: f32):
//       CHECK:     %[[Q32:.+]] = arith.extsi %[[QI]] : i8 to i32
//       CHECK:     %[[Z32:.+]] = arith.extsi %[[ZI]] : i8 to i32
//       CHECK:     %[[D:.+]] = arith.subi %[[Q32]], %[[Z32]] : i32
//       CHECK:     %[[DF:.+]] = arith.sitofp %[[D]] : i32 to f32
//       CHECK:     %[[R:.+]] = arith.mulf %[[DF]], %[[SI]] : f32
//       CHECK:     linalg.yield %[[R]] : f32
//       CHECK:   return %[[Y]]
func.func @dequantize_per_channel_zero_point(%q: tensor<768x3072xi8>, %s: tensor<768xf32>, %z: tensor<768xi8>) -> tensor<768x3072xf32> {
  %w = sits.dequantize %q, %s, %z {axis = 0 : i64} : (tensor<768x3072xi8>, tensor<768xf32>, tensor<768xi8>) -> tensor<768x3072xf32>
  return %w : tensor<768x3072xf32>
}

// -----

// Packed i4 along axis 1 (storage [K, N / 2] of i8): the storage is read at
// n floordiv 2; field n mod 2 is shifted down, truncated to i4 and
// sign-extended.
// CHECK-DAG: #[[$ST:.+]] = affine_map<(d0, d1) -> (d0, d1 floordiv 2)>
// CHECK-LABEL: func.func @dequantize_packed_i4
//  CHECK-SAME: (%[[Q:.+]]: tensor<?x?xi8>, %[[S:.+]]: tensor<f32>) -> tensor<?x?xf32>
//   CHECK-DAG:   %[[K:.+]] = tensor.dim %[[Q]], %c0 : tensor<?x?xi8>
//   CHECK-DAG:   %[[NS:.+]] = tensor.dim %[[Q]], %c1 : tensor<?x?xi8>
//       CHECK:   %[[N:.+]] = arith.muli %[[NS]], %{{.+}} : index
//       CHECK:   %[[E:.+]] = tensor.empty(%[[K]], %[[N]]) : tensor<?x?xf32>
//       CHECK:   linalg.generic {indexing_maps = [#[[$ST]], #{{.+}}, #{{.+}}]
//  CHECK-SAME:       ins(%[[Q]], %[[S]] : tensor<?x?xi8>, tensor<f32>) outs(%[[E]] : tensor<?x?xf32>)
//       CHECK:   ^bb0(%[[W:.+]]: i8, %{{.+}}: f32, %{{.+}}: f32):
//       CHECK:     %[[IDX:.+]] = linalg.index 1 : index
//       CHECK:     %[[FIELD:.+]] = arith.remui %[[IDX]], %{{.+}} : index
//       CHECK:     %[[F8:.+]] = arith.index_castui %[[FIELD]] : index to i8
//       CHECK:     %[[SH:.+]] = arith.muli %[[F8]], %{{.+}} : i8
//       CHECK:     %[[DOWN:.+]] = arith.shrui %[[W]], %[[SH]] : i8
//       CHECK:     %[[I4:.+]] = arith.trunci %[[DOWN]] : i8 to i4
//       CHECK:     %[[I32:.+]] = arith.extsi %[[I4]] : i4 to i32
//       CHECK:     arith.sitofp %[[I32]] : i32 to f32
func.func @dequantize_packed_i4(%q: tensor<?x?xi4, #sits.packed<storage = i8, axis = 1>>, %s: tensor<f32>) -> tensor<?x?xf32> {
  %w = sits.dequantize %q, %s : (tensor<?x?xi4, #sits.packed<storage = i8, axis = 1>>, tensor<f32>) -> tensor<?x?xf32>
  return %w : tensor<?x?xf32>
}

// -----

// Unsigned packed fields and packed zero points zero-extend; fp8 extends.
// CHECK-LABEL: func.func @dequantize_ui4_fp8
//       CHECK:     arith.trunci %{{.+}} : i16 to i4
//       CHECK:     arith.extui %{{.+}} : i4 to i32
//       CHECK:     arith.trunci %{{.+}} : i16 to i4
//       CHECK:     arith.extui %{{.+}} : i4 to i32
//       CHECK:     arith.subi
//       CHECK:   linalg.generic
//       CHECK:   ^bb0(%[[F:.+]]: f8E5M2, %{{.+}}: f32, %{{.+}}: f32):
//       CHECK:     arith.extf %[[F]] : f8E5M2 to f32
func.func @dequantize_ui4_fp8(%q: tensor<8x16xui4, #sits.packed<storage = i16, axis = 0>>, %s: tensor<16xf32>,
                              %z: tensor<16xui4, #sits.packed<storage = i16, axis = 0>>, %f: tensor<8xf8E5M2>, %s0: tensor<f32>)
    -> (tensor<8x16xf32>, tensor<8xf32>) {
  %a = sits.dequantize %q, %s, %z {axis = 1 : i64}
      : (tensor<8x16xui4, #sits.packed<storage = i16, axis = 0>>, tensor<16xf32>, tensor<16xui4, #sits.packed<storage = i16, axis = 0>>) -> tensor<8x16xf32>
  %b = sits.dequantize %f, %s0 : (tensor<8xf8E5M2>, tensor<f32>) -> tensor<8xf32>
  return %a, %b : tensor<8x16xf32>, tensor<8xf32>
}
