// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-cpu-vectorize),canonicalize,cse)' | FileCheck %s

// A register tile of f32 activations times int8 weight codes (a per-channel
// sits.qmatmul): the codes are read as i8, widened in registers, and the
// multiply-add still becomes one vector.contract, on f32 vectors.
// CHECK-LABEL: func.func @int8_codes
//       CHECK:   %[[A:.+]] = vector.transfer_read %{{.+}} : tensor<8x8xf32>, vector<8x8xf32>
//       CHECK:   %[[Q:.+]] = vector.transfer_read %{{.+}} : tensor<8x32xi8>, vector<8x32xi8>
//       CHECK:   %[[B:.+]] = arith.sitofp %[[Q]] : vector<8x32xi8> to vector<8x32xf32>
//       CHECK:   vector.contract {{.+}} %[[A]], %[[B]], %{{.+}} : vector<8x8xf32>, vector<8x32xf32> into vector<8x32xf32>
//   CHECK-NOT:   linalg.matmul
func.func @int8_codes(%a: tensor<8x8xf32>, %b: tensor<8x32xi8>, %c: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %m = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x32xi8>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %m : tensor<8x32xf32>
}
