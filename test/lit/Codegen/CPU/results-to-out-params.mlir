// RUN: sits-opt %s --split-input-file --sits-cpu-results-to-out-params | FileCheck %s

// The present K/V of two layers, each only copied into an output of the
// entry point: the layer writes the entry point's output where it
// allocated, and no copy is left. The hidden state, which the next layer
// reads, stays a result.
// CHECK-LABEL: func.func @main
//  CHECK-SAME:   (%[[X:.+]]: memref<4xf32>, %[[H:.+]]: memref<4xf32>, %[[K0:.+]]: memref<8xf32>, %[[K1:.+]]: memref<8xf32>)
//       CHECK:   %[[L0:.+]] = call @layer(%[[X]], %[[K0]]) : (memref<4xf32>, memref<8xf32>) -> memref<4xf32>
//       CHECK:   %[[L1:.+]] = call @layer(%[[L0]], %[[K1]])
//   CHECK-NOT:   memref.copy %{{.+}}, %[[K0]]
//   CHECK-NOT:   memref.copy %{{.+}}, %[[K1]]
//       CHECK:   memref.copy %[[L1]], %[[H]]
//  CHECK-NEXT:   return
// CHECK-LABEL: func.func private @layer
//  CHECK-SAME:   (%[[IN:.+]]: memref<4xf32>, %[[OUT:.+]]: memref<8xf32>) -> memref<4xf32>
//       CHECK:   %[[HID:.+]] = memref.alloc() : memref<4xf32>
//   CHECK-NOT:   memref.alloc
//       CHECK:   linalg.fill ins(%{{.+}} : f32) outs(%[[OUT]] : memref<8xf32>)
//       CHECK:   return %[[HID]] : memref<4xf32>
func.func @main(%x: memref<4xf32>) -> (memref<4xf32>, memref<8xf32>, memref<8xf32>) {
  %h0, %k0 = call @layer(%x) : (memref<4xf32>) -> (memref<4xf32>, memref<8xf32>)
  %h1, %k1 = call @layer(%h0) : (memref<4xf32>) -> (memref<4xf32>, memref<8xf32>)
  return %h1, %k0, %k1 : memref<4xf32>, memref<8xf32>, memref<8xf32>
}
func.func private @layer(%x: memref<4xf32>) -> (memref<4xf32>, memref<8xf32>) attributes {sits.layer} {
  %c = arith.constant 1.0 : f32
  %h = memref.alloc() : memref<4xf32>
  memref.copy %x, %h : memref<4xf32> to memref<4xf32>
  %k = memref.alloc() : memref<8xf32>
  linalg.fill ins(%c : f32) outs(%k : memref<8xf32>)
  return %h, %k : memref<4xf32>, memref<8xf32>
}

// -----

// A present cache of run-time length: the layer takes the output of the
// entry point, whose extents the runtime sized, in place of its buffer.
// CHECK-LABEL: func.func @dynamic
//  CHECK-SAME:   (%[[P:.+]]: memref<?x4xf32>, %[[OUT:.+]]: memref<?x4xf32>)
//       CHECK:   call @dyn_layer(%[[P]], %[[OUT]]) : (memref<?x4xf32>, memref<?x4xf32>) -> ()
//  CHECK-NEXT:   return
// CHECK-LABEL: func.func private @dyn_layer
//  CHECK-SAME:   (%[[PAST:.+]]: memref<?x4xf32>, %[[PRESENT:.+]]: memref<?x4xf32>)
//   CHECK-NOT:   memref.alloc
//       CHECK:   memref.subview %[[PRESENT]]
//       CHECK:   return{{$}}
func.func @dynamic(%past: memref<?x4xf32>) -> memref<?x4xf32> {
  %present = call @dyn_layer(%past) : (memref<?x4xf32>) -> memref<?x4xf32>
  return %present : memref<?x4xf32>
}
func.func private @dyn_layer(%past: memref<?x4xf32>) -> memref<?x4xf32> attributes {sits.layer} {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = memref.dim %past, %c0 : memref<?x4xf32>
  %m = arith.addi %n, %c1 : index
  %present = memref.alloc(%m) : memref<?x4xf32>
  %head = memref.subview %present[0, 0] [%n, 4] [1, 1] : memref<?x4xf32> to memref<?x4xf32, strided<[4, 1]>>
  memref.copy %past, %head : memref<?x4xf32> to memref<?x4xf32, strided<[4, 1]>>
  return %present : memref<?x4xf32>
}

// -----

// One call reads the cache after the call: the layer keeps its result, and
// every call copies.
// CHECK-LABEL: func.func @read_after
//       CHECK:   %[[K0:.+]] = call @kept(%{{.+}}) : (memref<8xf32>) -> memref<8xf32>
//       CHECK:   %[[K1:.+]] = call @kept(%[[K0]]) : (memref<8xf32>) -> memref<8xf32>
//       CHECK:   memref.copy %[[K0]], %{{.+}}
//       CHECK:   memref.copy %[[K1]], %{{.+}}
// CHECK-LABEL: func.func private @kept
//  CHECK-SAME:   -> memref<8xf32>
func.func @read_after(%x: memref<8xf32>) -> (memref<8xf32>, memref<8xf32>) {
  %k0 = call @kept(%x) : (memref<8xf32>) -> memref<8xf32>
  %k1 = call @kept(%k0) : (memref<8xf32>) -> memref<8xf32>
  return %k0, %k1 : memref<8xf32>, memref<8xf32>
}
func.func private @kept(%x: memref<8xf32>) -> memref<8xf32> attributes {sits.layer} {
  %k = memref.alloc() : memref<8xf32>
  memref.copy %x, %k : memref<8xf32> to memref<8xf32>
  return %k : memref<8xf32>
}

// -----

// A layer returning an argument, not a buffer of its own: nothing to
// forward.
// CHECK-LABEL: func.func @passthrough
//       CHECK:   %[[R:.+]] = call @identity(%{{.+}}) : (memref<8xf32>) -> memref<8xf32>
//       CHECK:   memref.copy %[[R]], %{{.+}}
func.func @passthrough(%x: memref<8xf32>) -> memref<8xf32> {
  %r = call @identity(%x) : (memref<8xf32>) -> memref<8xf32>
  return %r : memref<8xf32>
}
func.func private @identity(%x: memref<8xf32>) -> memref<8xf32> attributes {sits.layer} {
  return %x : memref<8xf32>
}
