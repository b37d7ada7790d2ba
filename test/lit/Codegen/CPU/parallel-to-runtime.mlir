// RUN: sits-opt %s --sits-cpu-parallel-to-runtime --split-input-file | FileCheck %s

// A 2-D parallel loop becomes a call of the runtime's fork-join with its
// body outlined: the memref (as its descriptor), the float and the run-time
// trip count travel in a struct allocated in the caller's entry block; the
// constants are cloned into the body, which recovers (i, j) from the linear
// iteration, the last dimension fastest.
// CHECK-LABEL: func.func @scale(
//  CHECK-SAME:     %[[BUF:.+]]: memref<?x16xf32>, %[[N:.+]]: index, %[[S:.+]]: f32)
//       CHECK:   %[[ONE:.+]] = llvm.mlir.constant(1 : i64) : i64
//       CHECK:   %[[CTX:.+]] = llvm.alloca %[[ONE]] x !llvm.struct<(struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>, f32, i64)>
//       CHECK:   %[[TRIP:.+]] = arith.maxsi %[[N]], %{{.+}} : index
//       CHECK:   %[[TOTAL:.+]] = arith.muli %[[TRIP]], %{{.+}} : index
//       CHECK:   %[[DESC:.+]] = builtin.unrealized_conversion_cast %[[BUF]] : memref<?x16xf32> to !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
//       CHECK:   %[[F0:.+]] = llvm.getelementptr %[[CTX]][0, 0]
//       CHECK:   llvm.store %[[DESC]], %[[F0]]
//       CHECK:   %[[F1:.+]] = llvm.getelementptr %[[CTX]][0, 1]
//       CHECK:   llvm.store %[[S]], %[[F1]] : f32, !llvm.ptr
//       CHECK:   %[[TRIP64:.+]] = builtin.unrealized_conversion_cast %[[TRIP]] : index to i64
//       CHECK:   %[[F2:.+]] = llvm.getelementptr %[[CTX]][0, 2]
//       CHECK:   llvm.store %[[TRIP64]], %[[F2]] : i64, !llvm.ptr
//       CHECK:   %[[BODY:.+]] = constant @scale_parallel : (!llvm.ptr, i64) -> ()
//       CHECK:   %[[COUNT:.+]] = arith.index_cast %[[TOTAL]] : index to i64
//       CHECK:   call @sitsRuntimeParallelFor(%[[BODY]], %[[CTX]], %[[COUNT]])
//   CHECK-NOT:   scf.parallel
//       CHECK: func.func private @scale_parallel(%[[CTXARG:.+]]: !llvm.ptr, %[[I:.+]]: i64)
//       CHECK:   %[[C4:.+]] = arith.constant 4 : index
//       CHECK:   %[[G0:.+]] = llvm.getelementptr %[[CTXARG]][0, 0]
//       CHECK:   %[[L0:.+]] = llvm.load %[[G0]] : !llvm.ptr -> !llvm.struct<(ptr, ptr, i64, array<2 x i64>, array<2 x i64>)>
//       CHECK:   %[[M:.+]] = builtin.unrealized_conversion_cast %[[L0]] : {{.+}} to memref<?x16xf32>
//       CHECK:   %[[G1:.+]] = llvm.getelementptr %[[CTXARG]][0, 1]
//       CHECK:   %[[SCALE:.+]] = llvm.load %[[G1]] : !llvm.ptr -> f32
//       CHECK:   %[[LIN:.+]] = arith.index_cast %[[I]] : i64 to index
//       CHECK:   %[[J:.+]] = arith.remsi %[[LIN]], %[[C4]] : index
//       CHECK:   %[[II:.+]] = arith.divsi %[[LIN]], %[[C4]] : index
//       CHECK:   %[[V:.+]] = memref.load %[[M]][%[[II]], %[[J]]]
//       CHECK:   %[[W:.+]] = arith.mulf %[[V]], %[[SCALE]] : f32
//       CHECK:   memref.store %[[W]], %[[M]][%[[II]], %[[J]]]
//       CHECK:   return
//       CHECK: func.func private @sitsRuntimeParallelFor((!llvm.ptr, i64) -> (), !llvm.ptr, i64)
func.func @scale(%buf: memref<?x16xf32>, %n: index, %s: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%n, %c4) step (%c1, %c1) {
    %v = memref.load %buf[%i, %j] : memref<?x16xf32>
    %w = arith.mulf %v, %s : f32
    memref.store %w, %buf[%i, %j] : memref<?x16xf32>
    scf.reduce
  }
  return
}

// -----

// Only outermost loops are outlined, each into a body of its own: an inner
// parallel loop runs inside its outer loop's body (sequentially, once
// scf-to-cf lowers it), and a second loop of the same function gets the
// next name.
// CHECK-LABEL: func.func @nested(
//       CHECK:   call @sitsRuntimeParallelFor
//       CHECK:   call @sitsRuntimeParallelFor
//       CHECK: func.func private @nested_parallel_0(
//       CHECK: func.func private @nested_parallel(
//       CHECK:   scf.parallel
func.func @nested(%buf: memref<4x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    scf.parallel (%j) = (%c0) to (%c8) step (%c1) {
      memref.store %zero, %buf[%i, %j] : memref<4x8xf32>
      scf.reduce
    }
    scf.reduce
  }
  scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
    memref.store %zero, %buf[%i, %c0] : memref<4x8xf32>
    scf.reduce
  }
  return
}

// -----

// A loop with reductions is left as it is (scf-to-cf runs it sequentially).
// CHECK-LABEL: func.func @sum(
//       CHECK:   scf.parallel
//   CHECK-NOT:   sitsRuntimeParallelFor
func.func @sum(%buf: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %r = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%zero) -> f32 {
    %v = memref.load %buf[%i] : memref<8xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %r : f32
}
