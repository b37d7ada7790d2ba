// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-cpu-distinct-results))' | FileCheck %s
// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-cpu-distinct-results),buffer-results-to-out-params{modify-public-functions=true})' | FileCheck %s --check-prefix=OUT

// A value returned three times: each repeat is a copy in its own buffer,
// and each result then becomes its own out-param.
// CHECK-LABEL: func.func @twice
//  CHECK-SAME:   (%[[A:.+]]: memref<?x4xf32>)
//       CHECK:   %[[C0:.+]] = arith.constant 0 : index
//       CHECK:   %[[D:.+]] = memref.dim %[[A]], %[[C0]]
//       CHECK:   %[[NEW:.+]] = memref.alloc(%[[D]]) : memref<?x4xf32>
//       CHECK:   memref.copy %[[A]], %[[NEW]]
//       CHECK:   %[[NEW2:.+]] = memref.alloc(%{{.+}}) : memref<?x4xf32>
//       CHECK:   memref.copy %[[A]], %[[NEW2]]
//       CHECK:   return %[[A]], %[[NEW]], %[[NEW2]]
// OUT-LABEL: func.func @twice
//  OUT-SAME:   (%{{.+}}: memref<?x4xf32>, %{{.+}}: memref<?x4xf32>, %{{.+}}: memref<?x4xf32>, %{{.+}}: memref<?x4xf32>)
//       OUT:   memref.copy %arg0, %arg1
//       OUT:   memref.copy %alloc, %arg2
//       OUT:   memref.copy %alloc_2, %arg3
func.func @twice(%a: memref<?x4xf32>) -> (memref<?x4xf32>, memref<?x4xf32>, memref<?x4xf32>) {
  return %a, %a, %a : memref<?x4xf32>, memref<?x4xf32>, memref<?x4xf32>
}
