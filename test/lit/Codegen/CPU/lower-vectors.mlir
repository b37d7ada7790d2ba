// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-cpu-lower-vectors))' | FileCheck %s

// f16 operands accumulating in f32 are extended first: the outer-product
// lowering takes one element type, and the sums are f32 as specified.
// CHECK-LABEL: func.func @mixed_contract
//   CHECK-DAG:   arith.extf %{{.+}} : vector<2x4xf16> to vector<2x4xf32>
//   CHECK-DAG:   arith.extf %{{.+}} : vector<4x8xf16> to vector<4x8xf32>
//       CHECK:   vector.fma {{.+}} : vector<8xf32>
//   CHECK-NOT:   vector.contract
func.func @mixed_contract(%a: vector<2x4xf16>, %b: vector<4x8xf16>, %c: vector<2x8xf32>) -> vector<2x8xf32> {
  %0 = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %a, %b, %c : vector<2x4xf16>, vector<4x8xf16> into vector<2x8xf32>
  return %0 : vector<2x8xf32>
}

// A past KV cache joined to its present: the heads' [512, 64] blocks are
// contiguous in both buffers, 1.5 MiB in all: a parallel loop over the
// heads, one contiguous copy (a memcpy) each.
// CHECK-LABEL: func.func @kv_join
//       CHECK:   scf.parallel (%[[B:.+]], %[[H:.+]]) = (%c0, %c0) to (%c1, %c12) step (%c1, %c1)
//       CHECK:     %[[DST:.+]] = memref.subview %arg1[%[[B]], %[[H]], 0, 0] [1, 1, 512, 64] [1, 1, 1, 1] {{.+}} to memref<512x64xf32, strided<[64, 1], offset: ?>>
//       CHECK:     %[[SRC:.+]] = memref.subview %arg0[%[[B]], %[[H]], 0, 0] [1, 1, 512, 64] [1, 1, 1, 1] {{.+}} to memref<512x64xf32, strided<[64, 1], offset: ?>>
//       CHECK:     memref.copy %[[SRC]], %[[DST]]
//   CHECK-NOT:   linalg.copy
func.func @kv_join(%past: memref<1x12x512x64xf32>, %present: memref<1x12x512x64xf32, strided<[393984, 32832, 64, 1]>>) {
  memref.copy %past, %present : memref<1x12x512x64xf32> to memref<1x12x512x64xf32, strided<[393984, 32832, 64, 1]>>
  return
}

// A small one (a block of a paged pool into a gathered context, dynamic
// head stride): a sequential loop of contiguous copies.
// CHECK-LABEL: func.func @block_copy
//       CHECK:   scf.for %[[H:.+]] = %c0 to %c4 step %c1
//       CHECK:     memref.copy {{.+}} : memref<16x64xf32, strided<[64, 1], offset: ?>> to memref<16x64xf32, strided<[64, 1], offset: ?>>
//   CHECK-NOT:   scf.parallel
func.func @block_copy(%block: memref<4x16x64xf32, strided<[1024, 64, 1], offset: ?>>, %context: memref<4x16x64xf32, strided<[?, 64, 1], offset: ?>>) {
  memref.copy %block, %context : memref<4x16x64xf32, strided<[1024, 64, 1], offset: ?>> to memref<4x16x64xf32, strided<[?, 64, 1], offset: ?>>
  return
}

// Innermost elements not adjacent (a transposing copy): element loops.
// CHECK-LABEL: func.func @transposing_copy
//       CHECK:   linalg.copy
func.func @transposing_copy(%a: memref<8x16xf32, strided<[1, 8]>>, %b: memref<8x16xf32>) {
  memref.copy %a, %b : memref<8x16xf32, strided<[1, 8]>> to memref<8x16xf32>
  return
}
