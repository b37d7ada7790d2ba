//===- FuseEpilogue.cpp - Fold activations into contractions --------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSFUSEEPILOGUE
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

FailureOr<FusedEpilogueOpInterface>
mlir::sits::fuseActivationIntoProducer(RewriterBase &rewriter,
                                       ActivationOp activation) {
  if (activation.getKind() == ActivationKind::None)
    return rewriter.notifyMatchFailure(activation,
                                       "identity activation folds away");
  auto producer =
      activation.getInput().getDefiningOp<FusedEpilogueOpInterface>();
  if (!producer)
    return rewriter.notifyMatchFailure(
        activation, "input is not produced by a contraction with an epilogue");
  if (producer.getActivationKind() != ActivationKind::None)
    return rewriter.notifyMatchFailure(
        activation, "producer already applies an activation");
  if (!activation.getInput().hasOneUse())
    return rewriter.notifyMatchFailure(activation,
                                       "producer result has other users");

  rewriter.modifyOpInPlace(
      producer, [&] { producer.setActivationKind(activation.getKind()); });
  rewriter.replaceOp(activation, producer->getResults());
  return producer;
}

namespace {

struct FuseActivationPattern : OpRewritePattern<ActivationOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ActivationOp op,
                                PatternRewriter &rewriter) const override {
    return fuseActivationIntoProducer(rewriter, op);
  }
};

struct SitsFuseEpiloguePass
    : sits::impl::SitsFuseEpilogueBase<SitsFuseEpiloguePass> {
  void runOnOperation() override {
    SmallVector<ActivationOp> candidates;
    getOperation()->walk([&](ActivationOp op) { candidates.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (ActivationOp op : candidates) {
      rewriter.setInsertionPoint(op);
      if (succeeded(fuseActivationIntoProducer(rewriter, op)))
        ++numFused;
    }
  }
};

} // namespace

void mlir::sits::populateFuseEpiloguePatterns(RewritePatternSet &patterns) {
  patterns.add<FuseActivationPattern>(patterns.getContext());
}
