// RUN: sits-opt %s --split-input-file --sits-cpu-drop-updated-results --verify-diagnostics | FileCheck %s

// A result marked sits.updates = i is argument i written in place: it is
// dropped, also when it reaches the return through loops and branches that
// pass the buffer along (what an in-place scatter bufferizes to).
// CHECK-LABEL: func.func @in_place
//  CHECK-SAME:   (%[[P:.+]]: memref<8x4xf32>, %[[X:.+]]: memref<4xf32>, %[[N:.+]]: index, %[[C:.+]]: i1) -> memref<4xf32>
//       CHECK:   scf.for
//       CHECK:     memref.copy %[[X]]
//   CHECK-NOT:   memref.copy
//       CHECK:   return %[[X]] : memref<4xf32>
func.func @in_place(%pool: memref<8x4xf32>, %x: memref<4xf32>, %n: index, %c: i1)
    -> (memref<4xf32>, memref<8x4xf32> {sits.updates = 0 : i64}) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%p = %pool) -> (memref<8x4xf32>) {
    %q = scf.if %c -> (memref<8x4xf32>) {
      %row = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<4xf32, strided<[1], offset: ?>>
      memref.copy %x, %row : memref<4xf32> to memref<4xf32, strided<[1], offset: ?>>
      scf.yield %p : memref<8x4xf32>
    } else {
      scf.yield %p : memref<8x4xf32>
    }
    scf.yield %q : memref<8x4xf32>
  }
  return %x, %r : memref<4xf32>, memref<8x4xf32>
}

// -----

// Not written in place (a new buffer is returned): the result is copied
// into the argument, with a remark, and dropped.
// CHECK-LABEL: func.func @copied
//  CHECK-SAME:   (%[[P:.+]]: memref<8x4xf32>) {
//       CHECK:   %[[NEW:.+]] = memref.alloc() : memref<8x4xf32>
//       CHECK:   memref.copy %[[NEW]], %[[P]]
//       CHECK:   return{{$}}
// expected-remark @+1 {{result #0 was not bufferized in place into argument #0; it is copied there}}
func.func @copied(%pool: memref<8x4xf32>) -> (memref<8x4xf32> {sits.updates = 0 : i64}) {
  %new = memref.alloc() : memref<8x4xf32>
  return %new : memref<8x4xf32>
}
