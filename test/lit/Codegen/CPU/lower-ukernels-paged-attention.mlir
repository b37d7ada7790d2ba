// RUN: sits-opt %s --sits-cpu-lower-ukernels --canonicalize | FileCheck %s
// RUN: sits-opt %s --sits-cpu-lower-ukernels --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// sits.ukernel.paged_attention on buffers becomes one call of
// sitsRuntimePagedAttention: batch, queries, query heads, K/V heads, head
// dim; the query and its (batch, head, token) strides; the pool, its block
// count and block stride, the layer's K and V offsets in a block
// (layer * stride(1), plus stride(2) for V), its head stride, block size
// and position stride; the tables, their width and row stride; the context
// lengths; the scale; the output and its strides. Sizes and strides are in
// elements, as i64.

// CHECK-LABEL: func.func @decode
//  CHECK-SAME:   (%[[Q:.+]]: memref<?x8x1x64xf32>, %[[P:.+]]: memref<9x4x2x2x16x64xf32>, %[[T:.+]]: memref<?x5xi32>, %[[L:.+]]: memref<?xi32>, %[[O:.+]]: memref<?x8x1x64xf32>, %[[LAYER:.+]]: index)
//   CHECK-DAG:   %[[ONE:.+]] = arith.constant 1 : i64
//   CHECK-DAG:   %[[EIGHT:.+]] = arith.constant 8 : i64
//   CHECK-DAG:   %[[TWO:.+]] = arith.constant 2 : i64
//   CHECK-DAG:   %[[HD:.+]] = arith.constant 64 : i64
//   CHECK-DAG:   %[[QB:.+]] = arith.constant 512 : i64
//   CHECK-DAG:   %[[NB:.+]] = arith.constant 9 : i64
//   CHECK-DAG:   %[[BLOCK:.+]] = arith.constant 16384 : i64
//   CHECK-DAG:   %[[LAYERSTRIDE:.+]] = arith.constant 4096 : i64
//   CHECK-DAG:   %[[KIND:.+]] = arith.constant 2048 : i64
//   CHECK-DAG:   %[[HEAD:.+]] = arith.constant 1024 : i64
//   CHECK-DAG:   %[[BS:.+]] = arith.constant 16 : i64
//   CHECK-DAG:   %[[W:.+]] = arith.constant 5 : i64
//   CHECK-DAG:   %[[SCALE:.+]] = arith.constant 1.250000e-01 : f32
//       CHECK:   %[[QP:.+]] = llvm.inttoptr
//       CHECK:   %[[PP:.+]] = llvm.inttoptr
//       CHECK:   %[[TP:.+]] = llvm.inttoptr
//       CHECK:   %[[LP:.+]] = llvm.inttoptr
//       CHECK:   %[[OP:.+]] = llvm.inttoptr
//       CHECK:   %[[L64:.+]] = arith.index_cast %[[LAYER]] : index to i64
//       CHECK:   %[[KOFF:.+]] = arith.muli %[[L64]], %[[LAYERSTRIDE]] : i64
//       CHECK:   %[[VOFF:.+]] = arith.addi %[[KOFF]], %[[KIND]] : i64
//       CHECK:   %[[B:.+]] = arith.index_cast %{{.+}} : index to i64
//       CHECK:   call @sitsRuntimePagedAttention(%[[B]], %[[ONE]], %[[EIGHT]], %[[TWO]], %[[HD]], %[[QP]], %[[QB]], %[[HD]], %[[HD]], %[[PP]], %[[NB]], %[[BLOCK]], %[[KOFF]], %[[VOFF]], %[[HEAD]], %[[BS]], %[[HD]], %[[TP]], %[[W]], %[[W]], %[[LP]], %[[SCALE]], %[[OP]], %[[QB]], %[[HD]], %[[HD]])
//   CHECK-NOT:   sits.ukernel
//       CHECK:   return
func.func @decode(%q: memref<?x8x1x64xf32>, %pool: memref<9x4x2x2x16x64xf32>, %tables: memref<?x5xi32>,
                  %lens: memref<?xi32>, %out: memref<?x8x1x64xf32>, %layer: index) {
  sits.ukernel.paged_attention ins(%q, %pool, %tables, %lens : memref<?x8x1x64xf32>,
      memref<9x4x2x2x16x64xf32>, memref<?x5xi32>, memref<?xi32>) layer(%layer)
      outs(%out : memref<?x8x1x64xf32>) {scale = 0.125 : f32}
  return
}

// Strided buffers go as they are while their innermost dimension is
// contiguous (a query viewed from [B, S, Hq, D], table rows from a wider
// buffer). A query whose head dim is strided is copied into a contiguous
// buffer first, and an output likewise written through one, then freed.

// CHECK-LABEL: func.func @strided
//   CHECK-NOT:   memref.alloc
//       CHECK:   call @sitsRuntimePagedAttention
// CHECK-LABEL: func.func @copied
//  CHECK-SAME:   (%[[Q:[^:]+]]: memref<2x8x1x64xf32, strided<[1024, 128, 64, 2]>>,
//  CHECK-SAME:   %[[O:[^:]+]]: memref<2x8x1x64xf32, strided<[1024, 128, 64, 2]>>, %{{[^:]+}}: index)
//       CHECK:   %[[QC:.+]] = memref.alloc() : memref<2x8x1x64xf32>
//       CHECK:   memref.copy %[[Q]], %[[QC]]
//       CHECK:   %[[OC:.+]] = memref.alloc() : memref<2x8x1x64xf32>
//   CHECK-NOT:   memref.copy
//       CHECK:   call @sitsRuntimePagedAttention
//       CHECK:   memref.copy %[[OC]], %[[O]]
//   CHECK-DAG:   memref.dealloc %[[QC]]
//   CHECK-DAG:   memref.dealloc %[[OC]]
func.func @strided(%q: memref<2x8x3x64xf32, strided<[1536, 64, 512, 1]>>, %pool: memref<9x4x2x2x16x64xf32>,
                   %tables: memref<2x5xi32, strided<[7, 1], offset: 2>>, %lens: memref<2xi32>,
                   %out: memref<2x8x3x64xf32>, %layer: index) {
  sits.ukernel.paged_attention ins(%q, %pool, %tables, %lens : memref<2x8x3x64xf32, strided<[1536, 64, 512, 1]>>,
      memref<9x4x2x2x16x64xf32>, memref<2x5xi32, strided<[7, 1], offset: 2>>, memref<2xi32>) layer(%layer)
      outs(%out : memref<2x8x3x64xf32>) {scale = 0.125 : f32}
  return
}
func.func @copied(%q: memref<2x8x1x64xf32, strided<[1024, 128, 64, 2]>>, %pool: memref<9x4x2x2x16x64xf32>,
                  %tables: memref<2x5xi32>, %lens: memref<2xi32>,
                  %out: memref<2x8x1x64xf32, strided<[1024, 128, 64, 2]>>, %layer: index) {
  sits.ukernel.paged_attention ins(%q, %pool, %tables, %lens : memref<2x8x1x64xf32, strided<[1024, 128, 64, 2]>>,
      memref<9x4x2x2x16x64xf32>, memref<2x5xi32>, memref<2xi32>) layer(%layer)
      outs(%out : memref<2x8x1x64xf32, strided<[1024, 128, 64, 2]>>) {scale = 0.125 : f32}
  return
}

// The kernel is declared once.
// CHECK: func.func private @sitsRuntimePagedAttention(i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, f32, !llvm.ptr, i64, i64, i64)
//   CHECK-NOT:   @sitsRuntimePagedAttention

// STATS: 3 num-calls
