// RUN: sits-opt %s --split-input-file --sits-resolve-expand-shapes | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-resolve-expand-shapes --expand-strided-metadata --lower-affine --finalize-memref-to-llvm --convert-arith-to-llvm --convert-func-to-llvm --reconcile-unrealized-casts | FileCheck %s --check-prefix=LLVM

// Two dynamic extents in one group: a reinterpret_cast of the base buffer
// with the output_shape's extents; the outer stride steps over the inner
// extent times the source's row stride.
// CHECK-LABEL: func.func @two_dynamic
//  CHECK-SAME: (%[[M:.+]]: memref<?x64xf32>, %[[B:.+]]: index, %[[S:.+]]: index)
//       CHECK:   %[[BASE:.+]], %[[OFF:.+]], %{{.+}}:2, %{{.+}}:2 = memref.extract_strided_metadata %[[M]]
//       CHECK:   %[[STRIDE:.+]] = affine.apply #{{.+}}()[%[[S]]]
//       CHECK:   %[[R:.+]] = memref.reinterpret_cast %[[BASE]] to offset: [0], sizes: [%[[B]], %[[S]], 64], strides: [%[[STRIDE]], 64, 1]
//  CHECK-SAME:     to memref<?x?x64xf32>
//   CHECK-NOT:   memref.expand_shape
//       CHECK:   return %[[R]]
// LLVM-LABEL: llvm.func @two_dynamic
//   LLVM-NOT:   memref.
func.func @two_dynamic(%m: memref<?x64xf32>, %b: index, %s: index) -> memref<?x?x64xf32> {
  %0 = memref.expand_shape %m [[0, 1], [2]] output_shape [%b, %s, 64] : memref<?x64xf32> into memref<?x?x64xf32>
  return %0 : memref<?x?x64xf32>
}

// -----

// A strided source (a view): its dynamic offset and strides carry over.
// CHECK-LABEL: func.func @strided_source
//       CHECK:   %[[BASE:.+]], %[[OFF:.+]], %{{.+}}:3, %[[STRIDES:.+]]:3 = memref.extract_strided_metadata
//       CHECK:   %[[OUTER:.+]] = affine.apply #{{.+}}()[%[[STRIDES]]#0, %{{.+}}]
//       CHECK:   memref.reinterpret_cast %[[BASE]] to offset: [%[[OFF]]], sizes: [%{{.+}}, %{{.+}}, 8, 16], strides: [%[[OUTER]], %[[STRIDES]]#0, 16, 1]
func.func @strided_source(%m: memref<?x8x16xf32, strided<[?, 16, 1], offset: ?>>, %b: index, %s: index) -> memref<?x?x8x16xf32, strided<[?, ?, 16, 1], offset: ?>> {
  %0 = memref.expand_shape %m [[0, 1], [2], [3]] output_shape [%b, %s, 8, 16] : memref<?x8x16xf32, strided<[?, 16, 1], offset: ?>> into memref<?x?x8x16xf32, strided<[?, ?, 16, 1], offset: ?>>
  return %0 : memref<?x?x8x16xf32, strided<[?, ?, 16, 1], offset: ?>>
}

// -----

// One dynamic extent per group: left to expand-strided-metadata.
// CHECK-LABEL: func.func @one_dynamic
//       CHECK:   memref.expand_shape
//   CHECK-NOT:   memref.reinterpret_cast
func.func @one_dynamic(%m: memref<?x64xf32>, %b: index) -> memref<?x4x64xf32> {
  %0 = memref.expand_shape %m [[0, 1], [2]] output_shape [%b, 4, 64] : memref<?x64xf32> into memref<?x4x64xf32>
  return %0 : memref<?x4x64xf32>
}
