// RUN: not sits-opt %s --sits-mixed-precision=precision=int3 2>&1 | FileCheck %s --check-prefix=PRECISION
// RUN: not sits-opt %s --sits-mixed-precision="precision=int4 group-size=48" 2>&1 | FileCheck %s --check-prefix=GROUP
// RUN: not sits-opt %s --sits-mixed-precision="precision=auto block-k=32 group-size=64" 2>&1 | FileCheck %s --check-prefix=BLOCK
// RUN: not sits-opt %s --sits-mixed-precision="precision=auto block-n=0" 2>&1 | FileCheck %s --check-prefix=SHAPE
// RUN: not sits-opt %s --sits-mixed-precision="precision=auto error-budget=-0.1" 2>&1 | FileCheck %s --check-prefix=BUDGET
// RUN: not sits-opt %s --sits-mixed-precision=precision=fp8 2>&1 | FileCheck %s --check-prefix=HOST
// RUN: sits-opt %s --sits-mixed-precision="precision=int8" --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS

// PRECISION: error: unknown precision 'int3'; expected fp32, int8, int4, fp8 or auto
// GROUP: error: group-size must be 32, 64 or 128, got 48
// BLOCK: error: block-k (32) must be a multiple of group-size (64) so that INT4 blocks hold whole groups
// SHAPE: error: block-k must be non-negative (0: all of K) and block-n positive, got 0 and 0
// BUDGET: error: error-budget must be non-negative, got -1.000000e-01
// Without a sits.target the host CPU decides, which has no FP8.
// HOST: error: precision 'fp8' needs a target with FP8 E4M3 support; 'cpu' has none

// STATS: SitsMixedPrecision
// STATS: (S) 12 bytes - Bytes of the quantized weights and scales
// STATS: (S) 16 fp32-bytes - Bytes of the quantized weights in fp32
// STATS: (S) 1 num-quantized - Weights quantized
func.func @f(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %y = sits.matmul %x, %w : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
