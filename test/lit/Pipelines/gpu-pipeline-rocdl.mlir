// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-pipeline{target=mi300x})' \
// RUN:   --mlir-print-ir-before=sits-gpu-serialize-to-llvm-ir 2>&1 | FileCheck %s
// RUN: not sits-opt %s --pass-pipeline='builtin.module(sits-gpu-pipeline{target=mi300x format=isa})' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ISA

// The AMD pipeline, as sits_mlir.compile runs it for target='mi300x' (before
// the driver finishes the kernels with an AMDGPU llc): the same blocks,
// threads, staging and vectors as for NVIDIA, tiled for the known-target
// table's wavefront of 64, then the ROCDL dialect for gfx942 with code
// object v5, math through the ROCm device libraries, and the kernels
// serialized as LLVM bitcode. The host code is the same as for NVIDIA.

// Device code in the ROCDL dialect, before serialization: workgroups of
// 128 threads (two wavefronts), tiles staged in LDS (address space 3)
// between barriers, multiply-adds on vectors, GELU's erfc from ocml.
// CHECK-LABEL: IR Dump Before SitsGpuSerializeToLLVMIR
// CHECK: gpu.module @main_kernel [#rocdl.target<O = 3, chip = "gfx942", abi = "500">] attributes {llvm.data_layout = "{{.*}}-A5-
// CHECK-DAG: llvm.mlir.global internal @__wg_main_kernel_{{[0-9]+}}() {addr_space = 3 : i32, alignment = 16 : i64}
// CHECK-DAG: llvm.func @__ocml_erfc_f32(f32) -> f32
// CHECK: llvm.func @main_kernel(
// CHECK-SAME: rocdl.flat_work_group_size = "128,128", rocdl.kernel, rocdl.reqd_work_group_size = array<i32: 128, 1, 1>
// CHECK: rocdl.workgroup.id.x
// CHECK: rocdl.workitem.id.x range <i32, 0, 128>
// CHECK: rocdl.barrier
// CHECK: llvm.intr.fmuladd({{.+}}) : (vector<4xf32>, vector<4xf32>, vector<4xf32>) -> vector<4xf32>
// CHECK: llvm.call @__ocml_erfc_f32

// After: host code launching through MLIR's GPU runtime ABI, and the
// kernels' LLVM bitcode with the device libraries they need.
// CHECK: module attributes {gpu.container_module
// CHECK-DAG: llvm.func @sits_entry_main(%{{.+}}: !llvm.ptr)
// CHECK-DAG: llvm.call @mgpuStreamCreate()
// CHECK-DAG: gpu.launch_func <%{{.+}} : !llvm.ptr> @main_kernel::@main_kernel blocks in
// CHECK-DAG: llvm.call @mgpuStreamSynchronize
// CHECK: gpu.binary @main_kernel  [#gpu.object<#rocdl.target<O = 3, chip = "gfx942", abi = "500">, properties = {device_libraries = ["ocml", "ockl"]}, offload = "BC\C0\DE
// CHECK-NOT: gpu.module

// Other formats need the AMDGPU back end in MLIR's LLVM, which the LLVM
// wheels do not have.
// ISA: error: the `AMDGPU` target was not built
module {
  func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
    %w = arith.constant dense_resource<w> : tensor<64x64xf32>
    %h = sits.matmul %x, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %y = sits.activation <gelu> %h : tensor<64x64xf32>
    return %y : tensor<64x64xf32>
  }
}
