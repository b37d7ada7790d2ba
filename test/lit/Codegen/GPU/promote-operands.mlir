// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse,sits-gpu-promote-operands),canonicalize,cse)' | FileCheck %s
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse,sits-gpu-promote-operands{max-bytes=1024}),canonicalize,cse)' | FileCheck %s --check-prefix=SMALL
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse,sits-gpu-promote-operands{workgroup-memory=false}),canonicalize,cse)' | FileCheck %s --check-prefix=CPU

// Each step of a block's reduction copies the block's 32x16 tile of A and
// 16x32 tile of B into workgroup memory (every thread copies all of it, a
// marked copy that sits-gpu-distribute-copies shares among them), and each
// thread reads its 4x16 and 16x4 slices from there.

// CHECK-LABEL: func.func @matmul
//       CHECK:   scf.forall (%[[BM:.+]], %[[BN:.+]]) = (0, 0) to (128, 512) step (32, 32)
//   CHECK-DAG:     %[[ABLK:.+]] = tensor.extract_slice %{{.+}}[%[[BM]], 0] [32, 256] [1, 1]
//   CHECK-DAG:     %[[BBLK:.+]] = tensor.extract_slice %{{.+}}[0, %[[BN]]] [256, 32] [1, 1]
//       CHECK:     scf.forall (%[[TM:.+]], %[[TN:.+]]) = (0, 0) to (32, 32) step (4, 4)
//       CHECK:       scf.for %[[K:.+]] = %c0 to %c256 step %c16
//       CHECK:         %[[AT:.+]] = tensor.extract_slice %[[ABLK]][0, %[[K]]] [32, 16] [1, 1]
//       CHECK:         %[[ABUF:.+]] = bufferization.alloc_tensor() {memory_space = #gpu.address_space<workgroup>} : tensor<32x16xf32>
//       CHECK:         %[[AS:.+]] = linalg.copy {sits_cooperative} ins(%[[AT]] : tensor<32x16xf32>) outs(%[[ABUF]] : tensor<32x16xf32>)
//       CHECK:         %[[A:.+]] = tensor.extract_slice %[[AS]][%[[TM]], 0] [4, 16] [1, 1]
//       CHECK:         %[[BT:.+]] = tensor.extract_slice %[[BBLK]][%[[K]], 0] [16, 32] [1, 1]
//       CHECK:         %[[BBUF:.+]] = bufferization.alloc_tensor() {memory_space = #gpu.address_space<workgroup>} : tensor<16x32xf32>
//       CHECK:         %[[BS:.+]] = linalg.copy {sits_cooperative} ins(%[[BT]] : tensor<16x32xf32>) outs(%[[BBUF]] : tensor<16x32xf32>)
//       CHECK:         %[[B:.+]] = tensor.extract_slice %[[BS]][0, %[[TN]]] [16, 4] [1, 1]
//       CHECK:         linalg.matmul ins(%[[A]], %[[B]] : tensor<4x16xf32>, tensor<16x4xf32>)

// To run the tiled code on a CPU, the same staging without memory space.
// CPU-LABEL: func.func @matmul
//       CPU:   bufferization.alloc_tensor() : tensor<32x16xf32>
//       CPU:   linalg.copy {sits_cooperative}
//   CPU-NOT:   #gpu.address_space

// Tiles larger than max-bytes stay in global memory.
// SMALL-LABEL: func.func @matmul
//   SMALL-NOT:   bufferization.alloc_tensor
//   SMALL-NOT:   sits_cooperative
func.func @matmul(%a: tensor<128x256xf32>, %b: tensor<256x512xf32>) -> tensor<128x512xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x512xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<128x512xf32>) -> tensor<128x512xf32>
  %m = linalg.matmul ins(%a, %b : tensor<128x256xf32>, tensor<256x512xf32>) outs(%f : tensor<128x512xf32>) -> tensor<128x512xf32>
  return %m : tensor<128x512xf32>
}

// -----

// A row sum that the block's threads all read lives in workgroup memory:
// one thread loop writes it (a row per thread), the next reads it.

#id = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
// SMALL-LABEL: func.func @center_rows
// CHECK-LABEL: func.func @center_rows
//       CHECK:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (2048, 256) step (4, 256)
//       CHECK:     %[[SUM:.+]] = bufferization.alloc_tensor() {memory_space = #gpu.address_space<workgroup>} : tensor<4xf32>
//       CHECK:     %[[ROWS:.+]] = scf.forall (%{{.+}}) in (4) shared_outs(%{{.+}} = %[[SUM]])
//       CHECK:     } {mapping = [#gpu.thread<linear_dim_0>]}
//       CHECK:     scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (4, 256) step (1, 4)
//       CHECK:       tensor.extract_slice %[[ROWS]]
//       CHECK:       arith.subf
func.func @center_rows(%x: tensor<2048x256xf32>) -> tensor<2048x256xf32> {
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<2048xf32>
  %e2 = tensor.empty() : tensor<2048x256xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<2048xf32>) -> tensor<2048xf32>
  %sum = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<2048x256xf32>) outs(%init : tensor<2048xf32>) {
  ^bb0(%a: f32, %s: f32):
    %r = arith.addf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2048xf32>
  %y = linalg.generic {indexing_maps = [#id, #red, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %sum : tensor<2048x256xf32>, tensor<2048xf32>) outs(%e2 : tensor<2048x256xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %r = arith.subf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<2048x256xf32>
  return %y : tensor<2048x256xf32>
}
