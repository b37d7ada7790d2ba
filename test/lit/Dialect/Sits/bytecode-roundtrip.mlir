// Writing every SITS op and attribute as MLIR bytecode and reading it back
// gives the IR the text parser gives.
//
// RUN: sits-opt %s --emit-bytecode -o %t.mlirbc
// RUN: %python -c "import sys; data = open(sys.argv[1], 'rb').read(); sys.exit(0 if data[:4] == b'ML\xefR' else 'not bytecode: %%r' %% data[:4])" %t.mlirbc
// RUN: sits-opt %t.mlirbc > %t.from-bytecode
// RUN: sits-opt %s > %t.from-text
// RUN: diff %t.from-text %t.from-bytecode
// RUN: sits-opt %s --emit-bytecode | sits-opt | FileCheck %s
// RUN: sits-opt %s --emit-bytecode | sits-opt --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

#int4 = #sits.packed<storage = i8, axis = 0>
module attributes {sits.target = #sits.target<"h100">} {
  func.func @all_ops(%x: tensor<2x8x64xf32>, %w: tensor<64x64xf32>, %b: tensor<64xf32>,
                     %img: tensor<1x4x8x8xf32>, %f: tensor<8x4x3x3xf32>,
                     %qw: tensor<64x64xi4, #int4>, %qs: tensor<2x64xf32>, %qz: tensor<2x64xi4>,
                     %q: tensor<1x4x8x16xf32>, %k: tensor<1x2x9x16xf32>, %m: tensor<8x9xf32>,
                     %g: tensor<64xf32>, %s: tensor<64xf32>)
      -> (tensor<2x8x64xf32>, tensor<1x8x4x4xf32>, tensor<2x8x64xf32>, tensor<1x4x8x16xf32>,
          tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>,
          tensor<64x64xf32>) {
    %0 = sits.matmul %x, %w bias(%b) {transpose_rhs, activation = #sits.activation<gelu_tanh>}
        : (tensor<2x8x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    %1 = sits.conv %img, %f {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>,
                             activation = #sits.activation<relu>}
        : (tensor<1x4x8x8xf32>, tensor<8x4x3x3xf32>) -> tensor<1x8x4x4xf32>
    %2 = sits.qmatmul %x, %qw, %qs zero_point(%qz) bias(%b) {axis = 0 : i64, block_size = 32 : i64,
                                                             activation = #sits.activation<silu>}
        : (tensor<2x8x64xf32>, tensor<64x64xi4, #int4>, tensor<2x64xf32>, tensor<2x64xi4>, tensor<64xf32>)
        -> tensor<2x8x64xf32>
    %3 = sits.attention %q, %k, %k mask(%m) {causal, scale = 1.250000e-01 : f64}
        : (tensor<1x4x8x16xf32>, tensor<1x2x9x16xf32>, tensor<1x2x9x16xf32>, tensor<8x9xf32>) -> tensor<1x4x8x16xf32>
    %4 = sits.layer_norm %x, %g, %b {epsilon = 1.0e-06 : f64}
        : (tensor<2x8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    %5 = sits.rms_norm %x, %g {axis = -1 : i64, epsilon = 1.0e-06 : f64} : (tensor<2x8x64xf32>, tensor<64xf32>) -> tensor<2x8x64xf32>
    %6 = sits.softmax %x {axis = 1 : i64} : tensor<2x8x64xf32>
    %7 = sits.activation <sigmoid> %x : tensor<2x8x64xf32>
    %8 = sits.quantize %w, %s {axis = 1 : i64} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xi8>
    %9 = sits.dequantize %8, %s {axis = 1 : i64} : (tensor<64x64xi8>, tensor<64xf32>) -> tensor<64x64xf32>
    return %0, %1, %2, %3, %4, %5, %6, %7, %9 : tensor<2x8x64xf32>, tensor<1x8x4x4xf32>, tensor<2x8x64xf32>,
        tensor<1x4x8x16xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>, tensor<2x8x64xf32>,
        tensor<64x64xf32>
  }
}

// CHECK: module attributes {sits.target = #sits.target<"h100">}
// CHECK-LABEL: func.func @all_ops
//  CHECK-SAME: %[[X:[^:]+]]: tensor<2x8x64xf32>, %[[W:[^:]+]]: tensor<64x64xf32>, %[[B:[^:]+]]: tensor<64xf32>,
//  CHECK-SAME: %[[IMG:[^:]+]]: tensor<1x4x8x8xf32>, %[[F:[^:]+]]: tensor<8x4x3x3xf32>,
//  CHECK-SAME: %[[QW:[^:]+]]: tensor<64x64xi4, #sits.packed<storage = i8, axis = 0>>, %[[QS:[^:]+]]: tensor<2x64xf32>, %[[QZ:[^:]+]]: tensor<2x64xi4>,
//  CHECK-SAME: %[[Q:[^:]+]]: tensor<1x4x8x16xf32>, %[[K:[^:]+]]: tensor<1x2x9x16xf32>, %[[M:[^:]+]]: tensor<8x9xf32>,
//  CHECK-SAME: %[[G:[^:]+]]: tensor<64xf32>, %[[S:[^:]+]]: tensor<64xf32>
//       CHECK:   %[[R0:.+]] = sits.matmul %[[X]], %[[W]] bias(%[[B]]) {activation = #sits.activation<gelu_tanh>, transpose_rhs}
//       CHECK:   %[[R1:.+]] = sits.conv %[[IMG]], %[[F]] {activation = #sits.activation<relu>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
//       CHECK:   %[[R2:.+]] = sits.qmatmul %[[X]], %[[QW]], %[[QS]] zero_point(%[[QZ]]) bias(%[[B]]) {activation = #sits.activation<silu>, axis = 0 : i64, block_size = 32 : i64}
//       CHECK:   %[[R3:.+]] = sits.attention %[[Q]], %[[K]], %[[K]] mask(%[[M]]) {causal, scale = 1.250000e-01 : f64}
//       CHECK:   %[[R4:.+]] = sits.layer_norm %[[X]], %[[G]], %[[B]] {epsilon = 9.9999999999999995E-7 : f64}
//       CHECK:   %[[R5:.+]] = sits.rms_norm %[[X]], %[[G]] {epsilon = 9.9999999999999995E-7 : f64}
//       CHECK:   %[[R6:.+]] = sits.softmax %[[X]] {axis = 1 : i64}
//       CHECK:   %[[R7:.+]] = sits.activation <sigmoid> %[[X]]
//       CHECK:   %[[R8:.+]] = sits.quantize %[[W]], %[[S]] {axis = 1 : i64} : (tensor<64x64xf32>, tensor<64xf32>) -> tensor<64x64xi8>
//       CHECK:   %[[R9:.+]] = sits.dequantize %[[R8]], %[[S]] {axis = 1 : i64} : (tensor<64x64xi8>, tensor<64xf32>) -> tensor<64x64xf32>
//       CHECK:   return %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[R4]], %[[R5]], %[[R6]], %[[R7]], %[[R9]]

// Properties come back from bytecode with their defaults and segment sizes.
// GENERIC: "sits.qmatmul"
// GENERIC-SAME: operandSegmentSizes = array<i32: 1, 1, 1, 1, 1>
// GENERIC: "sits.rms_norm"
// GENERIC-SAME: <{axis = -1 : i64, epsilon = 9.9999999999999995E-7 : f64}>
