// RUN: sits-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(sits-gpu-device-buffers))' --verify-diagnostics | FileCheck %s

// The intermediate buffer between two kernels is device memory, freed after
// the last kernel that reads it (through a view). A constant a kernel reads
// moves into the kernel, so that outlining takes it into the GPU module.

memref.global "private" constant @table : memref<4xf32> = dense<[1.0, 2.0, 3.0, 4.0]>

// CHECK-LABEL: func.func @two_kernels
//   CHECK-NOT:   memref.alloc
//   CHECK-NOT:   memref.get_global
//       CHECK:   %[[T:.+]] = gpu.alloc  () : memref<64xf32>
//       CHECK:   gpu.launch
//       CHECK:     memref.get_global @table
//       CHECK:     memref.store %{{.+}}, %[[T]]
//       CHECK:   %[[V:.+]] = memref.expand_shape %[[T]]
//       CHECK:   gpu.launch
//       CHECK:     memref.load %[[V]]
//       CHECK:     gpu.terminator
//  CHECK-NEXT:   }
//  CHECK-NEXT:   gpu.dealloc  %[[T]] : memref<64xf32>
//  CHECK-NEXT:   return
func.func @two_kernels(%out: memref<8x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %t = memref.alloc() : memref<64xf32>
  %g = memref.get_global @table : memref<4xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %x = memref.load %g[%c0] : memref<4xf32>
    memref.store %x, %t[%c0] : memref<64xf32>
    gpu.terminator
  }
  %v = memref.expand_shape %t [[0, 1]] output_shape [8, 8] : memref<64xf32> into memref<8x8xf32>
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %y = memref.load %v[%c0, %c0] : memref<8x8xf32>
    memref.store %y, %out[%c0, %c0] : memref<8x8xf32>
    gpu.terminator
  }
  return
}

// -----

// The host must not touch device memory.

func.func @host_access(%in: memref<8xf32>, %out: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  // expected-error @below {{would access GPU memory from the host: every operation on buffers must run in a kernel}}
  %x = memref.load %in[%c0] : memref<8xf32>
  // expected-error @below {{would access GPU memory from the host}}
  memref.store %x, %out[%c0] : memref<8xf32>
  return
}
