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
