// The graph pipeline runs sits-prune first, with its options.
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-graph-pipeline)' | FileCheck %s --check-prefix=EXACT
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-graph-pipeline{prune-threshold=0.01})' | FileCheck %s --check-prefix=THRESHOLD
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-graph-pipeline{prune=false})' | FileCheck %s --check-prefix=OFF

// Channel 1 reads zero weights, channel 2 small ones.
// EXACT: sits.report.pruning = [{{.+}}indices = [1], kind = "ffn_channels"
// EXACT: func.func @ffn
// EXACT: -> tensor<8x2xf32>
// THRESHOLD: sits.report.pruning = [{{.+}}indices = [1, 2], kind = "ffn_channels"
// THRESHOLD: func.func @ffn
// THRESHOLD: -> tensor<8x1xf32>
// OFF-NOT: sits.report.pruning
// OFF: -> tensor<8x3xf32>
func.func @ffn(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w1 = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %w2 = arith.constant dense<[[1.0, 2.0], [0.0, 0.0], [0.005, -0.004]]> : tensor<3x2xf32>
  %h = sits.matmul %x, %w1 {activation = #sits.activation<gelu>} : (tensor<8x2xf32>, tensor<2x3xf32>) -> tensor<8x3xf32>
  %y = sits.matmul %h, %w2 : (tensor<8x3xf32>, tensor<3x2xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}
