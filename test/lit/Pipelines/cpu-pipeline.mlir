// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=2})' | FileCheck %s --check-prefixes=CHECK,V3
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v4 num-threads=2})' | FileCheck %s --check-prefixes=CHECK,V4
// RUN: sits-opt %s --pass-pipeline='builtin.module(sits-cpu-pipeline{target=x86-64-v3 num-threads=1})' | FileCheck %s --check-prefix=ONE

// The whole CPU pipeline, as sits_mlir.compile runs it: graph passes, SITS to
// linalg, tiling, vectorization, bufferization with out-params, weights
// moved to a buffer, and the LLVM dialect with the runtime's entry point.
// The pipeline's `target` replaces the module's `sits.target` (here the
// host, `cpu`), so the string alone says what the code is for.

// Tiles run through the runtime's fork-join: the dispatch calls
// sitsRuntimeParallelFor with the outlined parallel body, where the
// vectorized kernel sits. With one thread there is no parallel loop at all.

// (sits.report.*: the decisions of the graph passes, for the explain report.)
// V3: module attributes {{{.*}}sits.report.schedule = [{{.+}}], sits.target = #sits.target<"x86-64-v3">, sits.weights = [{name = "{{.+}}", offset = 0 : i64, value = dense_resource<w> : tensor<64x64xf32>}]}
// V4: module attributes {{{.*}}sits.report.schedule = [{{.+}}], sits.target = #sits.target<"x86-64-v4">, sits.weights = [{name = "{{.+}}", offset = 0 : i64, value = dense_resource<w> : tensor<64x64xf32>}]}
// CHECK-DAG: llvm.func @main(
// CHECK-DAG: llvm.func @_mlir_ciface_main(%{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr, %{{.+}}: !llvm.ptr)
// CHECK-DAG: llvm.func @sits_entry_main(%{{.+}}: !llvm.ptr)
// CHECK-DAG: llvm.mlir.addressof @main_dispatch_0_parallel : !llvm.ptr
// CHECK-DAG: llvm.call @sitsRuntimeParallelFor(
// CHECK-DAG: llvm.func @main_dispatch_0_parallel(%{{.+}}: !llvm.ptr, %{{.+}}: i64)
// Each fusion group is a function of its own, called from the entry point.
// CHECK-DAG: llvm.func @main_dispatch_0(
// CHECK-DAG: llvm.call @main_dispatch_0(
// Multiply-adds on the register block's rows of two vectors: 16 floats
// with AVX2, 32 with AVX-512.
// V3-DAG: llvm.intr.fmuladd({{.+}}) : (vector<16xf32>, vector<16xf32>, vector<16xf32>) -> vector<16xf32>
// V4-DAG: llvm.intr.fmuladd({{.+}}) : (vector<32xf32>, vector<32xf32>, vector<32xf32>) -> vector<32xf32>
// Intermediate buffers come from the runtime's allocation functions, which
// reuse freed buffers across calls (never malloc, which faults in fresh
// pages for every large buffer).
// CHECK-DAG: llvm.call @_mlir_memref_to_llvm_alloc(
// CHECK-DAG: llvm.call @_mlir_memref_to_llvm_free(
// CHECK-NOT: llvm.call @malloc
// CHECK-NOT: sits.matmul
// CHECK-NOT: linalg.
// CHECK-NOT: memref.

// ONE-NOT: sitsRuntimeParallelFor
// ONE-DAG: llvm.func @main_dispatch_0(
// ONE-DAG: llvm.intr.fmuladd
// ONE-DAG: llvm.func @sits_entry_main
module attributes {sits.target = #sits.target<"cpu">} {
  func.func @main(%x: tensor<8x64xf32>) -> tensor<8x64xf32> {
    %w = arith.constant dense_resource<w> : tensor<64x64xf32>
    %h = sits.matmul %x, %w : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %y = sits.activation <relu> %h : tensor<8x64xf32>
    return %y : tensor<8x64xf32>
  }
}
