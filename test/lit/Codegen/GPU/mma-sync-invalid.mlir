// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-gpu-mma-sync))' --verify-diagnostics

// A warp-level bf16 contraction: sm_80 has a bf16 mma.sync, but upstream's
// vector-to-nvgpu conversion has no bf16 fragment layout (its operand
// reads do not convert). The pass fails rather than leave a half-converted
// warp. (sits-gpu-tile-and-fuse spreads only f16 contractions over warps.)
module attributes {sits.target = #sits.target<"a100">} {
  func.func @warp_bf16(%a: memref<16x16xbf16, #gpu.address_space<workgroup>>, %b: memref<16x8xbf16, #gpu.address_space<workgroup>>, %c: memref<16x8xf32>) {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : bf16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    // expected-error @+1 {{warp-level contraction does not map onto nvgpu.mma.sync}}
    scf.forall (%w, %lane) = (0, 0) to (1, 32) step (1, 1) {
      // expected-error @+1 {{failed to convert op during vector-to-nvgpu conversion}}
      %va = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xbf16, #gpu.address_space<workgroup>>, vector<16x16xbf16>
      %vb = vector.transfer_read %b[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x8xbf16, #gpu.address_space<workgroup>>, vector<16x8xbf16>
      %d = vector.contract {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x16xbf16>, vector<16x8xbf16> into vector<16x8xf32>
      vector.transfer_write %d, %c[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
    } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
    return
  }
}
