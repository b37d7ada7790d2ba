// RUN: sits-opt %s --split-input-file --sits-mixed-precision=precision=fp8 --verify-diagnostics | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-mixed-precision="precision=auto error-budget=0" | FileCheck %s --check-prefix=AUTO

// FP8 E4M3 with one scale per output channel (the largest magnitude maps to
// 448) on a target whose table lists it: column 0 gets scale 1, column 1
// scale 0.5, and every value here is exact in E4M3.

// CHECK-LABEL: func.func @fp8
//       CHECK: sits.qmatmul %arg0, %{{.+}}, %{{.+}} {axis = 1 : i64} : (tensor<2x2xf32>, tensor<2x2xf8E4M3FN>, tensor<2xf32>) -> tensor<2x2xf32>
// On an FP8 target, auto mode may choose FP8 for a block: of the two 8-bit
// formats, which cost the same, the one with the smaller error (here FP8,
// exact, while INT8 rounds 0.3125 of column 0) wins.
// AUTO: format = ["fp8"]
module attributes {sits.target = #sits.target<"h100">} {
  func.func @fp8(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %w = arith.constant dense<[[448.0, 224.0], [0.3125, 1.0]]> : tensor<2x2xf32>
    %y = sits.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    return %y : tensor<2x2xf32>
  }
}

// -----

// expected-error @+1 {{precision 'fp8' needs a target with FP8 E4M3 support; 'a100' has none}}
module attributes {sits.target = #sits.target<"a100">} {
  func.func @no_fp8(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
    %w = arith.constant dense<[[448.0, 224.0], [0.3125, 1.0]]> : tensor<2x2xf32>
    %y = sits.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    return %y : tensor<2x2xf32>
  }
}
