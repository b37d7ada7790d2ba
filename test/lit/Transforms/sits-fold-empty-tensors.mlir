// RUN: sits-opt %s --split-input-file --sits-fold-empty-tensors | FileCheck %s
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(sits-cpu-codegen{target=x86-64-v3 num-threads=2})' | FileCheck %s --check-prefix=CPU
// RUN: sits-opt %s --split-input-file --sits-gpu-codegen=target=h100 | FileCheck %s --check-prefix=GPU

// A reduction over an empty axis is its init: the identity, filled. The
// codegen pipelines compile it (tiling a loop of zero trips would fail).

// CHECK-LABEL: func.func @reduce_empty_axis
//       CHECK:   %[[FILL:.+]] = linalg.fill
//   CHECK-NOT:   linalg.reduce
//       CHECK:   return %[[FILL]]
// CPU-LABEL: llvm.func @reduce_empty_axis
// GPU-LABEL: llvm.func @reduce_empty_axis
func.func @reduce_empty_axis(%x: tensor<2x0x4xf32>) -> tensor<2x4xf32> {
  %cst = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<2x4xf32>
  %init = linalg.fill ins(%cst : f32) outs(%e : tensor<2x4xf32>) -> tensor<2x4xf32>
  %r = linalg.reduce { arith.maximumf } ins(%x : tensor<2x0x4xf32>)
                     outs(%init : tensor<2x4xf32>) dimensions = [1]
  return %r : tensor<2x4xf32>
}

// -----

// A matmul with K = 0 is its accumulator; the elementwise op after it still
// runs.

// CHECK-LABEL: func.func @matmul_empty_k
//       CHECK:   %[[ACC:.+]] = linalg.fill
//   CHECK-NOT:   linalg.matmul
//       CHECK:   linalg.generic {{.*}} ins(%[[ACC]]
// CPU-LABEL: llvm.func @matmul_empty_k
// GPU-LABEL: llvm.func @matmul_empty_k
func.func @matmul_empty_k(%a: tensor<4x0xf32>, %b: tensor<0x8xf32>) -> tensor<4x8xf32> {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %e = tensor.empty() : tensor<4x8xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<4x0xf32>, tensor<0x8xf32>)
                      outs(%acc : tensor<4x8xf32>) -> tensor<4x8xf32>
  %e2 = tensor.empty() : tensor<4x8xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%mm : tensor<4x8xf32>) outs(%e2 : tensor<4x8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %one : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}

// -----

// An empty result reads nothing: it is a tensor.empty, and what produced it
// goes. Inserting it, or concatenating it, changes nothing.

// CHECK-LABEL: func.func @empty_results
//  CHECK-SAME: (%[[X:.+]]: tensor<3x8xf32>, %[[D:.+]]: tensor<3x8xf32>)
//   CHECK-NOT:   tensor.extract_slice
//   CHECK-NOT:   math.exp
//   CHECK-NOT:   tensor.insert_slice
//       CHECK:   %[[CAT:.+]] = tensor.concat dim(1) %[[X]], %[[D]]
//       CHECK:   return %[[D]], %[[CAT]], %{{.+}} : tensor<3x8xf32>, tensor<3x16xf32>, tensor<3x0xf32>
// CPU-LABEL: llvm.func @empty_results
func.func @empty_results(%x: tensor<3x8xf32>, %d: tensor<3x8xf32>)
    -> (tensor<3x8xf32>, tensor<3x16xf32>, tensor<3x0xf32>) {
  %s = tensor.extract_slice %x[0, 0] [3, 0] [1, 1] : tensor<3x8xf32> to tensor<3x0xf32>
  %exp = math.exp %s : tensor<3x0xf32>
  %ins = tensor.insert_slice %exp into %d[0, 0] [3, 0] [1, 1] : tensor<3x0xf32> into tensor<3x8xf32>
  %cat = tensor.concat dim(1) %x, %exp, %ins : (tensor<3x8xf32>, tensor<3x0xf32>, tensor<3x8xf32>) -> tensor<3x16xf32>
  return %ins, %cat, %exp : tensor<3x8xf32>, tensor<3x16xf32>, tensor<3x0xf32>
}

// -----

// Extents that are 0 only at run time, and non-empty ops, are left alone.

// CHECK-LABEL: func.func @dynamic_extent
//       CHECK:   linalg.reduce
func.func @dynamic_extent(%x: tensor<2x?xf32>, %init: tensor<2xf32>) -> tensor<2xf32> {
  %r = linalg.reduce { arith.addf } ins(%x : tensor<2x?xf32>)
                     outs(%init : tensor<2xf32>) dimensions = [1]
  return %r : tensor<2xf32>
}
