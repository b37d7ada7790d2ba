// RUN: sits-opt %s --split-input-file --sits-mixed-precision=precision=int8 | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-mixed-precision=precision=int4 | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-mixed-precision=precision=auto | FileCheck %s

// A weight with no elements (K = 0 or N = 0) has nothing to quantize: the
// matmul keeps it as it is.

// CHECK-LABEL: func.func @empty_k
//       CHECK:   sits.matmul {{.*}} : (tensor<2x0xf32>, tensor<0x8xf32>) -> tensor<2x8xf32>
func.func @empty_k(%x: tensor<2x0xf32>) -> tensor<2x8xf32> {
  %w = arith.constant dense<> : tensor<0x8xf32>
  %y = sits.matmul %x, %w : (tensor<2x0xf32>, tensor<0x8xf32>) -> tensor<2x8xf32>
  return %y : tensor<2x8xf32>
}

// -----

// CHECK-LABEL: func.func @empty_n
//       CHECK:   sits.matmul {{.*}} : (tensor<2x8xf32>, tensor<8x0xf32>) -> tensor<2x0xf32>
func.func @empty_n(%x: tensor<2x8xf32>) -> tensor<2x0xf32> {
  %w = arith.constant dense<> : tensor<8x0xf32>
  %y = sits.matmul %x, %w : (tensor<2x8xf32>, tensor<8x0xf32>) -> tensor<2x0xf32>
  return %y : tensor<2x0xf32>
}
