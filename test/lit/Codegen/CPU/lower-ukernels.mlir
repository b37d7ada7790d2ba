// RUN: sits-opt %s --sits-cpu-lower-ukernels --canonicalize | FileCheck %s
// RUN: sits-opt %s --sits-cpu-lower-ukernels --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// The integer dot-product contraction on buffers becomes one call of
// sitsRuntimeQDot: bits, M (the rows of the result), N (16 per column
// block), K (groups x group) and the group, then each buffer as the address
// of its first element and its row stride. Per-column weight scales have
// no row stride (0).

#x8 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3, d4, d5)>
#w8 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d3, d4, d2, d5)>
#sx8 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d3)>
#sw8 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d1, d2)>
#y8 = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d2)>

// CHECK-LABEL: func.func @int8
//  CHECK-SAME:   (%[[X:.+]]: memref<?x2x32x4xi8>, %[[W:.+]]: memref<2x2x32x16x4xi8>, %[[SX:.+]]: memref<?x2xf32>, %[[SW:.+]]: memref<2x16xf32>, %[[Y:.+]]: memref<?x2x16xf32, strided<[40, 16, 1], offset: 8>>)
//   CHECK-DAG:   %[[BITS:.+]] = arith.constant 8 : i64
//   CHECK-DAG:   %[[N:.+]] = arith.constant 32 : i64
//   CHECK-DAG:   %[[K:.+]] = arith.constant 256 : i64
//   CHECK-DAG:   %[[G:.+]] = arith.constant 128 : i64
//   CHECK-DAG:   %[[ZERO:.+]] = arith.constant 0 : i64
//   CHECK-DAG:   %[[TWO:.+]] = arith.constant 2 : i64
//   CHECK-DAG:   %[[FORTY:.+]] = arith.constant 40 : i64
//   CHECK-DAG:   %[[Y_OFFSET:.+]] = arith.constant 32 : index
//       CHECK:   %[[M:.+]] = arith.index_cast %{{.+}} : index to i64
//       CHECK:   %[[XA:.+]] = memref.extract_aligned_pointer_as_index %[[X]]
//       CHECK:   %[[XP:.+]] = llvm.inttoptr
//       CHECK:   %[[SXP:.+]] = llvm.inttoptr
//       CHECK:   %[[WP:.+]] = llvm.inttoptr
//       CHECK:   %[[SWP:.+]] = llvm.inttoptr
//       CHECK:   %[[YA:.+]] = memref.extract_aligned_pointer_as_index %[[Y]]
//       CHECK:   arith.addi %[[YA]], %[[Y_OFFSET]] : index
//       CHECK:   %[[YP:.+]] = llvm.inttoptr
//       CHECK:   call @sitsRuntimeQDot(%[[BITS]], %[[M]], %[[N]], %[[K]], %[[G]], %[[XP]], %[[K]], %[[SXP]], %[[TWO]], %[[WP]], %[[SWP]], %[[ZERO]], %[[YP]], %[[FORTY]])
//   CHECK-NOT:   linalg.generic
func.func @int8(%x: memref<?x2x32x4xi8>, %w: memref<2x2x32x16x4xi8>, %sx: memref<?x2xf32>, %sw: memref<2x16xf32>, %y: memref<?x2x16xf32, strided<[40, 16, 1], offset: 8>>) {
  linalg.generic {indexing_maps = [#x8, #w8, #sx8, #sw8, #y8], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w, %sx, %sw : memref<?x2x32x4xi8>, memref<2x2x32x16x4xi8>, memref<?x2xf32>, memref<2x16xf32>)
      outs(%y : memref<?x2x16xf32, strided<[40, 16, 1], offset: 8>>) attrs = {sits.ukernel = "qdot_i8"} {
  ^bb0(%a: i8, %b: i8, %c: f32, %d: f32, %e: f32):
    linalg.yield %e : f32
  }
  return
}

// A result whose rows are not contiguous inside (column blocks 32 apart)
// keeps its loops, and so does an op marked for an unknown kernel.
// CHECK-LABEL: func.func @left
//       CHECK:   linalg.generic {{.+}} attrs =  {sits.ukernel = "qdot_i8"}
//       CHECK:   linalg.generic {{.+}} attrs =  {sits.ukernel = "other"}
//   CHECK-NOT:   call
func.func @left(%x: memref<?x2x32x4xi8>, %w: memref<2x2x32x16x4xi8>, %sx: memref<?x2xf32>, %sw: memref<2x16xf32>, %y: memref<?x2x16xf32, strided<[64, 32, 1]>>, %z: memref<?x2x16xf32>) {
  linalg.generic {indexing_maps = [#x8, #w8, #sx8, #sw8, #y8], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w, %sx, %sw : memref<?x2x32x4xi8>, memref<2x2x32x16x4xi8>, memref<?x2xf32>, memref<2x16xf32>)
      outs(%y : memref<?x2x16xf32, strided<[64, 32, 1]>>) attrs = {sits.ukernel = "qdot_i8"} {
  ^bb0(%a: i8, %b: i8, %c: f32, %d: f32, %e: f32):
    linalg.yield %e : f32
  }
  linalg.generic {indexing_maps = [#x8, #w8, #sx8, #sw8, #y8], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%x, %w, %sx, %sw : memref<?x2x32x4xi8>, memref<2x2x32x16x4xi8>, memref<?x2xf32>, memref<2x16xf32>)
      outs(%z : memref<?x2x16xf32>) attrs = {sits.ukernel = "other"} {
  ^bb0(%a: i8, %b: i8, %c: f32, %d: f32, %e: f32):
    linalg.yield %e : f32
  }
  return
}

// CHECK: func.func private @sitsRuntimeQDot(i64, i64, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64)

// STATS: (S) 1 num-calls
// STATS: (S) 2 num-left
