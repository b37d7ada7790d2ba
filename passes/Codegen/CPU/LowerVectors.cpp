//===- LowerVectors.cpp - Vector ops to FMAs, loads and stores ------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/Transforms/Hoisting.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/Vector/Transforms/LoweringPatterns.h"
#include "mlir/Dialect/Vector/Transforms/VectorRewritePatterns.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPULOWERVECTORS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

/// A copy between strided buffers would become a call into MLIR's runner
/// library, which compiled models do not link; make it a loop nest instead.
/// Contiguous copies stay memref.copy and become memcpy.
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

/// A contraction of f16/bf16 operands into an f32 accumulator has no
/// outer-product lowering (vector.outerproduct takes one element type), so
/// the operands are extended to the accumulator's type first: the products
/// and sums are f32, as the linalg op specifies.
struct WidenMixedContraction : OpRewritePattern<vector::ContractionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::ContractionOp contract,
                                PatternRewriter &rewriter) const override {
    auto accType =
        dyn_cast<FloatType>(getElementTypeOrSelf(contract.getAccType()));
    if (!accType)
      return rewriter.notifyMatchFailure(contract, "not a float accumulator");
    auto widen = [&](Value v) -> Value {
      auto vecType = cast<VectorType>(v.getType());
      auto elem = dyn_cast<FloatType>(vecType.getElementType());
      if (!elem || elem.getWidth() >= accType.getWidth())
        return v;
      return arith::ExtFOp::create(rewriter, contract.getLoc(),
                                   vecType.clone(accType), v);
    };
    Value lhs = widen(contract.getLhs()), rhs = widen(contract.getRhs());
    if (lhs == contract.getLhs() && rhs == contract.getRhs())
      return rewriter.notifyMatchFailure(contract, "operand types match");
    rewriter.modifyOpInPlace(contract, [&] {
      contract.getLhsMutable().assign(lhs);
      contract.getRhsMutable().assign(rhs);
    });
    return success();
  }
};

struct SitsCpuLowerVectorsPass
    : cpu::impl::SitsCpuLowerVectorsBase<SitsCpuLowerVectorsPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();

    // Accumulators that bufferization left as memory round trips.
    linalg::hoistRedundantVectorTransfers(func);

    // Contractions -> outer products -> FMAs; reductions, transposes,
    // broadcasts and shape casts -> flat 1-D vector ops.
    {
      RewritePatternSet patterns(ctx);
      patterns.add<WidenMixedContraction>(ctx, /*benefit=*/2);
      vector::populateVectorContractLoweringPatterns(
          patterns, vector::VectorContractLowering::OuterProduct);
      vector::populateVectorOuterProductLoweringPatterns(patterns);
      vector::populateVectorMultiReductionLoweringPatterns(
          patterns, vector::VectorMultiReductionLowering::InnerParallel);
      vector::populateVectorTransposeLoweringPatterns(
          patterns, vector::VectorTransposeLowering::EltWise);
      vector::populateVectorBroadcastLoweringPatterns(patterns);
      vector::populateVectorShapeCastLoweringPatterns(patterns);
      vector::populateVectorMaskOpLoweringPatterns(patterns);
      vector::populateVectorTransferPermutationMapLoweringPatterns(patterns);
      if (failed(applyPatternsGreedily(func, std::move(patterns))))
        return signalPassFailure();
    }
    // Transfers of rank <= 1 become plain loads and stores; higher ranks are
    // unrolled by convert-vector-to-scf{full-unroll} afterwards.
    {
      RewritePatternSet patterns(ctx);
      patterns.add<StridedCopyToLoops>(ctx);
      vector::populateVectorTransferLoweringPatterns(patterns,
                                                     /*maxTransferRank=*/1);
      if (failed(applyPatternsGreedily(func, std::move(patterns))))
        return signalPassFailure();
    }
  }
};

} // namespace
