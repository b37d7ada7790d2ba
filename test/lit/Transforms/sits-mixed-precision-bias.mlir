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

// -----

// A layer outlined into a private function: each call's statistics (its
// layer norm's beta) and bias are its own, as in a function of its own. Call
// 0 is @layer_norm_input's weight with bias [1, -1]: 1 + 2 * 0.3 = 1.6. Call
// 1 has beta [0, 3], residual 0.1 and bias [0.5, 0.25]: 0.5 + 3 * 0.1 = 0.8.
// The corrected biases, codes and scales become arguments, and the weight
// and bias arguments go; without correction the bias argument stays.

// CHECK: call = "layer0"{{.*}}input_stats = "layer_norm"{{.*}}call = "layer1"{{.*}}input_stats = "layer_norm"
// CHECK-LABEL: func.func private @layer
//  CHECK-SAME:   (%[[X:.+]]: tensor<3x2xf32>, %[[G:.+]]: tensor<2xf32>, %[[BETA:.+]]: tensor<2xf32>, %[[B:.+]]: tensor<2xf32>, %[[Q:.+]]: tensor<2x2xi8>, %[[S:.+]]: tensor<2xf32>)
//       CHECK:   %[[N:.+]] = sits.layer_norm %[[X]], %[[G]], %[[BETA]]
//       CHECK:   sits.qmatmul %[[N]], %[[Q]], %[[S]] bias(%[[B]])
// CHECK-LABEL: func.func @layers
//       CHECK:   %[[B0:.+]] = arith.constant dense<[1.600000e+00, -1.000000e+00]> : tensor<2xf32>
//  CHECK-NEXT:   %[[Q0:.+]] = arith.constant dense<{{\[}}[127, 127], [0, -127]]> : tensor<2x2xi8>
//  CHECK-NEXT:   %[[S0:.+]] = arith.constant dense<[1.000000e+00, 0.00999999977]> : tensor<2xf32>
//  CHECK-NEXT:   call @layer(%{{.+}}, %{{.+}}, %{{.+}}, %[[B0]], %[[Q0]], %[[S0]])
//       CHECK:   %[[B1:.+]] = arith.constant dense<[8.000000e-01, 2.500000e-01]> : tensor<2xf32>
//  CHECK-NEXT:   %[[Q1:.+]] = arith.constant dense<{{\[}}[127, 127], [0, -127]]> : tensor<2x2xi8>
//  CHECK-NEXT:   %[[S1:.+]] = arith.constant dense<[1.000000e+00, 0.00999999977]> : tensor<2xf32>
//  CHECK-NEXT:   call @layer(%{{.+}}, %{{.+}}, %{{.+}}, %[[B1]], %[[Q1]], %[[S1]])
//   CHECK-NOT:   tensor<2x2xf32>
// OFF-LABEL: func.func private @layer
//  OFF-SAME:   (%{{.+}}: tensor<3x2xf32>, %{{.+}}: tensor<2xf32>, %{{.+}}: tensor<2xf32>, %[[B:.+]]: tensor<2xf32>, %[[Q:.+]]: tensor<2x2xi8>, %[[S:.+]]: tensor<2xf32>)
//       OFF:   sits.qmatmul %{{.+}}, %[[Q]], %[[S]] bias(%[[B]])
// OFF-LABEL: func.func @layers
//       OFF:   %[[B0:.+]] = arith.constant dense<[1.000000e+00, -1.000000e+00]> : tensor<2xf32>
//       OFF:   call @layer(%{{.+}}, %{{.+}}, %{{.+}}, %[[B0]], %{{.+}}, %{{.+}})
func.func private @layer(%x: tensor<3x2xf32>, %gamma: tensor<2xf32>, %beta: tensor<2xf32>, %w: tensor<2x2xf32>, %b: tensor<2xf32>) -> tensor<3x2xf32> {
  %n = sits.layer_norm %x, %gamma, %beta : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %y = sits.matmul %n, %w bias(%b) : (tensor<3x2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<3x2xf32> loc("fc")
  return %y : tensor<3x2xf32>
}
func.func @layers(%x: tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %gamma = arith.constant dense<[1.0, 1.0]> : tensor<2xf32>
  %beta0 = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %w0 = arith.constant dense<[[127.0, 1.27], [0.3, -1.27]]> : tensor<2x2xf32>
  %b0 = arith.constant dense<[1.0, -1.0]> : tensor<2xf32>
  %y0 = call @layer(%x, %gamma, %beta0, %w0, %b0) : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<3x2xf32> loc("layer0")
  %beta1 = arith.constant dense<[0.0, 3.0]> : tensor<2xf32>
  %w1 = arith.constant dense<[[127.0, 1.27], [0.1, -1.27]]> : tensor<2x2xf32>
  %b1 = arith.constant dense<[0.5, 0.25]> : tensor<2xf32>
  %y1 = call @layer(%x, %gamma, %beta1, %w1, %b1) : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2x2xf32>, tensor<2xf32>) -> tensor<3x2xf32> loc("layer1")
  return %y0, %y1 : tensor<3x2xf32>, tensor<3x2xf32>
}

// -----

// One rewrite serves every call only when all correct their bias alike:
// here call 1's beta is zero (no correction), so the weight stays f32. A
// weight argument with another use is quantized and kept for that use.

// CHECK: {kind = "skipped", op = "mixed", reason = "the calls' weights differ in how their bias is corrected"}
// CHECK-LABEL: func.func private @mixed
//       CHECK:   sits.matmul
// CHECK-LABEL: func.func private @second_use
//  CHECK-SAME:   (%{{.+}}: tensor<3x2xf32>, %[[W:.+]]: tensor<2x2xf32>, %[[Q:.+]]: tensor<2x2xi8>, %[[S:.+]]: tensor<2xf32>)
//       CHECK:   sits.qmatmul %{{.+}}, %[[Q]], %[[S]]
//       CHECK:   return %{{.+}}, %[[W]]
// CHECK-LABEL: func.func @callers
//       CHECK:   %[[W:.+]] = arith.constant dense<{{.+}}> : tensor<2x2xf32>
//       CHECK:   call @mixed
//       CHECK:   call @mixed
//       CHECK:   call @second_use(%{{.+}}, %[[W]], %{{.+}}, %{{.+}})
func.func private @mixed(%x: tensor<3x2xf32>, %beta: tensor<2xf32>, %w: tensor<2x2xf32>) -> tensor<3x2xf32> {
  %gamma = arith.constant dense<[1.0, 1.0]> : tensor<2xf32>
  %n = sits.layer_norm %x, %gamma, %beta : (tensor<3x2xf32>, tensor<2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %y = sits.matmul %n, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32> loc("mixed")
  return %y : tensor<3x2xf32>
}
func.func private @second_use(%x: tensor<3x2xf32>, %w: tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<2x2xf32>) {
  %y = sits.matmul %x, %w : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32> loc("second_use")
  return %y, %w : tensor<3x2xf32>, tensor<2x2xf32>
}
func.func @callers(%x: tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<2x2xf32>) {
  %w = arith.constant dense<[[127.0, 1.27], [0.3, -1.27]]> : tensor<2x2xf32>
  %beta0 = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  %beta1 = arith.constant dense<[0.0, 0.0]> : tensor<2xf32>
  %y0 = call @mixed(%x, %beta0, %w) : (tensor<3x2xf32>, tensor<2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %y1 = call @mixed(%x, %beta1, %w) : (tensor<3x2xf32>, tensor<2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  %y2, %w2 = call @second_use(%x, %w) : (tensor<3x2xf32>, tensor<2x2xf32>) -> (tensor<3x2xf32>, tensor<2x2xf32>)
  return %y0, %y1, %y2, %w2 : tensor<3x2xf32>, tensor<3x2xf32>, tensor<3x2xf32>, tensor<2x2xf32>
}
