// RUN: sits-opt %s --split-input-file --sits-dealloc-after-last-use --mlir-pass-statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// STATS: (S) 3 num-moved
// STATS: (S) 1 num-moved
// STATS: (S) 0 num-moved
// STATS: (S) 0 num-moved
// STATS: (S) 3 num-moved

// Three layers whose activations were all freed at the end of the function
// (ownership-based deallocation): each buffer is now freed right after the
// last op using it or a view of it, including a use inside a loop.

func.func private @layer(memref<?x256xf32>, memref<?x256xf32>)
func.func private @read(memref<?xf32>)

// CHECK-LABEL: func.func @layers
//       CHECK:   %[[A:.+]] = memref.alloc
//       CHECK:   call @layer(%{{.+}}, %[[A]])
//       CHECK:   %[[B:.+]] = memref.alloc
//       CHECK:   call @layer(%[[A]], %[[B]])
//       CHECK:   memref.dealloc %[[A]]
//       CHECK:   %[[C:.+]] = memref.alloc
//       CHECK:   call @layer(%[[B]], %[[C]])
//       CHECK:   %[[V:.+]] = memref.collapse_shape %[[B]]
//       CHECK:   scf.for
//       CHECK:     call @read(%[[V]])
//       CHECK:   }
//       CHECK:   memref.dealloc %[[B]]
//       CHECK:   call @layer(%[[C]], %{{.+}})
//       CHECK:   memref.dealloc %[[C]]
//       CHECK:   return
func.func @layers(%x: memref<?x256xf32>, %y: memref<?x256xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc(%n) : memref<?x256xf32>
  call @layer(%x, %a) : (memref<?x256xf32>, memref<?x256xf32>) -> ()
  %b = memref.alloc(%n) : memref<?x256xf32>
  call @layer(%a, %b) : (memref<?x256xf32>, memref<?x256xf32>) -> ()
  %c = memref.alloc(%n) : memref<?x256xf32>
  call @layer(%b, %c) : (memref<?x256xf32>, memref<?x256xf32>) -> ()
  %v = memref.collapse_shape %b [[0, 1]] : memref<?x256xf32> into memref<?xf32>
  scf.for %i = %c0 to %n step %c1 {
    func.call @read(%v) : (memref<?xf32>) -> ()
  }
  call @layer(%c, %y) : (memref<?x256xf32>, memref<?x256xf32>) -> ()
  memref.dealloc %a : memref<?x256xf32>
  memref.dealloc %b : memref<?x256xf32>
  memref.dealloc %c : memref<?x256xf32>
  return
}

// -----

// A loop yielding the buffer returns a view of it: the loop's result is
// followed to its last use.

// CHECK-LABEL: func.func @yielded
//       CHECK:   scf.for
//       CHECK:   memref.load
//  CHECK-NEXT:   memref.dealloc
//  CHECK-NEXT:   arith.addf
func.func @yielded(%n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = memref.alloc(%n) : memref<?xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%m = %a) -> memref<?xf32> {
    scf.yield %m : memref<?xf32>
  }
  %f = memref.load %r[%c0] : memref<?xf32>
  %z = arith.addf %f, %f : f32
  memref.dealloc %a : memref<?xf32>
  return %z : f32
}

// -----

// A buffer passed to another block escapes what this pass follows: its
// deallocation stays.

// CHECK-LABEL: func.func @branch
//       CHECK:   cf.br
//       CHECK: ^bb1
//       CHECK:   memref.load
//       CHECK:   memref.dealloc
func.func @branch(%n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %a = memref.alloc(%n) : memref<?xf32>
  cf.br ^bb1(%a : memref<?xf32>)
^bb1(%m: memref<?xf32>):
  %f = memref.load %m[%c0] : memref<?xf32>
  %z = arith.addf %f, %f : f32
  memref.dealloc %a : memref<?xf32>
  return %z : f32
}

// -----

// A buffer whose address leaves as an integer keeps its deallocation.

// CHECK-LABEL: func.func @pointer
//       CHECK:   memref.extract_aligned_pointer_as_index
//       CHECK:   arith.addi
//       CHECK:   memref.dealloc
func.func @pointer(%n: index) -> index {
  %a = memref.alloc(%n) : memref<?xf32>
  %p = memref.extract_aligned_pointer_as_index %a : memref<?xf32> -> index
  %q = arith.addi %p, %n : index
  memref.dealloc %a : memref<?xf32>
  return %q : index
}

// -----

// Outlined layers return buffers they allocated: each is freed after the
// next layer (its last use), not at the end; the results of that layer are
// fresh, not views of its argument. One freed through the base buffer the
// deallocation pipeline extracted is freed as itself. A call returning its
// argument gives a view: its buffer is followed through it.

func.func private @layer(%x: memref<?xf32>) -> memref<?xf32> {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %a = memref.alloc(%n) : memref<?xf32>
  return %a : memref<?xf32>
}
func.func private @view(%x: memref<?xf32>) -> memref<?xf32> {
  return %x : memref<?xf32>
}
func.func private @read(memref<?xf32>)

// CHECK-LABEL: func.func @chain
//       CHECK:   %[[L1:.+]] = call @layer
//  CHECK-NEXT:   %[[L2:.+]] = call @layer(%[[L1]])
//  CHECK-NEXT:   memref.dealloc %[[L1]]
//  CHECK-NEXT:   %[[V:.+]] = call @view(%[[L2]])
//  CHECK-NEXT:   %[[L3:.+]] = call @layer(%[[L2]])
//  CHECK-NEXT:   call @read(%[[V]])
//  CHECK-NEXT:   memref.dealloc %[[L2]]
//  CHECK-NEXT:   call @read(%[[L3]])
//  CHECK-NEXT:   memref.dealloc %[[L3]]
//  CHECK-NEXT:   return
func.func @chain(%x: memref<?xf32>) {
  %l1 = call @layer(%x) : (memref<?xf32>) -> memref<?xf32>
  %l2 = call @layer(%l1) : (memref<?xf32>) -> memref<?xf32>
  %v = call @view(%l2) : (memref<?xf32>) -> memref<?xf32>
  %l3 = call @layer(%l2) : (memref<?xf32>) -> memref<?xf32>
  call @read(%v) : (memref<?xf32>) -> ()
  call @read(%l3) : (memref<?xf32>) -> ()
  memref.dealloc %l1 : memref<?xf32>
  %base, %off, %size, %stride = memref.extract_strided_metadata %l2 : memref<?xf32> -> memref<f32>, index, index, index
  memref.dealloc %base : memref<f32>
  memref.dealloc %l3 : memref<?xf32>
  return
}
