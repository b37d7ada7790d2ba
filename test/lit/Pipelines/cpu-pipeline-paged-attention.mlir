// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2})' | FileCheck %s
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2 paged-attention-kernel=false})' | FileCheck %s --check-prefix=OFF

// A decode step's paged attention through the whole CPU pipeline: by default
// the slot writes are compiled loops and the attention one call of the
// runtime's sitsRuntimePagedAttention on the pool in place;
// paged-attention-kernel=false gathers each sequence's context and attends
// in compiled loops.
// CHECK-LABEL: llvm.func @decode
//       CHECK:   llvm.call @sitsRuntimePagedAttention
//       CHECK: llvm.func @sitsRuntimePagedAttention(i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, f32, !llvm.ptr, i64, i64, i64)
// OFF-NOT: sitsRuntimePagedAttention
func.func @decode(%q: tensor<?x4x1x16xf32>, %k: tensor<?x2x1x16xf32>, %v: tensor<?x2x1x16xf32>,
                  %pool: tensor<?x3x2x2x4x16xf32>, %tables: tensor<?x?xi32>, %slots: tensor<?x1xi64>,
                  %lens: tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>) {
  %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 1}
      : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x3x2x2x4x16xf32>,
         tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>) -> (tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>)
  return %o, %pool1 : tensor<?x4x1x16xf32>, tensor<?x3x2x2x4x16xf32>
}
