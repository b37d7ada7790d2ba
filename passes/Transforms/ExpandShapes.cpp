//===- ExpandShapes.cpp - Expand shapes with several dynamic extents ------===//
//
// A matmul on [B, S, K] x [K, N] runs as one [B * S, K] x [K, N] matmul, so
// that every row reads each weight panel once, and its result expands back
// into [B, S, N]. With B and S both dynamic, that expand_shape has two
// dynamic extents in one group, which upstream's expand-strided-metadata
// cannot resolve from the types alone; its output_shape operands can.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSRESOLVEEXPANDSHAPES
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;

namespace {

struct ExpandShapeAsReinterpretCast : OpRewritePattern<memref::ExpandShapeOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(memref::ExpandShapeOp op,
                                PatternRewriter &rewriter) const override {
    MemRefType resultType = op.getResultType();
    if (!op.getSrcType().isStrided())
      return failure();
    SmallVector<ReassociationIndices> groups = op.getReassociationIndices();
    if (llvm::none_of(groups, [&](const ReassociationIndices &group) {
          return llvm::count_if(group, [&](int64_t d) {
                   return resultType.isDynamicDim(d);
                 }) > 1;
        }))
      return failure();

    Location loc = op.getLoc();
    auto metadata =
        memref::ExtractStridedMetadataOp::create(rewriter, loc, op.getSrc());
    SmallVector<OpFoldResult> sizes = op.getMixedOutputShape();
    SmallVector<OpFoldResult> sourceStrides =
        metadata.getConstifiedMixedStrides();
    SmallVector<OpFoldResult> strides(resultType.getRank());
    // Within a group the innermost extent keeps the source dimension's
    // stride and each outer one steps over the extents inside it.
    AffineExpr s0, s1;
    bindSymbols(rewriter.getContext(), s0, s1);
    for (auto [sourceDim, group] : llvm::enumerate(groups)) {
      OpFoldResult stride = sourceStrides[sourceDim];
      for (int64_t d : llvm::reverse(group)) {
        strides[d] = stride;
        stride = affine::makeComposedFoldedAffineApply(rewriter, loc, s0 * s1,
                                                       {stride, sizes[d]});
      }
    }
    rewriter.replaceOpWithNewOp<memref::ReinterpretCastOp>(
        op, resultType, metadata.getBaseBuffer(),
        metadata.getConstifiedMixedOffset(), sizes, strides);
    return success();
  }
};

struct SitsResolveExpandShapesPass
    : sits::impl::SitsResolveExpandShapesBase<SitsResolveExpandShapesPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<ExpandShapeAsReinterpretCast>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
