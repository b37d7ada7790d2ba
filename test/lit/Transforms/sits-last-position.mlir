// RUN: sits-opt %s --split-input-file --sits-last-position | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-last-position --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS

// A decoder's head: the activation, the final norm and the LM head run on
// the last position (the slice moves above all three); the updated pool is
// left alone.
// CHECK-LABEL: func.func @main
//  CHECK-SAME:   -> (tensor<?x?x1000xf32>, tensor<4x8xf32> {sits.updates = 1 : i64})
//       CHECK:   %[[S:.+]] = tensor.dim %arg0, %c1
//       CHECK:   %[[ONE:.+]] = arith.minsi %[[S]], %c1
//       CHECK:   %[[OFF:.+]] = arith.subi %[[S]], %[[ONE]]
//       CHECK:   %[[LAST:.+]] = tensor.extract_slice %arg0[0, %[[OFF]], 0] [%{{.+}}, %[[ONE]], 64] [1, 1, 1] : tensor<?x?x64xf32> to tensor<?x?x64xf32>
//       CHECK:   %[[H:.+]] = sits.activation <silu> %[[LAST]]
//       CHECK:   %[[N:.+]] = sits.rms_norm %[[H]], %{{.+}} : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
//       CHECK:   %[[L:.+]] = sits.matmul %[[N]], %{{.+}} : (tensor<?x?x64xf32>, tensor<64x1000xf32>) -> tensor<?x?x1000xf32>
//       CHECK:   return %[[L]], %arg1
// STATS: 3 num-hoisted
// STATS: 1 num-results
// STATS: 1 num-hoisted
// STATS: 2 num-results
// STATS: 0 num-hoisted
// STATS: 1 num-results
// STATS: 2 num-hoisted
// STATS: 1 num-results
func.func @main(%x: tensor<?x?x64xf32>, %pool: tensor<4x8xf32>) -> (tensor<?x?x1000xf32>, tensor<4x8xf32> {sits.updates = 1 : i64}) {
  %g = arith.constant dense<1.0> : tensor<64xf32>
  %w = arith.constant dense<0.5> : tensor<64x1000xf32>
  %h = sits.activation <silu> %x : tensor<?x?x64xf32>
  %n = sits.rms_norm %h, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %l = sits.matmul %n, %w : (tensor<?x?x64xf32>, tensor<64x1000xf32>) -> tensor<?x?x1000xf32>
  return %l, %pool : tensor<?x?x1000xf32>, tensor<4x8xf32>
}

// -----

// The normalized state is returned too: both results keep their last
// position, and the slice stays below the norm, which two results read.
// CHECK-LABEL: func.func @main
//  CHECK-SAME:   -> (tensor<?x?x1000xf32>, tensor<?x?x64xf32>)
//       CHECK:   %[[N:.+]] = sits.rms_norm %arg0
//       CHECK:   %[[A:.+]] = tensor.extract_slice %[[N]]
//       CHECK:   %[[L:.+]] = sits.matmul %[[A]]
//       CHECK:   %[[B:.+]] = tensor.extract_slice %[[N]]
//       CHECK:   return %[[L]], %[[B]]
func.func @main(%x: tensor<?x?x64xf32>) -> (tensor<?x?x1000xf32>, tensor<?x?x64xf32>) {
  %g = arith.constant dense<1.0> : tensor<64xf32>
  %w = arith.constant dense<0.5> : tensor<64x1000xf32>
  %n = sits.rms_norm %x, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %l = sits.matmul %n, %w : (tensor<?x?x64xf32>, tensor<64x1000xf32>) -> tensor<?x?x1000xf32>
  return %l, %n : tensor<?x?x1000xf32>, tensor<?x?x64xf32>
}

// -----

// A norm over the position axis itself is not position-wise; a result
// whose position axis is already 1, or is its innermost axis, is kept.
// CHECK-LABEL: func.func @main
//       CHECK:   %[[N:.+]] = sits.rms_norm %arg0, %{{.+}} {axis = 1 : i64}
//       CHECK:   %[[LAST:.+]] = tensor.extract_slice %[[N]]{{.+}} : tensor<?x8x64xf32> to tensor<?x?x64xf32>
//       CHECK:   return %[[LAST]], %arg1, %arg2
func.func @main(%x: tensor<?x8x64xf32>, %y: tensor<2x1x64xf32>, %z: tensor<2x8xf32>) -> (tensor<?x8x64xf32>, tensor<2x1x64xf32>, tensor<2x8xf32>) {
  %g = arith.constant dense<1.0> : tensor<8x64xf32>
  %n = sits.rms_norm %x, %g {axis = 1 : i64} : (tensor<?x8x64xf32>, tensor<8x64xf32>) -> tensor<?x8x64xf32>
  return %n, %y, %z : tensor<?x8x64xf32>, tensor<2x1x64xf32>, tensor<2x8xf32>
}

// -----

// Weights defined between the hoisted ops (a tied, transposed embedding):
// every op is rebuilt in its own place, below its operands.
// CHECK-LABEL: func.func @main
//       CHECK:   %[[LAST:.+]] = tensor.extract_slice %arg0
//       CHECK:   %[[N:.+]] = sits.rms_norm %[[LAST]]
//       CHECK:   %[[WT:.+]] = sits.activation <relu> %{{.+}} : tensor<64x1000xf32>
//       CHECK:   sits.matmul %[[N]], %[[WT]]
func.func @main(%x: tensor<?x?x64xf32>, %w: tensor<64x1000xf32>) -> tensor<?x?x1000xf32> {
  %g = arith.constant dense<1.0> : tensor<64xf32>
  %n = sits.rms_norm %x, %g : (tensor<?x?x64xf32>, tensor<64xf32>) -> tensor<?x?x64xf32>
  %wt = sits.activation <relu> %w : tensor<64x1000xf32>
  %l = sits.matmul %n, %wt : (tensor<?x?x64xf32>, tensor<64x1000xf32>) -> tensor<?x?x1000xf32>
  return %l : tensor<?x?x1000xf32>
}
