// RUN: sits-opt %s --split-input-file --sits-prune=channel-multiple=2 | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-prune | FileCheck %s --check-prefix=TARGET
// RUN: not sits-opt %s --split-input-file --sits-prune=channel-multiple=-1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// NEGATIVE: error: sits-prune: 'channel-multiple' must be >= 0, got -1

// Channels 1, 2 and 3 read zero weights; a multiple of 2 channels is kept,
// so channel 1 is put back (all three are equally small).
// CHECK-LABEL: func.func @ffn
//       CHECK:   sits.matmul {{.+}} -> tensor<8x4xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
// Without a target and with the default, no rounding.
// TARGET-LABEL: func.func @ffn
//       TARGET:   sits.matmul {{.+}} : (tensor<8x3xf32>, tensor<3x2xf32>) -> tensor<8x2xf32>
func.func @ffn(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w1 = arith.constant dense<1.0> : tensor<2x6xf32>
  %w2 = arith.constant dense<[[1.0, 2.0], [0.0, 0.0], [0.0, 0.0], [0.0, 0.0], [5.0, 6.0], [7.0, 8.0]]> : tensor<6x2xf32>
  %h = sits.matmul %x, %w1 {activation = #sits.activation<relu>} : (tensor<8x2xf32>, tensor<2x6xf32>) -> tensor<8x6xf32>
  %y = sits.matmul %h, %w2 : (tensor<8x6xf32>, tensor<6x2xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}

// -----

// On h100 the default multiple is its warp, 32: 8 of 40 channels go (32
// left), 6 of 40 would leave 34 and round back up to all 40.
// TARGET-LABEL: func.func @warp
//       TARGET:   sits.matmul {{.+}} : (tensor<8x32xf32>, tensor<32x1xf32>) -> tensor<8x1xf32>
//       TARGET:   sits.matmul {{.+}} : (tensor<8x40xf32>, tensor<40x1xf32>) -> tensor<8x1xf32>
module attributes {sits.target = #sits.target<"h100">} {
  func.func @warp(%x: tensor<8x2xf32>) -> (tensor<8x1xf32>, tensor<8x1xf32>) {
    %w1 = arith.constant dense<1.0> : tensor<2x40xf32>
    %w2 = arith.constant dense<[[0.0], [0.0], [0.0], [0.0], [0.0], [0.0], [0.0], [0.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0]]> : tensor<40x1xf32>
    %v1 = arith.constant dense<2.0> : tensor<2x40xf32>
    %v2 = arith.constant dense<[[0.0], [0.0], [0.0], [0.0], [0.0], [0.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0], [1.0]]> : tensor<40x1xf32>
    %h = sits.matmul %x, %w1 : (tensor<8x2xf32>, tensor<2x40xf32>) -> tensor<8x40xf32>
    %y = sits.matmul %h, %w2 : (tensor<8x40xf32>, tensor<40x1xf32>) -> tensor<8x1xf32>
    %g = sits.matmul %x, %v1 : (tensor<8x2xf32>, tensor<2x40xf32>) -> tensor<8x40xf32>
    %z = sits.matmul %g, %v2 : (tensor<8x40xf32>, tensor<40x1xf32>) -> tensor<8x1xf32>
    return %y, %z : tensor<8x1xf32>, tensor<8x1xf32>
  }
}
