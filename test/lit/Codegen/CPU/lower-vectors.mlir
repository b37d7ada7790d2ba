// The cache level of streamed rows' prefetches is the target's (L2 on AMD
// Zen hosts): pinned here, so that the checks hold on every host.
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-cpu-lower-vectors{prefetch-cache-level=1}))' | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-cpu-lower-vectors{prefetch-cache-level=2}))' | FileCheck %s --check-prefix=L2
// RUN: not sits-opt %s --pass-pipeline='builtin.module(func.func(sits-cpu-lower-vectors{prefetch-cache-level=3}))' 2>&1 | FileCheck %s --check-prefix=BAD

// BAD: error: prefetch-cache-level must be 0 (the target's), 1 or 2, not 3

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

// A register tile streaming its weights (sits.streamed, a decode step):
// each step of 8 panel rows (1 KiB) requests the 16 cache lines 4 KiB
// (32 rows) ahead in the panel, the row index clamped to the panel's last
// row.
// CHECK-LABEL: func.func @streamed_panel
//   CHECK-DAG:   %[[LAST:.+]] = arith.constant 63 : index
//   CHECK-DAG:   %[[DIST:.+]] = arith.constant 32 : index
//       CHECK:   scf.for %[[K:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
//       CHECK:     %[[AHEAD:.+]] = arith.addi %[[K]], %[[DIST]] : index
//       CHECK:     %[[ROW:.+]] = arith.minui %[[AHEAD]], %[[LAST]] : index
//       CHECK:     memref.prefetch %arg1[%arg3, %[[ROW]], %{{.+}}], read, locality<3>, data : memref<4x64x32xf32>
// CHECK-COUNT-15:  memref.prefetch %arg1
//   CHECK-NOT:     memref.prefetch
//       CHECK:     vector.fma
// Into L2 (prefetcht1), the same lines at the same distance.
// L2-LABEL: func.func @streamed_panel
// L2-COUNT-16:   memref.prefetch %arg1[{{.+}}], read, locality<2>, data : memref<4x64x32xf32>
//   L2-NOT:      memref.prefetch
//       L2:      vector.fma
func.func @streamed_panel(%a: memref<64xf32>, %w: memref<4x64x32xf32>, %acc: vector<1x32xf32>, %p: index) -> vector<1x32xf32> {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %f0 = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %c64 step %c8 iter_args(%c = %acc) -> (vector<1x32xf32>) {
    %sa = memref.subview %a[%k] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1], offset: ?>>
    %sw = memref.subview %w[%p, %k, 0] [1, 8, 32] [1, 1, 1] : memref<4x64x32xf32> to memref<8x32xf32, strided<[32, 1], offset: ?>>
    %va = vector.transfer_read %sa[%c0], %f0 {in_bounds = [true]} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
    %vw = vector.transfer_read %sw[%c0, %c0], %f0 {in_bounds = [true, true]} : memref<8x32xf32, strided<[32, 1], offset: ?>>, vector<8x32xf32>
    %va2 = vector.shape_cast %va : vector<8xf32> to vector<1x8xf32>
    %n = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va2, %vw, %c : vector<1x8xf32>, vector<8x32xf32> into vector<1x32xf32>
    scf.yield %n : vector<1x32xf32>
  } {sits.streamed}
  return %r : vector<1x32xf32>
}

// INT8 codes widened for the contraction stream the same way: the codes'
// panel (32 bytes a row) is requested 4 KiB (128 rows) ahead, one request
// per cache line of the step's 8 rows.
// CHECK-LABEL: func.func @streamed_int8_panel
//   CHECK-DAG:   %[[LAST8:.+]] = arith.constant 63 : index
//   CHECK-DAG:   %[[DIST8:.+]] = arith.constant 128 : index
//       CHECK:   scf.for %[[K8:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args
//       CHECK:     %[[AHEAD8:.+]] = arith.addi %[[K8]], %[[DIST8]] : index
//       CHECK:     %[[ROW8:.+]] = arith.minui %[[AHEAD8]], %[[LAST8]] : index
//       CHECK:     memref.prefetch %arg1[%arg3, %[[ROW8]], %{{.+}}], read, locality<3>, data : memref<4x64x32xi8>
// CHECK-COUNT-3:   memref.prefetch %arg1
//   CHECK-NOT:     memref.prefetch
//       CHECK:     arith.sitofp
func.func @streamed_int8_panel(%a: memref<64xf32>, %w: memref<4x64x32xi8>, %acc: vector<1x32xf32>, %p: index) -> vector<1x32xf32> {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %f0 = arith.constant 0.0 : f32
  %i0 = arith.constant 0 : i8
  %r = scf.for %k = %c0 to %c64 step %c8 iter_args(%c = %acc) -> (vector<1x32xf32>) {
    %sa = memref.subview %a[%k] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1], offset: ?>>
    %sw = memref.subview %w[%p, %k, 0] [1, 8, 32] [1, 1, 1] : memref<4x64x32xi8> to memref<8x32xi8, strided<[32, 1], offset: ?>>
    %va = vector.transfer_read %sa[%c0], %f0 {in_bounds = [true]} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
    %vq = vector.transfer_read %sw[%c0, %c0], %i0 {in_bounds = [true, true]} : memref<8x32xi8, strided<[32, 1], offset: ?>>, vector<8x32xi8>
    %vw = arith.sitofp %vq : vector<8x32xi8> to vector<8x32xf32>
    %va2 = vector.shape_cast %va : vector<8xf32> to vector<1x8xf32>
    %n = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va2, %vw, %c : vector<1x8xf32>, vector<8x32xf32> into vector<1x32xf32>
    scf.yield %n : vector<1x32xf32>
  } {sits.streamed}
  return %r : vector<1x32xf32>
}

// The same loop unmarked (a tile whose weights stay in cache): nothing is
// prefetched.
// CHECK-LABEL: func.func @cached_panel
//   CHECK-NOT:   memref.prefetch
//       CHECK:   return
func.func @cached_panel(%a: memref<64xf32>, %w: memref<4x64x32xf32>, %acc: vector<1x32xf32>, %p: index) -> vector<1x32xf32> {
  %c0 = arith.constant 0 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %f0 = arith.constant 0.0 : f32
  %r = scf.for %k = %c0 to %c64 step %c8 iter_args(%c = %acc) -> (vector<1x32xf32>) {
    %sa = memref.subview %a[%k] [8] [1] : memref<64xf32> to memref<8xf32, strided<[1], offset: ?>>
    %sw = memref.subview %w[%p, %k, 0] [1, 8, 32] [1, 1, 1] : memref<4x64x32xf32> to memref<8x32xf32, strided<[32, 1], offset: ?>>
    %va = vector.transfer_read %sa[%c0], %f0 {in_bounds = [true]} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
    %vw = vector.transfer_read %sw[%c0, %c0], %f0 {in_bounds = [true, true]} : memref<8x32xf32, strided<[32, 1], offset: ?>>, vector<8x32xf32>
    %va2 = vector.shape_cast %va : vector<8xf32> to vector<1x8xf32>
    %n = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va2, %vw, %c : vector<1x8xf32>, vector<8x32xf32> into vector<1x32xf32>
    scf.yield %n : vector<1x32xf32>
  }
  return %r : vector<1x32xf32>
}

// Rows counted at run time, in blocks (sits.first_streams): the first
// block reads the weights from memory and the others from cache, so the
// K loop is taken in a prefetching copy on the first block only, chosen
// outside the loop.
// CHECK-LABEL: func.func @row_blocks
//       CHECK:   scf.for %[[R:.+]] = %[[LB:.+]] to %{{.+}} step %{{.+}} {
//       CHECK:     %[[FIRST:.+]] = arith.cmpi eq, %[[R]], %[[LB]] : index
//       CHECK:     scf.if %[[FIRST]] -> (vector<1x32xf32>) {
//       CHECK:       scf.for
//       CHECK:         memref.prefetch
//       CHECK:     } else {
//       CHECK:       scf.for
//   CHECK-NOT:         memref.prefetch
//       CHECK:       } {sits.first_streams}
func.func @row_blocks(%a: memref<?x64xf32>, %w: memref<4x64x32xf32>, %out: memref<?x32xf32>, %p: index, %rows: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %f0 = arith.constant 0.0 : f32
  %zero = arith.constant dense<0.0> : vector<1x32xf32>
  scf.for %m = %c0 to %rows step %c1 {
    %r = scf.for %k = %c0 to %c64 step %c8 iter_args(%c = %zero) -> (vector<1x32xf32>) {
      %sa = memref.subview %a[%m, %k] [1, 8] [1, 1] : memref<?x64xf32> to memref<8xf32, strided<[1], offset: ?>>
      %sw = memref.subview %w[%p, %k, 0] [1, 8, 32] [1, 1, 1] : memref<4x64x32xf32> to memref<8x32xf32, strided<[32, 1], offset: ?>>
      %va = vector.transfer_read %sa[%c0], %f0 {in_bounds = [true]} : memref<8xf32, strided<[1], offset: ?>>, vector<8xf32>
      %vw = vector.transfer_read %sw[%c0, %c0], %f0 {in_bounds = [true, true]} : memref<8x32xf32, strided<[32, 1], offset: ?>>, vector<8x32xf32>
      %va2 = vector.shape_cast %va : vector<8xf32> to vector<1x8xf32>
      %n = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va2, %vw, %c : vector<1x8xf32>, vector<8x32xf32> into vector<1x32xf32>
      scf.yield %n : vector<1x32xf32>
    } {sits.streamed}
    %v = vector.shape_cast %r : vector<1x32xf32> to vector<32xf32>
    vector.transfer_write %v, %out[%m, %c0] {in_bounds = [true]} : vector<32xf32>, memref<?x32xf32>
  } {sits.first_streams}
  return
}

// K innermost in both operands (attention's scores): each output is the
// product of two K-long rows summed by one reassociable reduction, with no
// transpose of the rhs.
// CHECK-LABEL: func.func @contiguous_k
//  CHECK-SAME:   (%[[Q:.+]]: vector<64xf32>, %[[K:.+]]: vector<2x64xf32>, %[[C:.+]]: vector<2xf32>)
//       CHECK:   %[[K0:.+]] = vector.extract %[[K]][0] : vector<64xf32> from vector<2x64xf32>
//       CHECK:   %[[P0:.+]] = arith.mulf %[[Q]], %[[K0]] fastmath<reassoc,contract> : vector<64xf32>
//       CHECK:   %[[C0:.+]] = vector.extract %[[C]][0] : f32 from vector<2xf32>
//       CHECK:   vector.reduction <add>, %[[P0]], %[[C0]] fastmath<reassoc,contract> : vector<64xf32> into f32
//       CHECK:   %[[K1:.+]] = vector.extract %[[K]][1] : vector<64xf32> from vector<2x64xf32>
//       CHECK:   arith.mulf %[[Q]], %[[K1]] fastmath<reassoc,contract> : vector<64xf32>
//       CHECK:   vector.reduction <add>
//   CHECK-NOT:   vector.transpose
//   CHECK-NOT:   vector.contract
func.func @contiguous_k(%q: vector<64xf32>, %k: vector<2x64xf32>, %c: vector<2xf32>) -> vector<2xf32> {
  %0 = vector.contract {indexing_maps = [affine_map<(n, k) -> (k)>, affine_map<(n, k) -> (n, k)>, affine_map<(n, k) -> (n)>], iterator_types = ["parallel", "reduction"], kind = #vector.kind<add>} %q, %k, %c : vector<64xf32>, vector<2x64xf32> into vector<2xf32>
  return %0 : vector<2xf32>
}

// With rows (a prompt's queries): one reduction per (row, key).
// CHECK-LABEL: func.func @contiguous_k_rows
// CHECK-COUNT-6:   vector.reduction <add>
//   CHECK-NOT:   vector.contract
func.func @contiguous_k_rows(%q: vector<2x32xf32>, %k: vector<3x32xf32>, %c: vector<2x3xf32>) -> vector<2x3xf32> {
  %0 = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (n, k)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %q, %k, %c : vector<2x32xf32>, vector<3x32xf32> into vector<2x3xf32>
  return %0 : vector<2x3xf32>
}

// A 16 x 16 f32 transpose (a block of a convolution's accumulator read
// back as NCHW) is unpacks and lane shuffles of whole rows, not one
// extract and insert per element.
// CHECK-LABEL: func.func @transpose_16x16
// CHECK-COUNT-64:   vector.shuffle {{.+}} : vector<16xf32>, vector<16xf32>
//   CHECK-NOT:   vector.shuffle
//   CHECK-NOT:   vector.transpose
//   CHECK-NOT:   vector.extract {{.+}} : f32 from
func.func @transpose_16x16(%a: vector<16x16xf32>) -> vector<16x16xf32> {
  %t = vector.transpose %a, [1, 0] : vector<16x16xf32> to vector<16x16xf32>
  return %t : vector<16x16xf32>
}

// Other shapes keep the element-wise lowering.
// CHECK-LABEL: func.func @transpose_8x16
//       CHECK:   vector.extract {{.+}} : f32 from vector<8x16xf32>
//   CHECK-NOT:   vector.shuffle
func.func @transpose_8x16(%a: vector<8x16xf32>) -> vector<16x8xf32> {
  %t = vector.transpose %a, [1, 0] : vector<8x16xf32> to vector<16x8xf32>
  return %t : vector<16x8xf32>
}

// A gather from a buffer with a non-unit innermost stride (a strided slice
// read at run-time indices): LLVM's masked gather cannot address it, so
// each lane loads at its delinearized position under its mask bit.
// CHECK-LABEL: func.func @strided_gather
// CHECK-NOT: vector.gather
// CHECK: affine.linearize_index
// CHECK-COUNT-2: scf.if
// CHECK: affine.delinearize_index
// CHECK: memref.load %{{.+}} : memref<?x?xf32, strided<[?, 2], offset: ?>>
// CHECK: vector.insert
func.func @strided_gather(%m: memref<?x?xf32, strided<[?, 2], offset: ?>>,
                          %i: index, %idx: vector<2xindex>,
                          %mask: vector<2xi1>, %pass: vector<2xf32>) -> vector<2xf32> {
  %c0 = arith.constant 0 : index
  %g = vector.gather %m[%i, %c0] [%idx], %mask, %pass
      : memref<?x?xf32, strided<[?, 2], offset: ?>>, vector<2xindex>, vector<2xi1>, vector<2xf32> into vector<2xf32>
  return %g : vector<2xf32>
}

// A unit innermost stride keeps the gather (LLVM's masked gather).
// CHECK-LABEL: func.func @unit_stride_gather
// CHECK: vector.gather
func.func @unit_stride_gather(%m: memref<?x?xf32>, %idx: vector<2xindex>,
                              %mask: vector<2xi1>, %pass: vector<2xf32>) -> vector<2xf32> {
  %c0 = arith.constant 0 : index
  %g = vector.gather %m[%c0, %c0] [%idx], %mask, %pass
      : memref<?x?xf32>, vector<2xindex>, vector<2xi1>, vector<2xf32> into vector<2xf32>
  return %g : vector<2xf32>
}
