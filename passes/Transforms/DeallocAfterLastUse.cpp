//===- DeallocAfterLastUse.cpp - Free buffers right after their last use --===//
//
// Ownership-based deallocation frees at the end of the allocating block;
// in @main that keeps every activation of every layer alive until the
// model returns. Moving each free up to the buffer's last use bounds the
// live activations by what a layer needs, not by the depth of the model.
//
// A fresh buffer is a `memref.alloc`, or the result of a call whose callee
// returns, there, a buffer of its own (an outlined layer returning its
// activations): either way nothing else aliases it.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/WalkPatternRewriteDriver.h"

#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSDEALLOCAFTERLASTUSE
#define GEN_PASS_DEF_SITSSPLITFRESHDEALLOCS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;

namespace {

/// Whether `user` may keep `memref` (or a pointer into it) alive past
/// itself other than through memref results: a terminator passing it out
/// of a region, a store of the descriptor, a cast to pointers or tensors.
bool escapes(Operation *user, Value memref) {
  if (user->hasTrait<OpTrait::IsTerminator>())
    return true;
  if (auto store = dyn_cast<memref::StoreOp>(user))
    return store.getValueToStore() == memref;
  if (isa<memref::ExtractAlignedPointerAsIndexOp, UnrealizedConversionCastOp,
          bufferization::ToTensorOp>(user))
    return true;
  return llvm::any_of(user->getResultTypes(),
                      [](Type t) { return isa<TensorType>(t); });
}

/// Whether every memref `call` returns is, in each return of its callee, a
/// distinct `memref.alloc` of the callee: the caller then owns buffers that
/// alias neither its own values nor each other.
bool returnsFreshBuffers(func::CallOp call) {
  if (llvm::none_of(call.getResultTypes(),
                    [](Type t) { return isa<BaseMemRefType>(t); }))
    return false;
  auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
      call, call.getCalleeAttr());
  if (!callee || callee.isExternal())
    return false;
  WalkResult walk = callee.walk([](func::ReturnOp ret) {
    llvm::SmallPtrSet<Value, 4> seen;
    for (Value v : ret.getOperands())
      if (isa<BaseMemRefType>(v.getType()) &&
          (!v.getDefiningOp<memref::AllocOp>() || !seen.insert(v).second))
        return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return !walk.wasInterrupted();
}

/// The fresh buffer `memref` is, or is the base buffer of; null otherwise.
Value freshRoot(Value memref) {
  if (auto meta = memref.getDefiningOp<memref::ExtractStridedMetadataOp>())
    return memref == meta.getBaseBuffer() ? freshRoot(meta.getSource())
                                          : Value();
  if (memref.getDefiningOp<memref::AllocOp>())
    return memref;
  if (auto call = memref.getDefiningOp<func::CallOp>())
    return returnsFreshBuffers(call) ? memref : Value();
  return {};
}

/// The position of every op of a block, taken once: moving deallocations
/// would otherwise renumber the block on every order query.
using Positions = DenseMap<Operation *, unsigned>;

/// The last op of `dealloc`'s block that uses its buffer or a view of it,
/// or null when the buffer escapes (or is not a fresh buffer of that
/// block).
Operation *lastUse(memref::DeallocOp dealloc, const Positions &positions) {
  Value buffer = freshRoot(dealloc.getMemref());
  Block *block = dealloc->getBlock();
  if (!buffer || buffer.getDefiningOp()->getBlock() != block)
    return nullptr;
  Operation *last = buffer.getDefiningOp();
  SmallVector<Value> worklist{buffer};
  llvm::SmallPtrSet<Value, 8> aliases{buffer};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      if (user == dealloc.getOperation())
        continue;
      if (escapes(user, value))
        return nullptr;
      // Any memref an op makes from the buffer may view it, but for the
      // fresh results of a call.
      auto call = dyn_cast<func::CallOp>(user);
      if (!call || !returnsFreshBuffers(call))
        for (Value result : user->getResults())
          if (isa<BaseMemRefType>(result.getType()) &&
              aliases.insert(result).second)
            worklist.push_back(result);
      Operation *ancestor = block->findAncestorOpInBlock(*user);
      if (!ancestor || ancestor == dealloc.getOperation())
        return nullptr;
      if (positions.lookup(last) < positions.lookup(ancestor))
        last = ancestor;
    }
  }
  return last;
}

/// Splits `bufferization.dealloc` ops that free several distinct fresh
/// allocations and retain nothing into one op per buffer: distinct
/// allocations never alias, and upstream's simplification would otherwise
/// query the aliasing of every pair, quadratic in the buffers a block
/// allocates (every activation of @main).
struct SplitFreshDeallocs : OpRewritePattern<bufferization::DeallocOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(bufferization::DeallocOp op,
                                PatternRewriter &rewriter) const override {
    if (op.getMemrefs().size() < 2 || !op.getRetained().empty())
      return failure();
    llvm::SmallPtrSet<Value, 16> seen;
    for (Value memref : op.getMemrefs()) {
      Value root = freshRoot(memref);
      if (!root || !seen.insert(root).second)
        return failure();
    }
    for (auto [memref, condition] :
         llvm::zip(op.getMemrefs(), op.getConditions()))
      bufferization::DeallocOp::create(rewriter, op.getLoc(), memref, condition,
                                       ValueRange());
    rewriter.eraseOp(op);
    return success();
  }
};

struct SitsDeallocAfterLastUsePass
    : sits::impl::SitsDeallocAfterLastUseBase<SitsDeallocAfterLastUsePass> {
  void runOnOperation() override {
    SmallVector<memref::DeallocOp> deallocs;
    getOperation()->walk([&](memref::DeallocOp op) { deallocs.push_back(op); });
    // A fresh buffer is freed through the base buffer the deallocation
    // pipeline extracted from it right before: free the buffer itself, so
    // that the extraction is no use that holds the free back.
    for (memref::DeallocOp dealloc : deallocs) {
      auto meta =
          dealloc.getMemref().getDefiningOp<memref::ExtractStridedMetadataOp>();
      if (!meta || !freshRoot(dealloc.getMemref()))
        continue;
      dealloc.getMemrefMutable().assign(meta.getSource());
      if (meta->use_empty())
        meta->erase();
    }
    DenseMap<Block *, Positions> positions;
    for (memref::DeallocOp dealloc : deallocs) {
      Block *block = dealloc->getBlock();
      auto [it, inserted] = positions.try_emplace(block);
      if (inserted) {
        unsigned i = 0;
        for (Operation &op : *block)
          it->second[&op] = i++;
      }
      Operation *last = lastUse(dealloc, it->second);
      if (!last || it->second.lookup(last) + 1 >= it->second.lookup(dealloc))
        continue;
      dealloc->moveAfter(last);
      ++numMoved;
    }
  }
};

struct SitsSplitFreshDeallocsPass
    : sits::impl::SitsSplitFreshDeallocsBase<SitsSplitFreshDeallocsPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SplitFreshDeallocs>(&getContext());
    walkAndApplyPatterns(getOperation(), std::move(patterns));
  }
};

} // namespace
