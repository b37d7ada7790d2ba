// RUN: sits-opt %s --pass-pipeline='builtin.module(func.func(sits-cpu-lower-vectors))' | FileCheck %s

// f16 operands accumulating in f32 are extended first: the outer-product
// lowering takes one element type, and the sums are f32 as specified.
// CHECK-LABEL: func.func @mixed_contract
//   CHECK-DAG:   arith.extf %{{.+}} : vector<2x4xf16> to vector<2x4xf32>
//   CHECK-DAG:   arith.extf %{{.+}} : vector<4x8xf16> to vector<4x8xf32>
//       CHECK:   vector.fma {{.+}} : vector<8xf32>
//   CHECK-NOT:   vector.contract
func.func @mixed_contract(%a: vector<2x4xf16>, %b: vector<4x8xf16>, %c: vector<2x8xf32>) -> vector<2x8xf32> {
  %0 = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %a, %b, %c : vector<2x4xf16>, vector<4x8xf16> into vector<2x8xf32>
  return %0 : vector<2x8xf32>
}
