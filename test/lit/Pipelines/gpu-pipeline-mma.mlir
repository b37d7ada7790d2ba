// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-codegen{target=a100})' | FileCheck %s --check-prefixes=MMA,SM80
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-codegen{target=h100})' | FileCheck %s --check-prefixes=MMA,SM90
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-codegen{target=v100})' | FileCheck %s --check-prefixes=FMA
// RUN: sed 's/xf16>/xf32>/g' %s | sits-opt --pass-pipeline='builtin.module(sits-gpu-codegen{target=h100})' | FileCheck %s --check-prefixes=FMA
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-gpu-codegen{target=a100})' --mlir-print-ir-after=convert-nvgpu-to-nvvm -o /dev/null 2>&1 | FileCheck %s --check-prefix=NVVM
// RUN: sed 's/xf16>/xf32>/g' %s | sits-opt --pass-pipeline='builtin.module(sits-gpu-codegen{target=a100 tf32=true})' | FileCheck %s --check-prefixes=TF32
// RUN: sed 's/xf16>/xf32>/g' %s | sits-opt --pass-pipeline='builtin.module(sits-gpu-codegen{target=v100 tf32=true})' | FileCheck %s --check-prefixes=FMA

// An f16 matmul accumulating in f32 with a bias+ReLU epilogue, down to PTX.
// On sm_80 and sm_90 each warp loads its operand fragments from the staged
// shared-memory tiles with ldmatrix (A as four 8x8 matrices, B as two,
// transposed) and multiplies them on tensor cores (mma.sync m16n8k16, f32
// accumulators in registers); the epilogue reads the block's result from
// shared memory. sm_70 and f32 operands keep FMAs on CUDA cores.
// NVVM: nvvm.ldmatrix %{{.+}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<row>, num = 4 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32, i32, i32)>
// NVVM: nvvm.ldmatrix %{{.+}} {eltType = #nvvm.ld_st_matrix_elt_type<b16>, layout = #nvvm.mma_layout<col>, num = 2 : i32, shape = #nvvm.ld_st_matrix_shape<m = 8, n = 8>} : (!llvm.ptr<3>) -> !llvm.struct<(i32, i32)>
// NVVM: nvvm.mma.sync A[{{.+}}]  B[{{.+}}]  C[{{.+}}]  {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>, shape = #nvvm.shape<m = 16, n = 8, k = 16>} : (vector<2xf16>, vector<2xf16>, f32) -> !llvm.struct<(f32, f32, f32, f32)>

// MMA: gpu.binary @main_kernel
// SM80-SAME: chip = "sm_80"
// SM90-SAME: chip = "sm_90"
// MMA-SAME: .shared .align
// MMA-SAME: bar.sync
// MMA-SAME: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// MMA-SAME: ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
// MMA-SAME: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// MMA-SAME: max.NaN.f32

// With tf32=true (off by default: TF32 keeps 10 of f32's 23 mantissa
// bits), f32 matmuls run on tensor cores too: m16n8k8 in TF32, A loaded
// with ldmatrix (16x8 f32 as four 8x8 b16 matrices), B ([k, n]) with
// per-lane loads. sm_70 keeps FMAs (no TF32 there).
// TF32: gpu.binary @main_kernel
// TF32-SAME: chip = "sm_80"
// TF32-SAME: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// TF32-SAME: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// TF32-NOT: fma.rn.f32

// FMA: gpu.binary @main_kernel
// FMA-NOT: mma.sync
// FMA-NOT: ldmatrix
// FMA-SAME: fma.rn.f32
// FMA-NOT: mma.sync
// FMA-NOT: ldmatrix
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d1)>
func.func @main(%a: tensor<128x256xf16>, %b: tensor<256x512xf16>, %bias: tensor<512xf32>) -> tensor<128x512xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<128x512xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<128x512xf32>) -> tensor<128x512xf32>
  %m = linalg.matmul ins(%a, %b : tensor<128x256xf16>, tensor<256x512xf16>) outs(%f : tensor<128x512xf32>) -> tensor<128x512xf32>
  %r = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%m, %bias : tensor<128x512xf32>, tensor<512xf32>) outs(%e : tensor<128x512xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    %t = arith.maximumf %s, %z : f32
    linalg.yield %t : f32
  } -> tensor<128x512xf32>
  return %r : tensor<128x512xf32>
}
