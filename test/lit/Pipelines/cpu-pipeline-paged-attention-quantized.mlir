// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2})' | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2 paged-attention-kernel=false})' | FileCheck %s --check-prefix=OFF
// RUN: sed 's/x20xi8>/x20xf8E4M3FN>/g' %s | sits-opt --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2})' | FileCheck %s --check-prefix=FP8
// RUN: sed 's/x20xi8>/x20xf8E4M3FN>/g' %s | sits-opt --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2 paged-attention-kernel=false})' | FileCheck %s --check-prefix=FP8OFF

// A decode step over an INT8 pool (rows of 16 codes and their f32 scale):
// the new K/V are quantized as they are written (round to nearest even,
// the scale's 4 bytes after the codes), and the attention is one call of
// the runtime's INT8 kernel on the pool in place. Without the kernel, each
// sequence's context is gathered and dequantized in compiled loops. An FP8
// (E4M3) pool is written with fp8 codes (integer code: no float8 type in
// LLVM) and read by the FP8 kernel.
//   CHECK-NOT: llvm.call @sitsRuntimePagedAttention(
//   CHECK-DAG: llvm.intr.roundeven
//   CHECK-DAG: llvm.call @sitsRuntimePagedAttentionI8
//       CHECK: llvm.func @sitsRuntimePagedAttentionI8(i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, f32, !llvm.ptr, i64, i64, i64)
//   FP8-NOT: llvm.call @sitsRuntimePagedAttention(
//   FP8-NOT: llvm.call @sitsRuntimePagedAttentionI8
//       FP8: llvm.call @sitsRuntimePagedAttentionF8E4M3
//       FP8: llvm.func @sitsRuntimePagedAttentionF8E4M3(
// FP8OFF-LABEL: llvm.func @decode
//   FP8OFF-NOT: sitsRuntimePagedAttention
// OFF-LABEL: llvm.func @decode
//   OFF-NOT: sitsRuntimePagedAttention
//       OFF: llvm.sitofp
//   OFF-NOT: sitsRuntimePagedAttention
func.func @decode(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                  %pool: tensor<?x3x2x2x4x20xi8>, %tables: tensor<?x?xi32>, %slots: tensor<?x1xi64>,
                  %lens: tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x20xi8>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 1}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x3x2x2x4x20xi8>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x20xi8>)
  return %o, %pool1 : tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x20xi8>
}
