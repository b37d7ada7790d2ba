// RUN: sits-opt %s --sits-convert-to-linalg=paged-attention-kernel | FileCheck %s

// With `paged-attention-kernel`, an f32 sits.paged_attention still writes
// the new K/V into the pool through the slot mapping, then attends with
// one sits.ukernel.paged_attention on the written pool (read in place
// through the block tables) into a fresh [B, Hq, S, D] tensor. The scale
// defaults to 1/sqrt(D); the layer is a constant or the operand.

// CHECK-LABEL: func.func @decode
//  CHECK-SAME: (%[[Q:[^:]+]]: tensor<?x4x1x16xf32>, %{{.+}}: tensor<?x2x1x16xf32>, %{{.+}}: tensor<?x2x1x16xf32>, %[[POOL:[^:]+]]: tensor<?x3x2x2x4x16xf32>, %[[T:[^:]+]]: tensor<?x?xi32>, %{{.+}}: tensor<?x1xi64>, %[[L:[^:]+]]: tensor<?xi32>)
//       CHECK:   %[[WRITTEN:.+]] = scf.for {{.+}} iter_args(%{{.+}} = %[[POOL]])
//       CHECK:         tensor.insert_slice %{{.+}}[%{{.+}}, 1, 0, 0, %{{.+}}, 0] [1, 1, 1, 2, 1, 16]
//       CHECK:         tensor.insert_slice %{{.+}}[%{{.+}}, 1, 1, 0, %{{.+}}, 0] [1, 1, 1, 2, 1, 16]
//   CHECK-NOT:   scf.forall
//       CHECK:   %[[INIT:.+]] = tensor.empty(%{{.+}}) : tensor<?x4x1x16xf32>
//       CHECK:   %[[LAYER:.+]] = arith.constant 1 : index
//       CHECK:   %[[O:.+]] = sits.ukernel.paged_attention ins(%[[Q]], %[[WRITTEN]], %[[T]], %[[L]] : tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>, tensor<?x?xi32>, tensor<?xi32>) layer(%[[LAYER]]) outs(%[[INIT]] : tensor<?x4x1x16xf32>) {scale = 2.500000e-01 : f32} -> tensor<?x4x1x16xf32>
//   CHECK-NOT:   linalg.generic
//       CHECK:   return %[[O]], %[[WRITTEN]] : tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>
func.func @decode(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                  %pool: tensor<?x3x2x2x4x16xf32>, %tables: tensor<?x?xi32>, %slots: tensor<?x1xi64>,
                  %lens: tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 1}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x3x2x2x4x16xf32>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>)
  return %o, %pool1 : tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>
}

// A prefill of 5 tokens in a function shared by all layers, with a given
// scale: the layer operand goes to the kernel op as it is.

// CHECK-LABEL: func.func @prefill_shared_layer
//  CHECK-SAME: %[[LAYER:[^:]+]]: index)
//       CHECK:   %[[WRITTEN:.+]] = scf.for
//       CHECK:   sits.ukernel.paged_attention ins(%{{.+}}, %[[WRITTEN]], %{{.+}}, %{{.+}} : tensor<2x4x5x16xf32>, tensor<?x?x2x2x4x16xf32>, tensor<2x?xi32>, tensor<2xi32>) layer(%[[LAYER]]) outs(%{{.+}} : tensor<2x4x5x16xf32>) {scale = 5.000000e-01 : f32} -> tensor<2x4x5x16xf32>
func.func @prefill_shared_layer(%q: tensor<2x4x5x16xf32>, %k: tensor<2x2x5x16xf32>, %v: tensor<2x2x5x16xf32>,
                                %pool: tensor<?x?x2x2x4x16xf32>, %tables: tensor<2x?xi32>, %slots: tensor<2x5xi64>,
                                %lens: tensor<2xi32>, %layer: index) -> (tensor<2x4x5x16xf32>, tensor<?x?x2x2x4x16xf32>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens layer(%layer) {scale = 0.5 : f64}
      : (tensor<2x4x5x16xf32>, tensor<2x2x5x16xf32>, tensor<2x2x5x16xf32>, tensor<?x?x2x2x4x16xf32>,
         tensor<2x?xi32>, tensor<2x5xi64>, tensor<2xi32>) -> (tensor<2x4x5x16xf32>, tensor<?x?x2x2x4x16xf32>)
  return %o, %pool1 : tensor<2x4x5x16xf32>, tensor<?x?x2x2x4x16xf32>
}

// An f16 pool has no kernel: the context is gathered and attended in linalg.

// CHECK-LABEL: func.func @f16
//   CHECK-NOT:   sits.ukernel.paged_attention
//       CHECK:   scf.forall
//       CHECK:   linalg.generic
func.func @f16(%q: tensor<1x4x1x16xf16>, %k: tensor<1x2x1x16xf16>, %v: tensor<1x2x1x16xf16>,
               %pool: tensor<8x1x2x2x4x16xf16>, %tables: tensor<1x2xi32>, %slots: tensor<1x1xi64>,
               %lens: tensor<1xi32>) -> (tensor<1x4x1x16xf16>, tensor<8x1x2x2x4x16xf16>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 0}
      : (tensor<1x4x1x16xf16>, tensor<1x2x1x16xf16>, tensor<1x2x1x16xf16>, tensor<8x1x2x2x4x16xf16>,
         tensor<1x2xi32>, tensor<1x1xi64>, tensor<1xi32>) -> (tensor<1x4x1x16xf16>, tensor<8x1x2x2x4x16xf16>)
  return %o, %pool1 : tensor<1x4x1x16xf16>, tensor<8x1x2x2x4x16xf16>
}
