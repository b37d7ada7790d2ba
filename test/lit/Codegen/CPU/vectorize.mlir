// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-cpu-vectorize),canonicalize,cse)' | FileCheck %s

// A static register tile becomes one vector.contract on whole-tile vectors.
// CHECK-LABEL: func.func @register_tile
//       CHECK:   %[[A:.+]] = vector.transfer_read %{{.+}} : tensor<8x8xf32>, vector<8x8xf32>
//       CHECK:   %[[B:.+]] = vector.transfer_read %{{.+}} : tensor<8x32xf32>, vector<8x32xf32>
//       CHECK:   %[[C:.+]] = vector.transfer_read %{{.+}} : tensor<8x32xf32>, vector<8x32xf32>
//       CHECK:   vector.contract {{.+}} %[[A]], %[[B]], %[[C]] : vector<8x8xf32>, vector<8x32xf32> into vector<8x32xf32>
//   CHECK-NOT:   linalg.matmul
func.func @register_tile(%a: tensor<8x8xf32>, %b: tensor<8x32xf32>, %c: tensor<8x32xf32>) -> tensor<8x32xf32> {
  %m = linalg.matmul ins(%a, %b : tensor<8x8xf32>, tensor<8x32xf32>) outs(%c : tensor<8x32xf32>) -> tensor<8x32xf32>
  return %m : tensor<8x32xf32>
}

// -----

// A row of convolution patches at stride 1: the innermost index steps by
// one, so the gather is one contiguous read from the input.
// CHECK-LABEL: func.func @patch_row
//  CHECK-SAME:   (%[[X:.+]]: tensor<1x4x10x10xf32>, %[[K:.+]]: index, %[[OH:.+]]: index)
//       CHECK:   vector.transfer_read %[[X]][%{{.+}}, %[[K]], %[[OH]], %{{.+}}], %{{.+}} {in_bounds = [true]} : tensor<1x4x10x10xf32>, vector<8xf32>
//   CHECK-NOT:   tensor.extract %
//   CHECK-NOT:   vector.gather
func.func @patch_row(%x: tensor<1x4x10x10xf32>, %k: index, %oh: index) -> tensor<1x1x1x8xf32> {
  %e = tensor.empty() : tensor<1x1x1x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%e : tensor<1x1x1x8xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %ow = linalg.index 3 : index
    %c1 = arith.constant 1 : index
    %iw = arith.addi %ow, %c1 : index
    %v = tensor.extract %x[%n, %k, %oh, %iw] : tensor<1x4x10x10xf32>
    linalg.yield %v : f32
  } -> tensor<1x1x1x8xf32>
  return %g : tensor<1x1x1x8xf32>
}

// -----

// At stride 2 the same row is a vector gather.
// CHECK-LABEL: func.func @strided_patch_row
//       CHECK:   vector.gather %{{.+}} : tensor<1x4x20x20xf32>, vector<8xindex>, vector<8xi1>, vector<8xf32> into vector<8xf32>
//   CHECK-NOT:   tensor.extract %
func.func @strided_patch_row(%x: tensor<1x4x20x20xf32>, %k: index, %oh: index) -> tensor<1x1x1x8xf32> {
  %e = tensor.empty() : tensor<1x1x1x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]} outs(%e : tensor<1x1x1x8xf32>) {
  ^bb0(%out: f32):
    %n = linalg.index 0 : index
    %ow = linalg.index 3 : index
    %c2 = arith.constant 2 : index
    %iw = arith.muli %ow, %c2 : index
    %v = tensor.extract %x[%n, %k, %oh, %iw] : tensor<1x4x20x20xf32>
    linalg.yield %v : f32
  } -> tensor<1x1x1x8xf32>
  return %g : tensor<1x1x1x8xf32>
}

// -----

// Dynamic shapes stay linalg (tile-and-fuse peels ragged tiles so that
// only the last one is dynamic).
// CHECK-LABEL: func.func @dynamic
//       CHECK:   linalg.matmul
//   CHECK-NOT:   vector.contract
func.func @dynamic(%a: tensor<?x8xf32>, %b: tensor<8x32xf32>, %c: tensor<?x32xf32>) -> tensor<?x32xf32> {
  %m = linalg.matmul ins(%a, %b : tensor<?x8xf32>, tensor<8x32xf32>) outs(%c : tensor<?x32xf32>) -> tensor<?x32xf32>
  return %m : tensor<?x32xf32>
}

// -----

// Bool tensors stay scalar: LLVM packs a vector of i1 into bits in memory,
// while a tensor of i1 holds one byte per element.
// CHECK-LABEL: func.func @bool_result
//   CHECK-NOT:   vector.transfer_write
//       CHECK:   linalg.generic
func.func @bool_result(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xi1> {
  %e = tensor.empty() : tensor<4x8xi1>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%a, %b : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xi1>) {
  ^bb0(%x: f32, %y: f32, %o: i1):
    %c = arith.cmpf olt, %x, %y : f32
    linalg.yield %c : i1
  } -> tensor<4x8xi1>
  return %r : tensor<4x8xi1>
}

// -----

// A tile of unit loops only stays scalar: there is nothing to vectorize, and
// its gather would become an invalid 0-d vector.gather.
// CHECK-LABEL: func.func @unit_gather
//   CHECK-NOT:   vector.gather
//       CHECK:   linalg.generic
func.func @unit_gather(%src: tensor<16xf32>, %idx: tensor<1x1xi64>) -> tensor<1x1xf32> {
  %e = tensor.empty() : tensor<1x1xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%idx : tensor<1x1xi64>) outs(%e : tensor<1x1xf32>) {
  ^bb0(%i: i64, %o: f32):
    %k = arith.index_cast %i : i64 to index
    %v = tensor.extract %src[%k] : tensor<16xf32>
    linalg.yield %v : f32
  } -> tensor<1x1xf32>
  return %r : tensor<1x1xf32>
}
