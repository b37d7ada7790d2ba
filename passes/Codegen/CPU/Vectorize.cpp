//===- Vectorize.cpp - Vectorize tiled linalg ops -------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUVECTORIZE
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

/// Iteration spaces above this many elements stay scalar loops: vectors that
/// large spill and blow up compile time.
constexpr int64_t kMaxVectorElements = 1024;

bool shouldVectorize(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || !linalg::hasVectorizationImpl(op))
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  int64_t elements = 1;
  for (int64_t range : ranges) {
    if (ShapedType::isDynamic(range))
      return false;
    elements *= range;
  }
  return elements <= kMaxVectorElements &&
         succeeded(linalg::vectorizeOpPrecondition(op));
}

struct SitsCpuVectorizePass
    : cpu::impl::SitsCpuVectorizeBase<SitsCpuVectorizePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rewriter(&getContext());

    SmallVector<linalg::LinalgOp> candidates;
    func.walk([&](linalg::LinalgOp op) {
      if (shouldVectorize(op))
        candidates.push_back(op);
    });
    for (linalg::LinalgOp op : candidates) {
      rewriter.setInsertionPoint(op);
      // Contractions go straight to vector.contract with their own maps;
      // the default multi_reduction form hides the matmul structure from
      // the outer-product lowering.
      FailureOr<linalg::VectorizationResult> result = linalg::vectorize(
          rewriter, op, /*inputVectorSizes=*/{}, /*inputScalableVecDims=*/{},
          /*vectorizeNDExtract=*/false, /*flatten1DDepthwiseConv=*/false,
          /*assumeDynamicDimsMatchVecSizes=*/false,
          /*createNamedContraction=*/true);
      if (failed(result))
        continue;
      rewriter.replaceOp(op, result->replacements);
      ++numVectorized;
    }

    // Reductions become vector.contract; slices of tensors fold into the
    // transfers that read and write them, so that the accumulator pattern
    // (read before the reduction loop, write after) is visible to hoisting.
    RewritePatternSet patterns(&getContext());
    vector::populateVectorReductionToContractPatterns(patterns);
    vector::populateSinkVectorOpsPatterns(patterns);
    tensor::populateFoldTensorSubsetIntoVectorTransferPatterns(patterns);
    vector::TransferReadOp::getCanonicalizationPatterns(patterns,
                                                        &getContext());
    vector::TransferWriteOp::getCanonicalizationPatterns(patterns,
                                                         &getContext());
    if (failed(applyPatternsGreedily(func, std::move(patterns))))
      return signalPassFailure();

    // Keep reduction accumulators in registers: hoist matching transfer
    // read/write pairs out of the loops, innermost loops first.
    SmallVector<LoopLikeOpInterface> loops;
    func.walk([&](LoopLikeOpInterface loop) { loops.push_back(loop); });
    for (LoopLikeOpInterface loop : loops)
      hoistLoopInvariantSubsets(rewriter, loop);
  }
};

} // namespace
