//===- LowerVectors.cpp - Vector ops to FMAs, loads and stores ------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Hoisting.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
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

/// The number of trailing dimensions over which both `a` and `b` (of the
/// same shape) are one contiguous run, with static extents: 0 when their
/// innermost elements are not adjacent.
int64_t contiguousTrailingDims(MemRefType a, MemRefType b) {
  SmallVector<int64_t> aStrides, bStrides;
  int64_t aOffset, bOffset;
  if (failed(a.getStridesAndOffset(aStrides, aOffset)) ||
      failed(b.getStridesAndOffset(bStrides, bOffset)))
    return 0;
  int64_t run = 1, dims = 0;
  for (int64_t i = a.getRank(); i-- > 0; ++dims) {
    int64_t size = a.getDimSize(i);
    if (ShapedType::isDynamic(size) ||
        (size != 1 && (aStrides[i] != run || bStrides[i] != run)))
      break;
    run *= size;
  }
  return dims;
}

/// A copy between strided buffers would become a call into MLIR's runner
/// library, which compiled models do not link. When the innermost
/// dimensions are contiguous in both buffers (a KV cache joined to its past,
/// a block of the paged pool), it becomes a loop over the outer ones with
/// a memcpy of each run; large ones (1 MiB and more, outside any parallel
/// loop) become a parallel loop the thread pool splits. Any other strided
/// copy becomes a loop nest of elements. Contiguous copies stay memref.copy
/// and become one memcpy.
struct StridedCopyToLoops : OpRewritePattern<memref::CopyOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(memref::CopyOp copy,
                                PatternRewriter &rewriter) const override {
    auto source = cast<MemRefType>(copy.getSource().getType());
    auto target = cast<MemRefType>(copy.getTarget().getType());
    if (memref::isStaticShapeAndContiguousRowMajor(source) &&
        memref::isStaticShapeAndContiguousRowMajor(target))
      return rewriter.notifyMatchFailure(copy, "contiguous copy");
    int64_t rank = source.getRank();
    int64_t inner = contiguousTrailingDims(source, target);
    int64_t runElements = 1;
    for (int64_t i = rank - inner; i < rank; ++i)
      runElements *= source.getDimSize(i);
    if (inner == 0 || inner == rank || runElements < 16) {
      rewriter.replaceOpWithNewOp<linalg::CopyOp>(copy, copy.getSource(),
                                                  copy.getTarget());
      return success();
    }

    Location loc = copy.getLoc();
    int64_t outer = rank - inner;
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
    SmallVector<Value> lbs(outer, zero), steps(outer, one), ubs;
    std::optional<int64_t> outerCount = 1;
    for (int64_t i = 0; i < outer; ++i) {
      ubs.push_back(memref::DimOp::create(rewriter, loc, copy.getSource(), i));
      if (source.isDynamicDim(i))
        outerCount.reset();
      else if (outerCount)
        *outerCount *= source.getDimSize(i);
    }
    int64_t runBytes = runElements * (source.getElementTypeBitWidth() + 7) / 8;
    bool large = !outerCount || *outerCount * runBytes >= (int64_t(1) << 20);
    bool nested = copy->getParentOfType<scf::ParallelOp>() ||
                  copy->getParentOfType<scf::ForallOp>();
    auto body = [&](OpBuilder &b, Location l, ValueRange ivs) {
      SmallVector<OpFoldResult> offsets(ivs.begin(), ivs.end());
      offsets.append(inner, b.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes(outer, b.getIndexAttr(1));
      for (int64_t i = outer; i < rank; ++i)
        sizes.push_back(b.getIndexAttr(source.getDimSize(i)));
      SmallVector<OpFoldResult> strides(rank, b.getIndexAttr(1));
      ArrayRef<int64_t> runShape = source.getShape().take_back(inner);
      auto view = [&](Value buffer) -> Value {
        auto type = memref::SubViewOp::inferRankReducedResultType(
            runShape, cast<MemRefType>(buffer.getType()), offsets, sizes,
            strides);
        return memref::SubViewOp::create(b, l, cast<MemRefType>(type), buffer,
                                         offsets, sizes, strides);
      };
      memref::CopyOp::create(b, l, view(copy.getSource()),
                             view(copy.getTarget()));
    };
    if (large && !nested) {
      scf::ParallelOp::create(
          rewriter, loc, lbs, ubs, steps,
          [&](OpBuilder &b, Location l, ValueRange ivs) { body(b, l, ivs); });
    } else {
      scf::buildLoopNest(rewriter, loc, lbs, ubs, steps, body);
    }
    rewriter.eraseOp(copy);
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
