// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-materialize-copies))' | FileCheck %s

// A pad becomes an all-parallel generic that yields the padding value
// outside the source: a kernel, not a host-side fill and copy.

// CHECK-LABEL: func.func @pad
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<1x4x6x6xf32>)
//   CHECK-NOT:   tensor.pad
//       CHECK:   linalg.generic {{.+}} iterator_types = ["parallel", "parallel", "parallel", "parallel"]
//  CHECK-SAME:     outs(%{{.+}} : tensor<1x4x8x8xf32>)
//       CHECK:     %[[V:.+]] = tensor.extract %[[X]]
//       CHECK:     %[[R:.+]] = arith.select %{{.+}}, %[[V]], %[[NINF:.+]] : f32
//       CHECK:     linalg.yield %[[R]]
func.func @pad(%x: tensor<1x4x6x6xf32>) -> tensor<1x4x8x8xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %ninf : f32
  } : tensor<1x4x6x6xf32> to tensor<1x4x8x8xf32>
  return %p : tensor<1x4x8x8xf32>
}

// -----

// A concatenation (a KV cache growing by one token) reads each position from
// the input that covers it.

// CHECK-LABEL: func.func @concat
//  CHECK-SAME:   (%[[PAST:[a-z0-9]+]]: tensor<1x2x16x8xf32>, %[[NEW:[a-z0-9]+]]: tensor<1x2x1x8xf32>)
//   CHECK-NOT:   tensor.concat
//       CHECK:   linalg.generic
//  CHECK-SAME:     outs(%{{.+}} : tensor<1x2x17x8xf32>)
//   CHECK-DAG:     %[[B:.+]] = tensor.extract %[[NEW]]
//   CHECK-DAG:     %[[A:.+]] = tensor.extract %[[PAST]]
//       CHECK:     %[[IN:.+]] = arith.cmpi slt, %{{.+}}, %c16
//       CHECK:     arith.select %[[IN]], %[[A]], %[[B]]
func.func @concat(%past: tensor<1x2x16x8xf32>, %new: tensor<1x2x1x8xf32>) -> tensor<1x2x17x8xf32> {
  %c = tensor.concat dim(2) %past, %new : (tensor<1x2x16x8xf32>, tensor<1x2x1x8xf32>) -> tensor<1x2x17x8xf32>
  return %c : tensor<1x2x17x8xf32>
}

// -----

// With dynamic extents, the input is chosen by branches: the past may be
// empty (a first prefill), and only the branch taken reads.

// CHECK-LABEL: func.func @concat_dynamic
//  CHECK-SAME:   (%[[PAST:[a-z0-9]+]]: tensor<2x?x16xf32>, %[[NEW:[a-z0-9]+]]: tensor<2x?x16xf32>)
//       CHECK:   %[[P:.+]] = tensor.dim %[[PAST]]
//       CHECK:   %[[N:.+]] = tensor.dim %[[NEW]]
//       CHECK:   %[[END:.+]] = arith.addi
//       CHECK:   %[[INIT:.+]] = tensor.empty(%[[END]]) : tensor<2x?x16xf32>
//       CHECK:   linalg.generic {{.*}} outs(%[[INIT]] : tensor<2x?x16xf32>)
//       CHECK:     %[[I:.+]] = linalg.index 1
//       CHECK:     %[[IN:.+]] = arith.cmpi slt, %[[I]], %[[P]]
//       CHECK:     scf.if %[[IN]] -> (f32)
//       CHECK:       tensor.extract %[[PAST]]
//       CHECK:     } else {
//       CHECK:       %[[J:.+]] = arith.subi %[[I]], %[[P]]
//       CHECK:       tensor.extract %[[NEW]][%{{.+}}, %[[J]], %{{.+}}]
//   CHECK-NOT:   tensor.concat
func.func @concat_dynamic(%past: tensor<2x?x16xf32>, %new: tensor<2x?x16xf32>) -> tensor<2x?x16xf32> {
  %r = tensor.concat dim(1) %past, %new : (tensor<2x?x16xf32>, tensor<2x?x16xf32>) -> tensor<2x?x16xf32>
  return %r : tensor<2x?x16xf32>
}

// -----

// Results that no kernel computes (an argument, a view of one) are copied
// by a linalg.copy; a value returned twice is copied for the second result.

// CHECK-LABEL: func.func @results
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<4x8xf32>)
//       CHECK:   %[[V:.+]] = tensor.collapse_shape %[[X]]
//       CHECK:   %[[G:.+]] = linalg.generic
//       CHECK:   %[[C0:.+]] = linalg.copy ins(%[[X]] : tensor<4x8xf32>)
//       CHECK:   %[[C1:.+]] = linalg.copy ins(%[[V]] : tensor<32xf32>)
//       CHECK:   %[[C2:.+]] = linalg.copy ins(%[[G]] : tensor<4x8xf32>)
//       CHECK:   return %[[C0]], %[[C1]], %[[G]], %[[C2]]
func.func @results(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<32xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %v = tensor.collapse_shape %x [[0, 1]] : tensor<4x8xf32> into tensor<32xf32>
  %e = tensor.empty() : tensor<4x8xf32>
  %g = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%x : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %n = arith.negf %a : f32
    linalg.yield %n : f32
  } -> tensor<4x8xf32>
  return %x, %v, %g, %g : tensor<4x8xf32>, tensor<32xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The source of an insert_slice that no kernel computes is copied by a
// linalg.copy, which bufferization writes straight into the destination.

// CHECK-LABEL: func.func @insert_argument
//  CHECK-SAME:   (%[[X:[a-z0-9]+]]: tensor<2x8xf32>, %[[D:[a-z0-9]+]]: tensor<4x8xf32>)
//       CHECK:   %[[C:.+]] = linalg.copy ins(%[[X]] : tensor<2x8xf32>)
//       CHECK:   tensor.insert_slice %[[C]] into %[[D]]
func.func @insert_argument(%x: tensor<2x8xf32>, %d: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r = tensor.insert_slice %x into %d[2, 0] [2, 8] [1, 1] : tensor<2x8xf32> into tensor<4x8xf32>
  return %r : tensor<4x8xf32>
}
