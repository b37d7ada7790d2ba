// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-merge-kernel-modules)' | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-merge-kernel-modules)' --mlir-pass-statistics -o /dev/null 2>&1 | FileCheck %s --check-prefix=STATS

// Outlining gave each kernel a module of its own, both kernels named
// @main_kernel, both with a copy of the same constant. One module remains:
// each kernel is named after its module, the constant is kept once, and the
// launches call the new names.

// CHECK-LABEL: gpu.module @main_kernel {
//   CHECK-DAG:   memref.global "private" constant @table
//   CHECK-DAG:   gpu.func @main_kernel(
//   CHECK-DAG:   gpu.func @main_kernel_0(
//   CHECK-NOT: gpu.module
//       CHECK: func.func @main
//       CHECK:   gpu.launch_func  @main_kernel::@main_kernel
//       CHECK:   gpu.launch_func  @main_kernel::@main_kernel_0
// STATS: (S) 2 num-kernels
module attributes {gpu.container_module} {
  gpu.module @main_kernel {
    memref.global "private" constant @table : memref<2xf32> = dense<[1.0, 2.0]>
    gpu.func @main_kernel(%out: memref<2xf32>) kernel {
      %c0 = arith.constant 0 : index
      %t = memref.get_global @table : memref<2xf32>
      %x = memref.load %t[%c0] : memref<2xf32>
      memref.store %x, %out[%c0] : memref<2xf32>
      gpu.return
    }
  }
  gpu.module @main_kernel_0 {
    memref.global "private" constant @table : memref<2xf32> = dense<[1.0, 2.0]>
    gpu.func @main_kernel(%out: memref<2xf32>) kernel {
      %c1 = arith.constant 1 : index
      %t = memref.get_global @table : memref<2xf32>
      %x = memref.load %t[%c1] : memref<2xf32>
      memref.store %x, %out[%c1] : memref<2xf32>
      gpu.return
    }
  }
  func.func @main(%out: memref<2xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @main_kernel::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%out : memref<2xf32>)
    gpu.launch_func @main_kernel_0::@main_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%out : memref<2xf32>)
    return
  }
}
