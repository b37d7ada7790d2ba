// RUN: sits-opt %s | sits-opt | FileCheck %s
// RUN: sits-opt %s --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// The kernels' form: the writes, then the attention, each in destination
// style; on buffers the pool is updated in place.
// CHECK-LABEL: func.func @kernels
//       CHECK:   %[[P:.+]] = sits.ukernel.kivi_write ins(%{{.+}}, %{{.+}}, %{{.+}} : tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x1xi64>) layer(%{{.+}}) outs(%{{.+}} : tensor<?x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>} -> tensor<?x12288xi8>
//       CHECK:   sits.ukernel.paged_attention ins(%{{.+}}, %[[P]], {{.*}}) {kivi = array<i64: 4, 2, 2, 4>, scale = 2.500000e-01 : f32}
// BUF-LABEL: func.func @kernels
//  BUF-SAME:   %[[POOL:[^:]+]]: memref<?x12288xi8
//       BUF:   sits.ukernel.kivi_write ins({{.*}}) layer(%{{.+}}) outs(%[[POOL]] : memref<?x12288xi8{{.*}}>) {kivi = array<i64: 4, 2, 2, 4>}
//   BUF-NOT:   memref.copy
//       BUF:   sits.ukernel.paged_attention ins(%{{.+}}, %[[POOL]], {{.*}}) {kivi = array<i64: 4, 2, 2, 4>, scale = 2.500000e-01 : f32}
func.func @kernels(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                   %pool: tensor<?x12288xi8>, %t: tensor<?x?xi32>, %s: tensor<?x1xi64>,
                   %l: tensor<?xi32>, %init: tensor<?x4x1x16xf32>, %layer: index)
    -> (tensor<?x4x1x16xf32>, tensor<?x12288xi8>) {
  %p = sits.ukernel.kivi_write ins(%k, %v, %s : tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x1xi64>)
      layer(%layer) outs(%pool : tensor<?x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>} -> tensor<?x12288xi8>
  %o = sits.ukernel.paged_attention ins(%q, %p, %t, %l : tensor<?x4x1x16xf32>, tensor<?x12288xi8>,
      tensor<?x?xi32>, tensor<?xi32>) layer(%layer) outs(%init : tensor<?x4x1x16xf32>)
      {kivi = array<i64: 4, 2, 2, 4>, scale = 0.25 : f32} -> tensor<?x4x1x16xf32>
  return %o, %p : tensor<?x4x1x16xf32>, tensor<?x12288xi8>
}
