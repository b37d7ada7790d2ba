// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-mma-sync,canonicalize,cse))' | FileCheck %s

// A warp-level loop as sits-gpu-tile-and-fuse builds it for an f16 matmul
// (after vectorization and bufferization): each warp an m16n8 tile, k
// stepped by 16 through tiles staged in workgroup memory, the lanes
// (linear_dim_0) unread. The tile is split among the lanes in mma.sync's
// fragment layouts: A (16x16, row-major) with ldmatrix.x4, lane l pointing
// at row l mod 16, column 8 * (l / 16); B (16x8, k-major) with a
// transposing ldmatrix.x2; m16n8k16 with the f32 accumulator fragment
// carried by the loop; each lane stores its two rows (l / 4, l / 4 + 8)
// of two columns (2 * (l mod 4)).
//   CHECK-DAG: #[[$AROW:.+]] = affine_map<()[s0] -> (s0 mod 16)>
//   CHECK-DAG: #[[$ACOL:.+]] = affine_map<()[s0] -> ((s0 floordiv 16) * 8)>
//   CHECK-DAG: #[[$BCOL:.+]] = affine_map<(d0)[s0] -> (d0 + (s0 floordiv 16) * 8)>
//   CHECK-DAG: #[[$CROW:.+]] = affine_map<()[s0] -> (s0 floordiv 4)>
//   CHECK-DAG: #[[$CCOL:.+]] = affine_map<()[s0] -> (s0 * 2 - (s0 floordiv 4) * 8)>
//   CHECK-DAG: #[[$CROW8:.+]] = affine_map<()[s0] -> (s0 floordiv 4 + 8)>
// CHECK-LABEL: func.func @warp_matmul
//       CHECK:   scf.forall (%{{.+}}, %[[N:.+]], %{{.+}}) = (0, 0, 0) to (16, 16, 32) step (16, 8, 1)
//       CHECK:     scf.for {{.+}} iter_args(%[[ACC:.+]] = %{{.+}}) -> (vector<2x2xf32>)
//       CHECK:       %[[LANE:.+]] = gpu.lane_id
//       CHECK:       %[[AR:.+]] = affine.apply #[[$AROW]]()[%[[LANE]]]
//       CHECK:       %[[AC:.+]] = affine.apply #[[$ACOL]]()[%[[LANE]]]
//       CHECK:       %[[A:.+]] = nvgpu.ldmatrix %{{.+}}[%[[AR]], %[[AC]]] {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
//       CHECK:       %[[BC:.+]] = affine.apply #[[$BCOL]](%[[N]])[%[[LANE]]]
//       CHECK:       %[[B:.+]] = nvgpu.ldmatrix %{{.+}}[%[[AR]], %[[BC]]] {numTiles = 2 : i32, transpose = true} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
//       CHECK:       %[[D:.+]] = nvgpu.mma.sync(%[[A]], %[[B]], %[[ACC]]) {mmaShape = [16, 8, 16]} : (vector<4x2xf16>, vector<2x2xf16>, vector<2x2xf32>) -> vector<2x2xf32>
//       CHECK:       scf.yield %[[D]]
//       CHECK:     %[[L:.+]] = gpu.lane_id
//       CHECK:     %[[D0:.+]] = vector.extract %{{.+}}[0] : vector<2xf32> from vector<2x2xf32>
//       CHECK:     %[[R0:.+]] = affine.apply #[[$CROW]]()[%[[L]]]
//       CHECK:     %[[C:.+]] = affine.apply #[[$CCOL]]()[%[[L]]]
//       CHECK:     vector.store %[[D0]], %{{.+}}[%[[R0]], %[[C]]]
//       CHECK:     %[[D1:.+]] = vector.extract %{{.+}}[1] : vector<2xf32> from vector<2x2xf32>
//       CHECK:     %[[R8:.+]] = affine.apply #[[$CROW8]]()[%[[L]]]
//       CHECK:     vector.store %[[D1]], %{{.+}}[%[[R8]], %[[C]]]
//   CHECK-NOT:   vector.contract
//       CHECK:   return
module attributes {sits.target = #sits.target<"a100">} {
  func.func @warp_matmul(%a: memref<16x256xf16>, %b: memref<256x16xf16>, %c: memref<16x16xf32, #gpu.address_space<workgroup>>) {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %c256 = arith.constant 256 : index
    %pad = arith.constant 0.0 : f16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    scf.forall (%m, %n, %lane) = (0, 0, 0) to (16, 16, 32) step (16, 8, 1) {
      %out = memref.subview %c[0, %n] [16, 8] [1, 1] : memref<16x16xf32, #gpu.address_space<workgroup>> to memref<16x8xf32, strided<[16, 1], offset: ?>, #gpu.address_space<workgroup>>
      %r = scf.for %k = %c0 to %c256 step %c16 iter_args(%acc = %zero) -> (vector<16x8xf32>) {
        %sa = memref.subview %a[0, %k] [16, 16] [1, 1] : memref<16x256xf16> to memref<16x16xf16, strided<[256, 1], offset: ?>>
        %ta = memref.alloc() : memref<16x16xf16, #gpu.address_space<workgroup>>
        memref.copy %sa, %ta : memref<16x16xf16, strided<[256, 1], offset: ?>> to memref<16x16xf16, #gpu.address_space<workgroup>>
        %sb = memref.subview %b[%k, 0] [16, 16] [1, 1] : memref<256x16xf16> to memref<16x16xf16, strided<[16, 1], offset: ?>>
        %tb = memref.alloc() : memref<16x16xf16, #gpu.address_space<workgroup>>
        memref.copy %sb, %tb : memref<16x16xf16, strided<[16, 1], offset: ?>> to memref<16x16xf16, #gpu.address_space<workgroup>>
        %va = vector.transfer_read %ta[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xf16, #gpu.address_space<workgroup>>, vector<16x16xf16>
        %vb = vector.transfer_read %tb[%c0, %n], %pad {in_bounds = [true, true]} : memref<16x16xf16, #gpu.address_space<workgroup>>, vector<16x8xf16>
        %d = vector.contract {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %acc : vector<16x16xf16>, vector<16x8xf16> into vector<16x8xf32>
        scf.yield %d : vector<16x8xf32>
      }
      vector.transfer_write %r, %out[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32, strided<[16, 1], offset: ?>, #gpu.address_space<workgroup>>
    } {mapping = [#gpu.thread<linear_dim_2>, #gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
    return
  }
}

// -----

// Not warp-level code: the body reads the index of linear_dim_0 (each
// thread its own tile), or the target has no mma.sync (sm_70). Nothing
// changes.
// CHECK-LABEL: func.func @per_thread
//   CHECK-NOT:   nvgpu
//       CHECK:   vector.contract
// CHECK-LABEL: func.func @v100
//   CHECK-NOT:   nvgpu
//       CHECK:   vector.contract
module attributes {sits.target = #sits.target<"a100">} {
  func.func @per_thread(%a: memref<16x16xf16>, %b: memref<16x256xf16>, %c: memref<16x256xf32>) {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : f16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    scf.forall (%n) = (0) to (256) step (8) {
      %va = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xf16>, vector<16x16xf16>
      %vb = vector.transfer_read %b[%c0, %n], %pad {in_bounds = [true, true]} : memref<16x256xf16>, vector<16x8xf16>
      %d = vector.contract {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x16xf16>, vector<16x8xf16> into vector<16x8xf32>
      vector.transfer_write %d, %c[%c0, %n] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x256xf32>
    } {mapping = [#gpu.thread<linear_dim_0>]}
    return
  }
}
module attributes {sits.target = #sits.target<"v100">} {
  func.func @v100(%a: memref<16x16xf16>, %b: memref<16x8xf16>, %c: memref<16x8xf32>) {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : f16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    scf.forall (%w, %lane) = (0, 0) to (1, 32) step (1, 1) {
      %va = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xf16>, vector<16x16xf16>
      %vb = vector.transfer_read %b[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x8xf16>, vector<16x8xf16>
      %d = vector.contract {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d2, d1)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %va, %vb, %zero : vector<16x16xf16>, vector<16x8xf16> into vector<16x8xf32>
      vector.transfer_write %d, %c[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
    } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
    return
  }
}

// -----

// A linalg.generic contraction vectorizes to f32 multiplies of extended
// f16 operands (here of a B read transposed, [n, k] in memory, as a
// Q x K^T reads K): the extensions fold into the contraction, which then
// runs on tensor cores with B loaded by a non-transposing ldmatrix (from
// workgroup memory; elsewhere lanes load their fragments with plain loads).
// CHECK-LABEL: func.func @extended_operands
//       CHECK:   nvgpu.ldmatrix %{{.+}} {numTiles = 4 : i32, transpose = false} : memref<16x16xf16, #gpu.address_space<workgroup>> -> vector<4x2xf16>
//       CHECK:   nvgpu.ldmatrix %{{.+}} {numTiles = 2 : i32, transpose = false} : memref<8x16xf16, #gpu.address_space<workgroup>> -> vector<2x2xf16>
//       CHECK:   nvgpu.mma.sync
//   CHECK-NOT:   arith.extf
//   CHECK-NOT:   vector.contract
module attributes {sits.target = #sits.target<"h100">} {
  func.func @extended_operands(%a: memref<16x16xf16, #gpu.address_space<workgroup>>, %b: memref<8x16xf16, #gpu.address_space<workgroup>>, %c: memref<16x8xf32>) {
    %c0 = arith.constant 0 : index
    %pad = arith.constant 0.0 : f16
    %zero = arith.constant dense<0.0> : vector<16x8xf32>
    scf.forall (%w, %lane) = (0, 0) to (1, 32) step (1, 1) {
      %va = vector.transfer_read %a[%c0, %c0], %pad {in_bounds = [true, true]} : memref<16x16xf16, #gpu.address_space<workgroup>>, vector<16x16xf16>
      %vb = vector.transfer_read %b[%c0, %c0], %pad {in_bounds = [true, true]} : memref<8x16xf16, #gpu.address_space<workgroup>>, vector<8x16xf16>
      %ea = arith.extf %va : vector<16x16xf16> to vector<16x16xf32>
      %eb = arith.extf %vb : vector<8x16xf16> to vector<8x16xf32>
      %d = vector.contract {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %ea, %eb, %zero : vector<16x16xf32>, vector<8x16xf32> into vector<16x8xf32>
      vector.transfer_write %d, %c[%c0, %c0] {in_bounds = [true, true]} : vector<16x8xf32>, memref<16x8xf32>
    } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
    return
  }
}
