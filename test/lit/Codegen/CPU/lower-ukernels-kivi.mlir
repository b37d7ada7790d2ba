// RUN: sits-opt %s --split-input-file --sits-cpu-lower-ukernels --canonicalize --verify-diagnostics | FileCheck %s

// The KIVI kernels on buffers become calls of the runtime's writer and
// attention over the pool of KIVI blocks. sitsRuntimeKiviWrite: batch,
// tokens, K/V heads, head dim; key and value and their (batch, token,
// head) strides; the slots and their row stride; the pool, its block
// count; the layout's layers, the layer, block size and bits; flags (1:
// give filled tails back). sitsRuntimePagedAttentionKivi: batch, queries,
// query heads, K/V heads, head dim; the query and its strides; the pool,
// its block count, layers, layer, block size and bits; the tables, their
// width and row stride; the lengths; the scale; the output and its strides.

// CHECK-LABEL: func.func @decode
//  CHECK-SAME:   (%[[Q:[^:]+]]: memref<?x4x1x16xf32>, %[[K:[^:]+]]: memref<?x2x1x16xf32>, %[[V:[^:]+]]: memref<?x2x1x16xf32>,
//  CHECK-SAME:    %[[POOL:[^:]+]]: memref<?x12288xi8>, %[[T:[^:]+]]: memref<?x?xi32>, %[[S:[^:]+]]: memref<?x1xi64>,
//  CHECK-SAME:    %[[L:[^:]+]]: memref<?xi32>, %[[O:[^:]+]]: memref<?x4x1x16xf32>, %[[LAYER:[^:]+]]: index)
//   CHECK-DAG:   %[[C1:.+]] = arith.constant 1 : i64
//   CHECK-DAG:   %[[C2:.+]] = arith.constant 2 : i64
//   CHECK-DAG:   %[[C4:.+]] = arith.constant 4 : i64
//   CHECK-DAG:   %[[C16:.+]] = arith.constant 16 : i64
//   CHECK-DAG:   %[[C32:.+]] = arith.constant 32 : i64
//       CHECK:   call @sitsRuntimeKiviWrite(%{{.+}}, %[[C1]], %[[C2]], %[[C16]], %{{.+}}, %{{.+}}, %[[C32]], %[[C16]], %[[C16]], %{{.+}}, %[[C1]], %{{.+}}, %{{.+}}, %[[C2]], %{{.+}}, %[[C4]], %[[C4]], %[[C1]])
//       CHECK:   call @sitsRuntimePagedAttentionKivi(%{{.+}}, %[[C1]], %[[C4]], %[[C2]], %[[C16]], %{{.+}}, %{{.+}}, %[[C16]], %{{.+}}, %{{.+}}, %{{.+}}, %[[C2]], %{{.+}}, %[[C4]], %[[C4]], %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}, %[[C16]], %{{.+}})
//   CHECK-NOT:   sits.ukernel
// CHECK: func.func private @sitsRuntimeKiviWrite(i64, i64, i64, i64, !llvm.ptr, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, i64, i64, i64, i64, i64)
// CHECK: func.func private @sitsRuntimePagedAttentionKivi(i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, f32, !llvm.ptr, i64, i64, i64)
func.func @decode(%q: memref<?x4x1x16xf32>, %k: memref<?x2x1x16xf32>, %v: memref<?x2x1x16xf32>,
                  %pool: memref<?x12288xi8>, %t: memref<?x?xi32>, %s: memref<?x1xi64>,
                  %l: memref<?xi32>, %o: memref<?x4x1x16xf32>, %layer: index) {
  sits.ukernel.kivi_write ins(%k, %v, %s : memref<?x2x1x16xf32>, memref<?x2x1x16xf32>, memref<?x1xi64>)
      layer(%layer) outs(%pool : memref<?x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>}
  sits.ukernel.paged_attention ins(%q, %pool, %t, %l : memref<?x4x1x16xf32>, memref<?x12288xi8>,
      memref<?x?xi32>, memref<?xi32>) layer(%layer) outs(%o : memref<?x4x1x16xf32>)
      {kivi = array<i64: 4, 2, 2, 4>, scale = 0.25 : f32}
  return
}

// -----

// Strided key and value (one set of strides in the call): copied into
// identity-layout buffers first, freed after.
// CHECK-LABEL: func.func @strided
//       CHECK:   %[[KC:.+]] = memref.alloc() : memref<2x2x3x16xf32>
//       CHECK:   memref.copy
//       CHECK:   %[[VC:.+]] = memref.alloc() : memref<2x2x3x16xf32>
//       CHECK:   memref.copy
//       CHECK:   call @sitsRuntimeKiviWrite
//   CHECK-DAG:   memref.dealloc %[[KC]]
//   CHECK-DAG:   memref.dealloc %[[VC]]
func.func @strided(%k: memref<2x2x3x16xf32, strided<[192, 16, 64, 1]>>,
                   %v: memref<2x2x3x16xf32, strided<[192, 16, 64, 1]>>, %s: memref<2x3xi64>,
                   %pool: memref<5x12288xi8>, %layer: index) {
  sits.ukernel.kivi_write ins(%k, %v, %s : memref<2x2x3x16xf32, strided<[192, 16, 64, 1]>>,
      memref<2x2x3x16xf32, strided<[192, 16, 64, 1]>>, memref<2x3xi64>)
      layer(%layer) outs(%pool : memref<5x12288xi8>) {kivi = array<i64: 4, 2, 2, 4>}
  return
}

// -----

func.func @strided_pool(%k: memref<2x2x3x16xf32>, %v: memref<2x2x3x16xf32>, %s: memref<2x3xi64>,
                        %pool: memref<5x12288xi8, strided<[24576, 1]>>, %layer: index) {
  // expected-error @+1 {{'sits.ukernel.kivi_write' op needs a KIVI pool in the identity layout}}
  sits.ukernel.kivi_write ins(%k, %v, %s : memref<2x2x3x16xf32>, memref<2x2x3x16xf32>, memref<2x3xi64>)
      layer(%layer) outs(%pool : memref<5x12288xi8, strided<[24576, 1]>>) {kivi = array<i64: 4, 2, 2, 4>}
  return
}
