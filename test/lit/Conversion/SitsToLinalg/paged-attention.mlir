// RUN: sits-opt %s --sits-convert-to-linalg | FileCheck %s

// sits.paged_attention: an scf.for over (sequence, new token) writes each
// token's K and V into its slot of the pool (skipping padding, slot < 0, and
// slots past the pool), then K and V of the layer are gathered through the
// block tables a whole block at a time, by an scf.forall over (sequence,
// block) the thread pool splits (out-of-range block numbers read block 0),
// and attended causally with one offset per sequence, context_lens[b] - S;
// queries at negative positions (left padding) get zeros.

func.func @decode(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                  %pool: tensor<?x3x2x2x4x16xf32>, %tables: tensor<?x?xi32>, %slots: tensor<?x1xi64>,
                  %lens: tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 1}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x3x2x2x4x16xf32>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>)
  return %o, %pool1 : tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>
}
// CHECK-DAG: #[[$BATCH:.+]] = affine_map<(d0, d1, d2, d3, d4) -> (d0)>
// CHECK-LABEL: func.func @decode
//  CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x4x1x16xf32>, %[[K:[^:]+]]: tensor<?x2x1x16xf32>, %[[V:[^:]+]]: tensor<?x2x1x16xf32>, %[[POOL:[^:]+]]: tensor<?x3x2x2x4x16xf32>, %[[T:[^:]+]]: tensor<?x?xi32>, %[[S:[^:]+]]: tensor<?x1xi64>, %[[L:[^:]+]]: tensor<?xi32>)
//       CHECK:   %[[WRITTEN:.+]] = scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[P0:.+]] = %[[POOL]])
//       CHECK:     scf.for %[[I:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[P1:.+]] = %[[P0]])
//       CHECK:       %[[SLOT:.+]] = tensor.extract %[[S]][%[[B]], %[[I]]] : tensor<?x1xi64>
//       CHECK:       %[[BELOW:.+]] = arith.cmpi slt, %[[SLOT]], %{{.+}} : i64
//       CHECK:       %[[ABOVE:.+]] = arith.cmpi sge, %[[SLOT]], %{{.+}} : i64
//       CHECK:       %[[OK:.+]] = arith.andi %[[ABOVE]], %[[BELOW]] : i1
//       CHECK:       scf.if %[[OK]]
//       CHECK:         %[[BLOCK:.+]] = arith.divui
//       CHECK:         %[[OFF:.+]] = arith.remui
//       CHECK:         %[[KS:.+]] = tensor.extract_slice %[[K]][%[[B]], 0, %[[I]], 0] [1, 2, 1, 16] [1, 1, 1, 1] : tensor<?x2x1x16xf32> to tensor<2x16xf32>
//       CHECK:         %[[P2:.+]] = tensor.insert_slice %[[KS]] into %[[P1]][%[[BLOCK]], 1, 0, 0, %[[OFF]], 0] [1, 1, 1, 2, 1, 16]
//       CHECK:         %[[VS:.+]] = tensor.extract_slice %[[V]][%[[B]], 0, %[[I]], 0] [1, 2, 1, 16]
//       CHECK:         %[[P3:.+]] = tensor.insert_slice %[[VS]] into %[[P2]][%[[BLOCK]], 1, 1, 0, %[[OFF]], 0] [1, 1, 1, 2, 1, 16]
//       CHECK:         scf.yield %[[P3]]
//       CHECK:       } else {
//       CHECK:         scf.yield %[[P1]]
//       CHECK:   %[[NB:.+]] = tensor.dim %[[WRITTEN]], %{{.+}} : tensor<?x3x2x2x4x16xf32>
//       CHECK:   %[[KG:.+]] = scf.forall (%[[GB:.+]], %[[GM:.+]]) in (%{{.+}}, %{{.+}}) shared_outs(%[[G:.+]] = %{{.+}}) -> (tensor<?x2x?x4x16xf32>)
//       CHECK:     %[[E:.+]] = tensor.extract %[[T]][%[[GB]], %[[GM]]] : tensor<?x?xi32>
//       CHECK:     %[[N:.+]] = arith.index_cast %[[E]] : i32 to index
//       CHECK:     %[[IN:.+]] = arith.cmpi ult, %[[N]], %[[NB]] : index
//       CHECK:     %[[SAFE:.+]] = arith.select %[[IN]], %[[N]], %{{.+}} : index
//       CHECK:     %[[CHUNK:.+]] = tensor.extract_slice %[[WRITTEN]][%[[SAFE]], 1, 0, 0, 0, 0] [1, 1, 1, 2, 4, 16] [1, 1, 1, 1, 1, 1] : tensor<?x3x2x2x4x16xf32> to tensor<2x4x16xf32>
//       CHECK:     scf.forall.in_parallel
//       CHECK:       tensor.parallel_insert_slice %[[CHUNK]] into %[[G]][%[[GB]], 0, %[[GM]], 0, 0] [1, 2, 1, 4, 16]
//       CHECK:   %[[KC:.+]] = tensor.collapse_shape %[[KG]] {{\[}}[0], [1], [2, 3], [4]] : tensor<?x2x?x4x16xf32> into tensor<?x2x?x16xf32>
//       CHECK:   %[[VG:.+]] = scf.forall
//       CHECK:     tensor.extract_slice %[[WRITTEN]][%{{.+}}, 1, 1, 0, 0, 0] [1, 1, 1, 2, 4, 16]
//       CHECK:   %[[VC:.+]] = tensor.collapse_shape %[[VG]]
//       CHECK:   %[[OFFS:.+]] = linalg.generic {{.+}} ins(%[[L]] : tensor<?xi32>) outs(%{{.+}} : tensor<?xi64>)
//       CHECK:     arith.extsi
//       CHECK:     arith.subi
//       CHECK:   %[[SCORES:.+]] = linalg.generic {{.+}} ins(%{{.+}}, %[[KC]] : tensor<?x2x2x1x16xf32>, tensor<?x2x?x16xf32>)
//       CHECK:   linalg.generic {indexing_maps = [#{{.+}}, #[[$BATCH]], #{{.+}}], {{.+}} ins(%[[SCORES]], %[[OFFS]] : tensor<?x2x2x1x?xf32>, tensor<?xi64>)
//       CHECK:     ^bb0(%{{.+}}: f32, %[[OFF64:.+]]: i64, %{{.+}}: f32):
//       CHECK:       %[[QI:.+]] = arith.index_cast %{{.+}} : index to i64
//       CHECK:       %[[KJ:.+]] = arith.index_cast %{{.+}} : index to i64
//       CHECK:       %[[LAST:.+]] = arith.addi %[[QI]], %[[OFF64]] : i64
//       CHECK:       arith.cmpi sgt, %[[KJ]], %[[LAST]] : i64
//       CHECK:   linalg.generic {{.+}} ins(%{{.+}}, %[[VC]] :
//       CHECK:   %[[O:.+]] = linalg.generic {{.+}} ins(%{{.+}}, %[[OFFS]] : tensor<?x4x1x16xf32>, tensor<?xi64>)
//       CHECK:     ^bb0(%[[X:.+]]: f32, %[[OFF:.+]]: i64, %{{.+}}: f32):
//       CHECK:       %[[S:.+]] = linalg.index 2 : index
//       CHECK:       %[[S64:.+]] = arith.index_cast %[[S]] : index to i64
//       CHECK:       %[[POS:.+]] = arith.addi %[[OFF]], %[[S64]] : i64
//       CHECK:       %[[PAD:.+]] = arith.cmpi slt, %[[POS]], %{{.+}} : i64
//       CHECK:       arith.select %[[PAD]], %{{.+}}, %[[X]] : f32
//       CHECK:   return %[[O]], %[[WRITTEN]] : tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>

// A layer operand becomes the layer offset of every pool slice.

func.func @shared_layer(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                        %pool: tensor<?x?x2x2x4x16xf32>, %tables: tensor<?x?xi32>, %slots: tensor<?x1xi64>,
                        %lens: tensor<?xi32>, %layer: index) -> (tensor<?x4x1x16xf32>, tensor<?x?x2x2x4x16xf32>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens layer(%layer)
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x?x2x2x4x16xf32>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x?x2x2x4x16xf32>)
  return %o, %pool1 : tensor<?x4x1x16xf32>, tensor<?x?x2x2x4x16xf32>
}
// CHECK-LABEL: func.func @shared_layer
//  CHECK-SAME: %[[LAYER:[^:]+]]: index)
//       CHECK:   %[[WRITTEN:.+]] = scf.for
//       CHECK:         tensor.insert_slice %{{.+}} into %{{.+}}[%{{.+}}, %[[LAYER]], 0, 0, %{{.+}}, 0] [1, 1, 1, 2, 1, 16]
//       CHECK:         tensor.insert_slice %{{.+}} into %{{.+}}[%{{.+}}, %[[LAYER]], 1, 0, %{{.+}}, 0] [1, 1, 1, 2, 1, 16]
//       CHECK:   scf.forall
//       CHECK:     tensor.extract_slice %[[WRITTEN]][%{{.+}}, %[[LAYER]], 0, 0, 0, 0] [1, 1, 1, 2, 4, 16] [1, 1, 1, 1, 1, 1] : tensor<?x?x2x2x4x16xf32> to tensor<2x4x16xf32>
//       CHECK:   scf.forall
//       CHECK:     tensor.extract_slice %[[WRITTEN]][%{{.+}}, %[[LAYER]], 1, 0, 0, 0] [1, 1, 1, 2, 4, 16]
//       CHECK:   return %{{.+}}, %[[WRITTEN]] : tensor<?x4x1x16xf32>, tensor<?x?x2x2x4x16xf32>
