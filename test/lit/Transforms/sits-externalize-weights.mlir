// RUN: sits-opt %s --split-input-file --sits-externalize-weights --allow-unregistered-dialect | FileCheck %s
// RUN: sits-opt %s --split-input-file --sits-externalize-weights=min-bytes=64 --allow-unregistered-dialect | FileCheck %s --check-prefix=SMALL

// Large constants become views into a leading weights buffer, each at a
// 64-byte aligned offset, in first-use order; small ones and splats stay.

// CHECK: module attributes {sits.weights = [{name = "w1", offset = 0 : i64, value = dense_resource<w1_blob> : tensor<32x64xf32>}, {name = "w2", offset = 8192 : i64, value = dense_resource<w2_blob> : tensor<4097xi8>}]}
// CHECK-NOT: memref.global "private" constant @w1
// CHECK-NOT: memref.global "private" constant @w2
// CHECK: memref.global "private" constant @small
// CHECK-LABEL: func.func @main
//  CHECK-SAME: (%[[W:.+]]: memref<?xi8>, %{{.+}}: memref<32x64xf32>)
//       CHECK: %[[O0:.+]] = arith.constant 0 : index
//       CHECK: memref.view %[[W]][%[[O0]]][] : memref<?xi8> to memref<32x64xf32>
//       CHECK: %[[O1:.+]] = arith.constant 8192 : index
//       CHECK: memref.view %[[W]][%[[O1]]][] : memref<?xi8> to memref<4097xi8>
//       CHECK: memref.get_global @small
// CHECK-LABEL: func.func private @helper()
//       CHECK:   memref.get_global @small

// SMALL: {name = "small", offset = 12352 : i64
module {
  memref.global "private" constant @w1 : memref<32x64xf32> = dense_resource<w1_blob>
  memref.global "private" constant @w2 : memref<4097xi8> = dense_resource<w2_blob>
  memref.global "private" constant @small : memref<16xf32> = dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]>
  memref.global "private" constant @splat : memref<4096xf32> = dense<1.0>
  func.func @main(%out: memref<32x64xf32>) {
    %w1 = memref.get_global @w1 : memref<32x64xf32>
    %w2 = memref.get_global @w2 : memref<4097xi8>
    %s = memref.get_global @small : memref<16xf32>
    %p = memref.get_global @splat : memref<4096xf32>
    "test.use"(%w1, %w2, %s, %p) : (memref<32x64xf32>, memref<4097xi8>, memref<16xf32>, memref<4096xf32>) -> ()
    memref.copy %w1, %out : memref<32x64xf32> to memref<32x64xf32>
    return
  }
  func.func private @helper() {
    %s = memref.get_global @small : memref<16xf32>
    "test.use"(%s) : (memref<16xf32>) -> ()
    return
  }
}

// -----

// Once the module has weights, every public function takes the buffer,
// used or not (a shape function beside its model): one calling convention.
// CHECK-LABEL: func.func @model
//  CHECK-SAME: (%{{.+}}: memref<?xi8>, %{{.+}}: memref<32x64xf32>)
// CHECK-LABEL: func.func @model_shapes
//  CHECK-SAME: (%{{.+}}: memref<?xi8>, %{{.+}}: memref<1xi64>)
module {
  memref.global "private" constant @w : memref<32x64xf32> = dense_resource<w_blob>
  func.func @model(%out: memref<32x64xf32>) {
    %w = memref.get_global @w : memref<32x64xf32>
    memref.copy %w, %out : memref<32x64xf32> to memref<32x64xf32>
    return
  }
  func.func @model_shapes(%out: memref<1xi64>) {
    return
  }
}

// -----

// Without weights nothing changes.
// CHECK-LABEL: func.func @no_weights
//  CHECK-SAME: (%{{.+}}: memref<4xf32>)
func.func @no_weights(%out: memref<4xf32>) {
  return
}
