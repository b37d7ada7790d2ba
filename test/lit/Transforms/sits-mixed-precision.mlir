// RUN: sits-opt %s --split-input-file --sits-mixed-precision=precision=int8 | FileCheck %s --check-prefix=INT8
// RUN: sits-opt %s --split-input-file --sits-mixed-precision="precision=int4 group-size=32" | FileCheck %s --check-prefix=INT4
// RUN: sits-opt %s --split-input-file --sits-mixed-precision=precision=fp32 | FileCheck %s --check-prefix=FP32

// A per-channel INT8 weight: column 0 spans [-127, 127] (scale 1), column 1
// [-63.5, 63.5] (scale 0.5), so the codes are exact. Without input
// statistics the inputs are taken as zero-mean: no bias correction.

// INT8-LABEL: func.func @int8
//   INT8-DAG: %[[Q:.+]] = arith.constant dense<{{\[}}[127, 127], [-3, 2], [5, -5], [0, 1]]> : tensor<4x2xi8>
//   INT8-DAG: %[[S:.+]] = arith.constant dense<[1.000000e+00, 5.000000e-01]> : tensor<2xf32>
//       INT8: %[[Y:.+]] = sits.qmatmul %arg0, %[[Q]], %[[S]] {activation = #sits.activation<relu>, axis = 1 : i64} : (tensor<3x4xf32>, tensor<4x2xi8>, tensor<2xf32>) -> tensor<3x2xf32>
//       INT8: return %[[Y]]
// FP32-LABEL: func.func @int8
//       FP32: sits.matmul
//   FP32-NOT: sits.report.precision
func.func @int8(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<[[127.0, 63.5], [-3.0, 1.0], [5.0, -2.5], [0.0, 0.5]]> : tensor<4x2xf32>
  %y = sits.matmul %x, %w {activation = #sits.activation<relu>} : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}

// -----

// INT4 per group of 32 rows, packed two per byte along K. Column 0 holds
// integers in [-7, 7] (scale 1), column 1 halves (scale 0.5); each group
// reaches its bound. A transposed weight is read as [K, N].

// INT4: module attributes {sits.report.precision = [{{{.*}}block_shape = [64, 64], bytes = 80 : i64, est_error = 0.000000e+00 : f64, format = ["int4"], fp32_bytes = 512 : i64, input_stats = "default", kind = "quantized", op = "fc", precision = "int4", shape = [64, 2]
// INT4-LABEL: func.func @int4
//       INT4: %[[S:.+]] = arith.constant dense<{{\[}}[1.000000e+00, 5.000000e-01], [1.000000e+00, 5.000000e-01]]> : tensor<2x2xf32>
//       INT4: sits.qmatmul %arg0, %{{.+}}, %[[S]] {axis = 0 : i64, block_size = 32 : i64} : (tensor<1x5x64xf32>, tensor<64x2xi4, #sits.packed<storage = i8, axis = 0>>, tensor<2x2xf32>) -> tensor<1x5x2xf32>
//   INT4-NOT: sits.matmul
// INT4-LABEL: func.func @transposed
// INT8-LABEL: func.func @int4
//       INT8: sits.qmatmul %arg0, %{{.+}}, %{{.+}} {axis = 1 : i64} : (tensor<1x5x64xf32>, tensor<64x2xi8>, tensor<2xf32>) -> tensor<1x5x2xf32>
func.func @int4(%x: tensor<1x5x64xf32>) -> tensor<1x5x2xf32> {
  %wt = arith.constant dense<[[7.0, 3.0], [2.0, 3.5], [0.0, 0.5], [-3.0, 1.5], [-3.0, 2.5], [-7.0, 0.0], [-6.0, -1.0], [-7.0, -1.5], [-5.0, -0.5], [5.0, 0.0], [2.0, 1.5], [6.0, 3.0], [0.0, -3.0], [2.0, 3.5], [7.0, 0.0], [3.0, -1.0], [2.0, 1.5], [1.0, 0.5], [1.0, -2.0], [7.0, -1.5], [-3.0, 1.5], [5.0, 0.5], [3.0, 0.0], [-7.0, -1.0], [-2.0, 2.0], [5.0, -1.0], [1.0, -1.5], [-7.0, 3.0], [4.0, -2.0], [3.0, -2.0], [5.0, 1.5], [-5.0, 1.0], [-7.0, -3.5], [5.0, -3.0], [-7.0, -1.0], [1.0, 2.5], [-6.0, -0.5], [-3.0, 2.0], [0.0, -1.5], [-1.0, -2.0], [-1.0, -3.5], [-7.0, 3.0], [-7.0, -3.0], [-6.0, -3.5], [-7.0, 1.5], [3.0, -1.0], [0.0, 0.5], [2.0, -2.5], [-4.0, 2.5], [2.0, -0.5], [4.0, 3.0], [-2.0, 2.0], [-1.0, 1.5], [7.0, -2.0], [5.0, 2.0], [7.0, -3.5], [-2.0, 0.5], [3.0, -0.5], [7.0, 3.5], [2.0, -2.5], [5.0, 3.5], [3.0, -3.0], [3.0, 1.0], [-2.0, 0.5]]> : tensor<64x2xf32>
  %y = sits.matmul %x, %wt : (tensor<1x5x64xf32>, tensor<64x2xf32>) -> tensor<1x5x2xf32> loc("fc")
  return %y : tensor<1x5x2xf32>
}

// -----

// A weight used transposed ([N, K], as PyTorch stores Linear) is quantized
// as the [K, N] it stands for; the qmatmul reads it untransposed.

// INT8-LABEL: func.func @transposed
//       INT8: %[[Q:.+]] = arith.constant dense<{{\[}}[127, -127], [0, 127]]> : tensor<2x2xi8>
//       INT8: sits.qmatmul %arg0, %[[Q]], %{{.+}} {axis = 1 : i64} : (tensor<4x2xf32>, tensor<2x2xi8>, tensor<2xf32>) -> tensor<4x2xf32>
func.func @transposed(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %w = arith.constant dense<[[2.0, 0.0], [-1.0, 1.0]]> : tensor<2x2xf32>
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// fp16 and bf16 weights of an f32 model (kept narrow by the importer) are
// quantized from their stored values, transposed or not.

// INT8-LABEL: func.func @f16_weight
//       INT8: %[[Q:.+]] = arith.constant dense<{{\[}}[127, 127], [-3, 2], [5, -5], [0, 1]]> : tensor<4x2xi8>
//       INT8: sits.qmatmul %arg0, %[[Q]], %{{.+}} {axis = 1 : i64} : (tensor<3x4xf32>, tensor<4x2xi8>, tensor<2xf32>) -> tensor<3x2xf32>
// INT8-LABEL: func.func @bf16_weight_transposed
//       INT8: %[[Q:.+]] = arith.constant dense<{{\[}}[127, -127], [0, 127]]> : tensor<2x2xi8>
//       INT8: sits.qmatmul %arg0, %[[Q]], %{{.+}} {axis = 1 : i64} : (tensor<4x2xf32>, tensor<2x2xi8>, tensor<2xf32>) -> tensor<4x2xf32>
// FP32-LABEL: func.func @f16_weight
//       FP32: sits.matmul %arg0, %{{.+}} : (tensor<3x4xf32>, tensor<4x2xf16>) -> tensor<3x2xf32>
func.func @f16_weight(%x: tensor<3x4xf32>) -> tensor<3x2xf32> {
  %w = arith.constant dense<[[127.0, 63.5], [-3.0, 1.0], [5.0, -2.5], [0.0, 0.5]]> : tensor<4x2xf16>
  %y = sits.matmul %x, %w : (tensor<3x4xf32>, tensor<4x2xf16>) -> tensor<3x2xf32>
  return %y : tensor<3x2xf32>
}
func.func @bf16_weight_transposed(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
  %w = arith.constant dense<[[2.0, 0.0], [-1.0, 1.0]]> : tensor<2x2xbf16>
  %y = sits.matmul %x, %w {transpose_rhs} : (tensor<4x2xf32>, tensor<2x2xbf16>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

// -----

// Matmuls of two activations are not weights and are left alone silently;
// constant weights the pass cannot take are reported with the reason.

// INT8: module attributes {sits.report.precision = [{kind = "skipped", op = "lhs_t", reason = "lhs is transposed"}, {kind = "skipped", op = "half", reason = "activations are not f32"}]}
// INT8-LABEL: func.func @skipped
//       INT8: sits.matmul %arg0, %arg1
//       INT8: sits.matmul %arg1, %{{.+}} {transpose_lhs}
//       INT8: sits.matmul %arg2, %{{.+}} :
//   INT8-NOT: sits.qmatmul
func.func @skipped(%a: tensor<2x2xf32>, %b: tensor<2x2xf32>, %h: tensor<2x2xf16>) -> (tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf16>) {
  %w = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %w16 = arith.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf16>
  %0 = sits.matmul %a, %b : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %1 = sits.matmul %b, %w {transpose_lhs} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32> loc("lhs_t")
  %2 = sits.matmul %h, %w16 : (tensor<2x2xf16>, tensor<2x2xf16>) -> tensor<2x2xf16> loc("half")
  return %0, %1, %2 : tensor<2x2xf32>, tensor<2x2xf32>, tensor<2x2xf16>
}

// -----

// A layer outlined into a private function: each call's weight is quantized
// as it would be in a function of its own (the first as in @int8 above),
// and the function gets the pieces' constants (codes, scales) as new
// arguments, each call passing those of its weight, named after it. The
// report has one entry per call. Precision auto would choose different
// pieces per call: it leaves the weight alone.

// INT8: module attributes {sits.report.precision = [{{{.*}}call = "layer0", {{.*}}op = "fc", precision = "int8"{{.*}}}, {{{.*}}call = "layer1", {{.*}}op = "fc", precision = "int8"{{.*}}}]}
// INT8-LABEL: func.func private @layer
//  INT8-SAME:   (%[[X:.+]]: tensor<3x4xf32>, %[[Q:.+]]: tensor<4x2xi8>, %[[S:.+]]: tensor<2xf32>)
//       INT8:   sits.qmatmul %[[X]], %[[Q]], %[[S]] {activation = #sits.activation<relu>, axis = 1 : i64}
// INT8-LABEL: func.func @layers
//  INT8-SAME:   (%[[IN:.+]]: tensor<3x4xf32>)
//   INT8-NOT:   tensor<4x2xf32>
//       INT8:   %[[Q0:.+]] = arith.constant dense_resource<w0.qint8.0.0> : tensor<4x2xi8>
//  INT8-NEXT:   %[[S0:.+]] = arith.constant dense_resource<w0.qint8.0.0.scale> : tensor<2xf32>
//  INT8-NEXT:   call @layer(%[[IN]], %[[Q0]], %[[S0]])
//       INT8:   %[[Q1:.+]] = arith.constant dense<{{\[}}[-127, 127], [2, 0], [1, -127], [0, 64]]> : tensor<4x2xi8>
//  INT8-NEXT:   %[[S1:.+]] = arith.constant dense<[2.000000e+00, 0.00787401571]> : tensor<2xf32>
//  INT8-NEXT:   call @layer(%[[IN]], %[[Q1]], %[[S1]])
//   INT8-NOT:   tensor<4x2xf32>
// INT4-LABEL: func.func private @layer
//  INT4-SAME:   (%{{.+}}: tensor<3x4xf32>, %{{.+}}: tensor<4x2xi4, #sits.packed<storage = i8, axis = 0>>, %{{.+}}: tensor<2xf32>)
// INT4-LABEL: func.func @layers
//       INT4:   %[[Q1:.+]] = arith.constant dense<{{\[}}[-7, 7], [0, 0], [0, -7], [0, 3]]> : tensor<4x2xi4, #sits.packed<storage = i8, axis = 0>>
//  INT4-NEXT:   %[[S1:.+]] = arith.constant dense<[36.2857132, 0.142857149]> : tensor<2xf32>
//  INT4-NEXT:   call @layer(%{{.+}}, %[[Q1]], %[[S1]])
// AUTO: {kind = "skipped", op = "fc", reason = "precision auto plans each weight alone, and the calls pass different ones"}
// AUTO-LABEL: func.func private @layer
//  AUTO-SAME:   (%{{.+}}: tensor<3x4xf32>, %[[W:.+]]: tensor<4x2xf32>)
//       AUTO:   sits.matmul %{{.+}}, %[[W]]
func.func private @layer(%x: tensor<3x4xf32>, %w: tensor<4x2xf32>) -> tensor<3x2xf32> {
  %y = sits.matmul %x, %w {activation = #sits.activation<relu>} : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32> loc("fc")
  return %y : tensor<3x2xf32>
}
func.func @layers(%x: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xf32>) {
  %w0 = arith.constant dense_resource<w0> : tensor<4x2xf32>
  %y0 = call @layer(%x, %w0) : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32> loc("layer0")
  %w1 = arith.constant dense<[[-254.0, 1.0], [4.0, 0.0], [2.0, -1.0], [0.0, 0.5]]> : tensor<4x2xf32>
  %y1 = call @layer(%x, %w1) : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32> loc("layer1")
  return %y0, %y1 : tensor<3x2xf32>, tensor<3x2xf32>
}

{-#
  dialect_resources: {
    builtin: {
      w0: "0x040000000000FE4200007E42000040C00000803F0000A040000020C0000000000000003F"
    }
  }
#-}
