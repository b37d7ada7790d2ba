//===- FoldEmptyTensors.cpp - Fold ops on tensors with no elements --------===//
//
// Tiling takes a tile size of 0 for "this loop is not tiled", so a loop of
// zero trips cannot be tiled; vectorization cannot make vectors of no
// lanes. Both are spared: an op with nothing to compute is replaced by what
// it computes, which for every op here needs no code at all.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSFOLDEMPTYTENSORS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;

namespace {

bool isStaticallyEmpty(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && llvm::is_contained(tensor.getShape(), 0);
}

/// A linalg op whose iteration space has an extent of 0 runs no iteration:
/// its results are its inits, unchanged.
struct FoldEmptyIterationSpace : OpInterfaceRewritePattern<linalg::LinalgOp> {
  using OpInterfaceRewritePattern::OpInterfaceRewritePattern;
  LogicalResult matchAndRewrite(linalg::LinalgOp op,
                                PatternRewriter &rewriter) const override {
    if (!op.hasPureTensorSemantics() ||
        !llvm::is_contained(op.getStaticLoopRanges(), 0))
      return rewriter.notifyMatchFailure(op, "iteration space is not empty");
    rewriter.replaceOp(op, op.getDpsInits());
    return success();
  }
};

/// An op without side effects whose results all have static shapes with an
/// extent of 0 reads nothing to produce them.
struct EmptyResultsToTensorEmpty : RewritePattern {
  explicit EmptyResultsToTensorEmpty(MLIRContext *context)
      : RewritePattern(MatchAnyOpTypeTag(), /*benefit=*/1, context) {}
  LogicalResult matchAndRewrite(Operation *op,
                                PatternRewriter &rewriter) const override {
    if (op->getNumResults() == 0 || isa<tensor::EmptyOp>(op) ||
        op->hasTrait<OpTrait::ConstantLike>() || !isMemoryEffectFree(op))
      return failure();
    SmallVector<Value> empties;
    for (Value result : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || !type.hasStaticShape() || type.getNumElements() != 0)
        return failure();
      empties.push_back(
          tensor::EmptyOp::create(rewriter, op->getLoc(), type.getShape(),
                                  type.getElementType(), type.getEncoding()));
    }
    rewriter.replaceOp(op, empties);
    return success();
  }
};

/// Inserting no element leaves the destination as it is.
struct FoldEmptyInsert : OpRewritePattern<tensor::InsertSliceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::InsertSliceOp op,
                                PatternRewriter &rewriter) const override {
    if (!llvm::is_contained(op.getStaticSizes(), 0))
      return failure();
    rewriter.replaceOp(op, op.getDest());
    return success();
  }
};

/// Empty operands add nothing to a concat.
struct DropEmptyConcatOperands : OpRewritePattern<tensor::ConcatOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(tensor::ConcatOp op,
                                PatternRewriter &rewriter) const override {
    SmallVector<Value> kept;
    for (Value input : op.getInputs())
      if (!isStaticallyEmpty(input.getType()))
        kept.push_back(input);
    if (kept.size() == op.getInputs().size() || kept.empty())
      return failure(); // all empty: the result is empty too (see above)
    if (kept.size() == 1 && kept.front().getType() == op.getType()) {
      rewriter.replaceOp(op, kept.front());
      return success();
    }
    rewriter.replaceOpWithNewOp<tensor::ConcatOp>(op, op.getType(), op.getDim(),
                                                  kept);
    return success();
  }
};

struct SitsFoldEmptyTensorsPass
    : sits::impl::SitsFoldEmptyTensorsBase<SitsFoldEmptyTensorsPass> {
  void runOnOperation() override {
    // Only worth a rewrite driver when some value has no elements.
    bool any = false;
    getOperation()->walk([&](Operation *op) {
      for (Value v : op->getResults())
        any |= isStaticallyEmpty(v.getType());
      for (Region &region : op->getRegions())
        for (Block &block : region)
          for (BlockArgument arg : block.getArguments())
            any |= isStaticallyEmpty(arg.getType());
      return any ? WalkResult::interrupt() : WalkResult::advance();
    });
    if (!any)
      return;
    RewritePatternSet patterns(&getContext());
    sits::populateFoldEmptyTensorPatterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace

void sits::populateFoldEmptyTensorPatterns(RewritePatternSet &patterns) {
  patterns.add<FoldEmptyIterationSpace, EmptyResultsToTensorEmpty,
               FoldEmptyInsert, DropEmptyConcatOperands>(patterns.getContext());
}
