// RUN: sits-opt %s --split-input-file --sits-split-empty-tensors --mlir-pass-statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// STATS: (S) 2 num-split
// STATS: (S) 0 num-split

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
