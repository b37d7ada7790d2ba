//===- Vectorize.cpp - Vectorize tiled linalg ops -------------------------===//

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/Common/Ukernels.h"

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

/// Ops whose operands would become vectors of more than this many elements
/// stay scalar loops: vectors that large spill and blow up compile time.
constexpr int64_t kMaxVectorElements = 1024;

/// i1, i4, f4E2M1FN, ...: one element per byte in memory, bits in a vector.
bool isSubByte(Type type) {
  Type element = getElementTypeOrSelf(type);
  return element.isIntOrFloat() && element.getIntOrFloatBitWidth() < 8;
}

bool shouldVectorize(linalg::LinalgOp op) {
  if (!op.hasPureTensorSemantics() || !linalg::hasVectorizationImpl(op) ||
      op->hasAttr(kUkernelAttr))
    return false;
  // LLVM packs a vector of i1 (or i4) into bits in memory while a memref
  // of them holds a byte per element, so bool and other sub-byte tensors
  // are read and written by scalar code (results computed from other types
  // included).
  if (llvm::any_of(op->getOperandTypes(), isSubByte))
    return false;
  bool gathersSubBytes = false;
  op->walk([&](tensor::ExtractOp extract) {
    gathersSubBytes |= isSubByte(extract.getType());
  });
  if (gathersSubBytes)
    return false;
  if (llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return false;
  // A tile left with unit loops only has nothing to vectorize (and a
  // gather there would become an invalid 0-d vector.gather).
  if (llvm::all_of(op.getStaticLoopRanges(), [](int64_t r) { return r == 1; }))
    return false;
  // Each operand becomes one vector of its (static) shape; a contraction's
  // iteration space (m x n x k) is never materialized as a vector.
  for (OpOperand &operand : op->getOpOperands()) {
    auto type = dyn_cast<ShapedType>(operand.get().getType());
    if (type && type.getNumElements() > kMaxVectorElements)
      return false;
  }
  return succeeded(linalg::vectorizeOpPrecondition(
      op, /*inputVectorSizes=*/{}, /*inputScalableVecDims=*/{},
      /*vectorizeNDExtract=*/true));
}

struct SitsCpuVectorizePass
    : cpu::impl::SitsCpuVectorizeBase<SitsCpuVectorizePass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    IRRewriter rewriter(&getContext());

    // Tiles have unit dimensions where a loop was stepped by one (a panel
    // of packed weights, a row of a batch); dropping them leaves the plain
    // matmul/elementwise shapes the vectorizer and the contraction lowering
    // handle best.
    {
      RewritePatternSet patterns(&getContext());
      linalg::ControlDropUnitDims options;
      options.rankReductionStrategy = linalg::ControlDropUnitDims::
          RankReductionStrategy::ExtractInsertSlice;
      // A runtime kernel's op keeps the form its call is built from.
      auto allDims = options.controlFn;
      options.controlFn = [allDims](Operation *op) -> SmallVector<unsigned> {
        if (op->hasAttr(kUkernelAttr))
          return {};
        return allDims(op);
      };
      linalg::populateFoldUnitExtentDimsPatterns(patterns, options);
      if (failed(applyPatternsGreedily(func, std::move(patterns))))
        return signalPassFailure();
    }

    SmallVector<linalg::LinalgOp> candidates;
    func.walk([&](linalg::LinalgOp op) {
      if (shouldVectorize(op))
        candidates.push_back(op);
    });
    for (linalg::LinalgOp op : candidates) {
      rewriter.setInsertionPoint(op);
      // Contractions go straight to vector.contract with their own maps;
      // the default multi_reduction form hides the matmul structure from
      // the outer-product lowering. Gathers (tensor.extract at computed
      // indices, e.g. convolution patches) become one contiguous read when
      // the innermost index steps by one, else a vector gather.
      // Operands of different element types (f32 activations times 8-bit
      // weight codes) keep the generic form: vector.contract takes one
      // element type, and the body's casts widen the codes in registers
      // before the multiply-reduction folds into a contraction below.
      bool mixedInputs = llvm::any_of(op.getDpsInputs(), [&](Value v) {
        return getElementTypeOrSelf(v.getType()) !=
               getElementTypeOrSelf(op.getDpsInits()[0].getType());
      });
      FailureOr<linalg::VectorizationResult> result = linalg::vectorize(
          rewriter, op, /*inputVectorSizes=*/{}, /*inputScalableVecDims=*/{},
          /*vectorizeNDExtract=*/true, /*flatten1DDepthwiseConv=*/false,
          /*assumeDynamicDimsMatchVecSizes=*/false,
          /*createNamedContraction=*/
          !(mixedInputs && linalg::isaContractionOpInterface(op)));
      if (failed(result))
        continue;
      rewriter.replaceOp(op, result->replacements);
      ++numVectorized;
    }

    // Broadcasting reads become a read and a broadcast, which then fold
    // with the multiply-add into vector.contract. Slices stay slices: an
    // accumulator slice read and written once per reduction step is a
    // matching extract/insert pair that hoisting below lifts out of the
    // reduction loop, leaving the accumulator in registers.
    RewritePatternSet patterns(&getContext());
    vector::populateVectorTransferPermutationMapLoweringPatterns(patterns);
    vector::populateVectorReductionToContractPatterns(patterns);
    vector::populateSinkVectorOpsPatterns(patterns);
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
