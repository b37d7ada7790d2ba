// RUN: sits-opt %s --sits-prune=threshold=0.01 | FileCheck %s
// RUN: sits-opt %s --sits-prune | FileCheck %s --check-prefix=EXACT
// RUN: sits-opt %s --sits-prune=threshold=0.01 --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// With a threshold, channel 1 (consumer weights at most 0.005) goes; the
// exact default keeps it, as its contribution is not zero.
// CHECK: module attributes {sits.report.pruning = [{bytes = 20 : i64, consumer = "fc2", indices = [1], kind = "ffn_channels", multiple = 1 : i64, op = "fc1", removed = 1 : i64, threshold = 1.000000e-02 : f64, total = 3 : i64}, {constant_bytes_after = 40 : i64, constant_bytes_before = 60 : i64, kind = "summary", op = {{.+}}, threshold = 1.000000e-02 : f64}]}
// CHECK-LABEL: func.func @ffn
//       CHECK:   sits.matmul {{.+}} -> tensor<8x2xf32>
//       CHECK:   sits.matmul {{.+}} : (tensor<8x2xf32>, tensor<2x2xf32>) -> tensor<8x2xf32>
// EXACT: module attributes {sits.report.pruning = [{constant_bytes_after = 60 : i64, constant_bytes_before = 60 : i64, kind = "summary", op = {{.+}}, threshold = 0.000000e+00 : f64}]}
// EXACT-LABEL: func.func @ffn
//       EXACT:   sits.matmul {{.+}} -> tensor<8x3xf32>
// STATS: (S) 20 num-bytes
// STATS: (S)  1 num-channels
// STATS: (S)  0 num-heads
func.func @ffn(%x: tensor<8x2xf32>) -> tensor<8x2xf32> {
  %w1 = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %b1 = arith.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %w2 = arith.constant dense<[[1.0, 2.0], [0.005, -0.004], [5.0, 6.0]]> : tensor<3x2xf32>
  %h = sits.matmul %x, %w1 bias(%b1) {activation = #sits.activation<gelu>} : (tensor<8x2xf32>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<8x3xf32> loc("fc1")
  %y = sits.matmul %h, %w2 : (tensor<8x3xf32>, tensor<3x2xf32>) -> tensor<8x2xf32> loc("fc2")
  return %y : tensor<8x2xf32>
}
