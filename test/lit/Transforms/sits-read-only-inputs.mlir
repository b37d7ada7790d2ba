// RUN: sits-opt %s --sits-read-only-inputs | FileCheck %s
// RUN: sits-opt %s --sits-read-only-inputs --one-shot-bufferize=bufferize-function-boundaries | FileCheck %s --check-prefix=BUF

// Tensor arguments of public functions become read-only, except the one a
// result updates in place; private functions and non-tensor arguments keep
// their attributes.

// CHECK-LABEL: func.func @main
//  CHECK-SAME: (%{{.+}}: tensor<8xf32> {bufferization.writable = false},
//  CHECK-SAME:  %{{.+}}: tensor<8xf32> {sits.name = "pool"},
//  CHECK-SAME:  %{{.+}}: index)
// CHECK-LABEL: func.func private @helper
//  CHECK-SAME: (%{{.+}}: tensor<8xf32>)

// Bufferized, the write into the read-only input goes to a new buffer; the
// pool is written in place.

// BUF-LABEL: func.func @main
//  BUF-SAME: (%[[X:.+]]: memref<8xf32{{.*}}>, %[[P:.+]]: memref<8xf32{{.*}}>
//       BUF:   %[[A:.+]] = memref.alloc
//       BUF:   memref.copy %[[X]], %[[A]]
//       BUF:   memref.store %{{.+}}, %[[A]]
//       BUF:   memref.store %{{.+}}, %[[P]]
func.func @main(%x: tensor<8xf32>, %pool: tensor<8xf32> {sits.name = "pool"}, %i: index)
    -> (tensor<8xf32>, tensor<8xf32> {sits.updates = 1 : i64}) {
  %f = arith.constant 1.0 : f32
  %0 = tensor.insert %f into %x[%i] : tensor<8xf32>
  %1 = tensor.insert %f into %pool[%i] : tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

func.func private @helper(%x: tensor<8xf32>) -> tensor<8xf32> {
  return %x : tensor<8xf32>
}
