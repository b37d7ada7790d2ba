// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse),canonicalize,cse)' | FileCheck %s
// RUN: sed 's/"a100"/"h100"/' %s | sits-opt --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse),canonicalize,cse)' | FileCheck %s
// RUN: sed 's/"a100"/"v100"/' %s | sits-opt --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse),canonicalize,cse)' | FileCheck %s --check-prefix=FMA
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse{tensor-cores=false}),canonicalize,cse)' | FileCheck %s --check-prefix=FMA
// RUN: sed 's/xf16>/xf32>/g' %s | sits-opt --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse),canonicalize,cse)' | FileCheck %s --check-prefix=FMA
// RUN: sed 's/xf16>/xf32>/g' %s | sits-opt --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse{tf32=true}),canonicalize,cse)' | FileCheck %s --check-prefix=TF32

// An f16 matmul accumulating in f32, with a bias+ReLU epilogue, on a
// target with tensor cores (sm_80, sm_90): the matmul is not fused into the
// epilogue's threads but tiled over warps in a thread loop of its own, one
// m16n8 output tile per warp stepping k by 16, whose innermost dimension
// (linear_dim_0) runs over the 32 lanes of a warp and is not read. Its
// result stays in the block (workgroup memory after promotion) for the
// epilogue's 4x4 thread tiles. The block tile (16x16 here, shrunk until the
// SMs have work) then needs 2 warps.
// CHECK-LABEL: func.func @matmul_f16
//       CHECK:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (128, 512) step (16, 16)
//       CHECK:     %[[MM:.+]] = scf.forall (%{{.+}}, %[[N:.+]], %[[LANE:.+]]) = (0, 0, 0) to (16, 16, 32) step (16, 8, 1)
//   CHECK-NOT:       %[[LANE]]
//       CHECK:       linalg.fill {{.+}} -> tensor<16x8xf32>
//       CHECK:       scf.for %{{.+}} = %c0 to %c256 step %c16 iter_args
//       CHECK:         linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<16x16xf16>, tensor<16x8xf16>) outs(%{{.+}} : tensor<16x8xf32>)
//       CHECK:     } {mapping = [#gpu.thread<linear_dim_2>, #gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
//       CHECK:     scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (16, 16) step (4, 4)
//       CHECK:       tensor.extract_slice %[[MM]]
//       CHECK:       linalg.generic
//  CHECK-SAME:         ins(%{{.+}}, %{{.+}} : tensor<4x4xf32>, tensor<4xf32>)
//       CHECK:     } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
//       CHECK:   } {mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}

// Without tensor cores (sm_70, tensor-cores=false, f32 operands): FMA on
// 4x4 register tiles, the matmul fused into the epilogue's threads.
// FMA-LABEL: func.func @matmul_f16
//       FMA:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (128, 512) step (32, 32)
//       FMA:     scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (32, 32) step (4, 4)
//       FMA:       linalg.fill {{.+}} -> tensor<4x4xf32>
//       FMA:       linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<4x16xf{{16|32}}>, tensor<16x4xf{{16|32}}>) outs(%{{.+}} : tensor<4x4xf32>)
//       FMA:       linalg.generic
//       FMA:     } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
//   FMA-NOT:   linear_dim_2
// With tf32=true, f32 operands are tiled over warps the same way, k stepped
// by 8 (m16n8k8).
// TF32-LABEL: func.func @matmul_f16
//       TF32:   scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) = (0, 0, 0) to (16, 16, 32) step (16, 8, 1)
//       TF32:     scf.for %{{.+}} = %c0 to %c256 step %c8 iter_args
//       TF32:       linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<16x8xf32>, tensor<8x8xf32>) outs(%{{.+}} : tensor<16x8xf32>)
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
module attributes {sits.target = #sits.target<"a100">} {
  func.func @matmul_f16(%a: tensor<128x256xf16>, %b: tensor<256x512xf16>, %bias: tensor<512xf32>) -> tensor<128x512xf32> {
    %z = arith.constant 0.0 : f32
    %e = tensor.empty() : tensor<128x512xf32>
    %f = linalg.fill ins(%z : f32) outs(%e : tensor<128x512xf32>) -> tensor<128x512xf32>
    %m = linalg.matmul ins(%a, %b : tensor<128x256xf16>, tensor<256x512xf16>) outs(%f : tensor<128x512xf32>) -> tensor<128x512xf32>
    %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%m, %bias : tensor<128x512xf32>, tensor<512xf32>) outs(%e : tensor<128x512xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %s = arith.addf %x, %y : f32
      %t = arith.maximumf %s, %z : f32
      linalg.yield %t : f32
    } -> tensor<128x512xf32>
    return %r : tensor<128x512xf32>
  }
}
