// Printing every SITS op in the generic form, re-parsing that and printing it
// again (generic or custom) gives the same IR.
//
// RUN: sits-opt %s --split-input-file --mlir-print-op-generic > %t.generic
// RUN: FileCheck %s --check-prefix=GENERIC --input-file=%t.generic
// RUN: sits-opt %t.generic --split-input-file --mlir-print-op-generic > %t.generic2
// RUN: diff %t.generic %t.generic2
// RUN: sits-opt %s --split-input-file > %t.custom
// RUN: sits-opt %t.generic --split-input-file > %t.custom2
// RUN: diff %t.custom %t.custom2
// RUN: FileCheck %s --check-prefix=CUSTOM --input-file=%t.custom2

func.func @all_ops(%x: tensor<2x8x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>,
                   %img: tensor<1x4x8x8xf32>, %f: tensor<8x4x3x3xf32>, %fb: tensor<8xf32>,
                   %qw: tensor<64x64xi4, #sits.packed<storage = i8, axis = 0>>, %qs: tensor<2x64xf32>,
                   %qz: tensor<2x64xi4>, %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>,
                   %m: tensor<1x1x8x8xi1>, %g: tensor<64xf32>, %s: tensor<64xf32>) {
  %0 = sits.matmul %x, %w bias(%b) {transpose_rhs, activation = #sits.activation<gelu>}
      : (tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %1 = sits.conv %img, %f bias(%fb) {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>,
                                     dilations = array<i64: 1, 1>, groups = 1 : i64,
                                     activation = #sits.activation<relu>}
      : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>, tensor<8xf32>) -> tensor<1x8x4x4xf32>
  %2 = sits.qmatmul %x, %qw, %qs zero_point(%qz) bias(%b) {axis = 0 : i64, block_size = 32 : i64}
      : (tensor<2x8x64xf32>, tensor<64x64xi4, #sits.packed<storage = i8, axis = 0>>, tensor<2x64xf32>,
         tensor<2x64xi4>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %3 = sits.qmatmul %x, %qw, %qs {axis = 0 : i64, block_size = 32 : i64, transpose_weight}
      : (tensor<2x8x64xf32>, tensor<64x64xi4, #sits.packed<storage = i8, axis = 0>>, tensor<2x64xf32>)
      -> tensor<2x8x64xf32>
  %4 = sits.attention %q, %k, %k mask(%m) {causal, scale = 1.250000e-01 : f64}
      : (tensor<1x4x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x2x8x16xf32>, tensor<1x1x8x8xi1>) -> tensor<1x4x8x16xf32>
  %5 = sits.layer_norm %x, %g, %b {epsilon = 1.0e-06 : f64}
      : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %6 = sits.rms_norm %x, %g {axis = 2 : i64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
  %7 = sits.softmax %x {axis = 1 : i64} : tensor<2x8x64xf32>
  %8 = sits.activation <silu> %x : tensor<2x8x64xf32>
  %9 = sits.quantize %w, %s {axis = 1 : i64} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xi8>
  %10 = sits.dequantize %9, %s {axis = 1 : i64} : (tensor<64x64xi8>, tensor<64xf32>) -> tensor<64x64xf32>
  return
}

// The generic form spells out the properties, including defaulted ones, and
// the operand segments of sits.qmatmul (input, weight, scale, zero_point, bias).
// GENERIC-LABEL: "func.func"
//       GENERIC:   "sits.matmul"(%{{.+}}) <{activation = #sits.activation<gelu>, transpose_rhs}>
//       GENERIC:   "sits.conv"(%{{.+}}) <{activation = #sits.activation<relu>, dilations = array<i64: 1, 1>, groups = 1 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}>
//       GENERIC:   "sits.qmatmul"(%{{.+}}) <{activation = #sits.activation<none>, axis = 0 : i64, block_size = 32 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>}>
//       GENERIC:   "sits.qmatmul"(%{{.+}}) <{activation = #sits.activation<none>, axis = 0 : i64, block_size = 32 : i64, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>, transpose_weight}>
//       GENERIC:   "sits.attention"(%{{.+}}) <{causal, scale = 1.250000e-01 : f64}>
//       GENERIC:   "sits.layer_norm"(%{{.+}}) <{axis = -1 : i64, epsilon = 9.9999999999999995E-7 : f64}>
//       GENERIC:   "sits.rms_norm"(%{{.+}}) <{axis = 2 : i64, epsilon = 1.000000e-05 : f64}>
//       GENERIC:   "sits.softmax"(%{{.+}}) <{axis = 1 : i64}>
//       GENERIC:   "sits.activation"(%{{.+}}) <{kind = #sits.activation<silu>}>
//       GENERIC:   "sits.quantize"(%{{.+}}) <{axis = 1 : i64}>
//       GENERIC:   "sits.dequantize"(%{{.+}}) <{axis = 1 : i64}>

// CUSTOM-LABEL: func.func @all_ops
//       CUSTOM:   sits.matmul {{.+}} {activation = #sits.activation<gelu>, transpose_rhs}
//       CUSTOM:   sits.conv {{.+}} {activation = #sits.activation<relu>, dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
//       CUSTOM:   sits.qmatmul {{.+}} zero_point(%{{.+}}) bias(%{{.+}}) {axis = 0 : i64, block_size = 32 : i64}
//       CUSTOM:   sits.qmatmul {{.+}} {axis = 0 : i64, block_size = 32 : i64, transpose_weight}
//       CUSTOM:   sits.attention {{.+}} mask(%{{.+}}) {causal, scale = 1.250000e-01 : f64}
//       CUSTOM:   sits.layer_norm {{.+}} {epsilon = 9.9999999999999995E-7 : f64}
//       CUSTOM:   sits.rms_norm {{.+}} {axis = 2 : i64}
//       CUSTOM:   sits.softmax {{.+}} {axis = 1 : i64}
//       CUSTOM:   sits.activation <silu>
//       CUSTOM:   sits.quantize {{.+}} {axis = 1 : i64}
//       CUSTOM:   sits.dequantize {{.+}} {axis = 1 : i64}

// -----

// Attributes and encodings survive the generic form too.
module attributes {sits.target = #sits.target<"a100">} {
  func.func @attrs(%w: tensor<8x32xi4, #sits.packed<storage = i32, axis = 1>>) attributes {act = #sits.activation<tanh>} {
    return
  }
}
// GENERIC-LABEL: "builtin.module"
//       GENERIC:   "func.func"() <{function_type = (tensor<8x32xi4, #sits.packed<storage = i32, axis = 1>>) -> ()
//       GENERIC:   }) {act = #sits.activation<tanh>} : () -> ()
//       GENERIC: }) {sits.target = #sits.target<"a100">} : () -> ()

// CUSTOM: module attributes {sits.target = #sits.target<"a100">}
// CUSTOM:   func.func @attrs(%{{.+}}: tensor<8x32xi4, #sits.packed<storage = i32, axis = 1>>) attributes {act = #sits.activation<tanh>}
