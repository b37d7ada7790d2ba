// RUN: sits-opt %s | sits-opt | FileCheck %s
// RUN: sits-opt %s --one-shot-bufferize="bufferize-function-boundaries" | FileCheck %s --check-prefix=BUF

// sits.ukernel.paged_attention round-trips on tensors and on buffers, and
// bufferizes in destination style: the init's buffer is written in place
// (it is not read, so a tensor.empty init needs no copy) and the other
// operands are only read.

// CHECK-LABEL: func.func @tensors
//       CHECK:   sits.ukernel.paged_attention ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<?x8x1x64xf32>, tensor<?x4x2x2x16x64xf32>, tensor<?x?xi32>, tensor<?xi32>) layer(%{{.+}}) outs(%{{.+}} : tensor<?x8x1x64xf32>) {scale = 1.250000e-01 : f32} -> tensor<?x8x1x64xf32>
// BUF-LABEL: func.func @tensors
//  BUF-SAME:   (%[[Q:.+]]: memref<?x8x1x64xf32, strided<[?, ?, ?, ?], offset: ?>>, %[[P:.+]]: memref<?x4x2x2x16x64xf32, strided<[?, ?, ?, ?, ?, ?], offset: ?>>, %[[T:.+]]: memref<?x?xi32, strided<[?, ?], offset: ?>>, %[[L:.+]]: memref<?xi32, strided<[?], offset: ?>>, %[[LAYER:.+]]: index)
//       BUF:   %[[OUT:.+]] = memref.alloc(%{{.+}}) {{.*}}: memref<?x8x1x64xf32>
//   BUF-NOT:   memref.copy
//       BUF:   sits.ukernel.paged_attention ins(%[[Q]], %[[P]], %[[T]], %[[L]] : {{.+}}) layer(%[[LAYER]]) outs(%[[OUT]] : memref<?x8x1x64xf32>) {scale = 1.250000e-01 : f32}
//   BUF-NOT:   ->
//       BUF:   return %[[OUT]]
func.func @tensors(%q: tensor<?x8x1x64xf32>, %pool: tensor<?x4x2x2x16x64xf32>, %tables: tensor<?x?xi32>,
                   %lens: tensor<?xi32>, %layer: index) -> tensor<?x8x1x64xf32> {
  %c0 = arith.constant 0 : index
  %b = tensor.dim %q, %c0 : tensor<?x8x1x64xf32>
  %init = tensor.empty(%b) : tensor<?x8x1x64xf32>
  %o = sits.ukernel.paged_attention ins(%q, %pool, %tables, %lens : tensor<?x8x1x64xf32>,
      tensor<?x4x2x2x16x64xf32>, tensor<?x?xi32>, tensor<?xi32>) layer(%layer)
      outs(%init : tensor<?x8x1x64xf32>) {scale = 0.125 : f32} -> tensor<?x8x1x64xf32>
  return %o : tensor<?x8x1x64xf32>
}

// CHECK-LABEL: func.func @buffers
//       CHECK:   sits.ukernel.paged_attention ins(%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : memref<2x8x3x64xf32>, memref<9x4x2x2x16x64xf32>, memref<2x5xi32>, memref<2xi32>) layer(%{{.+}}) outs(%{{.+}} : memref<2x8x3x64xf32>) {scale = 1.250000e-01 : f32}
//   CHECK-NOT:   ->
func.func @buffers(%q: memref<2x8x3x64xf32>, %pool: memref<9x4x2x2x16x64xf32>, %tables: memref<2x5xi32>,
                   %lens: memref<2xi32>, %out: memref<2x8x3x64xf32>) {
  %c3 = arith.constant 3 : index
  sits.ukernel.paged_attention ins(%q, %pool, %tables, %lens : memref<2x8x3x64xf32>,
      memref<9x4x2x2x16x64xf32>, memref<2x5xi32>, memref<2xi32>) layer(%c3)
      outs(%out : memref<2x8x3x64xf32>) {scale = 0.125 : f32}
  return
}
