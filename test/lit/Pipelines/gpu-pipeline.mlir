// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-pipeline{target=h100})' | FileCheck %s --check-prefixes=CHECK,H100
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-pipeline{target=a100})' | FileCheck %s --check-prefixes=CHECK,A100
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-pipeline{target=v100})' | FileCheck %s --check-prefixes=CHECK,V100

// The whole NVIDIA pipeline, as sits_mlir.compile runs it for a GPU target
// (before the driver assembles the PTX with ptxas): graph passes, SITS to
// linalg, blocks and threads, shared-memory staging, vectors, bufferization
// with out-parameters and the weights buffer, kernels outlined into one GPU
// module serialized to PTX for the target's chip, and host code in the LLVM
// dialect that launches them through MLIR's GPU runtime ABI.

// The weights stay a buffer the runtime passes (64x64 fp32); the module
// names the target the graph passes scheduled for.
// CHECK: module attributes {gpu.container_module, {{.*}}sits.report.schedule = [{{.+}}], sits.target = #sits.target<"{{h100|a100|v100}}">, sits.weights = [{name = "{{.+}}", offset = 0 : i64, value = dense_resource<w> : tensor<64x64xf32>}]}

// Host code: the entry point the runtime calls, the launches on one stream.
// CHECK-DAG: llvm.func @sits_entry_main(%{{.+}}: !llvm.ptr)
// CHECK-DAG: llvm.call @mgpuStreamCreate()
// CHECK-DAG: gpu.launch_func <%{{.+}} : !llvm.ptr> @main_kernel::@main_kernel blocks in
// CHECK-DAG: llvm.call @mgpuStreamSynchronize

// Device code: PTX for the target, with the matmul's tiles staged in shared
// memory (16-byte loads and stores) between barriers, and multiply-adds on
// registers.
// CHECK: gpu.binary @main_kernel
// H100-SAME: #nvvm.target<O = 3, chip = "sm_90", features = "+ptx80">
// A100-SAME: #nvvm.target<O = 3, chip = "sm_80", features = "+ptx70">
// V100-SAME: #nvvm.target<O = 3, chip = "sm_70", features = "+ptx60">
// CHECK-SAME: assembly = "
// H100-SAME: .version 8.0
// H100-SAME: .target sm_90
// A100-SAME: .target sm_80
// V100-SAME: .target sm_70
// CHECK-SAME: .visible .entry main_kernel(
// CHECK-SAME: .shared .align 16
// CHECK-SAME: bar.sync
// CHECK-SAME: ld.global.v4.b32
// CHECK-SAME: st.shared.v4.b32
// CHECK-SAME: bar.sync
// CHECK-SAME: fma.rn.f32
// H100-SAME: max.NaN.f32
// A100-SAME: max.NaN.f32
// V100-SAME: max.f32

// CHECK-NOT: sits.matmul
// CHECK-NOT: linalg.
// CHECK-NOT: memref.alloc
module {
  func.func @main(%x: tensor<64x64xf32>) -> tensor<64x64xf32> {
    %w = arith.constant dense_resource<w> : tensor<64x64xf32>
    %h = sits.matmul %x, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
    %y = sits.activation <relu> %h : tensor<64x64xf32>
    return %y : tensor<64x64xf32>
  }
}
