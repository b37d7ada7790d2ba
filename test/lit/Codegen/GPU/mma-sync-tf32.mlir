// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-gpu-mma-sync{tf32=true},canonicalize,cse))' | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-gpu-mma-sync,canonicalize,cse))' | FileCheck %s --check-prefix=FMA

// A warp-level f32 contraction (m16n8k8): with tf32 its multiplies run on
// tensor cores in TF32 (nvgpu.mma.sync marked tf32Enabled); by default it
// is left alone, as sits-gpu-tile-and-fuse does not make such loops then.
// CHECK-LABEL: func.func @warp_tf32
//       CHECK:   nvgpu.ldmatrix %{{.+}} {numTiles = 4 : i32, transpose = false} : memref<16x8xf32, #gpu.address_space<workgroup>> -> vector<4x1xf32>
//       CHECK:   nvgpu.mma.sync(%{{.+}}, %{{.+}}, %{{.+}}) {mmaShape = [16, 8, 8], tf32Enabled} : (vector<4x1xf32>, vector<2x1xf32>, vector<2x2xf32>) -> vector<2x2xf32>
//   CHECK-NOT:   vector.contract
// FMA-LABEL: func.func @warp_tf32
//   FMA-NOT:   nvgpu
//       FMA:   vector.contract
module attributes {sits.target = #sits.target<"h100">} {
  func.func @warp_tf32(%a: memref<16x8xf32, #gpu.address_space<workgroup>>, %b: memref<8x8xf32, #gpu.address_space<workgroup>>, %c: memref<16x8xf32>) {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : f32
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    scf.forall (%w, %lane) = (0, 0) to (1, 32) step (1, 1) {
      %va = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x8xf32, #gpu.address_space<workgroup>>, vector<16x8xf32>
      %vb = vector.transfer_read %b[%c0, %c0], %pad {in_bounds = [true, true]} : memref<8x8xf32, #gpu.address_space<workgroup>>, vector<8x8xf32>
      %d = vector.contract {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x8xf32>, vector<8x8xf32> into vector<16x8xf32>
      vector.transfer_write %d, %c[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
    } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
    return
  }
}
