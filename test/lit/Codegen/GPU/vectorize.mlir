// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse,sits-gpu-promote-operands),canonicalize,cse,func.func(sits-gpu-vectorize),canonicalize,cse)' | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse,sits-gpu-promote-operands),canonicalize,cse,func.func(sits-gpu-vectorize))' --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS

// A thread's 4x4 tile of a matmul + bias + ReLU: the accumulator is a
// vector carried through the reduction loop (registers), each step reads
// the thread's slices of the staged tiles as vectors into a vector.contract,
// and the epilogue works on the accumulator vector. The staged copies stay
// linalg.copy for sits-gpu-distribute-copies.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @matmul_epilogue
//       CHECK:   scf.forall (%[[TM:.+]], %[[TN:.+]]) = (0, 0) to (32, 32) step (4, 4)
//       CHECK:     %[[ACC:.+]] = scf.for %{{.+}} = %c0 to %c256 step %c16 iter_args(%[[C:.+]] = %{{.+}}) -> (vector<4x4xf32>)
//       CHECK:       %[[AS:.+]] = linalg.copy {sits_cooperative}
//       CHECK:       %[[BS:.+]] = linalg.copy {sits_cooperative}
//       CHECK:       %[[A:.+]] = vector.transfer_read %[[AS]][%[[TM]], %c0]{{.+}} : tensor<32x16xf32>, vector<4x16xf32>
//       CHECK:       %[[B:.+]] = vector.transfer_read %[[BS]][%c0, %[[TN]]]{{.+}} : tensor<16x32xf32>, vector<16x4xf32>
//       CHECK:       %[[R:.+]] = vector.contract {{.+}} %[[A]], %[[B]], %[[C]] : vector<4x16xf32>, vector<16x4xf32> into vector<4x4xf32>
//       CHECK:       scf.yield %[[R]] : vector<4x4xf32>
//       CHECK:     vector.broadcast %{{.+}} : vector<4xf32> to vector<4x4xf32>
//       CHECK:     %[[S:.+]] = arith.addf %[[ACC]], %{{.+}} : vector<4x4xf32>
//       CHECK:     %[[Y:.+]] = arith.maximumf %[[S]], %{{.+}} : vector<4x4xf32>
//       CHECK:     vector.transfer_write %[[Y]]
//   CHECK-NOT:   linalg.matmul
//   CHECK-NOT:   linalg.generic
// STATS: (S) 3 num-vectorized
func.func @matmul_epilogue(%a: tensor<128x256xf32>, %b: tensor<256x512xf32>, %bias: tensor<512xf32>) -> tensor<128x512xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x512xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<128x512xf32>) -> tensor<128x512xf32>
  %m = linalg.matmul ins(%a, %b : tensor<128x256xf32>, tensor<256x512xf32>) outs(%f : tensor<128x512xf32>) -> tensor<128x512xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%m, %bias : tensor<128x512xf32>, tensor<512xf32>) outs(%e : tensor<128x512xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.maximumf %s, %z : f32
    linalg.yield %t : f32
  } -> tensor<128x512xf32>
  return %r : tensor<128x512xf32>
}
