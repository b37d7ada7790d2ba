//===- LowerVectors.cpp - Vector ops to 1-D forms for NVVM ----------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Hoisting.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPULOWERVECTORS
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// Vector patterns that undo each other would rewrite forever (growing the
/// IR); a bound turns that into a failed pass instead of a hung compiler.
GreedyRewriteConfig boundedRewrites() {
  GreedyRewriteConfig config;
  config.setMaxNumRewrites(1 << 20);
  return config;
}

/// A copy between strided buffers would become a call into MLIR's runner
/// library; a loop nest instead. Contiguous copies stay memref.copy.
struct StridedCopyToLoops : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp copy,
                                PatternRewriter &rewriter) const override {
    auto source = cast<MemRefType>(copy.getSource().getType());
    auto target = cast<MemRefType>(copy.getTarget().getType());
    if (memref::isStaticShapeAndContiguousRowMajor(source) &&
        memref::isStaticShapeAndContiguousRowMajor(target))
      return rewriter.notifyMatchFailure(copy, "contiguous copy");
    rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                copy.getTarget());
    return success();
  }
};

struct SitsGpuLowerVectorsPass
    : sits::gpu::impl::SitsGpuLowerVectorsBase<SitsGpuLowerVectorsPass> {
  void runOnOperation() override {
    Operation *root = getOperation();
    MLIRContext *ctx = &getContext();

    // Accumulators that bufferization left as memory round trips.
    root->walk(
        [](func::FuncOp func) { linalg::hoistRedundantVectorTransfers(func); });

    {
      RewritePatternSet patterns(ctx);
      vector::populateVectorContractLoweringPatterns(
          patterns, vector::VectorContractLowering::OuterProduct);
      vector::populateVectorOuterProductLoweringPatterns(patterns);
      vector::populateVectorMultiReductionLoweringPatterns(
          patterns, vector::VectorMultiReductionLowering::InnerReduction);
      vector::populateVectorTransposeLoweringPatterns(
          patterns, vector::VectorTransposeLowering::EltWise);
      vector::populateVectorBroadcastLoweringPatterns(patterns);
      vector::populateVectorShapeCastLoweringPatterns(patterns);
      vector::populateVectorMaskOpLoweringPatterns(patterns);
      vector::populateVectorInsertExtractStridedSliceTransforms(patterns);
      vector::populateVectorTransferPermutationMapLoweringPatterns(patterns);
      vector::populateVectorGatherLoweringPatterns(patterns);
      vector::populateVectorStepLoweringPatterns(patterns);
      if (failed(applyPatternsGreedily(root, std::move(patterns),
                                       boundedRewrites())))
        return signalPassFailure();
    }
    {
      RewritePatternSet patterns(ctx);
      patterns.add<StridedCopyToLoops>(ctx);
      vector::populateVectorTransferLoweringPatterns(patterns,
                                                     /*maxTransferRank=*/1);
      if (failed(applyPatternsGreedily(root, std::move(patterns),
                                       boundedRewrites())))
        return signalPassFailure();
    }
  }
};

} // namespace
