// The `num-fused` statistic counts the activations folded into a contraction,
// per function and summed over the module.
//
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-fuse-epilogue))' -mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-fuse-epilogue))' -mlir-pass-statistics -mlir-pass-statistics-display=pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PIPELINE
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-fuse-epilogue))' | FileCheck %s --check-prefix=IR

// CHECK: Pass statistics report
// CHECK: 'func.func' Pipeline
// CHECK-NEXT:   SitsFuseEpilogue
// CHECK-NEXT:     (S) 4 num-fused - Number of activations fused into a contraction

// PIPELINE: 'func.func' Pipeline
// PIPELINE-NEXT:   SitsFuseEpilogue
// PIPELINE-NEXT:     (S) 4 num-fused - Number of activations fused into a contraction

// Three fusions here (matmul, conv, qmatmul); the relu reading the matmul
// with other users, the tanh of a block argument and the identity do not
// count.
// IR-LABEL: func.func @three
//  IR-COUNT-3: activation = #sits.activation<
//   IR-NOT: activation = #sits.activation<
//       IR: return
func.func @three(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>, %img: tensor<1x4x8x8xf32>, %f: tensor<8x4x3x3xf32>,
                 %qw: tensor<64x64xi8>, %qs: tensor<64xf32>)
    -> (tensor<8x64xf32>, tensor<1x8x6x6xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %0 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %1 = sits.activation <gelu> %0 : tensor<8x64xf32>
  %2 = sits.conv %img, %f : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x6x6xf32>
  %3 = sits.activation <relu> %2 : tensor<1x8x6x6xf32>
  %4 = sits.qmatmul %x, %qw, %qs {axis = 1 : i64} : (tensor<8x64xf32>, tensor<64x64xi8>, tensor<64xf32>) -> tensor<8x64xf32>
  %5 = sits.activation <silu> %4 : tensor<8x64xf32>
  %6 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %7 = sits.activation <relu> %6 : tensor<8x64xf32>
  %8 = arith.addf %7, %6 : tensor<8x64xf32>
  %9 = sits.activation <tanh> %x : tensor<8x64xf32>
  %10 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %11 = sits.activation <none> %10 : tensor<8x64xf32>
  return %1, %3, %5, %8, %9, %11 : tensor<8x64xf32>, tensor<1x8x6x6xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}

// One more in a second function (the second sigmoid of the chain stays): the
// statistic is summed over functions.
// IR-LABEL: func.func @one
//       IR: %[[M:.+]] = sits.matmul {{.+}} {activation = #sits.activation<sigmoid>}
//       IR: %[[A:.+]] = sits.activation <sigmoid> %[[M]]
//       IR: return %[[A]]
func.func @one(%x: tensor<8x64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %0 = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %1 = sits.activation <sigmoid> %0 : tensor<8x64xf32>
  %2 = sits.activation <sigmoid> %1 : tensor<8x64xf32>
  return %2 : tensor<8x64xf32>
}
