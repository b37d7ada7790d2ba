// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2})' --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2 fuse-sibling-matmuls=false})' --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2 profile=memory})' --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=OFF

// The CPU pipeline joins the projections of one input by constant weights
// (here three, as Q, K and V) before anything else sees them;
// fuse-sibling-matmuls=false keeps them apart, and so does profile=memory
// (the joined result would keep every sibling's output alive at once).
// CHECK: SitsFuseSiblingMatmuls
// CHECK-NEXT: (S) 3 num-fused
// OFF-NOT: SitsFuseSiblingMatmuls
func.func @main(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?x2xf32>, tensor<?x2xf32>) {
  %wq = arith.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0], [13.0, 14.0, 15.0, 16.0]]> : tensor<4x4xf32>
  %wk = arith.constant dense<[[-1.0, -2.0], [-3.0, -4.0], [-5.0, -6.0], [-7.0, -8.0]]> : tensor<4x2xf32>
  %wv = arith.constant dense<[[0.5, 1.5], [2.5, 3.5], [4.5, 5.5], [6.5, 7.5]]> : tensor<4x2xf32>
  %q = sits.matmul %x, %wq : (tensor<?x4xf32>, tensor<4x4xf32>) -> tensor<?x4xf32>
  %k = sits.matmul %x, %wk : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  %v = sits.matmul %x, %wv : (tensor<?x4xf32>, tensor<4x2xf32>) -> tensor<?x2xf32>
  return %q, %k, %v : tensor<?x4xf32>, tensor<?x2xf32>, tensor<?x2xf32>
}
