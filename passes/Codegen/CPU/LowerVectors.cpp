//===- LowerVectors.cpp - Vector ops to FMAs, loads and stores ------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
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

/// A 1-D `vector.gather` from a buffer whose innermost stride is not 1 (a
/// strided slice read at run-time indices). The vectorizer's offsets are
/// row-major positions in the buffer's logical shape, which LLVM's masked
/// gather (addresses from a unit stride) cannot express; each lane becomes
/// a load at its delinearized position, under its mask bit.
struct StridedGatherToLoads : OpRewritePattern<vector::GatherOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::GatherOp gather,
                                PatternRewriter &rewriter) const override {
    auto base = dyn_cast<MemRefType>(gather.getBase().getType());
    VectorType type = gather.getVectorType();
    if (!base || base.isLastDimUnitStride() || type.getRank() != 1 ||
        type.isScalable())
      return rewriter.notifyMatchFailure(gather, "not a 1-D strided gather");
    Location loc = gather.getLoc();
    Value buffer = gather.getBase();
    int64_t rank = base.getRank();
    SmallVector<OpFoldResult> basis;
    for (int64_t d = 0; d < rank; ++d)
      basis.push_back(memref::getMixedSize(rewriter, loc, buffer, d));
    // The gather's base indices, as one row-major position.
    SmallVector<Value> start(gather.getOffsets());
    Value origin = rank == 0
                       ? Value(arith::ConstantIndexOp::create(rewriter, loc, 0))
                       : affine::AffineLinearizeIndexOp::create(
                             rewriter, loc, start, basis, /*disjoint=*/false)
                             .getResult();
    Value result = gather.getPassThru();
    for (int64_t lane = 0; lane < type.getNumElements(); ++lane) {
      Value bit =
          vector::ExtractOp::create(rewriter, loc, gather.getMask(), lane);
      Value offset =
          vector::ExtractOp::create(rewriter, loc, gather.getIndices(), lane);
      offset = arith::IndexCastOp::create(rewriter, loc,
                                          rewriter.getIndexType(), offset);
      Value position = arith::AddIOp::create(rewriter, loc, origin, offset);
      auto branch = scf::IfOp::create(
          rewriter, loc, bit,
          [&](OpBuilder &b, Location l) {
            SmallVector<Value> at;
            if (rank > 0)
              at = affine::AffineDelinearizeIndexOp::create(
                       b, l, position, basis, /*hasOuterBound=*/true)
                       .getResults();
            Value element = memref::LoadOp::create(b, l, buffer, at);
            scf::YieldOp::create(
                b, l,
                ValueRange{vector::InsertOp::create(b, l, element, result, lane)
                               .getResult()});
          },
          [&](OpBuilder &b, Location l) {
            scf::YieldOp::create(b, l, result);
          });
      result = branch.getResult(0);
    }
    rewriter.replaceOp(gather, result);
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

/// C[m, n] += sum_k A[m, k] * B[n, k] with K innermost in both operands
/// (attention's scores: a query row against key rows). The outer-product
/// lowering would transpose B element by element; here each output is one
/// product of two K-long rows summed by a tree reduction. The tiling gives
/// such contractions K steps of whole vectors (see TileAndFuse), so each
/// reduction sums several vectors' worth of products. Also the forms
/// without an M dimension (A[k], C[n]).
struct ContractAlongContiguousK : OpRewritePattern<vector::ContractionOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(vector::ContractionOp contract,
                                PatternRewriter &rewriter) const override {
    MLIRContext *ctx = contract.getContext();
    auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
    auto accType = dyn_cast<VectorType>(contract.getAccType());
    auto lhsType = contract.getLhsType(), rhsType = contract.getRhsType();
    if (contract.getKind() != vector::CombiningKind::ADD || !accType ||
        !isa<FloatType>(accType.getElementType()) ||
        lhsType.getElementType() != accType.getElementType() ||
        rhsType.getElementType() != accType.getElementType() ||
        cast<vector::MaskableOpInterface>(contract.getOperation()).isMasked())
      return rewriter.notifyMatchFailure(contract, "not a float contraction");
    SmallVector<AffineMap> maps = contract.getIndexingMapsArray();
    bool withRows;
    if (maps == SmallVector<AffineMap>{AffineMap::get(2, 0, {d(1)}, ctx),
                                       AffineMap::get(2, 0, {d(0), d(1)}, ctx),
                                       AffineMap::get(2, 0, {d(0)}, ctx)})
      withRows = false;
    else if (maps ==
             SmallVector<AffineMap>{AffineMap::get(3, 0, {d(0), d(2)}, ctx),
                                    AffineMap::get(3, 0, {d(1), d(2)}, ctx),
                                    AffineMap::get(3, 0, {d(0), d(1)}, ctx)})
      withRows = true;
    else
      return rewriter.notifyMatchFailure(contract, "K is not innermost");
    Location loc = contract.getLoc();
    int64_t rows = withRows ? lhsType.getDimSize(0) : 1;
    int64_t columns = rhsType.getDimSize(0);
    // Reassociation lets LLVM sum the products as a tree of vector adds.
    auto reassoc = arith::FastMathFlagsAttr::get(
        ctx, arith::FastMathFlags::reassoc | arith::FastMathFlags::contract);
    Value result = contract.getAcc();
    for (int64_t i = 0; i < rows; ++i) {
      Value a = withRows ? vector::ExtractOp::create(rewriter, loc,
                                                     contract.getLhs(), i)
                               .getResult()
                         : contract.getLhs();
      for (int64_t j = 0; j < columns; ++j) {
        Value b =
            vector::ExtractOp::create(rewriter, loc, contract.getRhs(), j);
        Value product = arith::MulFOp::create(rewriter, loc, a, b, reassoc);
        SmallVector<int64_t> at =
            withRows ? SmallVector<int64_t>{i, j} : SmallVector<int64_t>{j};
        Value acc = vector::ExtractOp::create(rewriter, loc, result, at);
        Value sum = vector::ReductionOp::create(
            rewriter, loc, vector::CombiningKind::ADD, product, acc,
            reassoc.getValue());
        result = vector::InsertOp::create(rewriter, loc, sum, result, at);
      }
    }
    rewriter.replaceOp(contract, result);
    return success();
  }
};

/// A contraction in a loop over K reads its right-hand side (a panel of
/// packed weights) one step of rows per iteration. Streamed from memory,
/// such reads wait on the memory's latency at every page, where the
/// hardware prefetcher stops; requesting the rows `distanceBytes` ahead
/// keeps enough reads in flight for the memory's bandwidth. The prefetch
/// index is clamped to the last row, so no address leaves the buffer.
/// `cacheLevel` is the level the rows are requested into (1 or 2).
void prefetchStreamedOperands(func::FuncOp func, int64_t distanceBytes,
                              int64_t cacheLevel) {
  // In a loop over row blocks, only the first block reads the weights from
  // memory: its K loops get a copy that prefetches, taken on the first
  // block only (a branch around the loop, not in it).
  SmallVector<std::pair<scf::ForOp, scf::ForOp>> versioned; // (K, rows)
  func.walk([&](scf::ForOp loop) {
    if (!loop->hasAttr(cpu::kStreamedAttr))
      return;
    for (auto rows = loop->getParentOfType<scf::ForOp>(); rows;
         rows = rows->getParentOfType<scf::ForOp>())
      if (rows->hasAttr(cpu::kFirstStreamsAttr)) {
        versioned.emplace_back(loop, rows);
        break;
      }
  });
  for (auto [loop, rows] : versioned) {
    OpBuilder b(loop);
    Location loc = loop.getLoc();
    Value first =
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                              rows.getInductionVar(), rows.getLowerBound());
    auto branch = scf::IfOp::create(
        b, loc, first,
        [&](OpBuilder &then, Location l) {
          scf::YieldOp::create(then, l, then.clone(*loop)->getResults());
        },
        [&](OpBuilder &otherwise, Location l) {
          Operation *plain = otherwise.clone(*loop);
          plain->removeAttr(cpu::kStreamedAttr);
          scf::YieldOp::create(otherwise, l, plain->getResults());
        });
    loop->replaceAllUsesWith(branch.getResults());
    loop.erase();
  }

  func.walk([&](vector::ContractionOp contract) {
    auto loop = contract->getParentOfType<scf::ForOp>();
    // INT8 weights reach the contraction widened: the stream is the codes.
    Value rhs = contract.getRhs();
    while (Operation *cast = rhs.getDefiningOp()) {
      if (!isa<arith::SIToFPOp, arith::UIToFPOp, arith::ExtFOp, arith::ExtSIOp,
               arith::ExtUIOp>(cast))
        break;
      rhs = cast->getOperand(0);
    }
    auto read = rhs.getDefiningOp<vector::TransferReadOp>();
    if (!loop || !loop->hasAttr(cpu::kStreamedAttr) || !read ||
        read->getParentOp() != loop)
      return;
    // The outermost view taken inside the loop, of a buffer from outside.
    memref::SubViewOp view;
    for (Value source = read.getBase();
         auto sub = source.getDefiningOp<memref::SubViewOp>();
         source = sub.getSource()) {
      if (!loop->isAncestor(sub))
        break;
      view = sub;
    }
    if (!view)
      return;
    Value buffer = view.getSource();
    auto type = cast<MemRefType>(buffer.getType());
    SmallVector<int64_t> strides;
    int64_t offset;
    if (failed(type.getStridesAndOffset(strides, offset)) ||
        !type.getElementType().isIntOrFloat())
      return;
    SmallVector<OpFoldResult> offsets = view.getMixedOffsets();
    Value iv = loop.getInductionVar();
    auto kPos = llvm::find_if(offsets, [&](OpFoldResult o) {
      return llvm::dyn_cast_if_present<Value>(o) == iv;
    });
    if (kPos == offsets.end())
      return;
    unsigned k = kPos - offsets.begin();
    int64_t rank = type.getRank();
    int64_t elementBytes = type.getElementTypeBitWidth() / 8;
    if (elementBytes == 0 || ShapedType::isDynamic(strides[k]) ||
        type.isDynamicDim(k) || strides[rank - 1] != 1)
      return;
    // Rows are contiguous runs of the innermost dimensions (a panel row).
    int64_t rowBytes = strides[k] * elementBytes;
    if (rowBytes <= 0 || rowBytes > 4096)
      return;
    std::optional<APInt> step = loop.getConstantStep();
    if (!step)
      return;
    int64_t rowsAhead = std::max<int64_t>(1, distanceBytes / rowBytes);
    int64_t lineElems = std::max<int64_t>(1, 64 / elementBytes);
    OpBuilder b(read);
    Location loc = read.getLoc();
    auto cst = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, v);
    };
    Value last = cst(type.getDimSize(k) - 1);
    int64_t lines = (step->getSExtValue() * rowBytes + 63) / 64;
    for (int64_t line = 0; line < lines; ++line) {
      int64_t byte = line * 64;
      int64_t row = byte / rowBytes, inRow = (byte % rowBytes) / elementBytes;
      SmallVector<Value> indices;
      for (auto [i, o] : llvm::enumerate(offsets)) {
        Value v = getValueOrCreateConstantIndexOp(b, loc, o);
        if (i == k) {
          v = arith::AddIOp::create(b, loc, v, cst(rowsAhead + row));
          v = arith::MinUIOp::create(b, loc, v, last);
        } else if (int64_t(i) == rank - 1) {
          v = arith::AddIOp::create(b, loc, v, cst(inRow - inRow % lineElems));
        }
        indices.push_back(v);
      }
      // Locality 3 is x86's prefetcht0 (into L1), 2 its prefetcht1 (L2).
      memref::PrefetchOp::create(b, loc, buffer, indices, /*isWrite=*/false,
                                 /*localityHint=*/cacheLevel == 2 ? 2 : 3,
                                 /*isDataCache=*/true);
    }
  });
}

struct SitsCpuLowerVectorsPass
    : cpu::impl::SitsCpuLowerVectorsBase<SitsCpuLowerVectorsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    if (prefetchCacheLevel > 2) {
      func.emitError() << "prefetch-cache-level must be 0 (the target's), 1 "
                          "or 2, not "
                       << int64_t(prefetchCacheLevel);
      return signalPassFailure();
    }

    // Accumulators that bufferization left as memory round trips.
    linalg::hoistRedundantVectorTransfers(func);

    cpu::CpuTilingConfig config = cpu::getCpuTilingConfig(func);
    prefetchStreamedOperands(func, config.prefetchBytes,
                             prefetchCacheLevel > 0
                                 ? int64_t(prefetchCacheLevel)
                                 : config.prefetchCacheLevel);

    // Transposes of square blocks of one vector (see the tiling of
    // transposes in TileAndFuse) as unpacks and lane shuffles rather than
    // one extract and insert per element; 16 x 16 f32 takes the AVX-512
    // sequence (64 shuffles for 256 elements).
    {
      SmallVector<Operation *> squares;
      func.walk([&](vector::TransposeOp transpose) {
        VectorType type = transpose.getSourceVectorType();
        if (type.getRank() == 2 && type.getDimSize(0) == 16 &&
            type.getDimSize(1) == 16 && type.getElementType().isF32())
          squares.push_back(transpose);
      });
      RewritePatternSet patterns(ctx);
      vector::populateVectorTransposeLoweringPatterns(
          patterns, vector::VectorTransposeLowering::Shuffle16x16,
          /*benefit=*/2);
      if (!squares.empty() &&
          failed(applyOpPatternsGreedily(squares, std::move(patterns))))
        return signalPassFailure();
    }
    // Gathers from memrefs whose innermost stride is not 1 (a strided
    // slice read at run-time indices): LLVM's masked gather wants a unit
    // stride, so these become conditional scalar loads.
    {
      SmallVector<Operation *> strided;
      func.walk([&](vector::GatherOp gather) {
        auto base = dyn_cast<MemRefType>(gather.getBase().getType());
        if (base && !base.isLastDimUnitStride())
          strided.push_back(gather);
      });
      RewritePatternSet patterns(ctx);
      vector::populateVectorGatherLoweringPatterns(patterns);
      patterns.add<StridedGatherToLoads>(ctx);
      if (!strided.empty() &&
          failed(applyOpPatternsGreedily(strided, std::move(patterns))))
        return signalPassFailure();
    }
    // Contractions -> outer products -> FMAs; reductions, transposes,
    // broadcasts and shape casts -> flat 1-D vector ops.
    {
      RewritePatternSet patterns(ctx);
      patterns.add<WidenMixedContraction, ContractAlongContiguousK>(
          ctx, /*benefit=*/2);
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
