//===- Passes.h - SITS GPU code generation passes ---------------*- C++ -*-===//

#ifndef SITS_PASSES_CODEGEN_GPU_PASSES_H
#define SITS_PASSES_CODEGEN_GPU_PASSES_H

#include "dialects/Target/KnownTargets.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::sits::gpu {

#define GEN_PASS_DECL
#include "passes/Codegen/GPU/Passes.h.inc"

/// Tile sizes for GPU kernels, derived from the target's facts.
struct GpuTilingConfig {
  /// Threads of a warp.
  int64_t warpSize = 32;
  /// Most threads in a block.
  int64_t maxThreads = 256;
  /// Blocks that keep every SM busy (a couple per SM).
  int64_t wantedBlocks = 264;
  /// A contraction's block tile (BM x BN outputs), each thread's register
  /// tile (TM x TN) and the reduction step staged in shared memory (BK).
  int64_t bm = 64, bn = 64, tm = 4, tn = 4, bk = 16;
  /// Elements a thread reads or writes as one vector.
  int64_t vector = 4;
  /// Shared memory a block may use, in bytes (the static limit, 48 KiB).
  int64_t sharedMemoryBytes = 48 * 1024;
  /// Whether f16 contractions accumulating in f32 run on tensor cores with
  /// warp-level mma.sync (NVIDIA sm_80 and newer), and f32 ones too, in TF32
  /// (an opt-in: it changes results).
  bool mmaSync = false, tf32 = false;
};

/// The warp-level tensor core operations accumulating in f32: m16n8k16 for
/// f16 operands, m16n8k8 for TF32.
constexpr int64_t kMmaM = 16, kMmaN = 8, kMmaK = 16, kMmaKTf32 = 8;

/// The GPU target for code nested in `op` (the module's `sits.target`), or
/// null when the module names none or names a CPU.
const target::TargetInfo *getGpuTarget(Operation *op);

/// Whether `info` has warp-level tensor core operations (mma.sync) for f16
/// and bf16: NVIDIA sm_80 and newer.
bool hasMmaSync(const target::TargetInfo &info);

/// The tiling configuration for code nested in `op`.
GpuTilingConfig getGpuTilingConfig(Operation *op, int64_t maxThreads = 0);

/// The attribute marking a linalg.copy that the threads of a block perform
/// together (see sits-gpu-promote-operands).
constexpr llvm::StringLiteral kCooperativeAttrName = "sits_cooperative";

/// The largest divisor of `n` that is at most `bound` (1 when n <= 0).
int64_t largestDivisorAtMost(int64_t n, int64_t bound);

#define GEN_PASS_REGISTRATION
#include "passes/Codegen/GPU/Passes.h.inc"

} // namespace mlir::sits::gpu

#endif // SITS_PASSES_CODEGEN_GPU_PASSES_H
