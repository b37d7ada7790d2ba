// RUN: sits-opt %s --split-input-file --sits-mixed-precision=precision=int8 | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-mixed-precision="precision=int8 bias-correction=false" | FileCheck %s --check-prefix=OFF

// Bias correction adds E[x] . (W - Q(W)) to each output channel. Here the
// input comes from a layer norm, so E[x] is its beta = [1, 2]. Column 0 of W
// is [127, 0.3]: scale 1, codes [127, 0], residual [0, 0.3], so the bias
// gains 2 * 0.3 = 0.6. Column 1 ([1.27, -1.27], scale 0.01) is exact.

// CHECK: input_stats = "layer_norm"
// CHECK-LABEL: func.func @layer_norm_input
//       CHECK: %[[B:.+]] = arith.constant dense<[6.000000{{[0-9]*}}e-01, 0.000000e+00]> : tensor<2xf32>
//       CHECK: sits.qmatmul %{{.+}}, %{{.+}}, %{{.+}} bias(%[[B]])
// OFF-LABEL: func.func @layer_norm_input
//   OFF-NOT: bias(
func.func @layer_norm_input(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %gamma = arith.constant dense<[1.0, 1.0]> : tensor<2xf32>
  %beta = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %n = sits.layer_norm %x, %gamma, %beta : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %w = arith.constant dense<[[127.0, 1.27], [0.3, -1.27]]> : tensor<2x2xf32>
  %y = sits.matmul %n, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// Measured statistics (a calibration set) take precedence, and an existing
// bias gets the correction folded in: E[x] = [-1, 4] gives column 0 a
// correction of 4 * 0.3 = 1.2 on top of its bias 1.

// CHECK: input_stats = "calibration"
// CHECK-LABEL: func.func @calibrated
//       CHECK: %[[B:.+]] = arith.constant dense<[2.2{{0*[0-9]*}}e+00, -1.000000e+00]> : tensor<2xf32>
//       CHECK: sits.qmatmul %arg0, %{{.+}}, %{{.+}} bias(%[[B]])
// OFF-LABEL: func.func @calibrated
//       OFF: %[[B:.+]] = arith.constant dense<[1.000000e+00, -1.000000e+00]> : tensor<2xf32>
//       OFF: sits.qmatmul %arg0, %{{.+}}, %{{.+}} bias(%[[B]])
func.func @calibrated(%x: tensor<3x2xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<[[127.0, 1.27], [0.3, -1.27]]> : tensor<2x2xf32>
  %b = arith.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %y = sits.matmul %x, %w bias(%b) {sits.input_stats = {mean = dense<[-1.0, 4.0]> : tensor<2xf32>, mean_square = dense<[2.0, 17.0]> : tensor<2xf32>}} : (tensor<3x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}
