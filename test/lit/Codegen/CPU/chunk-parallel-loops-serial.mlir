// RUN: sits-opt %s --split-input-file --sits-cpu-chunk-parallel-loops="num-threads=2 chunks-per-thread=2 serial-work=4096" | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-cpu-chunk-parallel-loops="num-threads=2 chunks-per-thread=2 serial-work=4096" --canonicalize | FileCheck %s --check-prefix=FOLD

// Loops too small to pay for handing out chunks run as one chunk (the
// runtime runs a single chunk on the calling thread).

// One store per iteration over a run-time extent: the chunk count becomes 1
// when the iterations add up to fewer than 4096 operations.
// CHECK-LABEL: func.func @dynamic_small
//  CHECK-SAME:   (%{{.+}}: memref<?xf32>, %[[N:.+]]: index)
//       CHECK:   %[[TOTAL:.+]] = arith.maxsi %[[N]], %{{.+}}
//       CHECK:   %[[CHUNKS:.+]] = arith.minsi %[[TOTAL]], %{{.+}}
//       CHECK:   %[[SMALL:.+]] = arith.cmpi ult, %[[TOTAL]], %{{.+}}
//       CHECK:   %[[COUNT:.+]] = arith.select %[[SMALL]], %{{.+}}, %[[CHUNKS]]
//       CHECK:   scf.parallel (%{{.+}}) = (%{{.+}}) to (%[[COUNT]]) step (%{{.+}})
func.func @dynamic_small(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %one, %m[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// -----

// 8 iterations of a 64-step loop of stores (about 8 x 130 operations): one
// chunk, statically, which folds into a plain loop nest.
// CHECK-LABEL: func.func @static_small
//   CHECK-NOT:   arith.select
// FOLD-LABEL: func.func @static_small
//   FOLD-NOT:   scf.parallel
//       FOLD:   scf.for
//       FOLD:     scf.for
//       FOLD:       memref.store
func.func @static_small(%m: memref<8x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c64 = arith.constant 64 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    scf.for %j = %c0 to %c64 step %c1 {
      memref.store %one, %m[%i, %j] : memref<8x64xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A tile's inner loop bounded by affine.min (at most 16 iterations) still
// has a known bound: the select is emitted.
// CHECK-LABEL: func.func @bounded_tile
//       CHECK:   arith.cmpi ult
//       CHECK:   arith.select
//       CHECK:   scf.parallel
#tile = affine_map<(d0)[s0] -> (-d0 + s0, 16)>
func.func @bounded_tile(%m: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c16 = arith.constant 16 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c16) {
    %size = affine.min #tile(%i)[%n]
    scf.for %j = %c0 to %size step %c1 {
      %k = arith.addi %i, %j : index
      memref.store %one, %m[%k] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// -----

// Work that depends on an unbounded run-time extent inside (a loop to %n),
// or that is large (8192 steps per iteration), keeps the plain chunking.
// CHECK-LABEL: func.func @unknown_work
//   CHECK-NOT:   arith.select
//       CHECK:   scf.parallel
// CHECK-LABEL: func.func @large_work
//   CHECK-NOT:   arith.select
//       CHECK:   scf.parallel
func.func @unknown_work(%m: memref<?x?xf32>, %rows: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%rows) step (%c1) {
    scf.for %j = %c0 to %n step %c1 {
      memref.store %one, %m[%i, %j] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}
func.func @large_work(%m: memref<?x8192xf32>, %rows: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8192 = arith.constant 8192 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%rows) step (%c1) {
    scf.for %j = %c0 to %c8192 step %c1 {
      memref.store %one, %m[%i, %j] : memref<?x8192xf32>
    }
    scf.reduce
  }
  return
}

// -----

// A copy of a statically shaped row (the halves of a rotary embedding's
// concatenation: 32 f32, two cache lines) costs the lines it moves, so the
// run-time select is emitted; a copy of a run-time shape has no estimate.
// CHECK-LABEL: func.func @static_copy
//       CHECK:   arith.cmpi ult
//       CHECK:   arith.select
//       CHECK:   scf.parallel
//       CHECK:     memref.copy
// CHECK-LABEL: func.func @dynamic_copy
//   CHECK-NOT:   arith.select
//       CHECK:   scf.parallel
func.func @static_copy(%src: memref<?x8x?x32xf32>, %dst: memref<?x8x?x32xf32, strided<[?, ?, 64, 1]>>, %b: index, %t: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i, %h, %j) = (%c0, %c0, %c0) to (%b, %c8, %t) step (%c1, %c1, %c1) {
    %to = memref.subview %dst[%i, %h, %j, 0] [1, 1, 1, 32] [1, 1, 1, 1] : memref<?x8x?x32xf32, strided<[?, ?, 64, 1]>> to memref<32xf32, strided<[1], offset: ?>>
    %from = memref.subview %src[%i, %h, %j, 0] [1, 1, 1, 32] [1, 1, 1, 1] : memref<?x8x?x32xf32> to memref<32xf32, strided<[1], offset: ?>>
    memref.copy %from, %to : memref<32xf32, strided<[1], offset: ?>> to memref<32xf32, strided<[1], offset: ?>>
    scf.reduce
  }
  return
}
func.func @dynamic_copy(%src: memref<?x?xf32>, %dst: memref<?x?xf32>, %rows: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.parallel (%i) = (%c0) to (%rows) step (%c1) {
    %from = memref.subview %src[%i, 0] [1, %n] [1, 1] : memref<?x?xf32> to memref<?xf32, strided<[1], offset: ?>>
    %to = memref.subview %dst[%i, 0] [1, %n] [1, 1] : memref<?x?xf32> to memref<?xf32, strided<[1], offset: ?>>
    memref.copy %from, %to : memref<?xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
    scf.reduce
  }
  return
}
