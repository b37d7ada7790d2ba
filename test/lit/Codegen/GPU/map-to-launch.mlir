// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-map-to-launch))' --verify-diagnostics | FileCheck %s

// A block loop becomes a launch over a 1-D grid (16 blocks of the larger
// thread loop's 256 threads). The row sums the two thread loops share are a
// workgroup attribution; the first thread loop (4 threads) is predicated,
// and a barrier follows each. A thread's scratch buffer is a stack buffer.

// CHECK-LABEL: func.func @rows
//       CHECK:   %[[C16:.+]] = arith.constant 16 : index
//       CHECK:   %[[C256:.+]] = arith.constant 256 : index
//       CHECK:   gpu.launch blocks(%[[BX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[C16]], %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads(%{{.+}}) in (%{{.+}} = %[[C256]], %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) workgroup(%[[SUM:.+]] : memref<4xf32, #gpu.address_space<workgroup>>)
//       CHECK:     %[[B:.+]] = affine.delinearize_index %[[BX]] into (16)
//       CHECK:     %[[ROW0:.+]] = affine.apply #{{.+}}()[%[[B]]]
//       CHECK:     %[[TID:.+]] = gpu.thread_id x
//       CHECK:     %[[ACTIVE:.+]] = arith.cmpi ult, %{{.+}}, %c4
//       CHECK:     scf.if %[[ACTIVE]] {
//       CHECK:       memref.alloca() : memref<4xf32>
//       CHECK:       memref.store %{{.+}}, %[[SUM]][%{{.+}}]
//       CHECK:     }
//       CHECK:     gpu.barrier
//   CHECK-NOT:     scf.if
//       CHECK:     memref.load %[[SUM]]
//       CHECK:     gpu.barrier
//       CHECK:     gpu.terminator
//   CHECK-NOT:   scf.forall
func.func @rows(%in: memref<64x256xf32>, %out: memref<64x256xf32>) {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  scf.forall (%b) = (0) to (64) step (4) {
    %sum = memref.alloc() : memref<4xf32, #gpu.address_space<workgroup>>
    scf.forall (%r) in (4) {
      %scratch = memref.alloc() : memref<4xf32>
      memref.store %zero, %scratch[%c0] : memref<4xf32>
      %v = memref.load %scratch[%c0] : memref<4xf32>
      memref.store %v, %sum[%r] : memref<4xf32, #gpu.address_space<workgroup>>
      memref.dealloc %scratch : memref<4xf32>
    } {mapping = [#gpu.thread<linear_dim_0>]}
    scf.forall (%r, %c) in (4, 64) {
      %row = arith.addi %b, %r : index
      %s = memref.load %sum[%r] : memref<4xf32, #gpu.address_space<workgroup>>
      %x = memref.load %in[%row, %c] : memref<64x256xf32>
      %y = arith.subf %x, %s : f32
      memref.store %y, %out[%row, %c] : memref<64x256xf32>
    } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
    memref.dealloc %sum : memref<4xf32, #gpu.address_space<workgroup>>
  } {mapping = [#gpu.block<linear_dim_0>]}
  return
}

// -----

// Writes of a block outside its thread loops run on thread 0 (every thread
// would repeat them otherwise), and the block waits for them.

// CHECK-LABEL: func.func @block_write
//       CHECK:   gpu.launch
//       CHECK:     %[[TID:.+]] = gpu.thread_id x
//       CHECK:     %[[FIRST:.+]] = arith.cmpi eq, %[[TID]], %c0
//       CHECK:     scf.if %[[FIRST]] {
//       CHECK:       memref.store %{{.+}}, %{{.+}}[%{{.+}}] : memref<8xf32>
//       CHECK:     }
//       CHECK:     gpu.barrier
//       CHECK:     memref.store %{{.+}}, %{{.+}}[%{{.+}}, %{{.+}}] : memref<8x32xf32>
func.func @block_write(%out: memref<8xf32>, %rows: memref<8x32xf32>) {
  %one = arith.constant 1.0 : f32
  scf.forall (%b) in (8) {
    memref.store %one, %out[%b] : memref<8xf32>
    scf.forall (%t) in (32) {
      memref.store %one, %rows[%b, %t] : memref<8x32xf32>
    } {mapping = [#gpu.thread<linear_dim_0>]}
  } {mapping = [#gpu.block<linear_dim_0>]}
  return
}

// -----

// An op no block loop covers runs in a kernel of one thread.

// CHECK-LABEL: func.func @straggler
//       CHECK:   gpu.launch blocks({{.+}}) in (%{{.+}} = %[[ONE:.+]], %{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]]) threads({{.+}}) in (%{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]])
//       CHECK:     linalg.copy
//       CHECK:     gpu.terminator
func.func @straggler(%in: memref<?xf32>, %out: memref<?xf32>) {
  // expected-remark @below {{runs in a GPU kernel of one thread: it was not distributed over blocks}}
  linalg.copy ins(%in : memref<?xf32>) outs(%out : memref<?xf32>)
  return
}

// -----

// More threads than a GPU block has is an error, not an invalid launch.

func.func @too_many_threads(%out: memref<2048xf32>) {
  %one = arith.constant 1.0 : f32
  // expected-error @below {{a block of 2048 threads: more than the 1024 a GPU runs}}
  scf.forall (%b) in (1) {
    scf.forall (%t) in (2048) {
      memref.store %one, %out[%t] : memref<2048xf32>
    } {mapping = [#gpu.thread<linear_dim_0>]}
  } {mapping = [#gpu.block<linear_dim_0>]}
  return
}

// -----

// A host loop that reads and writes buffers through run-time indices (the
// paged KV pool's slot writes: a scatter no block loop expresses) runs
// whole in a kernel of one thread, its index loads included.

// CHECK-LABEL: func.func @scatter
//       CHECK:   gpu.launch blocks({{.+}}) in (%{{.+}} = %[[ONE:.+]], %{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]]) threads({{.+}}) in (%{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]], %{{.+}} = %[[ONE]])
//       CHECK:     scf.for
//       CHECK:       memref.load %{{.+}} : memref<?xi64>
//       CHECK:       scf.if
//       CHECK:         memref.store
//       CHECK:     gpu.terminator
//   CHECK-NOT:   scf.for
func.func @scatter(%slots: memref<?xi64>, %rows: memref<?xf32>, %pool: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c0_i64 = arith.constant 0 : i64
  %c64 = arith.constant 64 : i64
  %n = memref.dim %slots, %c0 : memref<?xi64>
  // expected-remark @below {{runs in a GPU kernel of one thread: a host loop over buffers}}
  scf.for %i = %c0 to %n step %c1 {
    %slot = memref.load %slots[%i] : memref<?xi64>
    %ge = arith.cmpi sge, %slot, %c0_i64 : i64
    %lt = arith.cmpi slt, %slot, %c64 : i64
    %ok = arith.andi %ge, %lt : i1
    scf.if %ok {
      %at = arith.index_cast %slot : i64 to index
      %v = memref.load %rows[%i] : memref<?xf32>
      memref.store %v, %pool[%at] : memref<64xf32>
    }
  }
  return
}

// -----

// A parallel loop the tiling left unmapped (the gather of each sequence's
// blocks through its table) gets a block per iteration, its first
// dimension varying slowest; four warps share its statically shaped copy.

// CHECK-LABEL: func.func @gather
//       CHECK:   %[[GRID:.+]] = affine.apply #{{.+}}()[%{{.+}}]
//       CHECK:   %[[C128:.+]] = arith.constant 128 : index
//       CHECK:   gpu.launch blocks(%[[BX:.+]], %{{.+}}, %{{.+}}) in (%{{.+}} = %[[GRID]], %{{.+}} = %c1{{.*}}, %{{.+}} = %c1{{.*}}) threads(%{{.+}}) in (%{{.+}} = %[[C128]],
//       CHECK:     %[[IDS:.+]]:2 = affine.delinearize_index %[[BX]] into (%{{.+}}, 4)
//       CHECK:     memref.load %{{.+}}[%[[IDS]]#0, %[[IDS]]#1] : memref<?x4xi32>
//   CHECK-NOT:     scf.if
//       CHECK:     linalg.copy {sits_cooperative}
//   CHECK-NOT:   scf.forall
func.func @gather(%tables: memref<?x4xi32>, %pool: memref<16x8xf32>, %out: memref<?x4x8xf32>) {
  %c0 = arith.constant 0 : index
  %b = memref.dim %tables, %c0 : memref<?x4xi32>
  scf.forall (%i, %j) in (%b, 4) {
    %entry = memref.load %tables[%i, %j] : memref<?x4xi32>
    %block = arith.index_cast %entry : i32 to index
    %src = memref.subview %pool[%block, 0] [1, 8] [1, 1] : memref<16x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %dst = memref.subview %out[%i, %j, 0] [1, 1, 8] [1, 1, 1] : memref<?x4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    memref.copy %src, %dst : memref<8xf32, strided<[1], offset: ?>> to memref<8xf32, strided<[1], offset: ?>>
  }
  return
}

// -----

// A gather whose block has a dynamic shape keeps its copy on one thread.

// CHECK-LABEL: func.func @gather_dynamic
//       CHECK:   gpu.launch
//       CHECK:     scf.if
//       CHECK:       memref.copy
func.func @gather_dynamic(%tables: memref<?x4xi32>, %pool: memref<16x?xf32>, %out: memref<?x4x?xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = memref.dim %tables, %c0 : memref<?x4xi32>
  %w = memref.dim %pool, %c1 : memref<16x?xf32>
  scf.forall (%i, %j) in (%b, 4) {
    %entry = memref.load %tables[%i, %j] : memref<?x4xi32>
    %block = arith.index_cast %entry : i32 to index
    %src = memref.subview %pool[%block, 0] [1, %w] [1, 1] : memref<16x?xf32> to memref<?xf32, strided<[1], offset: ?>>
    %dst = memref.subview %out[%i, %j, 0] [1, 1, %w] [1, 1, 1] : memref<?x4x?xf32> to memref<?xf32, strided<[1], offset: ?>>
    memref.copy %src, %dst : memref<?xf32, strided<[1], offset: ?>> to memref<?xf32, strided<[1], offset: ?>>
  }
  return
}
