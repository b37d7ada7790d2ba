// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v4},func.func(sits-cpu-tile-and-fuse{num-threads=2}),canonicalize,cse)' | FileCheck %s
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v4},func.func(sits-cpu-tile-and-fuse{num-threads=2}))' --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-set-target{target=x86-64-v3},func.func(sits-cpu-tile-and-fuse{num-threads=2}),canonicalize,cse)' | FileCheck %s --check-prefix=V3

// A matmul with a bias+relu epilogue becomes one fusion group: one
// scf.forall over 128x128 output tiles, each computing its slice of the
// matmul (fill, then a kc=256 reduction loop around a register block
// stepping k by eight) and then the epilogue on that slice. The register
// block fits the target's register file: 8x32 (16 zmm accumulators of 32)
// on x86-64-v4, 4x16 (8 ymm accumulators of 16) on x86-64-v3, where
// elementwise pieces are 4 vectors of 8 lanes.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @matmul_epilogue
//       CHECK:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (512, 512) step (128, 128)
//       CHECK:     linalg.fill
//       CHECK:     scf.for %{{.+}} = %{{.+}} to %{{.+}} step %[[C256:.+]] iter_args
//       CHECK:       scf.for
//       CHECK:         scf.for
//       CHECK:           scf.for
//       CHECK:             linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<8x8xf32>, tensor<8x32xf32>) outs(%{{.+}} : tensor<8x32xf32>)
//       CHECK:     linalg.generic
//  CHECK-SAME:       ins(%{{.+}}, %{{.+}} : tensor<1x64xf32>, tensor<64xf32>)
//       CHECK:     scf.forall.in_parallel
//   CHECK-NOT:   scf.forall (
//       CHECK:   return
// STATS: (S) 2 num-fused
// STATS: (S) 1 num-groups
// V3-LABEL: func.func @matmul_epilogue
//       V3:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (512, 512) step (128, 128)
//       V3:     linalg.fill {{.+}} -> tensor<1x32xf32>
//       V3:     scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args
//       V3:       scf.for
//       V3:         scf.for
//       V3:           scf.for
//       V3:             linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<4x8xf32>, tensor<8x16xf32>) outs(%{{.+}} : tensor<4x16xf32>)
//       V3:     linalg.generic
//  V3-SAME:       ins(%{{.+}}, %{{.+}} : tensor<1x32xf32>, tensor<32xf32>)
//       V3:     scf.forall.in_parallel
func.func @matmul_epilogue(%a: tensor<512x512xf32>, %b: tensor<512x512xf32>, %bias: tensor<512xf32>) -> tensor<512x512xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<512x512xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<512x512xf32>) -> tensor<512x512xf32>
  %m = linalg.matmul ins(%a, %b : tensor<512x512xf32>, tensor<512x512xf32>) outs(%f : tensor<512x512xf32>) -> tensor<512x512xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%m, %bias : tensor<512x512xf32>, tensor<512xf32>) outs(%e : tensor<512x512xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.maximumf %s, %z : f32
    linalg.yield %t : f32
  } -> tensor<512x512xf32>
  return %r : tensor<512x512xf32>
}

// -----

// A matmul whose result has a second user is not recomputed: it stays a
// group of its own and both consumers read its result.

#id = affine_map<(d0, d1) -> (d0, d1)>
// CHECK-LABEL: func.func @shared_matmul
//       CHECK:   %[[M:.+]] = scf.forall
//       CHECK:     linalg.matmul
//       CHECK:   scf.forall
//   CHECK-NOT:     linalg.matmul
//       CHECK:   return %[[M]],
func.func @shared_matmul(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> (tensor<64x64xf32>, tensor<64x64xf32>) {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m = linalg.matmul ins(%a, %b : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%m : tensor<64x64xf32>) outs(%e : tensor<64x64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %t = arith.maximumf %x, %z : f32
    linalg.yield %t : f32
  } -> tensor<64x64xf32>
  return %m, %r : tensor<64x64xf32>, tensor<64x64xf32>
}

// -----

// Row reductions (softmax) keep each row whole inside a tile: the forall
// splits the rows across threads and the max, exp-sum and division of a row
// are fused into the same tile.

#id = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @softmax_rows
//       CHECK:   scf.forall (%{{.+}}) = (0) to (128) step (32)
//       CHECK:     scf.for
//       CHECK:       linalg.generic {{.+}} iterator_types = ["parallel", "reduction"]
//  CHECK-SAME:         ins(%{{.+}} : tensor<1x512xf32>)
//       CHECK:     scf.for
//       CHECK:       linalg.generic {{.+}} iterator_types = ["parallel", "reduction"]
//       CHECK:     scf.for
//       CHECK:       scf.for
//       CHECK:         linalg.generic {{.+}} iterator_types = ["parallel", "parallel"]
//  CHECK-SAME:           tensor<1x64xf32>
//       CHECK:     scf.forall.in_parallel
//   CHECK-NOT:   scf.forall (
func.func @softmax_rows(%x: tensor<128x512xf32>) -> tensor<128x512xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<128xf32>
  %mi = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<128xf32>) -> tensor<128xf32>
  %max = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<128x512xf32>) outs(%mi : tensor<128xf32>) {
  ^bb0(%a: f32, %m: f32):
    %r = arith.maximumf %a, %m : f32
    linalg.yield %r : f32
  } -> tensor<128xf32>
  %si = linalg.fill ins(%zero : f32) outs(%e1 : tensor<128xf32>) -> tensor<128xf32>
  %sum = linalg.generic {indexing_maps = [#id, #red, #red], iterator_types = ["parallel", "reduction"]} ins(%x, %max : tensor<128x512xf32>, tensor<128xf32>) outs(%si : tensor<128xf32>) {
  ^bb0(%a: f32, %m: f32, %s: f32):
    %d = arith.subf %a, %m : f32
    %ex = math.exp %d : f32
    %r = arith.addf %ex, %s : f32
    linalg.yield %r : f32
  } -> tensor<128xf32>
  %e2 = tensor.empty() : tensor<128x512xf32>
  %y = linalg.generic {indexing_maps = [#id, #red, #red, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max, %sum : tensor<128x512xf32>, tensor<128xf32>, tensor<128xf32>) outs(%e2 : tensor<128x512xf32>) {
  ^bb0(%a: f32, %m: f32, %s: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %ex = math.exp %d : f32
    %r = arith.divf %ex, %s : f32
    linalg.yield %r : f32
  } -> tensor<128x512xf32>
  return %y : tensor<128x512xf32>
}

// -----

// Register steps that do not divide a loop are peeled: the full steps are
// static 8x8x32 matmuls, K's last step a static 8x4x32 one, and the rows
// left over in a ragged distributed tile (13 = 8 + 5) go one at a time, as
// static 1x8x32 and 1x4x32 matmuls.
// CHECK-LABEL: func.func @ragged
//       CHECK:   scf.forall (%{{.+}}) = (0) to (13) step (8)
//       CHECK:     %[[ROWS:.+]] = affine.min
//       CHECK:     %[[FULL:.+]] = affine.apply #{{.+}}()[%[[ROWS]]]
//       CHECK:     scf.for %{{.+}} = %{{.+}} to %[[FULL]] step %{{.+}}
//       CHECK:       scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}}
//       CHECK:         linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<8x8xf32>, tensor<8x32xf32>) outs(%{{.+}} : tensor<8x32xf32>)
//       CHECK:       linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<8x4xf32>, tensor<4x32xf32>) outs(%{{.+}} : tensor<8x32xf32>)
//       CHECK:     scf.for %{{.+}} = %[[FULL]] to %[[ROWS]]
//       CHECK:       %[[LEFT:.+]] = affine.apply
//       CHECK:       scf.for %{{.+}} = %c0 to %[[LEFT]] step %c1
//       CHECK:         scf.for
//       CHECK:           linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<1x8xf32>, tensor<8x32xf32>) outs(%{{.+}} : tensor<1x32xf32>)
//       CHECK:         linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<1x4xf32>, tensor<4x32xf32>) outs(%{{.+}} : tensor<1x32xf32>)
//   CHECK-NOT:     tensor<?x8xf32>
func.func @ragged(%a: tensor<13x20xf32>, %b: tensor<20x32xf32>) -> tensor<13x32xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<13x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<13x32xf32>) -> tensor<13x32xf32>
  %m = linalg.matmul ins(%a, %b : tensor<13x20xf32>, tensor<20x32xf32>) outs(%f : tensor<13x32xf32>) -> tensor<13x32xf32>
  return %m : tensor<13x32xf32>
}

// -----

// A convolution's output transpose reads the GEMM at pixel oh * 7 + ow, a
// linear map: the GEMM is still the anchor, so each tile is one panel of
// 32 channels over all 49 pixels (8-row register steps, row 48 peeled),
// and the transposing epilogue fuses into the same tile.
// CHECK-LABEL: func.func @conv_transpose_epilogue
//       CHECK:   scf.forall (%{{.+}}) in (2)
//       CHECK:         linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<1x8x8xf32>, tensor<1x8x32xf32>) outs(%{{.+}} : tensor<1x1x8x32xf32>)
//       CHECK:       linalg.generic {{.+}} ins(%{{.+}}, %{{.+}} : tensor<1x1x8xf32>, tensor<1x8x32xf32>) outs(%{{.+}} : tensor<1x1x1x32xf32>)
//       CHECK:         linalg.generic {{.+}} ins(%{{.+}} : tensor<1x1x7x1xf32>) outs(%{{.+}} : tensor<1x1x1x1x7xf32>)
//       CHECK:       tensor.parallel_insert_slice %{{.+}} into %{{.+}}[0, %{{.+}}, 0, 0, 0] [1, 1, 32, 7, 7]
//   CHECK-NOT:   linalg.generic
func.func @conv_transpose_epilogue(%i: tensor<1x49x64xf32>, %w: tensor<2x64x32xf32>) -> tensor<1x2x32x7x7xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x2x49x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x2x49x32xf32>) -> tensor<1x2x49x32xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(n, fb, p, j, k) -> (n, p, k)>, affine_map<(n, fb, p, j, k) -> (fb, k, j)>, affine_map<(n, fb, p, j, k) -> (n, fb, p, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%i, %w : tensor<1x49x64xf32>, tensor<2x64x32xf32>) outs(%f : tensor<1x2x49x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x2x49x32xf32>
  %e5 = tensor.empty() : tensor<1x2x32x7x7xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(n, fb, j, oh, ow) -> (n, fb, oh * 7 + ow, j)>, affine_map<(n, fb, j, oh, ow) -> (n, fb, j, oh, ow)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]} ins(%c : tensor<1x2x49x32xf32>) outs(%e5 : tensor<1x2x32x7x7xf32>) {
  ^bb0(%v: f32, %o: f32):
    %r = arith.maximumf %v, %z : f32
    linalg.yield %r : f32
  } -> tensor<1x2x32x7x7xf32>
  return %y : tensor<1x2x32x7x7xf32>
}

// -----

// INT4 weights in groups of 64 along K (as sits.qmatmul lowers them): K is
// split into [groups, words, fields]. The dequantization follows the
// contraction into its distributed tile, its K chunk and its register step,
// so each step widens one 2x32 block of codes in registers right before
// the 8x32 multiply-accumulate; no f32 copy of the weight exists outside.
// The register step takes one K loop (the fields, 2).

#dq_w = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#dq_s = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
#dq_out = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#mm_x = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d3, d4)>
#mm_w = affine_map<(d0, d1, d2, d3, d4) -> (d2, d3, d4, d1)>
#mm_out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1)>
// CHECK-LABEL: func.func @int4_groups
//   CHECK-NOT:   tensor.empty() : tensor<4x32x2x512xf32>
//       CHECK:   scf.forall (%{{.+}}) = (0) to (512) step (128)
//       CHECK:     scf.for
//       CHECK:       scf.for
//       CHECK:         scf.for
//       CHECK:           scf.for
//       CHECK:             %[[E:.+]] = tensor.empty() : tensor<1x1x2x32xf32>
//       CHECK:             %[[D:.+]] = linalg.generic
//  CHECK-SAME:                 ins(%{{.+}}, %{{.+}} : tensor<1x1x32xi8>, tensor<1x32xf32>) outs(%[[E]] : tensor<1x1x2x32xf32>)
//       CHECK:               arith.shrsi
//       CHECK:             linalg.generic
//  CHECK-SAME:                 ins(%{{.+}}, %[[D]] : tensor<8x1x1x2xf32>, tensor<1x1x2x32xf32>) outs(%{{.+}} : tensor<8x32xf32>)
func.func @int4_groups(%x: tensor<8x256xf32>, %codes: tensor<128x512xi8>, %scale: tensor<4x512xf32>) -> tensor<8x512xf32> {
  %words = tensor.expand_shape %codes [[0, 1], [2]] output_shape [4, 32, 512] : tensor<128x512xi8> into tensor<4x32x512xi8>
  %empty = tensor.empty() : tensor<4x32x2x512xf32>
  %w = linalg.generic {indexing_maps = [#dq_w, #dq_s, #dq_out], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%words, %scale : tensor<4x32x512xi8>, tensor<4x512xf32>) outs(%empty : tensor<4x32x2x512xf32>) {
  ^bb0(%in: i8, %s: f32, %out: f32):
    %wide = arith.extui %in : i8 to i32
    %field = linalg.index 2 : index
    %f = arith.index_castui %field : index to i32
    %c4 = arith.constant 4 : i32
    %c28 = arith.constant 28 : i32
    %low = arith.muli %f, %c4 : i32
    %up = arith.subi %c28, %low : i32
    %top = arith.shli %wide, %up : i32
    %code = arith.shrsi %top, %c28 : i32
    %real = arith.sitofp %code : i32 to f32
    %v = arith.mulf %real, %s : f32
    linalg.yield %v : f32
  } -> tensor<4x32x2x512xf32>
  %xs = tensor.expand_shape %x [[0], [1, 2, 3]] output_shape [8, 4, 32, 2] : tensor<8x256xf32> into tensor<8x4x32x2xf32>
  %zero = arith.constant 0.0 : f32
  %acc0 = tensor.empty() : tensor<8x512xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<8x512xf32>) -> tensor<8x512xf32>
  %y = linalg.generic {indexing_maps = [#mm_x, #mm_w, #mm_out], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xs, %w : tensor<8x4x32x2xf32>, tensor<4x32x2x512xf32>) outs(%acc : tensor<8x512xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x512xf32>
  return %y : tensor<8x512xf32>
}

// -----

// The same with 48 columns: each of the two tasks takes 24, less than a
// register block, so the register tile's column extent is a run-time value
// (min(32, 24 - j)) when its dequantization is tiled for vectors. Bounded by
// the block, the 2x24 piece stays one vector op: cut into rows, its fields
// would each be written to memory for the contraction to read back.
#dq_w = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
#dq_s = affine_map<(d0, d1, d2, d3) -> (d0, d3)>
#dq_out = affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>
#mm_x = affine_map<(d0, d1, d2, d3, d4) -> (d0, d2, d3, d4)>
#mm_w = affine_map<(d0, d1, d2, d3, d4) -> (d2, d3, d4, d1)>
#mm_out = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1)>
// CHECK-LABEL: func.func @int4_partial_columns
//       CHECK:   scf.forall (%{{.+}}) = (0) to (48) step (24)
//       CHECK:             %[[E:.+]] = tensor.empty() : tensor<1x1x2x24xf32>
//   CHECK-NOT:             scf.for
//       CHECK:             %[[D:.+]] = linalg.generic
//  CHECK-SAME:                 outs(%[[E]] : tensor<1x1x2x24xf32>)
//       CHECK:             linalg.generic
//  CHECK-SAME:                 ins(%{{.+}}, %[[D]] : tensor<8x1x1x2xf32>, tensor<1x1x2x24xf32>)
func.func @int4_partial_columns(%x: tensor<8x128xf32>, %codes: tensor<64x48xi8>, %scale: tensor<2x48xf32>) -> tensor<8x48xf32> {
  %words = tensor.expand_shape %codes [[0, 1], [2]] output_shape [2, 32, 48] : tensor<64x48xi8> into tensor<2x32x48xi8>
  %empty = tensor.empty() : tensor<2x32x2x48xf32>
  %w = linalg.generic {indexing_maps = [#dq_w, #dq_s, #dq_out], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%words, %scale : tensor<2x32x48xi8>, tensor<2x48xf32>) outs(%empty : tensor<2x32x2x48xf32>) {
  ^bb0(%in: i8, %s: f32, %out: f32):
    %wide = arith.extui %in : i8 to i32
    %field = linalg.index 2 : index
    %f = arith.index_castui %field : index to i32
    %c4 = arith.constant 4 : i32
    %c28 = arith.constant 28 : i32
    %low = arith.muli %f, %c4 : i32
    %up = arith.subi %c28, %low : i32
    %top = arith.shli %wide, %up : i32
    %code = arith.shrsi %top, %c28 : i32
    %real = arith.sitofp %code : i32 to f32
    %v = arith.mulf %real, %s : f32
    linalg.yield %v : f32
  } -> tensor<2x32x2x48xf32>
  %xs = tensor.expand_shape %x [[0], [1, 2, 3]] output_shape [8, 2, 32, 2] : tensor<8x128xf32> into tensor<8x2x32x2xf32>
  %zero = arith.constant 0.0 : f32
  %acc0 = tensor.empty() : tensor<8x48xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%acc0 : tensor<8x48xf32>) -> tensor<8x48xf32>
  %y = linalg.generic {indexing_maps = [#mm_x, #mm_w, #mm_out], iterator_types = ["parallel", "parallel", "reduction", "reduction", "reduction"]}
      ins(%xs, %w : tensor<8x2x32x2xf32>, tensor<2x32x2x48xf32>) outs(%acc : tensor<8x48xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x48xf32>
  return %y : tensor<8x48xf32>
}

// -----

// An elementwise op over [batch, tokens, hidden] with both leading extents
// dynamic: one row of the batch per task, and the tokens in blocks of 16, so
// that one long prompt spreads over the threads and a decode step's single
// token stays one task; the hidden dimension stays whole.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
// CHECK-LABEL: func.func @dynamic_rows
//       CHECK:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (%{{.+}}, %{{.+}}) step (1, 16)
//       CHECK:     linalg.generic
//  CHECK-SAME:       tensor<1x1x64xf32>
//   CHECK-NOT:   scf.forall (
func.func @dynamic_rows(%x: tensor<?x?x512xf32>) -> tensor<?x?x512xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %b = tensor.dim %x, %c0 : tensor<?x?x512xf32>
  %s = tensor.dim %x, %c1 : tensor<?x?x512xf32>
  %e = tensor.empty(%b, %s) : tensor<?x?x512xf32>
  %y = linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%x : tensor<?x?x512xf32>) outs(%e : tensor<?x?x512xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = math.exp %a : f32
    linalg.yield %r : f32
  } -> tensor<?x?x512xf32>
  return %y : tensor<?x?x512xf32>
}

// -----

// Attention scores [batch, K/V heads, group, queries, keys] with the batch
// and query extents dynamic, reduced over the keys: the batch one row per
// task, the queries in blocks of 16, and the static head dimensions after
// the batch split too, since each tile still spans the whole run-time
// context (with one sequence and one query, a decode step's attention
// would otherwise run on one thread). Four K/V heads make the 2 x 2 tiles
// wanted for two threads; the group stays whole.

#s5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3, d4)>
#r5 = affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2, d3)>
// CHECK-LABEL: func.func @dynamic_rows_static_heads
//       CHECK:   scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) = (0, 0, 0) to (%{{.+}}, 4, %{{.+}}) step (1, 1, 16)
//       CHECK:     linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]
//  CHECK-SAME:       tensor<1x1x1x1x?xf32>
//   CHECK-NOT:   scf.forall (
func.func @dynamic_rows_static_heads(%x: tensor<?x4x2x?x?xf32>) -> tensor<?x4x2x?xf32> {
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %ninf = arith.constant 0xFF800000 : f32
  %b = tensor.dim %x, %c0 : tensor<?x4x2x?x?xf32>
  %q = tensor.dim %x, %c3 : tensor<?x4x2x?x?xf32>
  %e = tensor.empty(%b, %q) : tensor<?x4x2x?xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e : tensor<?x4x2x?xf32>) -> tensor<?x4x2x?xf32>
  %m = linalg.generic {indexing_maps = [#s5, #r5], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%x : tensor<?x4x2x?x?xf32>) outs(%init : tensor<?x4x2x?xf32>) {
  ^bb0(%a: f32, %o: f32):
    %r = arith.maximumf %a, %o : f32
    linalg.yield %r : f32
  } -> tensor<?x4x2x?xf32>
  return %m : tensor<?x4x2x?xf32>
}

// -----

// A convolution as a patch gather and a panel GEMM in one dispatch: each
// distributed tile (two of its 28 output rows, both panels) gathers the patches of
// its own rows inside the tile, where the GEMM reads them from cache; no
// gather is left outside the tiles.
// CHECK-LABEL: func.func @conv_gather_in_tile
//       CHECK:   scf.forall (%[[ROW:.+]]) = (0) to (28) step (2)
//       CHECK:     linalg.generic
//       CHECK:       tensor.extract %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}, %{{.+}}] : tensor<1x4x30x30xf32>
//       CHECK:     scf.forall.in_parallel
//   CHECK-NOT:   tensor.extract
func.func @conv_gather_in_tile(%img: tensor<1x4x30x30xf32>, %w: tensor<2x36x32xf32>) -> tensor<1x2x28x28x32xf32> {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %c3 = arith.constant 3 : index
  %c9 = arith.constant 9 : index
  %ep = tensor.empty() : tensor<1x36x28x28xf32>
  %patches = linalg.generic {indexing_maps = [affine_map<(n, k, oh, ow) -> (n, k, oh, ow)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%ep : tensor<1x36x28x28xf32>) {
  ^bb0(%out: f32):
    %k = linalg.index 1 : index
    %oh = linalg.index 2 : index
    %ow = linalg.index 3 : index
    %c = arith.divui %k, %c9 : index
    %r = arith.remui %k, %c9 : index
    %kh = arith.divui %r, %c3 : index
    %kw = arith.remui %r, %c3 : index
    %ih = arith.addi %oh, %kh : index
    %iw = arith.addi %ow, %kw : index
    %v = tensor.extract %img[%c0, %c, %ih, %iw] : tensor<1x4x30x30xf32>
    linalg.yield %v : f32
  } -> tensor<1x36x28x28xf32>
  %e = tensor.empty() : tensor<1x2x28x28x32xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<1x2x28x28x32xf32>) -> tensor<1x2x28x28x32xf32>
  %c = linalg.generic {indexing_maps = [affine_map<(n, fb, oh, ow, j, k) -> (n, k, oh, ow)>, affine_map<(n, fb, oh, ow, j, k) -> (fb, k, j)>, affine_map<(n, fb, oh, ow, j, k) -> (n, fb, oh, ow, j)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel", "reduction"]} ins(%patches, %w : tensor<1x36x28x28xf32>, tensor<2x36x32xf32>) outs(%f : tensor<1x2x28x28x32xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x2x28x28x32xf32>
  return %c : tensor<1x2x28x28x32xf32>
}

// -----

// Four rows (a decode step of four sequences): one register block, so the
// weights are read once. K (1024) is not cut into kc chunks, which would
// interleave the panels' streams; the register tile's K loop is marked
// for prefetching.
// CHECK-LABEL: func.func @streamed_rows
//   CHECK-NOT:   step %c256
//       CHECK:   scf.for %{{.+}} = %c0 to %c1024 step %c8
//       CHECK:   } {sits.streamed}
func.func @streamed_rows(%a: tensor<4x1024xf32>, %b: tensor<1024x64xf32>) -> tensor<4x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<4x64xf32>) -> tensor<4x64xf32>
  %m = linalg.matmul ins(%a, %b : tensor<4x1024xf32>, tensor<1024x64xf32>) outs(%f : tensor<4x64xf32>) -> tensor<4x64xf32>
  return %m : tensor<4x64xf32>
}

// -----

// A run-time row count: the loops over row blocks (of 8, then the last
// rows one at a time) are marked, as only their first iteration reads the
// weights from memory, and so are the K loops inside them; K keeps its kc
// chunks for the blocks after the first.
// CHECK-LABEL: func.func @streamed_dynamic_rows
//       CHECK:   step %c256
//       CHECK:   } {sits.streamed}
//       CHECK:   } {sits.first_streams}
//       CHECK:   scf.for %{{.+}} = %c0 to %{{.+}} step %c1
//       CHECK:   } {sits.streamed}
//       CHECK:   } {sits.first_streams}
//       CHECK:   } {sits.first_streams}
func.func @streamed_dynamic_rows(%a: tensor<?x1024xf32>, %b: tensor<1024x64xf32>) -> tensor<?x64xf32> {
  %z = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a, %c0 : tensor<?x1024xf32>
  %e = tensor.empty(%n) : tensor<?x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x64xf32>) -> tensor<?x64xf32>
  %m = linalg.matmul ins(%a, %b : tensor<?x1024xf32>, tensor<1024x64xf32>) outs(%f : tensor<?x64xf32>) -> tensor<?x64xf32>
  return %m : tensor<?x64xf32>
}

// -----

// 64 rows reuse every weight from cache: nothing is marked.
// CHECK-LABEL: func.func @cached_rows
//   CHECK-NOT:   sits.streamed
//   CHECK-NOT:   sits.first_streams
//       CHECK:   return
func.func @cached_rows(%a: tensor<64x1024xf32>, %b: tensor<1024x64xf32>) -> tensor<64x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<64x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64x64xf32>) -> tensor<64x64xf32>
  %m = linalg.matmul ins(%a, %b : tensor<64x1024xf32>, tensor<1024x64xf32>) outs(%f : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %m : tensor<64x64xf32>
}

// -----

// Sixteen rows (a CNN's last 4 x 4 pixels): two register blocks. K is
// streamed whole as for one block; the second block reads each panel again
// from L2.
// CHECK-LABEL: func.func @streamed_two_blocks
//   CHECK-NOT:   step %c256
//       CHECK:   scf.for %{{.+}} = %c0 to %c16 step %c8
//       CHECK:   scf.for %{{.+}} = %c0 to %c1024 step %c8
//       CHECK:   } {sits.streamed}
func.func @streamed_two_blocks(%a: tensor<16x1024xf32>, %b: tensor<1024x256xf32>) -> tensor<16x256xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<16x256xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<16x256xf32>) -> tensor<16x256xf32>
  %m = linalg.matmul ins(%a, %b : tensor<16x1024xf32>, tensor<1024x256xf32>) outs(%f : tensor<16x256xf32>) -> tensor<16x256xf32>
  return %m : tensor<16x256xf32>
}

// -----

// Three blocks (24 rows) take kc chunks.
// CHECK-LABEL: func.func @cached_three_blocks
//       CHECK:   step %c256
//   CHECK-NOT:   sits.streamed
func.func @cached_three_blocks(%a: tensor<24x1024xf32>, %b: tensor<1024x256xf32>) -> tensor<24x256xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<24x256xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<24x256xf32>) -> tensor<24x256xf32>
  %m = linalg.matmul ins(%a, %b : tensor<24x1024xf32>, tensor<1024x256xf32>) outs(%f : tensor<24x256xf32>) -> tensor<24x256xf32>
  return %m : tensor<24x256xf32>
}

// -----

// Attention's scores of one query against 512 keys (K = 64 innermost in
// both operands): the register tile is a register block's count of keys by
// up to four whole vectors of K (8 x 64 on v4; 4 x 32 on v3, two steps),
// not 32 keys by 8-element steps.
// CHECK-LABEL: func.func @scores
//       CHECK:   scf.for %{{.+}} = %c0 to %c128 step %c8
//       CHECK:     tensor.extract_slice %{{.+}} [1, 8, 64] [1, 1, 1] : tensor<1x128x64xf32> to tensor<1x8x64xf32>
//   CHECK-NOT:   step %c32
// V3-LABEL: func.func @scores
//       V3:   scf.for %{{.+}} = %c0 to %c128 step %c4
//       V3:     scf.for %{{.+}} = %c0 to %c64 step %c32
//       V3:       tensor.extract_slice %{{.+}} [1, 4, 32] [1, 1, 1] : tensor<1x128x64xf32> to tensor<1x4x32xf32>
func.func @scores(%q: tensor<12x1x64xf32>, %k: tensor<12x512x64xf32>) -> tensor<12x1x512xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<12x1x512xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<12x1x512xf32>) -> tensor<12x1x512xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(h, m, n, d) -> (h, m, d)>, affine_map<(h, m, n, d) -> (h, n, d)>, affine_map<(h, m, n, d) -> (h, m, n)>], iterator_types = ["parallel", "parallel", "parallel", "reduction"]} ins(%q, %k : tensor<12x1x64xf32>, tensor<12x512x64xf32>) outs(%f : tensor<12x1x512xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %c, %p : f32
    linalg.yield %r : f32
  } -> tensor<12x1x512xf32>
  return %s : tensor<12x1x512xf32>
}

// -----

// A transpose (the output's innermost loop is not the input's): inside
// each distributed tile, square blocks of one vector each way (16 x 16 on
// v4, 8 x 8 on v3), which read and write whole vectors.
// CHECK-LABEL: func.func @transpose_blocks
//       CHECK:   scf.forall (%{{.+}}) = (0) to (64) step (16)
//       CHECK:     scf.for %{{.+}} = %c0 to %c48 step %c16
//       CHECK:       linalg.generic {{.+}} ins(%{{.+}} : tensor<16x16xf32>) outs(%{{.+}} : tensor<16x16xf32>)
// V3-LABEL: func.func @transpose_blocks
//       V3:         linalg.generic {{.+}} ins(%{{.+}} : tensor<8x8xf32>) outs(%{{.+}} : tensor<8x8xf32>)
func.func @transpose_blocks(%a: tensor<48x64xf32>) -> tensor<64x48xf32> {
  %e = tensor.empty() : tensor<64x48xf32>
  %t = linalg.generic {indexing_maps = [affine_map<(j, p) -> (p, j)>, affine_map<(j, p) -> (j, p)>], iterator_types = ["parallel", "parallel"]} ins(%a : tensor<48x64xf32>) outs(%e : tensor<64x48xf32>) {
  ^bb0(%x: f32, %y: f32):
    linalg.yield %x : f32
  } -> tensor<64x48xf32>
  return %t : tensor<64x48xf32>
}

// -----

// A gather of convolution patches for two output rows (576 x 2 x 28 per
// tile): rows of 28, each one contiguous read once vectorized. (The
// element count of a piece is unknown once past four vectors; it used to
// wrap around to a small number, which kept the whole op as one piece.)
// CHECK-LABEL: func.func @rows_of_three_dims
//       CHECK:   scf.forall
//       CHECK:     scf.for %{{.+}} = %c0 to %c144 step %c1
//       CHECK:       scf.for %{{.+}} = %c0 to %c2 step %c1
//       CHECK:         linalg.generic {{.+}} outs(%{{.+}} : tensor<1x1x1x28xf32>)
func.func @rows_of_three_dims(%a: tensor<1x576x2x28xf32>) -> tensor<1x576x2x28xf32> {
  %e = tensor.empty() : tensor<1x576x2x28xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(n, k, r, c) -> (n, k, r, c)>, affine_map<(n, k, r, c) -> (n, k, r, c)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%a : tensor<1x576x2x28xf32>) outs(%e : tensor<1x576x2x28xf32>) {
  ^bb0(%x: f32, %y: f32):
    %m = arith.addf %x, %x : f32
    linalg.yield %m : f32
  } -> tensor<1x576x2x28xf32>
  return %r : tensor<1x576x2x28xf32>
}
