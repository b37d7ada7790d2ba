// RUN: sits-opt %s --split-input-file --sits-convert-to-linalg | FileCheck %s

// sits.layer_norm: two passes (sum -> mean, squared deviations -> 1/std)
// over [axis, rank), then one normalizing generic. sits.rms_norm: the sum of
// squares, then x * rstd * scale. Statistics are f32 or wider.

// CHECK-DAG: #[[$ID:.+]] = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-DAG: #[[$ROW:.+]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$ROW2:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-DAG: #[[$FEAT:.+]] = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func @layer_norm
//  CHECK-SAME: (%[[X:.+]]: tensor<2x128x768xf32>, %[[G:.+]]: tensor<768xf32>, %[[B:.+]]: tensor<768xf32>)
//   CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0.000000e+00 : f32
//   CHECK-DAG:   %[[N:.+]] = arith.constant 7.680000e+02 : f32
//       CHECK:   %[[INIT:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%{{.+}} : tensor<2x128xf32>)
//       CHECK:   %[[SUM:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]]], iterator_types = ["parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[X]] : tensor<2x128x768xf32>) outs(%[[INIT]] : tensor<2x128xf32>)
//       CHECK:   %[[MEAN:.+]] = linalg.generic {indexing_maps = [#[[$ROW2]], #[[$ROW2]]], iterator_types = ["parallel", "parallel"]}
//  CHECK-SAME:       ins(%[[SUM]] : tensor<2x128xf32>)
//       CHECK:     arith.divf %{{.+}}, %[[N]] : f32
//       CHECK:   %[[SQ:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ROW]]], iterator_types = ["parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[X]], %[[MEAN]] : tensor<2x128x768xf32>, tensor<2x128xf32>) outs(%{{.+}} : tensor<2x128xf32>)
//       CHECK:   ^bb0(%[[XI:.+]]: f32, %[[MI:.+]]: f32, %[[ACC:.+]]: f32):
//       CHECK:     %[[DEV:.+]] = arith.subf %[[XI]], %[[MI]] : f32
//       CHECK:     %[[D2:.+]] = arith.mulf %[[DEV]], %[[DEV]] : f32
//       CHECK:     arith.addf %[[ACC]], %[[D2]] : f32
//       CHECK:   %[[RSTD:.+]] = linalg.generic {indexing_maps = [#[[$ROW2]], #[[$ROW2]]]
//  CHECK-SAME:       ins(%[[SQ]] : tensor<2x128xf32>)
//       CHECK:     %[[VAR:.+]] = arith.divf %{{.+}}, %[[N]] : f32
//       CHECK:     %[[VE:.+]] = arith.addf %[[VAR]], %{{.+}} : f32
//       CHECK:     %[[SD:.+]] = math.sqrt %[[VE]] : f32
//       CHECK:     arith.divf %{{.+}}, %[[SD]] : f32
//       CHECK:   %[[Y:.+]] = linalg.generic {indexing_maps = [#[[$ID]], #[[$ROW]], #[[$ROW]], #[[$FEAT]], #[[$FEAT]], #[[$ID]]], iterator_types = ["parallel", "parallel", "parallel"]}
//  CHECK-SAME:       ins(%[[X]], %[[MEAN]], %[[RSTD]], %[[G]], %[[B]] : tensor<2x128x768xf32>, tensor<2x128xf32>, tensor<2x128xf32>, tensor<768xf32>, tensor<768xf32>)
//       CHECK:   ^bb0(%[[XI:.+]]: f32, %[[MI:.+]]: f32, %[[RI:.+]]: f32, %[[GI:.+]]: f32, %[[BI:.+]]: f32, %{{.+}}: f32):
//       CHECK:     %[[C:.+]] = arith.subf %[[XI]], %[[MI]] : f32
//       CHECK:     %[[NRM:.+]] = arith.mulf %[[C]], %[[RI]] : f32
//       CHECK:     %[[SC:.+]] = arith.mulf %[[NRM]], %[[GI]] : f32
//       CHECK:     %[[R:.+]] = arith.addf %[[SC]], %[[BI]] : f32
//       CHECK:     linalg.yield %[[R]] : f32
//       CHECK:   return %[[Y]]
func.func @layer_norm(%x: tensor<2x128x768xf32>, %g: tensor<768xf32>, %b: tensor<768xf32>) -> tensor<2x128x768xf32> {
  %y = sits.layer_norm %x, %g, %b {epsilon = 1.0e-05 : f64}
      : (tensor<2x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<2x128x768xf32>
  return %y : tensor<2x128x768xf32>
}

// -----

// axis = 1: the reduction covers the last two dimensions; the scale has
// their shape.
// CHECK-DAG: #[[$PAR:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-LABEL: func.func @layer_norm_two_axes
//       CHECK:   arith.constant 3.200000e+01 : f32
//       CHECK:   linalg.generic {{.+}} iterator_types = ["parallel", "reduction", "reduction"]
//       CHECK:   linalg.generic {{.+}} iterator_types = ["parallel", "reduction", "reduction"]
//       CHECK:   linalg.generic {indexing_maps = [#{{.+}}, #{{.+}}, #{{.+}}, #[[$PAR]], #{{.+}}]
//   CHECK-NOT:     arith.addf
//       CHECK:     linalg.yield
func.func @layer_norm_two_axes(%x: tensor<4x8x4xf32>, %g: tensor<8x4xf32>) -> tensor<4x8x4xf32> {
  %y = sits.layer_norm %x, %g {axis = 1 : i64} : (tensor<4x8x4xf32>, tensor<8x4xf32>) -> tensor<4x8x4xf32>
  return %y : tensor<4x8x4xf32>
}

// -----

// f16 RMSNorm: f32 statistics, one truncation at the end.
// CHECK-LABEL: func.func @rms_norm_f16
//  CHECK-SAME: (%[[X:.+]]: tensor<1x16x4096xf16>, %[[G:.+]]: tensor<4096xf16>)
//       CHECK:   %[[SS:.+]] = linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction"]}
//  CHECK-SAME:       ins(%[[X]] : tensor<1x16x4096xf16>) outs(%{{.+}} : tensor<1x16xf32>)
//       CHECK:     %[[XF:.+]] = arith.extf %{{.+}} : f16 to f32
//       CHECK:     %[[X2:.+]] = arith.mulf %[[XF]], %[[XF]] : f32
//       CHECK:     arith.addf %{{.+}}, %[[X2]] : f32
//       CHECK:   %[[RSTD:.+]] = linalg.generic
//  CHECK-SAME:       ins(%[[SS]] : tensor<1x16xf32>)
//       CHECK:     arith.divf %{{.+}}, %{{.+}} : f32
//       CHECK:     math.sqrt
//       CHECK:   %[[Y:.+]] = linalg.generic
//  CHECK-SAME:       ins(%[[X]], %[[RSTD]], %[[G]] : tensor<1x16x4096xf16>, tensor<1x16xf32>, tensor<4096xf16>) outs(%{{.+}} : tensor<1x16x4096xf16>)
//       CHECK:     arith.truncf %{{.+}} : f32 to f16
//       CHECK:   return %[[Y]]
func.func @rms_norm_f16(%x: tensor<1x16x4096xf16>, %g: tensor<4096xf16>) -> tensor<1x16x4096xf16> {
  %y = sits.rms_norm %x, %g {epsilon = 1.0e-06 : f64} : (tensor<1x16x4096xf16>, tensor<4096xf16>) -> tensor<1x16x4096xf16>
  return %y : tensor<1x16x4096xf16>
}

// -----

// Dynamic normalized extents: the element count is computed at run time.
// CHECK-LABEL: func.func @rms_norm_dynamic
//  CHECK-SAME: (%[[X:.+]]: tensor<?x?xf32>,
//       CHECK:   %[[D:.+]] = tensor.dim %[[X]], %c1 : tensor<?x?xf32>
//       CHECK:   %[[D64:.+]] = arith.index_castui %[[D]] : index to i64
//       CHECK:   %[[N:.+]] = arith.uitofp %[[D64]] : i64 to f32
//       CHECK:   linalg.generic
//       CHECK:   linalg.generic
//       CHECK:     arith.divf %{{.+}}, %[[N]] : f32
func.func @rms_norm_dynamic(%x: tensor<?x?xf32>, %g: tensor<?xf32>) -> tensor<?x?xf32> {
  %y = sits.rms_norm %x, %g : (tensor<?x?xf32>, tensor<?xf32>) -> tensor<?x?xf32>
  return %y : tensor<?x?xf32>
}
