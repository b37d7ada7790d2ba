// RUN: sits-opt %s --split-input-file --verify-diagnostics

// `sits.input_stats` (calibration statistics for sits-mixed-precision)
// belongs on contractions and holds two equally long float vectors.

func.func @not_a_matmul(%x: tensor<2xf32>) -> tensor<2xf32> {
  // expected-error @+1 {{'sits.input_stats' is only valid on sits.matmul, sits.qmatmul, sits.conv and sits.qconv}}
  %y = sits.activation <relu> %x {sits.input_stats = {mean = dense<0.0> : tensor<2xf32>, mean_square = dense<1.0> : tensor<2xf32>}} : tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

func.func @sizes_differ(%x: tensor<2x2xf32>, %w: tensor<2x2xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'sits.input_stats' must be {mean, mean_square}, two 1-D float elements attributes of equal size}}
  %y = sits.matmul %x, %w {sits.input_stats = {mean = dense<0.0> : tensor<2xf32>, mean_square = dense<1.0> : tensor<3xf32>}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}

// -----

func.func @missing(%x: tensor<2x2xf32>, %w: tensor<2x2xf32>) -> tensor<2x2xf32> {
  // expected-error @+1 {{'sits.input_stats' must be {mean, mean_square}}}
  %y = sits.matmul %x, %w {sits.input_stats = {mean = dense<0.0> : tensor<2xf32>}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  return %y : tensor<2x2xf32>
}
