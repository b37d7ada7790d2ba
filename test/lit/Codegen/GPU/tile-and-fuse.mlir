// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse),canonicalize,cse)' | FileCheck %s
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-tile-and-fuse))' --mlir-pass-statistics 2>&1 | FileCheck %s --check-prefix=STATS

// A matmul with a bias+ReLU epilogue is one fusion group: a loop over
// blocks (here 32x32 outputs: 64x64 shrunk until the 132 SMs of the default
// target have work), a loop over threads inside each block (4x4 register
// tiles), and in each thread the fill, the reduction stepping K by 16 and
// the epilogue on the thread's tile.

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @matmul_epilogue
//       CHECK:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (128, 512) step (32, 32)
//       CHECK:     scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (32, 32) step (4, 4)
//       CHECK:       linalg.fill {{.+}} -> tensor<4x4xf32>
//       CHECK:       scf.for %{{.+}} = %c0 to %c256 step %c16 iter_args
//       CHECK:         linalg.matmul ins(%{{.+}}, %{{.+}} : tensor<4x16xf32>, tensor<16x4xf32>) outs(%{{.+}} : tensor<4x4xf32>)
//       CHECK:       linalg.generic
//  CHECK-SAME:         ins(%{{.+}}, %{{.+}} : tensor<4x4xf32>, tensor<4xf32>)
//       CHECK:     } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
//       CHECK:   } {mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]}
//   CHECK-NOT:   scf.forall
//       CHECK:   return
// STATS-LABEL: 'func.func' Pipeline
// STATS: (S) 2 num-fused
// STATS: (S) 1 num-groups
// STATS: (S) 0 num-split
// STATS: (S) 1 num-thread-loops
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

// -----

// A skinny GEMM (a batch of 8 rows: a matrix-vector product bound by
// reading the weights) splits its reduction across a warp: lane l of a
// thread group reduces k = l, l + 32, ... (the operands viewed as
// [.., 32, 32], coalesced) for all 8 rows and 4 columns, into a
// block-shared 8x8x32 partial result; one thread per output then adds its
// 32 partial sums. Each block computes 8 columns with 64 threads.

// CHECK-LABEL: func.func @skinny
//       CHECK:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (8, 4096) step (8, 8)
//   CHECK-DAG:     tensor.expand_shape %{{.+}} {{\[}}[0], [1, 2]] output_shape [8, 32, 32] : tensor<8x1024xf32> into tensor<8x32x32xf32>
//   CHECK-DAG:     tensor.expand_shape %{{.+}} {{\[}}[0, 1], [2]] output_shape [32, 32, 8] : tensor<1024x8xf32> into tensor<32x32x8xf32>
//       CHECK:     %[[PARTIAL:.+]] = scf.forall (%{{.+}}, %{{.+}}, %{{.+}}) = (0, 0, 0) to (8, 8, 32) step (8, 4, 1)
//       CHECK:       scf.for %{{.+}} = %c0 to %c32 step %c16
//       CHECK:         linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "reduction", "parallel"]
//  CHECK-SAME:           ins(%{{.+}}, %{{.+}} : tensor<8x16x1xf32>, tensor<16x1x4xf32>) outs(%{{.+}} : tensor<8x4x1xf32>)
//       CHECK:     } {mapping = [#gpu.thread<linear_dim_2>, #gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
//       CHECK:     scf.forall (%{{.+}}, %{{.+}}) in (8, 8)
//       CHECK:       tensor.extract_slice %[[PARTIAL]]
//       CHECK:       scf.for %{{.+}} = %c0 to %c32 step %c4
//       CHECK:     } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
func.func @skinny(%a: tensor<8x1024xf32>, %b: tensor<1024x4096xf32>) -> tensor<8x4096xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x4096xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<8x4096xf32>) -> tensor<8x4096xf32>
  %m = linalg.matmul ins(%a, %b : tensor<8x1024xf32>, tensor<1024x4096xf32>) outs(%f : tensor<8x4096xf32>) -> tensor<8x4096xf32>
  return %m : tensor<8x4096xf32>
}

// -----

// Softmax over rows: the row maximum, the sum of exponentials and the
// division are three kernels (each reads whole rows). A row reduction is
// split across a warp: lane l of a row reduces elements l, l + 32, ... (the
// row viewed as 16 x 32, coalesced) into a block-shared 2x32 partial
// result, which one thread per row then reduces, 4 at a time. The
// exponentials are computed by the lanes (fused into their reduction). The
// division gives each thread 4 consecutive elements.

#id = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
// CHECK-LABEL: func.func @softmax_rows
//       CHECK:   scf.forall (%{{.+}}) = (0) to (256) step (2)
//       CHECK:     tensor.expand_shape %{{.+}} {{\[}}[0], [1, 2]] output_shape [2, 16, 32]
//       CHECK:     %[[PARTIAL:.+]] = scf.forall (%{{.+}}, %{{.+}}) in (2, 32)
//       CHECK:       scf.for %{{.+}} = %c0 to %c16 step %c4
//       CHECK:         linalg.generic {{.+}} iterator_types = ["parallel", "reduction", "parallel"]
//  CHECK-SAME:           ins(%{{.+}} : tensor<1x4x1xf32>)
//       CHECK:         arith.maximumf
//       CHECK:     } {mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]}
//       CHECK:     scf.forall (%{{.+}}) in (2)
//       CHECK:       tensor.extract_slice %[[PARTIAL]]
//       CHECK:       scf.for %{{.+}} = %c0 to %c32 step %c4
//       CHECK:     } {mapping = [#gpu.thread<linear_dim_0>]}
//       CHECK:   scf.forall (%{{.+}}) = (0) to (256) step (2)
//       CHECK:     scf.forall (%{{.+}}, %{{.+}}) in (2, 32)
//       CHECK:       scf.for %{{.+}} = %c0 to %c16 step %c4
//       CHECK:         math.exp
//       CHECK:         arith.addf
//       CHECK:     scf.forall (%{{.+}}) in (2)
//       CHECK:   scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (256, 512) step (2, 128)
//       CHECK:     scf.forall (%{{.+}}, %{{.+}}) = (0, 0) to (2, 128) step (1, 4)
//       CHECK:       math.exp
//       CHECK:       arith.divf
// STATS-LABEL: 'func.func' Pipeline
// STATS: (S) 2 num-split
func.func @softmax_rows(%x: tensor<256x512xf32>) -> tensor<256x512xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty() : tensor<256xf32>
  %e2 = tensor.empty() : tensor<256x512xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<256xf32>) -> tensor<256xf32>
  %max = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<256x512xf32>) outs(%init : tensor<256xf32>) {
  ^bb0(%a: f32, %m: f32):
    %r = arith.maximumf %a, %m : f32
    linalg.yield %r : f32
  } -> tensor<256xf32>
  %exp = linalg.generic {indexing_maps = [#id, #red, #id], iterator_types = ["parallel", "parallel"]} ins(%x, %max : tensor<256x512xf32>, tensor<256xf32>) outs(%e2 : tensor<256x512xf32>) {
  ^bb0(%a: f32, %m: f32, %o: f32):
    %d = arith.subf %a, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<256x512xf32>
  %zinit = linalg.fill ins(%zero : f32) outs(%e1 : tensor<256xf32>) -> tensor<256xf32>
  %sum = linalg.generic {indexing_maps = [#id, #red], iterator_types = ["parallel", "reduction"]} ins(%exp : tensor<256x512xf32>) outs(%zinit : tensor<256xf32>) {
  ^bb0(%a: f32, %s: f32):
    %r = arith.addf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<256xf32>
  %y = linalg.generic {indexing_maps = [#id, #red, #id], iterator_types = ["parallel", "parallel"]} ins(%exp, %sum : tensor<256x512xf32>, tensor<256xf32>) outs(%e2 : tensor<256x512xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %r = arith.divf %a, %s : f32
    linalg.yield %r : f32
  } -> tensor<256x512xf32>
  return %y : tensor<256x512xf32>
}

// -----

// A dynamic parallel loop is tiled by one: a block per index (the grid is
// known at run time), each block's tile static.

// CHECK-LABEL: func.func @dynamic(
//       CHECK:   %[[D:.*]] = tensor.dim
//       CHECK:   scf.forall ({{.*}}) = (0, 0) to (%[[D]], 64) step (1, 64)
//       CHECK:     scf.forall ({{.*}}) = (0, 0) to (1, 64) step (1, 4)
//       CHECK:       linalg.generic {{.*}} ins(%{{.*}} : tensor<1x4xf32>)
//       CHECK:     mapping = [#gpu.thread<linear_dim_1>, #gpu.thread<linear_dim_0>]
//       CHECK:   mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]
func.func @dynamic(%x: tensor<?x64xf32>) -> tensor<?x64xf32> {
  %c0 = arith.constant 0 : index
  %d = tensor.dim %x, %c0 : tensor<?x64xf32>
  %e = tensor.empty(%d) : tensor<?x64xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<?x64xf32>) outs(%e : tensor<?x64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<?x64xf32>
  return %y : tensor<?x64xf32>
}

// -----

// A decode step's matrix-vector products: rows (tokens) are dynamic, each
// row's block splits the reduction across a warp.

// CHECK-LABEL: func.func @dynamic_matmul(
//       CHECK:   %[[M:.*]] = tensor.dim
//       CHECK:   scf.forall ({{.*}}) = (0, 0) to (%[[M]], 512) step (1, 8)
//       CHECK:     scf.forall ({{.*}}) = (0, 0, 0) to (1, 8, 32) step (1, 4, 1)
//       CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "parallel", "reduction", "parallel"]{{.*}}tensor<1x8x1xf32>, tensor<8x1x4xf32>
//       CHECK:   mapping = [#gpu.block<linear_dim_1>, #gpu.block<linear_dim_0>]
func.func @dynamic_matmul(%a: tensor<?x256xf32>, %b: tensor<256x512xf32>) -> tensor<?x512xf32> {
  %c0 = arith.constant 0 : index
  %m = tensor.dim %a, %c0 : tensor<?x256xf32>
  %e = tensor.empty(%m) : tensor<?x512xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<?x512xf32>) -> tensor<?x512xf32>
  %r = linalg.matmul ins(%a, %b : tensor<?x256xf32>, tensor<256x512xf32>) outs(%f : tensor<?x512xf32>) -> tensor<?x512xf32>
  return %r : tensor<?x512xf32>
}

// -----

// A dynamic reduction is not tiled: each thread reduces its rows whole.

// CHECK-LABEL: func.func @dynamic_reduction(
//       CHECK:   scf.forall (%{{.*}}) = (0) to (64) step (64)
//       CHECK:     scf.forall (%{{.*}}) in (64)
//       CHECK:       linalg.fill
//       CHECK:       linalg.generic {{.*}}iterator_types = ["parallel", "reduction"]{{.*}}tensor<1x?xf32>
//       CHECK:     mapping = [#gpu.thread<linear_dim_0>]
//       CHECK:   mapping = [#gpu.block<linear_dim_0>]
func.func @dynamic_reduction(%x: tensor<64x?xf32>) -> tensor<64xf32> {
  %e = tensor.empty() : tensor<64xf32>
  %z = arith.constant 0.0 : f32
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<64xf32>) -> tensor<64xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%x : tensor<64x?xf32>) outs(%f : tensor<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.addf %a, %o : f32
    linalg.yield %n : f32
  } -> tensor<64xf32>
  return %y : tensor<64xf32>
}
