// RUN: sits-opt %s --split-input-file \
// RUN:   --pass-pipeline='builtin.module(gpu.module(sits-gpu-alloca-address-space))' | FileCheck %s

// AMDGPU's data layout allocates in address space 5 ("A5"): allocas in the
// generic space move there, their users see an addrspacecast of them.

// CHECK-LABEL: gpu.module @amdgpu
//       CHECK:   llvm.func @private_buffer
//       CHECK:     %[[P:.+]] = llvm.alloca %{{.+}} x f32 {alignment = 16 : i64} : (i64) -> !llvm.ptr<5>
//       CHECK:     %[[G:.+]] = llvm.addrspacecast %[[P]] : !llvm.ptr<5> to !llvm.ptr
//       CHECK:     llvm.store %{{.+}}, %[[G]] : f32, !llvm.ptr
//       CHECK:     llvm.alloca %{{.+}} x i32 : (i64) -> !llvm.ptr<5>
//   CHECK-NOT:     llvm.addrspacecast
//       CHECK:     llvm.return
gpu.module @amdgpu attributes {llvm.data_layout = "e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9"} {
  llvm.func @private_buffer(%x: f32) {
    %c4 = llvm.mlir.constant(4 : i64) : i64
    %a = llvm.alloca %c4 x f32 {alignment = 16 : i64} : (i64) -> !llvm.ptr
    llvm.store %x, %a : f32, !llvm.ptr
    // Already in the alloca address space: left alone.
    %b = llvm.alloca %c4 x i32 : (i64) -> !llvm.ptr<5>
    llvm.return
  }
}

// -----

// Without a data layout (NVVM) allocas stay generic.

// CHECK-LABEL: gpu.module @nvptx
//       CHECK:   llvm.alloca %{{.+}} x f32 : (i64) -> !llvm.ptr
//   CHECK-NOT:   llvm.addrspacecast
gpu.module @nvptx {
  llvm.func @private_buffer() {
    %c4 = llvm.mlir.constant(4 : i64) : i64
    %a = llvm.alloca %c4 x f32 : (i64) -> !llvm.ptr
    llvm.return
  }
}
