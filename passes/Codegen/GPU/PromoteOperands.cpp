//===- PromoteOperands.cpp - Stage operand tiles in shared memory ---------===//
//
// A contraction tiled by sits-gpu-tile-and-fuse reads, per reduction step,
// a slice of each operand that depends on the thread (its rows or columns)
// and on the step. All threads of a block together read a block tile of the
// operand; that tile is copied into workgroup memory once per step, and each
// thread reads its slice from there.
//
// Values the threads of a block share between thread loops (a row's mean,
// the exponentials of a softmax) are allocated in workgroup memory too.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "passes/Codegen/Common/FusionGroups.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUPROMOTEOPERANDS
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;
using namespace mlir::sits::codegen;

namespace {

bool hasMapping(scf::ForallOp forall, bool threads) {
  std::optional<ArrayAttr> mapping = forall.getMapping();
  if (!mapping || mapping->empty())
    return false;
  return threads ? isa<mlir::gpu::GPUThreadMappingAttr>((*mapping)[0])
                 : isa<mlir::gpu::GPUBlockMappingAttr>((*mapping)[0]);
}

Attribute workgroupMemorySpace(MLIRContext *ctx) {
  return mlir::gpu::AddressSpaceAttr::get(ctx,
                                          mlir::gpu::AddressSpace::Workgroup);
}

/// Iterations of `forall` when static.
std::optional<int64_t> iterations(scf::ForallOp forall) {
  int64_t count = 1;
  for (auto [lb, ub, step] :
       llvm::zip_equal(forall.getStaticLowerBound(),
                       forall.getStaticUpperBound(), forall.getStaticStep())) {
    if (ShapedType::isDynamic(lb) || ShapedType::isDynamic(ub) ||
        ShapedType::isDynamic(step))
      return std::nullopt;
    count *= (ub - lb + step - 1) / step;
  }
  return count;
}

/// An operand slice as seen from outside the thread loop: the value it is
/// sliced from and the chain of slices down to the operand (outermost
/// first).
struct SliceChain {
  Value source;
  SmallVector<tensor::ExtractSliceOp> slices;
};

/// Follows rank-preserving, unit-stride extract_slices from `value` up to a
/// value defined outside `forall`.
std::optional<SliceChain> traceToOutside(Value value, scf::ForallOp forall) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return std::nullopt;
  SliceChain chain;
  chain.source = value;
  while (auto slice = chain.source.getDefiningOp<tensor::ExtractSliceOp>()) {
    if (!forall->isProperAncestor(slice))
      break;
    if (slice.getSourceType().getRank() != type.getRank() ||
        !slice.hasUnitStride())
      return std::nullopt;
    chain.slices.insert(chain.slices.begin(), slice);
    chain.source = slice.getSource();
  }
  if (Operation *def = chain.source.getDefiningOp())
    if (forall->isProperAncestor(def))
      return std::nullopt;
  if (auto arg = dyn_cast<BlockArgument>(chain.source))
    if (forall->isAncestor(arg.getOwner()->getParentOp()))
      return std::nullopt;
  return chain;
}

/// Whether the offset of dimension `d` along `chain` depends on any of `ivs`.
bool offsetDependsOn(const SliceChain &chain, unsigned d, ValueRange ivs) {
  return llvm::any_of(chain.slices, [&](tensor::ExtractSliceOp slice) {
    auto value = dyn_cast<Value>(slice.getMixedOffsets()[d]);
    return value && llvm::any_of(ivs, [&](Value iv) {
             return dependsOn(value, iv, /*depth=*/16);
           });
  });
}

/// The offset of dimension `d` of the operand in the chain's source.
OpFoldResult composedOffset(OpBuilder &b, Location loc, const SliceChain &chain,
                            unsigned d) {
  AffineExpr d0, d1;
  bindDims(b.getContext(), d0, d1);
  OpFoldResult offset = b.getIndexAttr(0);
  for (tensor::ExtractSliceOp slice : chain.slices)
    offset = affine::makeComposedFoldedAffineApply(
        b, loc, d0 + d1, {offset, slice.getMixedOffsets()[d]});
  return offset;
}

/// Stages `operand` of `op` (inside `loop`, inside thread loop `forall`) in
/// workgroup memory. Returns failure, changing nothing, when the operand is
/// not a slice whose per-dimension offsets each follow either the threads
/// or the reduction step, when no two threads share it, or when the block
/// tile is larger than `maxBytes`.
LogicalResult promoteOperand(RewriterBase &rewriter, OpOperand &operand,
                             scf::ForOp loop, scf::ForallOp forall,
                             int64_t maxBytes, Attribute memorySpace) {
  Operation *op = operand.getOwner();
  Location loc = op->getLoc();
  auto type = cast<RankedTensorType>(operand.get().getType());
  std::optional<SliceChain> chain = traceToOutside(operand.get(), forall);
  if (!chain || chain->slices.empty())
    return failure();
  auto sourceType = dyn_cast<RankedTensorType>(chain->source.getType());
  if (!sourceType)
    return failure();

  ValueRange threadIvs = forall.getInductionVars();
  Value step = loop.getInductionVar();
  SmallVector<bool> byThread(type.getRank(), false);
  SmallVector<int64_t> blockShape;
  llvm::SmallDenseSet<unsigned> usedThreadIvs;
  for (unsigned d = 0; d < type.getRank(); ++d) {
    byThread[d] = offsetDependsOn(*chain, d, threadIvs);
    if (byThread[d] && offsetDependsOn(*chain, d, step))
      return failure();
    if (byThread[d]) {
      // The block reads the whole extent the threads are spread over.
      if (sourceType.isDynamicDim(d))
        return failure();
      for (auto [i, iv] : llvm::enumerate(threadIvs))
        if (offsetDependsOn(*chain, d, iv))
          usedThreadIvs.insert(i);
      blockShape.push_back(sourceType.getDimSize(d));
    } else {
      blockShape.push_back(type.getDimSize(d));
    }
  }
  // Staging pays off when threads share data: some thread loop with more
  // than one iteration does not move the slice.
  bool shared = false;
  for (unsigned i = 0; i < threadIvs.size(); ++i) {
    int64_t lb = forall.getStaticLowerBound()[i];
    int64_t ub = forall.getStaticUpperBound()[i];
    int64_t st = forall.getStaticStep()[i];
    if (ShapedType::isDynamic(ub) || ShapedType::isDynamic(lb) ||
        ShapedType::isDynamic(st))
      return failure();
    if ((ub - lb) > st && !usedThreadIvs.contains(i))
      shared = true;
  }
  if (!shared)
    return failure();
  int64_t bytes = type.getElementTypeBitWidth() / 8;
  for (int64_t extent : blockShape)
    bytes *= extent;
  if (bytes > maxBytes || bytes == 0)
    return failure();

  MLIRContext *ctx = rewriter.getContext();
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  SmallVector<OpFoldResult> blockOffsets, threadOffsets;
  for (unsigned d = 0; d < type.getRank(); ++d) {
    OpFoldResult offset = composedOffset(rewriter, loc, *chain, d);
    blockOffsets.push_back(byThread[d] ? rewriter.getIndexAttr(0) : offset);
    threadOffsets.push_back(byThread[d] ? offset : rewriter.getIndexAttr(0));
  }
  SmallVector<OpFoldResult> ones(type.getRank(), rewriter.getIndexAttr(1));
  auto asSizes = [&](ArrayRef<int64_t> shape) {
    return llvm::map_to_vector(shape, [&](int64_t s) -> OpFoldResult {
      return rewriter.getIndexAttr(s);
    });
  };
  Value block = tensor::ExtractSliceOp::create(
      rewriter, loc, chain->source, blockOffsets, asSizes(blockShape), ones);
  auto bufferType = RankedTensorType::get(blockShape, type.getElementType());
  auto buffer = bufferization::AllocTensorOp::create(rewriter, loc, bufferType,
                                                     ValueRange{});
  if (memorySpace)
    buffer.setMemorySpaceAttr(memorySpace);
  auto copy = linalg::CopyOp::create(rewriter, loc, block, buffer.getResult());
  copy->setAttr(sits::gpu::kCooperativeAttrName, UnitAttr::get(ctx));
  Value slice = tensor::ExtractSliceOp::create(rewriter, loc, type,
                                               copy.getResult(0), threadOffsets,
                                               asSizes(type.getShape()), ones);
  rewriter.modifyOpInPlace(op, [&] { operand.set(slice); });
  // The slices the operand was read through are dead now.
  for (tensor::ExtractSliceOp old : llvm::reverse(chain->slices))
    if (old->use_empty())
      rewriter.eraseOp(old);
  return success();
}

struct SitsGpuPromoteOperandsPass
    : sits::gpu::impl::SitsGpuPromoteOperandsBase<SitsGpuPromoteOperandsPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    MLIRContext *ctx = &getContext();
    IRRewriter rewriter(ctx);
    Attribute memorySpace =
        workgroupMemory ? workgroupMemorySpace(ctx) : Attribute();

    // Operand tiles of contractions stepping their reduction in a thread.
    SmallVector<linalg::LinalgOp> contractions;
    func.walk([&](linalg::LinalgOp op) {
      if (isContraction(op) && op.hasPureTensorSemantics())
        contractions.push_back(op);
    });
    for (linalg::LinalgOp op : contractions) {
      auto loop = op->getParentOfType<scf::ForOp>();
      auto forall = op->getParentOfType<scf::ForallOp>();
      if (!loop || !forall || !hasMapping(forall, /*threads=*/true) ||
          !forall->isProperAncestor(loop))
        continue;
      // Only the block's largest thread loop may stage: every thread of the
      // block must reach the barriers around the copy, and smaller loops
      // run on some threads only.
      auto block = forall->getParentOfType<scf::ForallOp>();
      if (!block || !hasMapping(block, /*threads=*/false))
        continue;
      std::optional<int64_t> threads = iterations(forall);
      bool largest = threads.has_value();
      block.walk([&](scf::ForallOp inner) {
        if (inner == block || !hasMapping(inner, /*threads=*/true))
          return;
        std::optional<int64_t> n = iterations(inner);
        if (!n || (threads && *n > *threads))
          largest = false;
      });
      if (!largest)
        continue;
      for (OpOperand *input : op.getDpsInputOperands())
        if (succeeded(promoteOperand(rewriter, *input, loop, forall, maxBytes,
                                     memorySpace)))
          ++numPromoted;
    }

    // Values shared by the threads of a block: empty tensors in a block
    // but outside its thread loops. (Slices of empty tensors fold to empty
    // tensors first.)
    {
      RewritePatternSet patterns(ctx);
      tensor::populateFoldTensorEmptyPatterns(patterns);
      if (failed(applyPatternsGreedily(func, std::move(patterns))))
        return signalPassFailure();
    }
    SmallVector<tensor::EmptyOp> shared;
    func.walk([&](tensor::EmptyOp empty) {
      auto forall = empty->getParentOfType<scf::ForallOp>();
      if (forall && hasMapping(forall, /*threads=*/false))
        shared.push_back(empty);
    });
    for (tensor::EmptyOp empty : shared) {
      rewriter.setInsertionPoint(empty);
      auto alloc = bufferization::AllocTensorOp::create(
          rewriter, empty.getLoc(), empty.getType(), empty.getDynamicSizes());
      if (memorySpace)
        alloc.setMemorySpaceAttr(memorySpace);
      rewriter.replaceOp(empty, alloc.getResult());
    }
  }
};

} // namespace
