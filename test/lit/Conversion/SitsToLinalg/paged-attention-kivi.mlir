// RUN: sits-opt %s --sits-convert-to-linalg=paged-attention-kernel | FileCheck %s
// RUN: not sits-opt %s --sits-convert-to-linalg=paged-attention-kernel=false 2>&1 | FileCheck %s --check-prefix=GENERIC

// sits.paged_attention over KIVI blocks becomes the runtime kernels' ops:
// sits.ukernel.kivi_write puts the new K/V in the blocks' tails (and
// quantizes the blocks they fill), then sits.ukernel.paged_attention reads
// the written pool. Without the kernels there is no lowering: the
// diagnostic says so.

// CHECK-LABEL: func.func @decode
//  CHECK-SAME:   (%[[Q:[^:]+]]: tensor<?x4x1x16xf32>, %[[K:[^:]+]]: tensor<?x2x1x16xf32>, %[[V:[^:]+]]: tensor<?x2x1x16xf32>,
//  CHECK-SAME:    %[[POOL:[^:]+]]: tensor<?x12288xi8>, %[[T:[^:]+]]: tensor<?x?xi32>, %[[S:[^:]+]]: tensor<?x1xi64>, %[[L:[^:]+]]: tensor<?xi32>)
//       CHECK:   %[[LAYER:.+]] = arith.constant 1 : index
//       CHECK:   %[[P:.+]] = sits.ukernel.kivi_write ins(%[[K]], %[[V]], %[[S]] : {{.*}}) layer(%[[LAYER]]) outs(%[[POOL]] : tensor<?x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>}
//       CHECK:   %[[O:.+]] = sits.ukernel.paged_attention ins(%[[Q]], %[[P]], %[[T]], %[[L]] : {{.*}}) layer(%[[LAYER]]) outs(%{{.+}} : tensor<?x4x1x16xf32>) {kivi = array<i64: 4, 2, 2, 4>, scale = 2.500000e-01 : f32}
//       CHECK:   return %[[O]], %[[P]]

// GENERIC: error: 'sits.paged_attention' op a KIVI pool (4- or 2-bit KV blocks) is read and written by the CPU runtime kernels only
func.func @decode(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                  %pool: tensor<?x12288xi8>, %t: tensor<?x?xi32>, %s: tensor<?x1xi64>,
                  %l: tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x12288xi8>) {
  %o, %p = sits.paged_attention %q, %k, %v, %pool, %t, %s, %l {kivi = array<i64: 4, 2, 2, 4>, layer = 1}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x12288xi8>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x12288xi8>)
  return %o, %p : tensor<?x4x1x16xf32>, tensor<?x12288xi8>
}
