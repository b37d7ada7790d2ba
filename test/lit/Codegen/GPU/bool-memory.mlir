// RUN: sits-opt %s --pass-pipeline='builtin.module(gpu.module(sits-gpu-bool-memory))' | FileCheck %s

// Bytes of i1 buffers are read and written through pointers in the
// buffer's address space: generic for global memory, 3 (shared) for a
// workgroup buffer.

// CHECK-LABEL: gpu.func @masks
//   CHECK-NOT:   memref.load
//       CHECK:   %[[G:.+]] = llvm.inttoptr %{{.+}} : i64 to !llvm.ptr
//       CHECK:   %[[B:.+]] = llvm.load %[[G]] : !llvm.ptr -> i8
//       CHECK:   arith.cmpi ne, %[[B]], %{{.+}} : i8
//       CHECK:   %[[S:.+]] = llvm.inttoptr %{{.+}} : i64 to !llvm.ptr<3>
//       CHECK:   %[[Z:.+]] = arith.extui %{{.+}} : i1 to i8
//       CHECK:   llvm.store %[[Z]], %[[S]] : i8, !llvm.ptr<3>
//   CHECK-NOT:   memref.store
gpu.module @kernels {
  gpu.func @masks(%in: memref<4xi1>) workgroup(%shared : memref<4xi1, #gpu.address_space<workgroup>>) kernel {
    %c1 = arith.constant 1 : index
    %m = memref.load %in[%c1] : memref<4xi1>
    memref.store %m, %shared[%c1] : memref<4xi1, #gpu.address_space<workgroup>>
    gpu.return
  }
}
