//===- PageKVCache.cpp - Decoder attention over the paged KV pool ---------===//
//
// A decoder exported with its KV cache carries the past K/V of every layer as
// arguments and returns the present (past + new) as results, so serving it
// means copying each sequence's whole context in and out at every step. This
// pass gives @main the KV allocator's paged signature instead: attention
// reads the context through block tables and writes the new tokens into
// their slots, and the pool is updated in place.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSPAGEKVCACHE
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

/// `value` as `tensor.concat dim(2) %past, %new` with `%past` an argument of
/// the enclosing function.
static FailureOr<std::pair<BlockArgument, Value>> splitPast(Value value) {
  auto concat = value.getDefiningOp<tensor::ConcatOp>();
  if (!concat || concat.getDim() != 2 || concat.getInputs().size() != 2)
    return failure();
  auto past = dyn_cast<BlockArgument>(concat.getInputs()[0]);
  if (!past || !past.getOwner()->isEntryBlock() ||
      !isa<FunctionOpInterface>(past.getOwner()->getParentOp()))
    return failure();
  return std::make_pair(past, concat.getInputs()[1]);
}

FailureOr<CachedAttention>
mlir::sits::matchCachedAttention(RewriterBase &rewriter,
                                 AttentionOp attention) {
  if (!attention.getCausal())
    return rewriter.notifyMatchFailure(attention, "not causal");
  if (attention.getMask())
    return rewriter.notifyMatchFailure(attention, "has a mask");
  FailureOr<std::pair<BlockArgument, Value>> key =
      splitPast(attention.getKey());
  FailureOr<std::pair<BlockArgument, Value>> value =
      splitPast(attention.getValue());
  if (failed(key) || failed(value))
    return rewriter.notifyMatchFailure(
        attention, "key or value is not a past argument joined with new K/V");
  if (key->first == value->first)
    return rewriter.notifyMatchFailure(attention,
                                       "key and value read the same argument");
  return CachedAttention{attention, key->first, value->first, key->second,
                         value->second};
}

FailureOr<Value> mlir::sits::rewriteToPagedAttention(
    RewriterBase &rewriter, const CachedAttention &cached, Value pool,
    Value blockTables, Value slotMapping, Value contextLens, int64_t layer) {
  AttentionOp attention = cached.attention;
  rewriter.setInsertionPoint(attention);
  auto paged = PagedAttentionOp::create(
      rewriter, attention.getLoc(),
      TypeRange{attention.getType(), pool.getType()},
      ValueRange{attention.getQuery(), cached.newKey, cached.newValue, pool,
                 blockTables, slotMapping, contextLens},
      llvm::to_vector(attention->getDiscardableAttrs()));
  paged.setLayer(static_cast<uint64_t>(layer));
  if (FloatAttr scale = attention.getScaleAttr())
    paged.setScaleAttr(scale);
  rewriter.replaceOp(attention, paged.getResult());
  return paged.getUpdatedPool();
}

namespace {

struct SitsPageKVCachePass
    : sits::impl::SitsPageKVCacheBase<SitsPageKVCachePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal() || !main.isPublic()) {
      module.emitError("sits-page-kv-cache needs a public function @main");
      return signalPassFailure();
    }
    if (blockSize <= 0) {
      module.emitError("sits-page-kv-cache: block-size must be positive, got ")
          << static_cast<int64_t>(blockSize);
      return signalPassFailure();
    }
    IRRewriter rewriter(&getContext());
    SmallVector<CachedAttention> layers;
    main.walk([&](AttentionOp op) {
      FailureOr<CachedAttention> cached = matchCachedAttention(rewriter, op);
      if (succeeded(cached))
        layers.push_back(*cached);
    });
    if (layers.empty()) {
      main.emitError("cannot page the KV cache: no causal sits.attention "
                     "reads a past key/value argument joined with new ones");
      return signalPassFailure();
    }
    if (failed(checkLayers(main, layers)))
      return signalPassFailure();

    // The pool has one shape for every layer.
    auto keyType = cast<RankedTensorType>(layers.front().newKey.getType());
    MLIRContext *ctx = &getContext();
    int64_t dyn = ShapedType::kDynamic;
    auto poolType = RankedTensorType::get(
        {dyn, int64_t(layers.size()), 2, keyType.getDimSize(1), blockSize,
         keyType.getDimSize(3)},
        keyType.getElementType());
    Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    SmallVector<std::pair<StringRef, Type>> added = {
        {"kv_pool", poolType},
        {"block_tables", RankedTensorType::get({dyn, dyn}, i32)},
        {"slot_mapping", RankedTensorType::get({dyn, dyn}, i64)},
        {"context_lens", RankedTensorType::get({dyn}, i32)}};
    unsigned first = main.getNumArguments();
    for (auto [i, entry] : llvm::enumerate(added)) {
      auto attrs = DictionaryAttr::get(
          ctx, {NamedAttribute(StringAttr::get(ctx, "sits.name"),
                               StringAttr::get(ctx, entry.first))});
      if (failed(main.insertArgument(first + i, entry.second, attrs,
                                     main.getLoc()))) {
        main.emitError("cannot add the paged KV arguments to @main");
        return signalPassFailure();
      }
    }
    BlockArgument poolArg = main.getArgument(first);
    Value pool = poolArg, tables = main.getArgument(first + 1),
          slots = main.getArgument(first + 2),
          lens = main.getArgument(first + 3);

    llvm::SetVector<Operation *> concats;
    for (auto [layer, cached] : llvm::enumerate(layers)) {
      concats.insert(cached.attention.getKey().getDefiningOp());
      concats.insert(cached.attention.getValue().getDefiningOp());
      FailureOr<Value> updated = rewriteToPagedAttention(
          rewriter, cached, pool, tables, slots, lens, int64_t(layer));
      if (failed(updated))
        return signalPassFailure();
      pool = *updated;
      ++numLayers;
    }

    // Results: the present K/V go, the updated pool comes last.
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    llvm::BitVector dropResults(ret.getNumOperands());
    SmallVector<Value> kept;
    for (OpOperand &operand : ret->getOpOperands()) {
      if (concats.contains(operand.get().getDefiningOp()))
        dropResults.set(operand.getOperandNumber());
      else
        kept.push_back(operand.get());
    }
    kept.push_back(pool);
    rewriter.modifyOpInPlace(ret, [&] { ret->setOperands(kept); });
    for (Operation *concat : llvm::reverse(concats))
      rewriter.eraseOp(concat);
    llvm::BitVector dropArgs(main.getNumArguments());
    for (const CachedAttention &cached : layers) {
      dropArgs.set(cached.pastKey.getArgNumber());
      dropArgs.set(cached.pastValue.getArgNumber());
    }
    if (failed(main.eraseResults(dropResults)) ||
        failed(main.eraseArguments(dropArgs))) {
      main.emitError("cannot remove the past/present K/V from @main");
      return signalPassFailure();
    }
    auto updates = DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, "sits.updates"),
                             IntegerAttr::get(i64, poolArg.getArgNumber()))});
    if (failed(main.insertResult(main.getNumResults(), poolType, updates))) {
      main.emitError("cannot return the updated KV pool from @main");
      return signalPassFailure();
    }
  }

  /// Every layer fits the one pool, and the past K/V are read only by their
  /// concats, which feed only their attention and the return.
  LogicalResult checkLayers(func::FuncOp main,
                            ArrayRef<CachedAttention> layers) {
    auto first = cast<RankedTensorType>(layers.front().newKey.getType());
    for (auto [layer, cached] : llvm::enumerate(layers)) {
      AttentionOp attention = cached.attention;
      for (Value kv : {cached.newKey, cached.newValue}) {
        auto type = cast<RankedTensorType>(kv.getType());
        if (type.getElementType() != first.getElementType() ||
            type.isDynamicDim(1) || type.isDynamicDim(3) ||
            type.getDimSize(1) != first.getDimSize(1) ||
            type.getDimSize(3) != first.getDimSize(3))
          return attention.emitError("cannot page the KV cache: layer ")
                 << layer << "'s new K/V " << type
                 << " does not fit a pool of static K/V heads and head dim "
                    "shared by all layers, like layer 0's "
                 << first;
      }
      for (BlockArgument past : {cached.pastKey, cached.pastValue}) {
        if (!past.hasOneUse())
          return main.emitError("cannot page the KV cache: past argument #")
                 << past.getArgNumber()
                 << " is read by more than the concatenation feeding layer "
                 << layer << "'s attention";
      }
      for (Value joined : {attention.getKey(), attention.getValue()}) {
        for (Operation *user : joined.getUsers())
          if (user != attention.getOperation() &&
              !isa<func::ReturnOp>(user))
            return user->emitError("cannot page the KV cache: this op reads "
                                   "the joined K/V of layer ")
                   << layer << ", which only exists contiguously";
      }
      if (attention->getBlock() != &main.getBody().front())
        return attention.emitError(
            "cannot page the KV cache: the attention is not in @main's body");
    }
    return success();
  }
};

} // namespace
