// sits.qmatmul in its integer dot-product form (sits-convert-to-linalg's
// integer-dot), run through the reference lowering: the activation
// quantization, the weight re-layout (at run time here; the CPU pipeline
// folds it) and the marked contraction compute what the kernel computes.
// Inputs are chosen so that every step is exact: the largest magnitude of a
// row is 127 or 254 (codes x or x / 2, scale 1 or 2) and the scales are
// powers of two.
//
// REQUIRES: mlir-runner
// RUN: sits-opt %s --sits-convert-to-linalg=integer-dot=true | sits-opt %lower-to-llvm | %run-main | FileCheck %s

func.func @main() {
  // INT8 per output channel, K = 4 (one activation group).
  %x8 = arith.constant dense<[[127.0, -64.0, 3.0, 0.0], [0.0, 0.0, 0.0, 0.0], [254.0, -2.0, 10.0, 100.0]]> : tensor<3x4xf32>
  %w8 = arith.constant dense<[[-32, -31, -30, -29, -28, -27, -26, -25, -24, -23, -22, -21, -20, -19, -18, -17], [-16, -15, -14, -13, -12, -11, -10, -9, -8, -7, -6, -5, -4, -3, -2, -1], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], [16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]]> : tensor<4x16xi8>
  %s8 = arith.constant dense<0.5> : tensor<16xf32>
  %y8 = sits.qmatmul %x8, %w8, %s8 {axis = 1 : i64} : (tensor<3x4xf32>, tensor<4x16xi8>, tensor<16xf32>) -> tensor<3x16xf32>
  %p8 = tensor.cast %y8 : tensor<3x16xf32> to tensor<*xf32>
  call @printMemrefF32(%p8) : (tensor<*xf32>) -> ()

  // Signed INT4 packed along K, one group of 8, bias.
  %x4 = arith.constant dense<[[127.0, 1.0, -1.0, 2.0, -3.0, 4.0, -5.0, 6.0], [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0], [254.0, 2.0, -2.0, 4.0, -6.0, 8.0, -10.0, 12.0]]> : tensor<3x8xf32>
  %w4 = arith.constant dense<[[-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7], [-7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8], [-6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7], [-5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6], [-4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5], [-3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4], [-2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3], [-1, 0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2]]> : tensor<8x16xi4, #sits.packed<storage = i8, axis = 0>>
  %s4 = arith.constant dense<0.25> : tensor<1x16xf32>
  %b4 = arith.constant dense<[0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.5, 6.0, 6.5, 7.0, 7.5]> : tensor<16xf32>
  %y4 = sits.qmatmul %x4, %w4, %s4 bias(%b4) {axis = 0 : i64, block_size = 8 : i64} : (tensor<3x8xf32>, tensor<8x16xi4, #sits.packed<storage = i8, axis = 0>>, tensor<1x16xf32>, tensor<16xf32>) -> tensor<3x16xf32>
  %p4 = tensor.cast %y4 : tensor<3x16xf32> to tensor<*xf32>
  call @printMemrefF32(%p4) : (tensor<*xf32>) -> ()
  return
}

func.func private @printMemrefF32(tensor<*xf32>) attributes {llvm.emit_c_interface}

// CHECK: rank = 2 offset = 0 sizes = [3, 16] strides = [16, 1] data =
// CHECK-NEXT: [-1520,  -1487,  -1454,  -1421,  -1388,  -1355,  -1322,  -1289,  -1256,  -1223,  -1190,  -1157,  -1124,  -1091,  -1058,  -1025],
// CHECK-NEXT: [0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0,  0],
// CHECK-NEXT: [-3248,  -3067,  -2886,  -2705,  -2524,  -2343,  -2162,  -1981,  -1800,  -1619,  -1438,  -1257,  -1076,  -895,  -714,  -533]]

// CHECK: rank = 2 offset = 0 sizes = [3, 16] strides = [16, 1] data =
// CHECK-NEXT: [-255.75,  -222.5,  -189.25,  -156,  -122.75,  -89.5,  -56.25,  -23,  10.25,  19.5,  72.75,  90,  135.25,  160.5,  197.75,  227],
// CHECK-NEXT: [0,  0.5,  1,  1.5,  2,  2.5,  3,  3.5,  4,  4.5,  5,  5.5,  6,  6.5,  7,  7.5],
// CHECK-NEXT: [-511.5,  -445.5,  -379.5,  -313.5,  -247.5,  -181.5,  -115.5,  -49.5,  16.5,  34.5,  140.5,  174.5,  264.5,  314.5,  388.5,  446.5]]
