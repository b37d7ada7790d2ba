// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// sits.matmul: linalg.matmul / linalg.batch_matmul (transposes and
// broadcasts in indexing_maps) or a contraction generic for partial batch
// broadcasts, accumulating into a zero-filled linalg.fill; bias, activation
// and the cast to the result type in ONE elementwise generic consuming the
// contraction.

// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$COL:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @matmul_bias_relu
//  CHECK-SAME: (%[[X:.+]]: tensor<8x64xf32>, %[[W:.+]]: tensor<64x32xf32>, %[[B:.+]]: tensor<32xf32>)
//       CHECK:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
//       CHECK:   %[[E:.+]] = tensor.empty() : tensor<8x32xf32>
//       CHECK:   %[[ACC:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E]] : tensor<8x32xf32>)
//       CHECK:   %[[MM:.+]] = linalg.matmul ins(%[[X]], %[[W]] : tensor<8x64xf32>, tensor<64x32xf32>) outs(%[[ACC]] : tensor<8x32xf32>)
//       CHECK:   %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$COL]], #[[$ID]]], iterator_types = ["parallel", "parallel"]}
//  CHECK-SAME:       ins(%[[MM]], %[[B]] : tensor<8x32xf32>, tensor<32xf32>)
//       CHECK:   ^bb0(%[[IN:.+]]: f32, %[[BIAS:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[SUM:.+]] = arith.addf %[[IN]], %[[BIAS]] : f32
//       CHECK:     %[[R:.+]] = arith.maximumf %[[SUM]], %{{.+}} : f32
//       CHECK:     linalg.yield %[[R]] : f32
//       CHECK:   return %[[Y]]
func.func @matmul_bias_relu(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>, %b: tensor<32xf32>) -> tensor<8x32xf32> {
  %y = sits.matmul %x, %w bias(%b) {activation = #sits.activation<relu>}
      : (tensor<8x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// Nothing to do after the contraction: no epilogue.
// CHECK-LABEL: func.func @matmul_plain
//       CHECK:   %[[MM:.+]] = linalg.matmul ins
//   CHECK-NOT:   linalg.generic
//       CHECK:   return %[[MM]]
func.func @matmul_plain(%x: tensor<8x64xf32>, %w: tensor<64x32xf32>) -> tensor<8x32xf32> {
  %y = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  return %y : tensor<8x32xf32>
}

// -----

// x @ W^T with a rank-3 f16 x: the batch folds into M, W stays [N, K] (a
// transposed indexing map, no linalg.transpose), f32 accumulation, one
// truncation, then the batch is expanded back.
// CHECK-DAG: #[[$LHS:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-DAG: #[[$RHST:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$OUT:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func @matmul_fold_batch_transpose_rhs
//  CHECK-SAME: (%[[X:.+]]: tensor<2x16x64xf16>, %[[W:.+]]: tensor<128x64xf16>)
//       CHECK:   %[[XC:.+]] = tensor.collapse_shape %[[X]] {{\[}}[0, 1], [2]] : tensor<2x16x64xf16> into tensor<32x64xf16>
//       CHECK:   %[[ACC:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<32x128xf32>)
//       CHECK:   %[[MM:.+]] = linalg.matmul indexing_maps = [#[[$LHS]], #[[$RHST]], #[[$OUT]]]
//  CHECK-SAME:       ins(%[[XC]], %[[W]] : tensor<32x64xf16>, tensor<128x64xf16>) outs(%[[ACC]] : tensor<32x128xf32>)
//   CHECK-NOT:   linalg.transpose
//       CHECK:   %[[T:.+]] = linalg.generic
//  CHECK-SAME:       ins(%[[MM]] : tensor<32x128xf32>) outs(%{{.+}} : tensor<32x128xf16>)
//       CHECK:     arith.truncf %{{.+}} : f32 to f16
//       CHECK:   %[[Y:.+]] = tensor.expand_shape %[[T]] {{\[}}[0, 1], [2]] output_shape [2, 16, 128]
//       CHECK:   return %[[Y]]
func.func @matmul_fold_batch_transpose_rhs(%x: tensor<2x16x64xf16>, %w: tensor<128x64xf16>) -> tensor<2x16x128xf16> {
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<2x16x64xf16>, tensor<128x64xf16>) -> tensor<2x16x128xf16>
  return %y : tensor<2x16x128xf16>
}

// -----

// Attention scores q @ k^T: the batch dimensions collapse into one.
// CHECK-DAG: #[[$Q:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[$KT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-DAG: #[[$S:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @matmul_rank4
//  CHECK-SAME: (%[[Q:.+]]: tensor<1x12x128x64xf32>, %[[K:.+]]: tensor<1x12x128x64xf32>)
//   CHECK-DAG:   %[[QC:.+]] = tensor.collapse_shape %[[Q]] {{\[}}[0, 1], [2], [3]] : tensor<1x12x128x64xf32> into tensor<12x128x64xf32>
//   CHECK-DAG:   %[[KC:.+]] = tensor.collapse_shape %[[K]] {{\[}}[0, 1], [2], [3]] : tensor<1x12x128x64xf32> into tensor<12x128x64xf32>
//       CHECK:   %[[BMM:.+]] = linalg.batch_matmul indexing_maps = [#[[$Q]], #[[$KT]], #[[$S]]]
//  CHECK-SAME:       ins(%[[QC]], %[[KC]] : tensor<12x128x64xf32>, tensor<12x128x64xf32>)
//       CHECK:   %[[Y:.+]] = tensor.expand_shape %[[BMM]] {{\[}}[0, 1], [2], [3]] output_shape [1, 12, 128, 128]
//       CHECK:   return %[[Y]]
func.func @matmul_rank4(%q: tensor<1x12x128x64xf32>, %k: tensor<1x12x128x64xf32>) -> tensor<1x12x128x128xf32> {
  %s = sits.matmul %q, %k {transpose_rhs} : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x128x128xf32>
  return %s : tensor<1x12x128x128xf32>
}

// -----

// A 2-D lhs shared by every batch of the rhs: a broadcast map, no copy.
// CHECK-DAG: #[[$A:.+]] = affine_map<(d0, d1, d2, d3) -> (d1, d3)>
// CHECK-DAG: #[[$B:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d2)>
// CHECK-LABEL: func.func @matmul_broadcast_lhs
//  CHECK-SAME: (%[[A:.+]]: tensor<3x4xf32>, %[[B:.+]]: tensor<2x4x5xf32>)
//       CHECK:   %[[Y:.+]] = linalg.batch_matmul indexing_maps = [#[[$A]], #[[$B]], #{{.+}}]
//  CHECK-SAME:       ins(%[[A]], %[[B]] : tensor<3x4xf32>, tensor<2x4x5xf32>)
//       CHECK:   return %[[Y]]
func.func @matmul_broadcast_lhs(%a: tensor<3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %y = sits.matmul %a, %b : (tensor<3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// CHECK-DAG: #[[$AT:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d3, d1)>
// CHECK-LABEL: func.func @matmul_transpose_lhs
//       CHECK:   linalg.batch_matmul indexing_maps = [#[[$AT]], #{{.+}}, #{{.+}}]
//  CHECK-SAME:       ins(%{{.+}}, %{{.+}} : tensor<2x4x3xf32>, tensor<2x4x5xf32>)
func.func @matmul_transpose_lhs(%a: tensor<2x4x3xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %y = sits.matmul %a, %b {transpose_lhs} : (tensor<2x4x3xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %y : tensor<2x3x5xf32>
}

// -----

// Batch [2, 1] against [3]: the unit dimension is collapsed away and the
// contraction is a generic over (b0, b1, m, n, k).
// CHECK-DAG: #[[$L:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d4)>
// CHECK-DAG: #[[$R:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d4, d3)>
// CHECK-DAG: #[[$O:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @matmul_partial_broadcast
//  CHECK-SAME: (%[[A:.+]]: tensor<2x1x8x16xf32>, %[[B:.+]]: tensor<3x16x4xf32>)
//       CHECK:   %[[AC:.+]] = tensor.collapse_shape %[[A]] {{\[}}[0], [1, 2], [3]] : tensor<2x1x8x16xf32> into tensor<2x8x16xf32>
//       CHECK:   %[[ACC:.+]] = linalg.generic {indexing_maps = [#[[$L]], #[[$R]], #[[$O]]],
//  CHECK-SAME:       iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[AC]], %[[B]] : tensor<2x8x16xf32>, tensor<3x16x4xf32>)
//       CHECK:     arith.mulf
//       CHECK:     arith.addf
//       CHECK:   %[[Y:.+]] = linalg.generic
//  CHECK-SAME:       ins(%[[ACC]] : tensor<2x3x8x4xf32>)
//       CHECK:     math.exp
//       CHECK:   return %[[Y]]
func.func @matmul_partial_broadcast(%a: tensor<2x1x8x16xf32>, %b: tensor<3x16x4xf32>) -> tensor<2x3x8x4xf32> {
  %y = sits.matmul %a, %b {activation = #sits.activation<sigmoid>} : (tensor<2x1x8x16xf32>, tensor<3x16x4xf32>) -> tensor<2x3x8x4xf32>
  return %y : tensor<2x3x8x4xf32>
}

// -----

// Dynamic M and N come from tensor.dim of the operands.
// CHECK-LABEL: func.func @matmul_dynamic
//  CHECK-SAME: (%[[A:.+]]: tensor<?x16xf32>, %[[B:.+]]: tensor<16x?xf32>, %[[BIAS:.+]]: tensor<?xf32>)
//   CHECK-DAG:   %[[M:.+]] = tensor.dim %[[A]], %{{.+}} : tensor<?x16xf32>
//   CHECK-DAG:   %[[N:.+]] = tensor.dim %[[B]], %{{.+}} : tensor<16x?xf32>
//       CHECK:   %[[E:.+]] = tensor.empty(%[[M]], %[[N]]) : tensor<?x?xf32>
//       CHECK:   %[[ACC:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%[[E]] : tensor<?x?xf32>)
//       CHECK:   %[[MM:.+]] = linalg.matmul ins(%[[A]], %[[B]] : tensor<?x16xf32>, tensor<16x?xf32>) outs(%[[ACC]] : tensor<?x?xf32>)
//       CHECK:   linalg.generic
//  CHECK-SAME:       ins(%[[MM]], %[[BIAS]] : tensor<?x?xf32>, tensor<?xf32>)
func.func @matmul_dynamic(%a: tensor<?x16xf32>, %b: tensor<16x?xf32>, %bias: tensor<?xf32>) -> tensor<?x?xf32> {
  %y = sits.matmul %a, %b bias(%bias) : (tensor<?x16xf32>, tensor<16x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}

// -----

// A dynamic batch extent is taken to equal the static one it broadcasts
// against; the declared, less static result type is restored by a cast.
// CHECK-LABEL: func.func @matmul_dynamic_batch
//       CHECK:   %[[BMM:.+]] = linalg.batch_matmul ins(%{{.+}}, %{{.+}} : tensor<?x8x16xf32>, tensor<4x16x32xf32>) outs(%{{.+}} : tensor<4x8x32xf32>)
//       CHECK:   %[[Y:.+]] = tensor.cast %[[BMM]] : tensor<4x8x32xf32> to tensor<?x8x32xf32>
//       CHECK:   return %[[Y]]
func.func @matmul_dynamic_batch(%f: tensor<?x8x16xf32>, %g: tensor<4x16x32xf32>) -> tensor<?x8x32xf32> {
  %y = sits.matmul %f, %g : (tensor<?x8x16xf32>, tensor<4x16x32xf32>) -> tensor<?x8x32xf32>
  return %y : tensor<?x8x32xf32>
}

// -----

// Several dynamic batch dimensions merge into one batch (the expand_shape
// of the result names each extent; sits-resolve-expand-shapes lowers it).
// CHECK-LABEL: func.func @dynamic_batches
//       CHECK:   %[[B0:.+]] = tensor.dim %{{.+}}, %c0
//       CHECK:   %[[B1:.+]] = tensor.dim %{{.+}}, %c1
//       CHECK:   %[[BMM:.+]] = linalg.batch_matmul ins(%{{.+}}, %{{.+}} : tensor<?x4x8xf32>, tensor<?x8x16xf32>) outs(%{{.+}} : tensor<?x4x16xf32>)
//       CHECK:   tensor.expand_shape %[[BMM]] {{\[}}[0, 1], [2], [3]] output_shape [%[[B0]], %[[B1]], 4, 16]
func.func @dynamic_batches(%a: tensor<?x?x4x8xf32>, %b: tensor<?x?x8x16xf32>) -> tensor<?x?x4x16xf32> {
  %0 = sits.matmul %a, %b : (tensor<?x?x4x8xf32>, tensor<?x?x8x16xf32>) -> tensor<?x?x4x16xf32>
  return %0 : tensor<?x?x4x16xf32>
}

// -----

// Batch and sequence both dynamic against 2-D weights (a decoder's
// projections): one [B * S, K] x [K, N] matmul, so that a decode step reads
// each weight once for all its sequences.
// CHECK-LABEL: func.func @dynamic_rows
//       CHECK:   %[[B:.+]] = tensor.dim %{{.+}}, %c0
//       CHECK:   %[[S:.+]] = tensor.dim %{{.+}}, %c1
//       CHECK:   %[[X:.+]] = tensor.collapse_shape %{{.+}} {{\[}}[0, 1], [2]] : tensor<?x?x64xf32> into tensor<?x64xf32>
//       CHECK:   %[[MM:.+]] = linalg.matmul ins(%[[X]], %{{.+}} : tensor<?x64xf32>, tensor<64x128xf32>)
//       CHECK:   tensor.expand_shape %[[MM]] {{\[}}[0, 1], [2]] output_shape [%[[B]], %[[S]], 128]
func.func @dynamic_rows(%x: tensor<?x?x64xf32>, %w: tensor<64x128xf32>) -> tensor<?x?x128xf32> {
  %y = sits.matmul %x, %w : (tensor<?x?x64xf32>, tensor<64x128xf32>) -> tensor<?x?x128xf32>
  return %y : tensor<?x?x128xf32>
}

// -----

// fp16 weights of an f32 model: linalg.matmul reads them as they are (its
// body widens each element), no widened copy of the weights.
// CHECK-LABEL: func.func @matmul_narrow_rhs
//  CHECK-SAME: (%[[X:.+]]: tensor<2x16x64xf32>, %[[W:.+]]: tensor<128x64xbf16>)
//   CHECK-NOT:   arith.extf
//       CHECK:   %[[MM:.+]] = linalg.matmul indexing_maps
//  CHECK-SAME:       ins(%{{.+}}, %[[W]] : tensor<32x64xf32>, tensor<128x64xbf16>) outs(%{{.+}} : tensor<32x128xf32>)
//   CHECK-NOT:   linalg.generic
//       CHECK:   tensor.expand_shape %[[MM]]
func.func @matmul_narrow_rhs(%x: tensor<2x16x64xf32>, %w: tensor<128x64xbf16>) -> tensor<2x16x128xf32> {
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<2x16x64xf32>, tensor<128x64xbf16>) -> tensor<2x16x128xf32>
  return %y : tensor<2x16x128xf32>
}
