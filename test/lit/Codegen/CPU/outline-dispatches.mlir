// RUN: sits-opt %s --split-input-file --sits-cpu-outline-dispatches --mlir-pass-statistics 2>%t.stats | FileCheck %s
// RUN: FileCheck %s --check-prefix=STATS < %t.stats

// STATS:      (S) 2 num-dispatches
// STATS-NEXT: (S) 1 num-functions
// STATS:      (S) 1 num-dispatches
// STATS-NEXT: (S) 1 num-functions
// STATS:      (S) 2 num-dispatches
// STATS-NEXT: (S) 2 num-functions
// STATS:      (S) 1 num-dispatches
// STATS-NEXT: (S) 1 num-functions

// Two heads: a matmul on its own weights and the bias add only it feeds.
// Each matmul and its epilogue are one group, and both call one function
// with their weights as arguments. The shared zero fill and the splat bias
// are cloned into the function, and so is the empty tensor the matmul
// accumulates in (scratch); the root's destination is passed in, an empty
// tensor of each call's own, and the result is marked as that argument
// written.

// CHECK-LABEL: func.func @main
//  CHECK-SAME: (%[[X:.+]]: tensor<8x64xf32>)
//   CHECK-DAG:   %[[W0:.+]] = arith.constant dense_resource<w0>
//   CHECK-DAG:   %[[W1:.+]] = arith.constant dense_resource<w1>
//       CHECK:   %[[E0:.+]] = tensor.empty() : tensor<8x64xf32>
//       CHECK:   %[[H0:.+]] = call @main_dispatch_0(%[[X]], %[[W0]], %[[E0]])
//       CHECK:   %[[E1:.+]] = tensor.empty() : tensor<8x64xf32>
//       CHECK:   %[[H1:.+]] = call @main_dispatch_0(%[[X]], %[[W1]], %[[E1]])
//       CHECK:   return %[[H0]], %[[H1]]

// CHECK-LABEL: func.func private @main_dispatch_0
//  CHECK-SAME: (%[[IN:.+]]: tensor<8x64xf32>, %[[W:.+]]: tensor<64x64xf32>, %[[OUT:.+]]: tensor<8x64xf32>) -> (tensor<8x64xf32> {sits.updates = 2 : i64})
//       CHECK:   %[[ZERO:.+]] = arith.constant 0.0
//       CHECK:   %[[SCRATCH:.+]] = tensor.empty() : tensor<8x64xf32>
//       CHECK:   %[[F:.+]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[SCRATCH]]
//       CHECK:   %[[MM:.+]] = linalg.matmul ins(%[[IN]], %[[W]] : {{.*}}) outs(%[[F]]
//       CHECK:   %[[BIAS:.+]] = arith.constant dense<5.000000e-01> : tensor<8x64xf32>
//       CHECK:   %[[B:.+]] = linalg.add ins(%[[MM]], %[[BIAS]] : {{.*}}) outs(%[[OUT]]
//       CHECK:   return %[[B]]
//   CHECK-NOT: @main_dispatch_1

func.func @main(%x: tensor<8x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %bias = arith.constant dense<0.5> : tensor<8x64xf32>
  %w0 = arith.constant dense_resource<w0> : tensor<64x64xf32>
  %w1 = arith.constant dense_resource<w1> : tensor<64x64xf32>
  %empty = tensor.empty() : tensor<8x64xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<8x64xf32>) -> tensor<8x64xf32>
  %mm0 = linalg.matmul ins(%x, %w0 : tensor<8x64xf32>, tensor<64x64xf32>) outs(%fill : tensor<8x64xf32>) -> tensor<8x64xf32>
  %b0 = linalg.add ins(%mm0, %bias : tensor<8x64xf32>, tensor<8x64xf32>) outs(%empty : tensor<8x64xf32>) -> tensor<8x64xf32>
  %mm1 = linalg.matmul ins(%x, %w1 : tensor<8x64xf32>, tensor<64x64xf32>) outs(%fill : tensor<8x64xf32>) -> tensor<8x64xf32>
  %b1 = linalg.add ins(%mm1, %bias : tensor<8x64xf32>, tensor<8x64xf32>) outs(%empty : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %b0, %b1 : tensor<8x64xf32>, tensor<8x64xf32>
}

{-#
  dialect_resources: {
    builtin: {
      w0: "0x04000000DEADBEEF",
      w1: "0x04000000DEADBEEF"
    }
  }
#-}

// -----

// A slice read by a group is cloned into its function, which takes the
// whole tensor: a function argument is a whole buffer once bufferized.

// CHECK-LABEL: func.func @slice
//  CHECK-SAME: (%[[X:.+]]: tensor<8x128xf32>)
//       CHECK:   call @slice_dispatch_0(%[[X]], %{{.+}})
// CHECK-LABEL: func.func private @slice_dispatch_0
//  CHECK-SAME: (%[[ARG:.+]]: tensor<8x128xf32>
//       CHECK:   tensor.extract_slice %[[ARG]][0, 64] [8, 64] [1, 1]
//       CHECK:   linalg.exp
func.func @slice(%x: tensor<8x128xf32>) -> tensor<8x64xf32> {
  %s = tensor.extract_slice %x[0, 64] [8, 64] [1, 1] : tensor<8x128xf32> to tensor<8x64xf32>
  %empty = tensor.empty() : tensor<8x64xf32>
  %e = linalg.exp ins(%s : tensor<8x64xf32>) outs(%empty : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %e : tensor<8x64xf32>
}

// -----

// A chain: the matmul and its epilogue are one group; the activation the
// matmul reads is another group's result, so that a stack of layers is one
// group per layer, not one group.

// CHECK-LABEL: func.func @chain
//       CHECK:   %[[A:.+]] = call @chain_dispatch_1(
//       CHECK:   %[[R:.+]] = call @chain_dispatch_0(%[[A]],
//  CHECK-NEXT:   return %[[R]]
// CHECK-LABEL: func.func private @chain_dispatch_0
//       CHECK:   linalg.matmul
//       CHECK:   linalg.exp
// CHECK-LABEL: func.func private @chain_dispatch_1
//       CHECK:   linalg.exp
//  CHECK-NEXT:   return
func.func @chain(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %zero = arith.constant 0.0 : f32
  %empty = tensor.empty() : tensor<8x64xf32>
  %a = linalg.exp ins(%x : tensor<8x64xf32>) outs(%empty : tensor<8x64xf32>) -> tensor<8x64xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%empty : tensor<8x64xf32>) -> tensor<8x64xf32>
  %mm = linalg.matmul ins(%a, %w : tensor<8x64xf32>, tensor<64x64xf32>) outs(%fill : tensor<8x64xf32>) -> tensor<8x64xf32>
  %b = linalg.exp ins(%mm : tensor<8x64xf32>) outs(%empty : tensor<8x64xf32>) -> tensor<8x64xf32>
  return %b : tensor<8x64xf32>
}

// -----

// A convolution as a GEMM: the patch gather (it reads the image only by
// index) joins the contraction's dispatch, so that each tile gathers its
// own patches; the image is an argument.

// CHECK-LABEL: func.func @patches
//  CHECK-SAME: (%[[IMG:.+]]: tensor<4x10xf32>, %[[W:.+]]: tensor<12x16xf32>)
//       CHECK:   %[[R:.+]] = call @patches_dispatch_0(%[[IMG]], %[[W]], %{{.+}})
//  CHECK-NEXT:   return %[[R]]
// CHECK-LABEL: func.func private @patches_dispatch_0
//       CHECK:   linalg.generic
//       CHECK:     tensor.extract
//       CHECK:   linalg.matmul
//   CHECK-NOT: @patches_dispatch_1
func.func @patches(%img: tensor<4x10xf32>, %w: tensor<12x16xf32>) -> tensor<8x16xf32> {
  %zero = arith.constant 0.0 : f32
  %c3 = arith.constant 3 : index
  %empty = tensor.empty() : tensor<8x12xf32>
  %gather = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} outs(%empty : tensor<8x12xf32>) {
  ^bb0(%out: f32):
    %p = linalg.index 0 : index
    %k = linalg.index 1 : index
    %c = arith.divui %k, %c3 : index
    %t = arith.remui %k, %c3 : index
    %x = arith.addi %p, %t : index
    %v = tensor.extract %img[%c, %x] : tensor<4x10xf32>
    linalg.yield %v : f32
  } -> tensor<8x12xf32>
  %acc = tensor.empty() : tensor<8x16xf32>
  %fill = linalg.fill ins(%zero : f32) outs(%acc : tensor<8x16xf32>) -> tensor<8x16xf32>
  %mm = linalg.matmul ins(%gather, %w : tensor<8x12xf32>, tensor<12x16xf32>) outs(%fill : tensor<8x16xf32>) -> tensor<8x16xf32>
  return %mm : tensor<8x16xf32>
}
