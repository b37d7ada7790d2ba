//===- FuseElementwise.cpp - Elementwise fusion without recomputation -----===//

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/Common/Ukernels.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUFUSEELEMENTWISE
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

/// The most operations a fused body may hold. Each fusion clones the
/// consumer's body, and LLVM's time on one loop body grows faster than its
/// size: a chain of thousands of elementwise ops fused into one loop
/// compiled in O(n^1.7). Loops of this many ops already amortize the
/// memory traffic between them.
constexpr size_t kMaxFusedBodyOps = 256;

size_t bodyOps(Operation *op) {
  size_t n = 0;
  for (Region &region : op->getRegions())
    for (Block &block : region)
      n += block.getOperations().size();
  return n;
}

/// Fuse only single-use producers whose every element the consumer reads
/// once (the consumer's map for the operand is a permutation of all its
/// loops), while the fused body stays within kMaxFusedBodyOps.
bool readsEachElementOnce(OpOperand *fused) {
  Operation *producer = fused->get().getDefiningOp();
  if (!producer || !producer->hasOneUse())
    return false;
  auto consumer = dyn_cast<linalg::LinalgOp>(fused->getOwner());
  // A runtime kernel's op keeps the operands its call passes (a splat
  // scale folded into its body would leave the kernel without it).
  if (!consumer || consumer->hasAttr(kUkernelAttr))
    return false;
  AffineMap map = consumer.getMatchingIndexingMap(fused);
  return map.getNumResults() == consumer.getNumLoops() && map.isPermutation() &&
         bodyOps(producer) + bodyOps(consumer) <= kMaxFusedBodyOps;
}

struct SitsCpuFuseElementwisePass
    : cpu::impl::SitsCpuFuseElementwiseBase<SitsCpuFuseElementwisePass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    RewritePatternSet patterns(ctx);
    linalg::populateElementwiseOpsFusionPatterns(patterns,
                                                 readsEachElementOnce);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns,
                                                      readsEachElementOnce);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, ctx);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, ctx);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, ctx);
    ctx->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(
        patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
