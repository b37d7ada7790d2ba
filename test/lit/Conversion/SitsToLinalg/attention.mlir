// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// sits.attention: scores = Q K^T (a contraction generic), scale and masks
// (an elementwise generic), row max, exp(s - max), row sum, exp V, and the
// division by the row sum, all in f32 or wider. Grouped-query attention
// splits the query heads into (Hkv, G) so that key/value head h / G is read
// through a broadcast in the indexing maps: K and V are never copied.

// CHECK-DAG: #[[$Q:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d5)>
// CHECK-DAG: #[[$K:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4, d5)>
// CHECK-DAG: #[[$S:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$V:.+]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d5, d4)>
// CHECK-LABEL: func.func @gqa_causal_kv_cache
//  CHECK-SAME: (%[[Q:.+]]: tensor<1x32x4x128xf16>, %[[K:.+]]: tensor<1x8x20x128xf16>, %[[V:.+]]: tensor<1x8x20x128xf16>)
//       CHECK:   %[[QG:.+]] = tensor.expand_shape %[[Q]] {{\[}}[0], [1, 2], [3], [4]] output_shape [1, 8, 4, 4, 128] : tensor<1x32x4x128xf16> into tensor<1x8x4x4x128xf16>
//       CHECK:   %[[SACC:.+]] = linalg.fill ins(%{{.+}} : f32) outs(%{{.+}} : tensor<1x8x4x4x20xf32>)
//       CHECK:   %[[SC:.+]] = linalg.generic {indexing_maps = [#[[$Q]], #[[$K]], #[[$S]]],
//  CHECK-SAME:       iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[QG]], %[[K]] : tensor<1x8x4x4x128xf16>, tensor<1x8x20x128xf16>) outs(%[[SACC]] : tensor<1x8x4x4x20xf32>)
//       CHECK:     arith.extf
//       CHECK:     arith.extf
//       CHECK:     arith.mulf
//       CHECK:     arith.addf
//   CHECK-DAG:   %[[LOWEST:.+]] = arith.constant -3.40282347E+38 : f32
//   CHECK-DAG:   %[[SCALE:.+]] = arith.constant 0.0883883461 : f32
//   CHECK-DAG:   %[[OFFSET:.+]] = arith.constant 16 : index
//       CHECK:   %[[MASKED:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ID]]]
//  CHECK-SAME:       ins(%[[SC]] : tensor<1x8x4x4x20xf32>)
//       CHECK:   ^bb0(%[[S:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[SS:.+]] = arith.mulf %[[S]], %[[SCALE]] : f32
//       CHECK:     %[[I:.+]] = linalg.index 3 : index
//       CHECK:     %[[J:.+]] = linalg.index 4 : index
//       CHECK:     %[[LAST:.+]] = arith.addi %[[I]], %[[OFFSET]] : index
//       CHECK:     %[[HIDDEN:.+]] = arith.cmpi sgt, %[[J]], %[[LAST]] : index
//       CHECK:     %[[R:.+]] = arith.select %[[HIDDEN]], %[[LOWEST]], %[[SS]] : f32
//       CHECK:     linalg.yield %[[R]] : f32
//       CHECK:   %[[MAX:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[MASKED]] : tensor<1x8x4x4x20xf32>)
//       CHECK:     arith.maximumf
//       CHECK:   %[[EXP:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]]
//  CHECK-SAME:       ins(%[[MASKED]], %[[MAX]] : tensor<1x8x4x4x20xf32>, tensor<1x8x4x4xf32>)
//       CHECK:     arith.subf
//       CHECK:     math.exp
//       CHECK:   %[[SUM:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[EXP]] : tensor<1x8x4x4x20xf32>)
//       CHECK:   %[[PV:.+]] = linalg.generic {indexing_maps = [#[[$Q]], #[[$V]], #[[$S]]]
//  CHECK-SAME:       ins(%[[EXP]], %[[V]] : tensor<1x8x4x4x20xf32>, tensor<1x8x20x128xf16>) outs(%{{.+}} : tensor<1x8x4x4x128xf32>)
//       CHECK:   %[[OUT:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]]
//  CHECK-SAME:       ins(%[[PV]], %[[SUM]] : tensor<1x8x4x4x128xf32>, tensor<1x8x4x4xf32>) outs(%{{.+}} : tensor<1x8x4x4x128xf16>)
//       CHECK:     arith.divf
//       CHECK:     arith.truncf %{{.+}} : f32 to f16
//       CHECK:   %[[Y:.+]] = tensor.collapse_shape %[[OUT]] {{\[}}[0], [1, 2], [3], [4]] : tensor<1x8x4x4x128xf16> into tensor<1x32x4x128xf16>
//       CHECK:   return %[[Y]]
func.func @gqa_causal_kv_cache(%q: tensor<1x32x4x128xf16>, %k: tensor<1x8x20x128xf16>, %v: tensor<1x8x20x128xf16>) -> tensor<1x32x4x128xf16> {
  %o = sits.attention %q, %k, %v {causal}
      : (tensor<1x32x4x128xf16>, tensor<1x8x20x128xf16>, tensor<1x8x20x128xf16>) -> tensor<1x32x4x128xf16>
  return %o : tensor<1x32x4x128xf16>
}

// -----

// Multi-head attention (Hq = Hkv) keeps 4-D loops. A boolean mask [B, 1, 1, Tk]
// loses its unit dimensions and broadcasts through its map; false sets the
// lowest finite score (a fully masked row averages V, as in onnxruntime).
// CHECK-DAG: #[[$ID4:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$BM:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
// CHECK-LABEL: func.func @mha_bool_mask
//  CHECK-SAME: (%[[Q:.+]]: tensor<2x12x8x64xf32>, %[[K:.+]]: tensor<2x12x8x64xf32>, %[[V:.+]]: tensor<2x12x8x64xf32>, %[[M:.+]]: tensor<2x1x1x8xi1>)
//   CHECK-NOT:   tensor.expand_shape %[[Q]]
//       CHECK:   %[[SC:.+]] = linalg.generic
//  CHECK-SAME:       ins(%[[Q]], %[[K]] : tensor<2x12x8x64xf32>, tensor<2x12x8x64xf32>)
//       CHECK:   %[[MC:.+]] = tensor.collapse_shape %[[M]] {{\[}}[0], [1, 2, 3]] : tensor<2x1x1x8xi1> into tensor<2x8xi1>
//       CHECK:   linalg.generic {indexing_maps = [#[[$ID4]], #[[$BM]], #[[$ID4]]]
//  CHECK-SAME:       ins(%[[SC]], %[[MC]] : tensor<2x12x8x8xf32>, tensor<2x8xi1>)
//       CHECK:   ^bb0(%[[S:.+]]: f32, %[[KEEP:.+]]: i1, %{{.+}}: f32):
//       CHECK:     %[[SS:.+]] = arith.mulf %[[S]], %{{.+}} : f32
//       CHECK:     arith.select %[[KEEP]], %[[SS]], %{{.+}} : f32
//   CHECK-NOT:     linalg.index
//       CHECK:     linalg.yield
func.func @mha_bool_mask(%q: tensor<2x12x8x64xf32>, %k: tensor<2x12x8x64xf32>, %v: tensor<2x12x8x64xf32>, %m: tensor<2x1x1x8xi1>) -> tensor<2x12x8x64xf32> {
  %o = sits.attention %q, %k, %v mask(%m)
      : (tensor<2x12x8x64xf32>, tensor<2x12x8x64xf32>, tensor<2x12x8x64xf32>, tensor<2x1x1x8xi1>) -> tensor<2x12x8x64xf32>
  return %o : tensor<2x12x8x64xf32>
}

// -----

// An additive [Hq, Tq, Tk] mask under GQA: its head dimension is split like
// the query's, (h) -> (hk, g). An explicit scale is used as given.
// CHECK-DAG: #[[$FM:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d1, d2, d3, d4)>
// CHECK-LABEL: func.func @gqa_float_mask
//  CHECK-SAME: %[[M:[^:]+]]: tensor<4x2x3xf32>
//       CHECK:   %[[MG:.+]] = tensor.expand_shape %[[M]] {{\[}}[0, 1], [2], [3]] output_shape [2, 2, 2, 3] : tensor<4x2x3xf32> into tensor<2x2x2x3xf32>
//       CHECK:   linalg.generic {indexing_maps = [#{{.+}}, #[[$FM]], #{{.+}}]
//  CHECK-SAME:       ins(%{{.+}}, %[[MG]] : tensor<1x2x2x2x3xf32>, tensor<2x2x2x3xf32>)
//       CHECK:   ^bb0(%[[S:.+]]: f32, %[[ADD:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[SS:.+]] = arith.mulf %[[S]], %{{.+}} : f32
//       CHECK:     %[[R:.+]] = arith.addf %[[SS]], %[[ADD]] : f32
//       CHECK:     linalg.yield %[[R]] : f32
func.func @gqa_float_mask(%q: tensor<1x4x2x8xf32>, %k: tensor<1x2x3x8xf32>, %v: tensor<1x2x3x8xf32>, %m: tensor<4x2x3xf32>) -> tensor<1x4x2x8xf32> {
  %o = sits.attention %q, %k, %v mask(%m) {scale = 0.5 : f64}
      : (tensor<1x4x2x8xf32>, tensor<1x2x3x8xf32>, tensor<1x2x3x8xf32>, tensor<4x2x3xf32>) -> tensor<1x4x2x8xf32>
  return %o : tensor<1x4x2x8xf32>
}

// -----

// Dynamic lengths: the causal offset is Tk - Tq at run time; dynamic head
// counts give a run-time group size Hq / Hkv.
// CHECK-LABEL: func.func @attention_dynamic
//  CHECK-SAME: (%[[Q:.+]]: tensor<?x?x?x64xf32>, %[[K:.+]]: tensor<?x?x?x64xf32>, %[[V:.+]]: tensor<?x?x?x64xf32>)
//   CHECK-DAG:   %[[HQ:.+]] = tensor.dim %[[Q]], %c1 : tensor<?x?x?x64xf32>
//   CHECK-DAG:   %[[HKV:.+]] = tensor.dim %[[K]], %c1{{.*}} : tensor<?x?x?x64xf32>
//       CHECK:   %[[G:.+]] = arith.divui %[[HQ]], %[[HKV]] : index
//       CHECK:   tensor.expand_shape %[[Q]] {{\[}}[0], [1, 2], [3], [4]] output_shape [%{{.+}}, %[[HKV]], %[[G]], %{{.+}}, 64]
//       CHECK:   %[[OFFSET:.+]] = arith.subi %{{.+}}, %{{.+}} : index
//       CHECK:   linalg.generic
//       CHECK:     %[[I:.+]] = linalg.index 3 : index
//       CHECK:     %[[J:.+]] = linalg.index 4 : index
//       CHECK:     %[[LAST:.+]] = arith.addi %[[I]], %[[OFFSET]] : index
//       CHECK:     arith.cmpi sgt, %[[J]], %[[LAST]] : index
func.func @attention_dynamic(%q: tensor<?x?x?x64xf32>, %k: tensor<?x?x?x64xf32>, %v: tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32> {
  %o = sits.attention %q, %k, %v {causal}
      : (tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>, tensor<?x?x?x64xf32>) -> tensor<?x?x?x64xf32>
  return %o : tensor<?x?x?x64xf32>
}

// -----

// Dynamic head dim without a scale: 1 / sqrt(D) computed at run time.
// CHECK-LABEL: func.func @attention_dynamic_head_dim
//  CHECK-SAME: (%[[Q:.+]]: tensor<1x12x1x?xf32>,
//       CHECK:   %[[D:.+]] = tensor.dim %[[Q]], %{{.+}} : tensor<1x12x1x?xf32>
//       CHECK:   %[[D64:.+]] = arith.index_castui %[[D]] : index to i64
//       CHECK:   %[[DF:.+]] = arith.uitofp %[[D64]] : i64 to f32
//       CHECK:   %[[SQ:.+]] = math.sqrt %[[DF]] : f32
//       CHECK:   %[[SCALE:.+]] = arith.divf %{{.+}}, %[[SQ]] : f32
//       CHECK:   linalg.generic
//       CHECK:     arith.mulf %{{.+}}, %[[SCALE]] : f32
func.func @attention_dynamic_head_dim(%q: tensor<1x12x1x?xf32>, %k: tensor<1x12x9x?xf32>) -> tensor<1x12x1x?xf32> {
  %o = sits.attention %q, %k, %k : (tensor<1x12x1x?xf32>, tensor<1x12x9x?xf32>, tensor<1x12x9x?xf32>) -> tensor<1x12x1x?xf32>
  return %o : tensor<1x12x1x?xf32>
}
