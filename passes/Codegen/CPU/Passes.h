//===- Passes.h - SITS CPU code generation passes ---------------*- C++ -*-===//

#ifndef SITS_PASSES_CODEGEN_CPU_PASSES_H
#define SITS_PASSES_CODEGEN_CPU_PASSES_H

#include "dialects/Target/KnownTargets.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"

namespace mlir::sits::cpu {

#define GEN_PASS_DECL
#include "passes/Codegen/CPU/Passes.h.inc"

/// Tile sizes for one fusion group, derived from the target's facts.
struct CpuTilingConfig {
  int64_t threads = 1;
  /// f32 lanes of one vector register.
  int64_t lanes = 8;
  /// Register block of a contraction's output (mr x nr) and the reduction
  /// step held in registers.
  int64_t mr = 8, nr = 16, kr = 8;
  /// Reduction-dimension block that keeps a panel of the rhs in cache.
  int64_t kc = 256;
  /// Output tile of a contraction one task computes.
  int64_t mc = 64, nc = 128;
  /// How far ahead of its use a streamed weight row is requested.
  int64_t prefetchBytes = 1024;
  /// The cache level it is requested into: 1 (L1, `prefetcht0`) or 2 (L2,
  /// `prefetcht1`).
  int64_t prefetchCacheLevel = 1;
};

/// Marks the K loop of a register tile whose right-hand side is read from
/// memory once (a tile of at most one register block of rows: a decode
/// step), which sits-cpu-lower-vectors then prefetches ahead.
inline constexpr llvm::StringLiteral kStreamedAttr = "sits.streamed";
/// Marks a loop over blocks of rows of a contraction with a run-time row
/// count: its first iteration streams the weights, the others find them in
/// cache, so only the first prefetches.
inline constexpr llvm::StringLiteral kFirstStreamsAttr = "sits.first_streams";

/// The tiling configuration for code nested in `op`, from the module's
/// `sits.target` (the host when there is none).
CpuTilingConfig getCpuTilingConfig(Operation *op, int64_t threadsOverride = 0);

/// arith.extf / arith.truncf to or from 8- and 4-bit floats as integer
/// arithmetic (sits-cpu-expand-small-floats).
void populateExpandSmallFloatPatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "passes/Codegen/CPU/Passes.h.inc"

} // namespace mlir::sits::cpu

#endif // SITS_PASSES_CODEGEN_CPU_PASSES_H
