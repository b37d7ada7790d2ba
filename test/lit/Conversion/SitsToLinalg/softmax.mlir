// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// sits.softmax: max reduction (from -inf), exp(x - max), sum reduction,
// division; along any axis, in f32 or wider.

// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @softmax_last_axis
//  CHECK-SAME: (%[[X:.+]]: tensor<1x12x128x128xf32>)
//       CHECK:   %[[NEGINF:.+]] = arith.constant 0xFF800000 : f32
//       CHECK:   %[[MINIT:.+]] = linalg.fill ins(%[[NEGINF]] : f32) outs(%{{.+}} : tensor<1x12x128xf32>)
//       CHECK:   %[[MAX:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[X]] : tensor<1x12x128x128xf32>) outs(%[[MINIT]] : tensor<1x12x128xf32>)
//       CHECK:     arith.maximumf
//       CHECK:   %[[EXP:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
//  CHECK-SAME:       ins(%[[X]], %[[MAX]] : tensor<1x12x128x128xf32>, tensor<1x12x128xf32>)
//       CHECK:     %[[D:.+]] = arith.subf
//       CHECK:     math.exp %[[D]] : f32
//       CHECK:   %[[SUM:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[EXP]] : tensor<1x12x128x128xf32>)
//       CHECK:     arith.addf
//       CHECK:   %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ID]]]
//  CHECK-SAME:       ins(%[[EXP]], %[[SUM]] : tensor<1x12x128x128xf32>, tensor<1x12x128xf32>)
//       CHECK:     arith.divf
//       CHECK:   return %[[Y]]
func.func @softmax_last_axis(%x: tensor<1x12x128x128xf32>) -> tensor<1x12x128x128xf32> {
  %y = sits.softmax %x : tensor<1x12x128x128xf32>
  return %y : tensor<1x12x128x128xf32>
}

// -----

// A leading axis of an f16 tensor with a dynamic extent.
// CHECK-DAG: #[[$COL:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @softmax_axis0_f16
//  CHECK-SAME: (%[[X:.+]]: tensor<4x?xf16>)
//       CHECK:   %[[N:.+]] = tensor.dim %[[X]], %{{.+}} : tensor<4x?xf16>
//       CHECK:   tensor.empty(%[[N]]) : tensor<?xf32>
//       CHECK:   linalg.generic {indexing_maps = [#{{.+}}, #[[$COL]]], iterator_types = ["reduction", "parallel"]}
//       CHECK:     arith.extf %{{.+}} : f16 to f32
//       CHECK:   linalg.generic
//       CHECK:   linalg.generic {{.+}} iterator_types = ["reduction", "parallel"]
//       CHECK:   %[[Y:.+]] = linalg.generic
//  CHECK-SAME:       outs(%{{.+}} : tensor<4x?xf16>)
//       CHECK:     arith.truncf %{{.+}} : f32 to f16
//       CHECK:   return %[[Y]]
func.func @softmax_axis0_f16(%x: tensor<4x?xf16>) -> tensor<4x?xf16> {
  %y = sits.softmax %x {axis = 0 : i64} : tensor<4x?xf16>
  return %y : tensor<4x?xf16>
}
