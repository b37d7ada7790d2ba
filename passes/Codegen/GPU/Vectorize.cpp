//===- Vectorize.cpp - Vectorize per-thread tiles -------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Hoisting.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/LoopInvariantCodeMotionUtils.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUVECTORIZE
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

bool isBool(Type type) { return getElementTypeOrSelf(type).isInteger(1); }

bool isCooperative(Operation *op) {
  return op->hasAttr(sits::gpu::kCooperativeAttrName);
}

bool shouldVectorize(linalg::LinalgOp op, int64_t maxElements) {
  if (isCooperative(op) || !op.hasPureTensorSemantics() ||
      !linalg::hasVectorizationImpl(op))
    return false;
  // A vector of i1 is packed into bits in memory while a memref of i1 holds
  // a byte per element: bool tensors stay scalar.
  if (llvm::any_of(op->getOperandTypes(), isBool))
    return false;
  bool gathersBools = false;
  op->walk([&](tensor::ExtractOp extract) {
    gathersBools |= isBool(extract.getType());
  });
  if (gathersBools)
    return false;
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  if (llvm::any_of(ranges, ShapedType::isDynamic))
    return false;
  // A single element per thread is scalar code already.
  if (llvm::all_of(ranges, [](int64_t r) { return r == 1; }))
    return false;
  // Each operand becomes one vector of its (static) shape; per thread these
  // are a few registers.
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<ShapedType>(operand.get().getType());
    if (type && type.getNumElements() > maxElements)
      return false;
  }
  return succeeded(linalg::vectorizeOpPrecondition(
      op, /*inputVectorSizes=*/{}, /*inputScalableVecDims=*/{},
      /*vectorizeNDExtract=*/true));
}

struct SitsGpuVectorizePass
    : sits::gpu::impl::SitsGpuVectorizeBase<SitsGpuVectorizePass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rewriter(&getContext());

    // Unit dimensions (a thread's single row, a batch of one) are dropped
    // first, leaving plain matmul and elementwise shapes. Cooperative copies
    // keep their form for sits-gpu-distribute-copies.
    {
      RewritePatternSet patterns(&getContext());
      linalg::ControlDropUnitDims options;
      options.rankReductionStrategy = linalg::ControlDropUnitDims::
          RankReductionStrategy::ExtractInsertSlice;
      auto defaultControl = options.controlFn;
      options.controlFn = [=](Operation *op) -> SmallVector<unsigned> {
        if (isCooperative(op))
          return {};
        return defaultControl(op);
      };
      linalg::populateFoldUnitExtentDimsPatterns(patterns, options);
      if (failed(applyPatternsGreedily(func, std::move(patterns),
                                       boundedRewrites())))
        return signalPassFailure();
    }

    SmallVector<linalg::LinalgOp> candidates;
    func.walk([&](linalg::LinalgOp op) {
      if (shouldVectorize(op, maxElements))
        candidates.push_back(op);
    });
    for (linalg::LinalgOp op : candidates) {
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::VectorizationResult> result = linalg::vectorize(
          rewriter, op, /*inputVectorSizes=*/{}, /*inputScalableVecDims=*/{},
          /*vectorizeNDExtract=*/true, /*flatten1DDepthwiseConv=*/false,
          /*assumeDynamicDimsMatchVecSizes=*/false,
          /*createNamedContraction=*/true);
      if (failed(result))
        continue;
      rewriter.replaceOp(op, result->replacements);
      ++numVectorized;
    }

    RewritePatternSet patterns(&getContext());
    vector::populateVectorTransferPermutationMapLoweringPatterns(patterns);
    vector::populateVectorReductionToContractPatterns(patterns);
    vector::populateSinkVectorOpsPatterns(patterns);
    // Reads through slices read the sliced tensor, so that a value written
    // as a vector and read back (a contraction's accumulator handed to its
    // epilogue) is forwarded instead of going through private memory.
    tensor::populateFoldTensorSubsetOpPatterns(patterns);
    vector::TransferReadOp::getCanonicalizationPatterns(patterns,
                                                        &getContext());
    vector::TransferWriteOp::getCanonicalizationPatterns(patterns,
                                                         &getContext());
    if (failed(applyPatternsGreedily(func, std::move(patterns),
                                     boundedRewrites())))
      return signalPassFailure();

    // Vectors of a thread are 1-D where possible (a row of a register
    // tile): leading unit dimensions go, so that few n-D vectors reach the
    // NVVM lowering. (Not together with the permutation lowering above:
    // the two undo each other on writes with unit dimensions.)
    {
      RewritePatternSet castAway(&getContext());
      vector::populateCastAwayVectorLeadingOneDimPatterns(castAway);
      if (failed(applyPatternsGreedily(func, std::move(castAway),
                                       boundedRewrites())))
        return signalPassFailure();
    }

    // Accumulators stay in registers across reduction loops: matching
    // transfer read/write pairs are hoisted out, innermost loops first.
    SmallVector<LoopLikeOpInterface> loops;
    func.walk([&](LoopLikeOpInterface loop) { loops.push_back(loop); });
    for (LoopLikeOpInterface loop : loops)
      hoistLoopInvariantSubsets(rewriter, loop);
  }
};

} // namespace
