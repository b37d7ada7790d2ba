// The CPU pipeline runs sits-prune with its options, for its target: kept
// channels are rounded up to whole vectors of the target (8 lanes on
// x86-64-v3), so the 8 small channels go and the 8 others stay.
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 prune-threshold=0.01})' -mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=THRESHOLD
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3})' -mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=EXACT

// Channels 8-15 read weights of at most 0.004: 8 channels x (2 + 2) fp32
// weights = 128 bytes.
// THRESHOLD: SitsPrune
// THRESHOLD-NEXT: (S) 128 num-bytes
// THRESHOLD-NEXT: (S)   8 num-channels
// Exact pruning finds no channel that contributes exactly nothing.
// EXACT: SitsPrune
// EXACT-NEXT: (S) 0 num-bytes
// EXACT-NEXT: (S) 0 num-channels
func.func @ffn(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w1 = arith.constant dense<[[0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.25, 3.5, 3.75, 4.0], [0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.25, 3.5, 3.75, 4.0, 4.25, 4.5]]> : tensor<2x16xf32>
  %w2 = arith.constant dense<[[1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [1.0, 2.0], [0.004, -0.003], [0.004, -0.003], [0.004, -0.003], [0.004, -0.003], [0.004, -0.003], [0.004, -0.003], [0.004, -0.003], [0.004, -0.003]]> : tensor<16x2xf32>
  %h = sits.matmul %x, %w1 {activation = #sits.activation<gelu>} : (tensor<8x2xf32>, tensor<2x16xf32>) -> tensor<8x16xf32>
  %y = sits.matmul %h, %w2 : (tensor<8x16xf32>, tensor<16x2xf32>) -> tensor<8x2xf32>
  return %y : tensor<8x2xf32>
}
