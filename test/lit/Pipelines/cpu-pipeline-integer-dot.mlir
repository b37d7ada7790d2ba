// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2})' | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2 integer-dot=false})' | FileCheck %s --check-prefix=OFF

// Quantized matmuls with constant weights through the whole CPU pipeline:
// by default each is one call of the runtime's sitsRuntimeQDot, its
// re-laid-out codes in the weights section; integer-dot=false keeps
// weight-only dequantization in compiled loops. (Splat scales would fold into
// the contraction's body, which then keeps its loops: real scales never are.)
// CHECK-LABEL: llvm.func @int8
//       CHECK:   llvm.call @sitsRuntimeQDot
// CHECK-LABEL: llvm.func @int4
//       CHECK:   llvm.call @sitsRuntimeQDot
//       CHECK: llvm.func @sitsRuntimeQDot(i64, i64, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, !llvm.ptr, i64)
// OFF-NOT: sitsRuntimeQDot
func.func private @int8(%x: tensor<3x4xf32>) -> tensor<3x16xf32> {
  %w = arith.constant dense<[[-32, -31, -30, -29, -28, -27, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17], [-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]> : tensor<4x16xi8>
  %s = arith.constant dense<[0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25]> : tensor<16xf32>
  %y = sits.qmatmul %x, %w, %s {axis = 1 : i64} : (tensor<3x4xf32>, tensor<4x16xi8>, tensor<16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}
func.func private @int4(%x: tensor<3x8xf32>) -> tensor<3x16xf32> {
  %w = arith.constant dense<[[-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7], [-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8], [-6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7], [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6], [-4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5], [-3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4], [-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3], [-1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2]]> : tensor<8x16xi4, #sits.packed<storage = i8, axis = 0>>
  %s = arith.constant dense<[[0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25]]> : tensor<1x16xf32>
  %y = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 8 : i64} : (tensor<3x8xf32>, tensor<8x16xi4, #sits.packed<storage = i8, axis = 0>>, tensor<1x16xf32>) -> tensor<3x16xf32>
  return %y : tensor<3x16xf32>
}
func.func @main(%x: tensor<3x4xf32>, %x8: tensor<3x8xf32>) -> (tensor<3x16xf32>, tensor<3x16xf32>) {
  %0 = call @int8(%x) : (tensor<3x4xf32>) -> tensor<3x16xf32>
  %1 = call @int4(%x8) : (tensor<3x8xf32>) -> tensor<3x16xf32>
  return %0, %1 : tensor<3x16xf32>, tensor<3x16xf32>
}
