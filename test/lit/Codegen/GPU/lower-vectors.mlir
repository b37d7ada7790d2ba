// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(sits-gpu-lower-vectors))' | FileCheck %s

// Inside a GPU module (where convert-gpu-to-nvvm has no vector pre-lowering
// of its own): contractions become FMAs, shape casts and vector.step 1-D
// ops, and a copy between strided buffers a linalg.copy (a loop later;
// kernels cannot call MLIR's runner library).

// CHECK-LABEL: gpu.module @kernels
// CHECK-LABEL: gpu.func @contract
//   CHECK-NOT:   vector.contract
//       CHECK:   vector.fma
//   CHECK-NOT:   vector.contract

// CHECK-LABEL: gpu.func @shape_cast
//   CHECK-NOT:   vector.shape_cast
//       CHECK:   vector.extract
//   CHECK-NOT:   vector.shape_cast

// CHECK-LABEL: gpu.func @step
//   CHECK-NOT:   vector.step
//       CHECK:   arith.constant dense<[0, 1, 2, 3]> : vector<4xindex>

// CHECK-LABEL: gpu.func @strided_copy
//   CHECK-NOT:   memref.copy
//       CHECK:   linalg.copy ins(%{{.+}} : memref<4x4xf32, strided<[8, 1]>>) outs(%{{.+}} : memref<4x4xf32>)
gpu.module @kernels {
  gpu.func @contract(%a: vector<2x3xf32>, %b: vector<3x2xf32>, %c: vector<2x2xf32>, %out: memref<2x2xf32>) kernel {
    %r = vector.contract {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>], iterator_types = ["parallel", "parallel", "reduction"], kind = #vector.kind<add>} %a, %b, %c : vector<2x3xf32>, vector<3x2xf32> into vector<2x2xf32>
    %c0 = arith.constant 0 : index
    vector.transfer_write %r, %out[%c0, %c0] {in_bounds = [true, true]} : vector<2x2xf32>, memref<2x2xf32>
    gpu.return
  }
  gpu.func @shape_cast(%v: vector<4xf32>, %out: memref<1xf32>) kernel {
    %s = vector.shape_cast %v : vector<4xf32> to vector<4x1xf32>
    %e = vector.extract %s[2] : vector<1xf32> from vector<4x1xf32>
    %c0 = arith.constant 0 : index
    vector.store %e, %out[%c0] : memref<1xf32>, vector<1xf32>
    gpu.return
  }
  gpu.func @step(%out: memref<4xindex>) kernel {
    %s = vector.step : vector<4xindex>
    %c0 = arith.constant 0 : index
    vector.store %s, %out[%c0] : memref<4xindex>, vector<4xindex>
    gpu.return
  }
  gpu.func @strided_copy(%a: memref<4x4xf32, strided<[8, 1]>>, %b: memref<4x4xf32>) kernel {
    memref.copy %a, %b : memref<4x4xf32, strided<[8, 1]>> to memref<4x4xf32>
    gpu.return
  }
}
