// RUN: sits-opt %s --sits-page-kv-cache=block-size=8 | FileCheck %s

// onnxruntime's GroupQueryAttention imports as a sits.paged_attention over
// a pool of one block per sequence built from the past K/V (its present
// buffer), with its own lengths, tables and slots. Paged, the layer reads
// the real pool; its lengths are the pool's context lengths everywhere (RoPE
// positions computed from them included), and the arguments only the local
// pool read (the past, the local lengths, tables and slots) go.

func.func @main(%q: tensor<?x4x?x16xf32>, %k: tensor<?x2x?x16xf32>, %v: tensor<?x2x?x16xf32>,
                %pk: tensor<?x2x?x16xf32>, %pv: tensor<?x2x?x16xf32>, %seqlens: tensor<?xi32>,
                %tables: tensor<?x1xi32>, %slots: tensor<?x?xi64>, %unused: tensor<4xf32>)
    -> (tensor<?x4x?x16xf32>, tensor<?xi32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>) {
  %c0 = arith.constant 0 : index
  %c2 = arith.constant 2 : index
  %b = tensor.dim %pk, %c0 : tensor<?x2x?x16xf32>
  %t = tensor.dim %pk, %c2 : tensor<?x2x?x16xf32>
  %ke = tensor.expand_shape %pk [[0, 1, 2], [3], [4], [5]] output_shape [%b, 1, 1, 2, %t, 16]
      : tensor<?x2x?x16xf32> into tensor<?x1x1x2x?x16xf32>
  %ve = tensor.expand_shape %pv [[0, 1, 2], [3], [4], [5]] output_shape [%b, 1, 1, 2, %t, 16]
      : tensor<?x2x?x16xf32> into tensor<?x1x1x2x?x16xf32>
  %pool = tensor.concat dim(2) %ke, %ve
      : (tensor<?x1x1x2x?x16xf32>, tensor<?x1x1x2x?x16xf32>) -> tensor<?x1x2x2x?x16xf32>
  %lens = arith.addi %seqlens, %seqlens : tensor<?xi32>
  %o, %p1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 0}
      : (tensor<?x4x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>, tensor<?x1x2x2x?x16xf32>,
         tensor<?x1xi32>, tensor<?x?xi64>, tensor<?xi32>) -> (tensor<?x4x?x16xf32>, tensor<?x1x2x2x?x16xf32>)
  %pk1 = tensor.extract_slice %p1[0, 0, 0, 0, 0, 0] [%b, 1, 1, 2, %t, 16] [1, 1, 1, 1, 1, 1]
      : tensor<?x1x2x2x?x16xf32> to tensor<?x2x?x16xf32>
  %pv1 = tensor.extract_slice %p1[0, 0, 1, 0, 0, 0] [%b, 1, 1, 2, %t, 16] [1, 1, 1, 1, 1, 1]
      : tensor<?x1x2x2x?x16xf32> to tensor<?x2x?x16xf32>
  // Positions computed from the local lengths read the context lengths.
  %pos = arith.muli %lens, %lens : tensor<?xi32>
  return %o, %pos, %pk1, %pv1 : tensor<?x4x?x16xf32>, tensor<?xi32>, tensor<?x2x?x16xf32>, tensor<?x2x?x16xf32>
}
// CHECK-LABEL: func.func @main
//  CHECK-SAME:   (%[[Q:[^:]+]]: tensor<?x4x?x16xf32>, %[[K:[^:]+]]: tensor<?x2x?x16xf32>, %[[V:[^:]+]]: tensor<?x2x?x16xf32>, %{{[^:]+}}: tensor<4xf32>,
//  CHECK-SAME:    %[[POOL:[^:]+]]: tensor<?x1x2x2x8x16xf32> {sits.name = "kv_pool"}, %[[T:[^:]+]]: tensor<?x?xi32> {sits.name = "block_tables"},
//  CHECK-SAME:    %[[S:[^:]+]]: tensor<?x?xi64> {sits.name = "slot_mapping"}, %[[L:[^:]+]]: tensor<?xi32> {sits.name = "context_lens"})
//  CHECK-SAME:   -> (tensor<?x4x?x16xf32>, tensor<?xi32>, tensor<?x1x2x2x8x16xf32> {sits.updates = 4 : i64})
//   CHECK-NOT:   tensor.concat
//       CHECK:   %[[O:.+]], %[[P:.+]] = sits.paged_attention %[[Q]], %[[K]], %[[V]], %[[POOL]], %[[T]], %[[S]], %[[L]] {layer = 0 : i64}
//       CHECK:   %[[POS:.+]] = arith.muli %[[L]], %[[L]] : tensor<?xi32>
//       CHECK:   return %[[O]], %[[POS]], %[[P]]
