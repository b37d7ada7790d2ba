// RUN: sits-opt %s --split-input-file --sits-outline-kernels --mlir-pass-statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// Two layers: the same loop nest on other weights and buffers. Both become
// calls to one function; the weights, buffers and the dynamic size are its
// arguments, constants are cloned into it, and a small global read inside
// a loop is read outside and passed in (its symbol differs per layer).

// STATS:      (S) 3 num-functions
// STATS-NEXT: (S) 4 num-kernels
// STATS:      (S) 1 num-functions
// STATS-NEXT: (S) 2 num-kernels
// STATS:      (S) 3 num-functions
// STATS-NEXT: (S) 4 num-kernels
// STATS:      (S) 1 num-functions
// STATS-NEXT: (S) 2 num-kernels

// CHECK-LABEL: func.func @main
//  CHECK-SAME: (%[[WB:.+]]: memref<?xi8>, %[[X:.+]]: memref<?x64xf32>, %[[Y:.+]]: memref<?x64xf32>, %[[Z:.+]]: memref<?x64xf32>)
//       CHECK:   %[[N:.+]] = memref.dim %[[X]]
//       CHECK:   %[[W0:.+]] = memref.view %[[WB]]
//       CHECK:   %[[W1:.+]] = memref.view %[[WB]]
//       CHECK:   %[[G0:.+]] = memref.get_global @norm0
//       CHECK:   call @main_kernel_0(%[[N]], %[[G0]], %[[Y]], %[[X]], %[[W0]])
//       CHECK:   %[[G1:.+]] = memref.get_global @norm1
//       CHECK:   call @main_kernel_0(%[[N]], %[[G1]], %[[Z]], %[[Y]], %[[W1]])
//       CHECK:   %[[S:.+]] = call @main_kernel_2(%[[N]], %[[Z]])
//       CHECK:   call @main_kernel_3(%[[Z]], %[[S]])
//       CHECK:   return
//   CHECK-NOT: @main_kernel_1

// CHECK-LABEL: func.func private @main_kernel_0
//  CHECK-SAME: (%[[N:.+]]: index, %[[G:.+]]: memref<64xf32>, %[[OUT:.+]]: memref<?x64xf32>, %[[IN:.+]]: memref<?x64xf32>, %[[W:.+]]: memref<64x64xf32>)
//   CHECK-DAG:   %[[C0:.+]] = arith.constant 0.0
//       CHECK:   scf.forall (%{{.+}}) in (%[[N]])
//       CHECK:     memref.load %[[G]]
//       CHECK:     memref.store %[[C0]], %[[OUT]]
//       CHECK:     memref.subview %[[IN]]
//       CHECK:     linalg.matmul ins(%{{.+}}, %[[W]] :
//   CHECK-NOT:   memref.get_global
//       CHECK:   return

// A loop with a result (a reduction to a scalar) returns it.
// CHECK-LABEL: func.func private @main_kernel_2
//  CHECK-SAME: -> f32
//       CHECK:   %[[R:.+]] = scf.for
//       CHECK:   return %[[R]] : f32

// A linalg op on buffers is a kernel too.
// CHECK-LABEL: func.func private @main_kernel_3
//       CHECK:   linalg.generic

memref.global "private" constant @norm0 : memref<64xf32> = dense<1.0>
memref.global "private" constant @norm1 : memref<64xf32> = dense<2.0>
func.func @main(%weights: memref<?xi8>, %x: memref<?x64xf32>, %y: memref<?x64xf32>, %z: memref<?x64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %cst = arith.constant 0.0 : f32
  %off1 = arith.constant 16384 : index
  %n = memref.dim %x, %c0 : memref<?x64xf32>
  %w0 = memref.view %weights[%c0][] : memref<?xi8> to memref<64x64xf32>
  %w1 = memref.view %weights[%off1][] : memref<?xi8> to memref<64x64xf32>
  scf.forall (%i) in (%n) {
    %g = memref.get_global @norm0 : memref<64xf32>
    %v = memref.load %g[%c0] : memref<64xf32>
    memref.store %cst, %y[%i, %c0] : memref<?x64xf32>
    %a = memref.subview %x[%i, 0] [1, 64] [1, 1] : memref<?x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    %o = memref.subview %y[%i, 0] [1, 64] [1, 1] : memref<?x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    linalg.matmul ins(%a, %w0 : memref<1x64xf32, strided<[64, 1], offset: ?>>, memref<64x64xf32>) outs(%o : memref<1x64xf32, strided<[64, 1], offset: ?>>)
    memref.store %v, %y[%i, %c1] : memref<?x64xf32>
  }
  scf.forall (%i) in (%n) {
    %g = memref.get_global @norm1 : memref<64xf32>
    %v = memref.load %g[%c0] : memref<64xf32>
    memref.store %cst, %z[%i, %c0] : memref<?x64xf32>
    %a = memref.subview %y[%i, 0] [1, 64] [1, 1] : memref<?x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    %o = memref.subview %z[%i, 0] [1, 64] [1, 1] : memref<?x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
    linalg.matmul ins(%a, %w1 : memref<1x64xf32, strided<[64, 1], offset: ?>>, memref<64x64xf32>) outs(%o : memref<1x64xf32, strided<[64, 1], offset: ?>>)
    memref.store %v, %z[%i, %c1] : memref<?x64xf32>
  }
  %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %cst) -> (f32) {
    %e = memref.load %z[%i, %c0] : memref<?x64xf32>
    %s = arith.addf %acc, %e : f32
    scf.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>], iterator_types = ["parallel", "parallel"]} outs(%z : memref<?x64xf32>) {
  ^bb0(%out: f32):
    %r = arith.addf %out, %sum : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Every public function's kernels go to the same table: a shape function
// running the same loop as its model calls the model's kernel. Private
// functions are left alone.

// CHECK-LABEL: func.func @model
//       CHECK:   call @model_kernel_0
// CHECK-LABEL: func.func @model_shapes
//       CHECK:   call @model_kernel_0
// CHECK-LABEL: func.func private @helper
//       CHECK:   scf.for
// CHECK-LABEL: func.func private @model_kernel_0
//   CHECK-NOT: func.func private @model_shapes_kernel_0

func.func @model(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %cst = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %cst, %x[%i] : memref<8xf32>
  }
  return
}
func.func @model_shapes(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %cst = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %cst, %x[%i] : memref<8xf32>
  }
  return
}
func.func private @helper(%x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %cst = arith.constant 1.0 : f32
  scf.for %i = %c0 to %c8 step %c1 {
    memref.store %cst, %x[%i] : memref<8xf32>
  }
  return
}

// -----

// Layers reading their part of one cache shared by all layers differ only
// in a static subview offset (the layer). The offset becomes an argument
// of the one function, and every call passes its own. A subview whose
// result type holds the static offset is left as it is.

// CHECK-LABEL: func.func @pool
//  CHECK-SAME: (%[[P:.+]]: memref<4x3x8xf32>, %[[I:.+]]: index, %[[O:.+]]: memref<8xf32>)
//       CHECK:   %[[C0:.+]] = arith.constant 0 : index
//       CHECK:   %[[C0:.+]] = arith.constant 0 : index
//       CHECK:   call @pool_kernel_0(%[[P]], %[[I]], %[[O]], %[[C0]])
//       CHECK:   %[[C2:.+]] = arith.constant 2 : index
//       CHECK:   call @pool_kernel_0(%[[P]], %[[I]], %[[O]], %[[C2]])
//       CHECK:   call @pool_kernel_2(
//       CHECK:   call @pool_kernel_3(

// CHECK-LABEL: func.func private @pool_kernel_0
//  CHECK-SAME: (%[[P:.+]]: memref<4x3x8xf32>, %[[I:.+]]: index, %[[O:.+]]: memref<8xf32>, %[[L:.+]]: index)
//       CHECK:   memref.subview %[[P]][%[[I]], %[[L]], 0] [1, 1, 8] [1, 1, 1]
// CHECK-LABEL: func.func private @pool_kernel_2
// CHECK-LABEL: func.func private @pool_kernel_3

func.func @pool(%pool: memref<4x3x8xf32>, %i: index, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.subview %pool[%i, 0, 0] [1, 1, 8] [1, 1, 1] : memref<4x3x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %e = memref.load %v[%j] : memref<8xf32, strided<[1], offset: ?>>
    memref.store %e, %out[%j] : memref<8xf32>
  }
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.subview %pool[%i, 2, 0] [1, 1, 8] [1, 1, 1] : memref<4x3x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %e = memref.load %v[%j] : memref<8xf32, strided<[1], offset: ?>>
    memref.store %e, %out[%j] : memref<8xf32>
  }
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.subview %pool[0, 0, 0] [1, 1, 8] [1, 1, 1] : memref<4x3x8xf32> to memref<8xf32, strided<[1]>>
    %e = memref.load %v[%j] : memref<8xf32, strided<[1]>>
    memref.store %e, %out[%j] : memref<8xf32>
  }
  scf.for %j = %c0 to %c8 step %c1 {
    %v = memref.subview %pool[0, 1, 0] [1, 1, 8] [1, 1, 1] : memref<4x3x8xf32> to memref<8xf32, strided<[1], offset: 8>>
    %e = memref.load %v[%j] : memref<8xf32, strided<[1], offset: 8>>
    memref.store %e, %out[%j] : memref<8xf32>
  }
  return
}

// -----

// Copies between buffers are kernels: a strided one becomes a loop nest,
// and a decoder makes the same ones in every layer.

// CHECK-LABEL: func.func @copies
//       CHECK:   call @copies_kernel_0(%{{.+}}, %{{.+}})
//       CHECK:   call @copies_kernel_0(%{{.+}}, %{{.+}})
// CHECK-LABEL: func.func private @copies_kernel_0
//  CHECK-SAME: (%[[A:.+]]: memref<?x8xf32>, %[[B:.+]]: memref<?x8xf32, strided<[16, 1]>>)
//       CHECK:   memref.copy %[[A]], %[[B]]
//   CHECK-NOT: func.func private @copies_kernel_1

func.func @copies(%a: memref<?x8xf32>, %b: memref<?x16xf32>, %c: memref<?x8xf32>, %d: memref<?x16xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %a, %c0 : memref<?x8xf32>
  %sb = memref.subview %b[0, 0] [%n, 8] [1, 1] : memref<?x16xf32> to memref<?x8xf32, strided<[16, 1]>>
  memref.copy %a, %sb : memref<?x8xf32> to memref<?x8xf32, strided<[16, 1]>>
  %sd = memref.subview %d[0, 0] [%n, 8] [1, 1] : memref<?x16xf32> to memref<?x8xf32, strided<[16, 1]>>
  memref.copy %c, %sd : memref<?x8xf32> to memref<?x8xf32, strided<[16, 1]>>
  return
}
