// RUN: sits-opt %s --split-input-file --sits-split-empty-tensors --mlir-pass-statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// STATS: (S) 2 num-split
// STATS: (S) 0 num-split
// STATS: (S) 1 num-whole-inserts

// One tensor.empty that CSE made the destination of three calls: each call
// gets its own, created right before it with the same dynamic size.

func.func private @dispatch(tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>

// CHECK-LABEL: func.func @layers
//  CHECK-SAME: (%[[X:.+]]: tensor<?x256xf32>, %[[N:.+]]: index)
//       CHECK:   %[[E0:.+]] = tensor.empty(%[[N]])
//       CHECK:   %[[A:.+]] = call @dispatch(%[[X]], %[[E0]])
//       CHECK:   %[[E1:.+]] = tensor.empty(%[[N]])
//       CHECK:   %[[B:.+]] = call @dispatch(%[[A]], %[[E1]])
//       CHECK:   %[[E2:.+]] = tensor.empty(%[[N]])
//       CHECK:   call @dispatch(%[[B]], %[[E2]])
//   CHECK-NOT:   tensor.empty
func.func @layers(%x: tensor<?x256xf32>, %n: index) -> tensor<?x256xf32> {
  %e = tensor.empty(%n) : tensor<?x256xf32>
  %0 = call @dispatch(%x, %e) : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %1 = call @dispatch(%0, %e) : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  %2 = call @dispatch(%1, %e) : (tensor<?x256xf32>, tensor<?x256xf32>) -> tensor<?x256xf32>
  return %2 : tensor<?x256xf32>
}

// -----

// A use inside a loop keeps the tensor.empty defined outside: a clone in
// the body would be allocated once per iteration.

func.func private @dispatch(tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>

// CHECK-LABEL: func.func @loop
//       CHECK:   %[[E:.+]] = tensor.empty() : tensor<8xf32>
//       CHECK:   scf.for
//       CHECK:     call @dispatch(%{{.+}}, %[[E]])
//       CHECK:     call @dispatch(%{{.+}}, %[[E]])
//   CHECK-NOT:   tensor.empty
func.func @loop(%x: tensor<8xf32>, %n: index) -> tensor<8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %e = tensor.empty() : tensor<8xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %x) -> tensor<8xf32> {
    %0 = func.call @dispatch(%acc, %e) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    %1 = func.call @dispatch(%0, %e) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
    scf.yield %1 : tensor<8xf32>
  }
  return %r : tensor<8xf32>
}

// -----

// A padded image given back its batch dimension by an insert over the
// whole of an empty tensor: a reshape of the padded image (a view once
// bufferized), not a new buffer and a copy.
// CHECK-LABEL: func.func @whole_insert
//  CHECK-SAME:   (%[[X:.+]]: tensor<1x4x6x6xf32>)
//       CHECK:   %[[PAD:.+]] = tensor.pad
//       CHECK:   %[[B:.+]] = tensor.expand_shape %[[PAD]] {{\[\[}}0, 1], [2], [3]] output_shape [1, 4, 8, 8] : tensor<4x8x8xf32> into tensor<1x4x8x8xf32>
//  CHECK-NEXT:   return %[[B]]
func.func @whole_insert(%x: tensor<1x4x6x6xf32>) -> tensor<1x4x8x8xf32> {
  %zero = arith.constant 0.0 : f32
  %s = tensor.extract_slice %x[0, 0, 0, 0] [1, 4, 6, 6] [1, 1, 1, 1] : tensor<1x4x6x6xf32> to tensor<4x6x6xf32>
  %p = tensor.pad %s low[0, 1, 1] high[0, 1, 1] {
  ^bb0(%i: index, %j: index, %k: index):
    tensor.yield %zero : f32
  } : tensor<4x6x6xf32> to tensor<4x8x8xf32>
  %e = tensor.empty() : tensor<1x4x8x8xf32>
  %b = tensor.insert_slice %p into %e[0, 0, 0, 0] [1, 4, 8, 8] [1, 1, 1, 1] : tensor<4x8x8xf32> into tensor<1x4x8x8xf32>
  return %b : tensor<1x4x8x8xf32>
}

// An insert over part of an empty tensor stays: the rest is undefined,
// not the source.
// CHECK-LABEL: func.func @partial_insert
//       CHECK:   tensor.insert_slice
func.func @partial_insert(%x: tensor<4x8xf32>) -> tensor<1x4x16xf32> {
  %e = tensor.empty() : tensor<1x4x16xf32>
  %b = tensor.insert_slice %x into %e[0, 0, 0] [1, 4, 8] [1, 1, 1] : tensor<4x8xf32> into tensor<1x4x16xf32>
  return %b : tensor<1x4x16xf32>
}
