// RUN: sits-opt %s --split-input-file --sits-split-fresh-deallocs | FileCheck %s

// Distinct allocations freed together become one op each.

// CHECK-LABEL: func.func @fresh
//  CHECK-SAME: (%[[N:.+]]: index, %[[T:.+]]: i1)
//       CHECK:   %[[A:.+]] = memref.alloc
//       CHECK:   %[[B:.+]] = memref.alloc
//       CHECK:   bufferization.dealloc (%[[A]] : memref<?xf32>) if (%[[T]])
//  CHECK-NEXT:   bufferization.dealloc (%[[B]] : memref<?xf32>) if (%[[T]])
//  CHECK-NEXT:   return
func.func @fresh(%n: index, %t: i1) {
  %a = memref.alloc(%n) : memref<?xf32>
  %b = memref.alloc(%n) : memref<?xf32>
  bufferization.dealloc (%a, %b : memref<?xf32>, memref<?xf32>) if (%t, %t)
  return
}

// -----

// Retained values, or a memref that is not a fresh allocation (it may
// alias another), leave the op whole.

// CHECK-LABEL: func.func @kept
//       CHECK:   bufferization.dealloc (%{{.+}}, %{{.+}} : memref<?xf32>, memref<?xf32>) if (%{{.+}}, %{{.+}}) retain
//       CHECK:   bufferization.dealloc (%{{.+}}, %{{.+}} : memref<?xf32>, memref<?xf32>) if (%{{.+}}, %{{.+}})
//  CHECK-NEXT:   return
func.func @kept(%n: index, %t: i1, %m: memref<?xf32>) -> i1 {
  %a = memref.alloc(%n) : memref<?xf32>
  %b = memref.alloc(%n) : memref<?xf32>
  %r = bufferization.dealloc (%a, %b : memref<?xf32>, memref<?xf32>) if (%t, %t) retain (%m : memref<?xf32>)
  bufferization.dealloc (%a, %m : memref<?xf32>, memref<?xf32>) if (%t, %t)
  return %r : i1
}

// -----

// The results of a call whose callee returns buffers it allocated (an
// outlined layer) are fresh too, also through their base buffers; those of
// a callee returning one of its arguments, or one allocation twice, may
// alias.

func.func private @layer(%x: memref<?xf32>) -> (memref<?xf32>, memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %a = memref.alloc(%n) : memref<?xf32>
  %b = memref.alloc(%n) : memref<?xf32>
  return %a, %b : memref<?xf32>, memref<?xf32>
}
func.func private @passes(%x: memref<?xf32>) -> memref<?xf32> {
  return %x : memref<?xf32>
}
func.func private @twice(%x: memref<?xf32>) -> (memref<?xf32>, memref<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %a = memref.alloc(%n) : memref<?xf32>
  return %a, %a : memref<?xf32>, memref<?xf32>
}

// CHECK-LABEL: func.func @layers
//       CHECK:   %[[L:.+]]:2 = call @layer
//       CHECK:   %[[BASE:.+]], %{{.+}}, %{{.+}}, %{{.+}} = memref.extract_strided_metadata %[[L]]#1
//       CHECK:   bufferization.dealloc (%[[L]]#0 : memref<?xf32>) if
//  CHECK-NEXT:   bufferization.dealloc (%[[BASE]] : memref<f32>) if
//  CHECK-NEXT:   bufferization.dealloc (%{{.+}} : memref<?xf32>) if
//  CHECK-NEXT:   return
func.func @layers(%x: memref<?xf32>, %t: i1) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %l:2 = call @layer(%x) : (memref<?xf32>) -> (memref<?xf32>, memref<?xf32>)
  %base, %off, %size, %stride = memref.extract_strided_metadata %l#1 : memref<?xf32> -> memref<f32>, index, index, index
  %a = memref.alloc(%n) : memref<?xf32>
  bufferization.dealloc (%l#0, %base, %a : memref<?xf32>, memref<f32>, memref<?xf32>) if (%t, %t, %t)
  return
}

// CHECK-LABEL: func.func @aliasing
//   CHECK-NOT:   bufferization.dealloc ({{[^,]+}} : memref<?xf32>) if
//       CHECK:   bufferization.dealloc (%{{.+}}, %{{.+}} : memref<?xf32>, memref<?xf32>) if
//       CHECK:   bufferization.dealloc (%{{.+}}, %{{.+}} : memref<?xf32>, memref<?xf32>) if
//  CHECK-NEXT:   return
func.func @aliasing(%x: memref<?xf32>, %t: i1) {
  %c0 = arith.constant 0 : index
  %n = memref.dim %x, %c0 : memref<?xf32>
  %p = call @passes(%x) : (memref<?xf32>) -> memref<?xf32>
  %a = memref.alloc(%n) : memref<?xf32>
  bufferization.dealloc (%p, %a : memref<?xf32>, memref<?xf32>) if (%t, %t)
  %w:2 = call @twice(%x) : (memref<?xf32>) -> (memref<?xf32>, memref<?xf32>)
  bufferization.dealloc (%w#0, %w#1 : memref<?xf32>, memref<?xf32>) if (%t, %t)
  return
}
