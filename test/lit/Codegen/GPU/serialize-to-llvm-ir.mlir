// RUN: sits-opt %s --split-input-file --verify-diagnostics \
// RUN:   --pass-pipeline='builtin.module(sits-gpu-serialize-to-llvm-ir{textual=true})' | FileCheck %s

// A kernel that calls ocml: the object carries the IR for the chip, the
// code object version from the target's ABI, the device libraries' control
// constants (gfx942 is ISA version 9402) and the libraries to link.

// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.binary @kernels [#gpu.object<#rocdl.target<chip = "gfx942", abi = "500">, properties = {device_libraries = ["ocml", "ockl"]}, offload = "
// CHECK-SAME: target triple = \22amdgcn-amd-amdhsa\22
// CHECK-SAME: @__oclc_ISA_version = weak_odr protected local_unnamed_addr addrspace(4) constant i32 9402
// CHECK-SAME: @__oclc_ABI_version = weak_odr protected local_unnamed_addr addrspace(4) constant i32 500
// CHECK-SAME: @__oclc_wavefrontsize64 = weak_odr protected local_unnamed_addr addrspace(4) constant i8 1
// CHECK-SAME: @__oclc_correctly_rounded_sqrt32 = weak_odr protected local_unnamed_addr addrspace(4) constant i8 1
// CHECK-SAME: define amdgpu_kernel void @erf(ptr addrspace(1) %0)
// CHECK-SAME: call float @__ocml_erf_f32(
// CHECK-SAME: !\22amdhsa_code_object_version\22, i32 500}
// CHECK-NOT: gpu.module
module attributes {gpu.container_module} {
  gpu.module @kernels [#rocdl.target<chip = "gfx942", abi = "500">] attributes {llvm.data_layout = "e-p:64:64-p1:64:64-p2:32:32-p3:32:32-p4:64:64-p5:32:32-p6:32:32-p7:160:256:256:32-p8:128:128:128:48-p9:192:256:256:32-i64:64-v16:16-v24:32-v32:32-v48:64-v96:128-v192:256-v256:256-v512:512-v1024:1024-v2048:2048-n32:64-S32-A5-G1-ni:7:8:9"} {
    llvm.func @__ocml_erf_f32(f32) -> f32
    llvm.func @erf(%p: !llvm.ptr<1>) attributes {rocdl.kernel} {
      %x = llvm.load %p : !llvm.ptr<1> -> f32
      %y = llvm.call @__ocml_erf_f32(%x) : (f32) -> f32
      llvm.store %y, %p : f32, !llvm.ptr<1>
      llvm.return
    }
  }
}

// -----

// No library calls: no control constants, nothing to link. One object per
// target.

// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.binary @kernels [#gpu.object<#rocdl.target<chip = "gfx942", abi = "500">, offload = "
// CHECK-NOT: __oclc
// CHECK-SAME: define amdgpu_kernel void @scale(
// CHECK-SAME: #gpu.object<#rocdl.target<chip = "gfx90a", abi = "500">, offload = "
module attributes {gpu.container_module} {
  gpu.module @kernels [#rocdl.target<chip = "gfx942", abi = "500">, #rocdl.target<chip = "gfx90a", abi = "500">] {
    llvm.func @scale(%p: !llvm.ptr<1>) attributes {rocdl.kernel} {
      %x = llvm.load %p : !llvm.ptr<1> -> f32
      %y = llvm.fmul %x, %x : f32
      llvm.store %y, %p : f32, !llvm.ptr<1>
      llvm.return
    }
  }
}

// -----

module attributes {gpu.container_module} {
  // expected-error @below {{has no target: attach a #rocdl.target first (rocdl-attach-target)}}
  gpu.module @kernels {
  }
}

// -----

module attributes {gpu.container_module} {
  // expected-error @below {{is not a #rocdl.target: serialize it with gpu-module-to-binary}}
  gpu.module @kernels [#nvvm.target<chip = "sm_90">] {
  }
}

// -----

module attributes {gpu.container_module} {
  // expected-error @below {{cannot derive the ISA version of chip 'gfxnext' for the device libraries}}
  gpu.module @kernels [#rocdl.target<chip = "gfxnext">] {
    llvm.func @__ocml_exp_f32(f32) -> f32
    llvm.func @k(%x: f32) attributes {rocdl.kernel} {
      %y = llvm.call @__ocml_exp_f32(%x) : (f32) -> f32
      llvm.return
    }
  }
}
