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

#include "sits/runtime/kivi_layout.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"
#include "llvm/ADT/StringSwitch.h"

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

/// The function argument `value` copies, looking through the reshapes,
/// casts and zero padding (a concat's first operand) that build a present
/// buffer from it.
static BlockArgument pastArgument(Value value) {
  while (true) {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return arg.getOwner()->isEntryBlock() &&
                     isa<FunctionOpInterface>(arg.getOwner()->getParentOp())
                 ? arg
                 : BlockArgument();
    Operation *def = value.getDefiningOp();
    if (auto expand = dyn_cast_or_null<tensor::ExpandShapeOp>(def))
      value = expand.getSrc();
    else if (auto cast = dyn_cast_or_null<tensor::CastOp>(def))
      value = cast.getSource();
    else if (auto concat = dyn_cast_or_null<tensor::ConcatOp>(def);
             concat && concat.getDim() == 2)
      value = concat.getInputs().front();
    else
      return BlockArgument();
  }
}

static FailureOr<CachedAttention> matchConcatAttention(RewriterBase &rewriter,
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
  return CachedAttention{attention,
                         key->first,
                         value->first,
                         {attention.getKey(), attention.getValue()}};
}

static FailureOr<CachedAttention>
matchLocalPagedAttention(RewriterBase &rewriter, PagedAttentionOp paged) {
  auto kinds = paged.getPool().getDefiningOp<tensor::ConcatOp>();
  if (!kinds || kinds.getDim() != 2 || kinds.getInputs().size() != 2)
    return rewriter.notifyMatchFailure(
        paged, "the pool is not K and V joined along the kind dimension");
  BlockArgument key = pastArgument(kinds.getInputs()[0]);
  BlockArgument value = pastArgument(kinds.getInputs()[1]);
  if (!key || !value || key == value)
    return rewriter.notifyMatchFailure(
        paged, "the pool is not built from past K/V arguments");
  CachedAttention cached{paged, key, value, {}};
  for (Operation *user : paged.getUpdatedPool().getUsers()) {
    if (!isa<tensor::ExtractSliceOp>(user) ||
        !llvm::all_of(user->getUsers(), llvm::IsaPred<func::ReturnOp>))
      return rewriter.notifyMatchFailure(
          paged, "the updated pool feeds more than the present outputs");
    cached.presents.push_back(user->getResult(0));
  }
  return cached;
}

FailureOr<CachedAttention>
mlir::sits::matchCachedAttention(RewriterBase &rewriter, Operation *op) {
  if (auto attention = dyn_cast<AttentionOp>(op))
    return matchConcatAttention(rewriter, attention);
  if (auto paged = dyn_cast<PagedAttentionOp>(op))
    return matchLocalPagedAttention(rewriter, paged);
  return rewriter.notifyMatchFailure(op, "not an attention");
}

/// Layer `layer` of the paged pool computing `from`'s attention (its result
/// type and discardable attributes kept), at `from`.
static PagedAttentionOp createLayer(RewriterBase &rewriter, Operation *from,
                                    Value query, Value key, Value value,
                                    FloatAttr scale, Value pool,
                                    Value blockTables, Value slotMapping,
                                    Value contextLens, int64_t layer) {
  rewriter.setInsertionPoint(from);
  auto paged = PagedAttentionOp::create(
      rewriter, from->getLoc(),
      TypeRange{from->getResult(0).getType(), pool.getType()},
      ValueRange{query, key, value, pool, blockTables, slotMapping,
                 contextLens},
      llvm::to_vector(from->getDiscardableAttrs()));
  paged.setLayer(static_cast<uint64_t>(layer));
  if (scale)
    paged.setScaleAttr(scale);
  return paged;
}

FailureOr<Value> mlir::sits::rewriteToPagedAttention(
    RewriterBase &rewriter, const CachedAttention &cached, Value pool,
    Value blockTables, Value slotMapping, Value contextLens, int64_t layer) {
  if (auto paged = dyn_cast<PagedAttentionOp>(cached.op)) {
    // Point the layer at the real pool. Its own lengths (from the model's
    // inputs) also placed RoPE: the real ones replace them everywhere.
    Value local = paged.getContextLens();
    rewriter.setInsertionPoint(paged);
    Value lens = contextLens;
    if (lens.getType() != local.getType())
      lens = tensor::CastOp::create(rewriter, paged.getLoc(), local.getType(),
                                    lens);
    rewriter.replaceAllUsesWith(local, lens);
    PagedAttentionOp global =
        createLayer(rewriter, paged, paged.getQuery(), paged.getKey(),
                    paged.getValue(), paged.getScaleAttr(), pool, blockTables,
                    slotMapping, contextLens, layer);
    rewriter.replaceAllUsesWith(paged.getResult(), global.getResult());
    // The local op now only feeds the present outputs, which the caller
    // drops: it dies with them.
    return global.getUpdatedPool();
  }
  auto attention = cast<AttentionOp>(cached.op);
  auto key = attention.getKey().getDefiningOp<tensor::ConcatOp>();
  auto value = attention.getValue().getDefiningOp<tensor::ConcatOp>();
  PagedAttentionOp paged =
      createLayer(rewriter, attention, attention.getQuery(), key.getInputs()[1],
                  value.getInputs()[1], attention.getScaleAttr(), pool,
                  blockTables, slotMapping, contextLens, layer);
  rewriter.replaceOp(attention, paged.getResult());
  return paged.getUpdatedPool();
}

namespace {

struct SitsPageKVCachePass
    : mlir::sits::impl::SitsPageKVCacheBase<SitsPageKVCachePass> {
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
    // Quantized rows: INT8 or FP8 E4M3 codes per token and head; or KIVI
    // blocks of 4- or 2-bit codes.
    MLIRContext *ctx = &getContext();
    // KIVI blocks; "-token": keys quantized per token like values.
    const int64_t kiviBits =
        llvm::StringSwitch<int64_t>(kvDType)
            .Case("int4", 4)
            .Case("int2", 2)
            .Case("int4-token", 4 + ::sits::runtime::kivi::kKeysPerToken)
            .Case("int2-token", 2 + ::sits::runtime::kivi::kKeysPerToken)
            .Case("mixed", ::sits::runtime::kivi::kMixedWidths)
            .Default(0);
    Type codes = llvm::StringSwitch<Type>(kvDType)
                     .Case("int8", IntegerType::get(ctx, 8))
                     .Case("fp8", Float8E4M3FNType::get(ctx))
                     .Default(Type());
    if (!kvDType.empty() && !codes && !kiviBits) {
      module.emitError("sits-page-kv-cache: unsupported kv-dtype '")
          << kvDType
          << "'; supported: int8, fp8, int4, int2, int4-token, int2-token, "
             "mixed (with kv-widths) (or none: the model's K/V type)";
      return signalPassFailure();
    }
    const bool mixed = kiviBits == ::sits::runtime::kivi::kMixedWidths;
    if (mixed != !kvWidths.empty()) {
      module.emitError("sits-page-kv-cache: kv-widths (the bits of each "
                       "layer's kv heads) goes with kv-dtype=mixed, and "
                       "mixed needs it");
      return signalPassFailure();
    }
    const bool quantized = static_cast<bool>(codes);
    IRRewriter rewriter(&getContext());
    SmallVector<CachedAttention> layers;
    for (Operation &op : main.getBody().front()) {
      if (!isa<AttentionOp, PagedAttentionOp>(op))
        continue;
      FailureOr<CachedAttention> cached = matchCachedAttention(rewriter, &op);
      if (succeeded(cached))
        layers.push_back(*cached);
    }
    if (layers.empty()) {
      main.emitError("cannot page the KV cache: no causal sits.attention "
                     "reads a past key/value argument joined with new ones");
      return signalPassFailure();
    }
    FailureOr<RankedTensorType> kvType = checkLayers(main, layers);
    if (failed(kvType))
      return signalPassFailure();

    // The pool has one shape for every layer.
    int64_t dyn = ShapedType::kDynamic;
    // Quantized rows: D codes, then the 4 bytes of their f32 scale.
    auto poolType = RankedTensorType::get(
        {dyn, int64_t(layers.size()), 2, kvType->getDimSize(1), blockSize,
         kvType->getDimSize(3) + (quantized ? kKVScaleBytes : 0)},
        quantized ? codes : kvType->getElementType());
    // KIVI: [blocks, block bytes] i8 in the runtime's layout.
    DenseI64ArrayAttr kivi;
    if (kiviBits) {
      ::sits::runtime::kivi::Layout layout;
      if (!kvType->getElementType().isF32()) {
        main.emitError("sits-page-kv-cache: kv-dtype ")
            << kvDType << " takes f32 keys and values, got "
            << kvType->getElementType();
        return signalPassFailure();
      }
      const int64_t heads = int64_t(layers.size()) * kvType->getDimSize(1);
      if (mixed && int64_t(kvWidths.size()) != heads) {
        main.emitError("sits-page-kv-cache: kv-widths has ")
            << kvWidths.size() << " widths for " << layers.size()
            << " layers of " << kvType->getDimSize(1) << " kv heads (" << heads
            << ")";
        return signalPassFailure();
      }
      SmallVector<uint8_t> widths;
      for (int64_t w : kvWidths) {
        if (w != 4 && w != 2) {
          main.emitError("sits-page-kv-cache: kv-widths are 4 or 2 bits, got ")
              << w;
          return signalPassFailure();
        }
        widths.push_back(uint8_t(w));
      }
      if (!::sits::runtime::kivi::Layout::make(
              int64_t(layers.size()), kvType->getDimSize(1), blockSize,
              kvType->getDimSize(3), kiviBits, &layout, widths.data())) {
        main.emitError("sits-page-kv-cache: no ")
            << (mixed ? std::string("mixed-width")
                      : std::to_string(kiviBits &
                                       ~::sits::runtime::kivi::kKeysPerToken) +
                            "-bit")
            << " KIVI layout for head dim " << kvType->getDimSize(3)
            << " and blocks of " << static_cast<int64_t>(blockSize)
            << " (head dim x bits must be whole bytes, head dim <= "
            << ::sits::runtime::kivi::kMaxHeadDim
            << ", block size <= " << ::sits::runtime::kivi::kMaxBlockSize
            << ")";
        return signalPassFailure();
      }
      poolType = RankedTensorType::get({dyn, layout.blockStride},
                                       IntegerType::get(ctx, 8));
      SmallVector<int64_t> geometry = {kiviBits, int64_t(layers.size()),
                                       kvType->getDimSize(1),
                                       int64_t(blockSize)};
      llvm::append_range(geometry, kvWidths);
      kivi = DenseI64ArrayAttr::get(ctx, geometry);
    }
    Type i32 = IntegerType::get(ctx, 32), i64 = IntegerType::get(ctx, 64);
    SmallVector<std::pair<StringRef, Type>> added = {
        {"kv_pool", poolType},
        {"block_tables", RankedTensorType::get({dyn, dyn}, i32)},
        {"slot_mapping", RankedTensorType::get({dyn, dyn}, i64)},
        {"context_lens", RankedTensorType::get({dyn}, i32)}};
    // Arguments only the replaced K/V handling reads (the past, and for
    // GroupQueryAttention its lengths) go with it; others stay.
    llvm::SmallDenseSet<unsigned> wasUsed;
    for (BlockArgument arg : main.getArguments())
      if (!arg.use_empty())
        wasUsed.insert(arg.getArgNumber());
    unsigned first = main.getNumArguments();
    for (auto [i, entry] : llvm::enumerate(added)) {
      SmallVector<NamedAttribute> named = {
          NamedAttribute(StringAttr::get(ctx, "sits.name"),
                         StringAttr::get(ctx, entry.first))};
      if (i == 0 && quantized)
        named.emplace_back(StringAttr::get(ctx, "sits.kv_quantization"),
                           StringAttr::get(ctx, "per_token_head"));
      // KIVI: the geometry the pool's 2-D type does not show, for the
      // runtime to build the pool: [bits, layers, Hkv, block size, D].
      if (i == 0 && kivi) {
        named.emplace_back(
            StringAttr::get(ctx, "sits.kv_quantization"),
            StringAttr::get(ctx, kiviBits & ::sits::runtime::kivi::kKeysPerToken
                                     ? "per_token_group"
                                     : "kivi"));
        SmallVector<int64_t> geometry = {
            kiviBits, int64_t(layers.size()), kvType->getDimSize(1),
            int64_t(blockSize), kvType->getDimSize(3)};
        llvm::append_range(geometry, kvWidths);
        named.emplace_back(StringAttr::get(ctx, "sits.kivi"),
                           DenseI64ArrayAttr::get(ctx, geometry));
      }
      auto attrs = DictionaryAttr::get(ctx, named);
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

    llvm::SmallPtrSet<Value, 8> presents;
    for (auto [layer, cached] : llvm::enumerate(layers)) {
      presents.insert(cached.presents.begin(), cached.presents.end());
      FailureOr<Value> updated = rewriteToPagedAttention(
          rewriter, cached, pool, tables, slots, lens, int64_t(layer));
      if (failed(updated))
        return signalPassFailure();
      if (kivi)
        updated->getDefiningOp<PagedAttentionOp>().setKiviAttr(kivi);
      pool = *updated;
      ++numLayers;
    }

    // Results: the present K/V go, the updated pool comes last.
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    llvm::BitVector dropResults(ret.getNumOperands());
    SmallVector<Value> kept;
    for (OpOperand &operand : ret->getOpOperands()) {
      if (presents.contains(operand.get()))
        dropResults.set(operand.getOperandNumber());
      else
        kept.push_back(operand.get());
    }
    kept.push_back(pool);
    rewriter.modifyOpInPlace(ret, [&] { ret->setOperands(kept); });
    // What only computed the presents (concats, local pools) is dead now.
    SmallVector<Operation *> body =
        llvm::map_to_vector(main.getBody().front().without_terminator(),
                            [](Operation &op) { return &op; });
    for (Operation *op : llvm::reverse(body))
      if (isOpTriviallyDead(op))
        rewriter.eraseOp(op);
    llvm::BitVector dropArgs(main.getNumArguments());
    for (const CachedAttention &cached : layers) {
      for (BlockArgument past : {cached.pastKey, cached.pastValue}) {
        if (!past.use_empty()) {
          InFlightDiagnostic diag =
              main.emitError("cannot page the KV cache: past argument #")
              << past.getArgNumber() << " is still read after paging";
          diag.attachNote(past.getUses().begin()->getOwner()->getLoc())
              << "read here";
          return signalPassFailure();
        }
      }
    }
    for (BlockArgument arg : main.getArguments())
      if (arg.getArgNumber() < first && wasUsed.contains(arg.getArgNumber()) &&
          arg.use_empty())
        dropArgs.set(arg.getArgNumber());
    if (failed(main.eraseResults(dropResults)) ||
        failed(main.eraseArguments(dropArgs))) {
      main.emitError("cannot remove the past/present K/V from @main");
      return signalPassFailure();
    }
    auto updates = DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, kUpdatesAttr),
                             IntegerAttr::get(i64, poolArg.getArgNumber()))});
    if (failed(main.insertResult(main.getNumResults(), poolType, updates))) {
      main.emitError("cannot return the updated KV pool from @main");
      return signalPassFailure();
    }
  }

  /// The new K/V type [B, Hkv, S, D] every layer shares (static heads and
  /// head dim, one element type); for concat layers, the past K/V are read
  /// only by their concats, which feed only their attention and the return.
  FailureOr<RankedTensorType> checkLayers(func::FuncOp main,
                                          ArrayRef<CachedAttention> layers) {
    RankedTensorType first;
    for (auto [layer, cached] : llvm::enumerate(layers)) {
      SmallVector<RankedTensorType, 2> types;
      if (auto paged = dyn_cast<PagedAttentionOp>(cached.op)) {
        types = {paged.getKey().getType(), paged.getValue().getType()};
      } else {
        auto attention = cast<AttentionOp>(cached.op);
        for (Value joined : {attention.getKey(), attention.getValue()})
          types.push_back(
              cast<RankedTensorType>(joined.getDefiningOp<tensor::ConcatOp>()
                                         .getInputs()[1]
                                         .getType()));
        for (BlockArgument past : {cached.pastKey, cached.pastValue}) {
          if (!past.hasOneUse())
            return main.emitError("cannot page the KV cache: past argument #")
                   << past.getArgNumber()
                   << " is read by more than the concatenation feeding layer "
                   << layer << "'s attention";
        }
        for (Value joined : {attention.getKey(), attention.getValue()}) {
          for (Operation *user : joined.getUsers())
            if (user != attention.getOperation() && !isa<func::ReturnOp>(user))
              return user->emitError("cannot page the KV cache: this op reads "
                                     "the joined K/V of layer ")
                     << layer << ", which only exists contiguously";
        }
      }
      if (!first)
        first = types.front();
      for (RankedTensorType type : types) {
        if (type.getElementType() != first.getElementType() ||
            type.isDynamicDim(1) || type.isDynamicDim(3) ||
            type.getDimSize(1) != first.getDimSize(1) ||
            type.getDimSize(3) != first.getDimSize(3))
          return cached.op->emitError("cannot page the KV cache: layer ")
                 << layer << "'s new K/V " << type
                 << " does not fit a pool of static K/V heads and head dim "
                    "shared by all layers, like layer 0's "
                 << first;
      }
    }
    return first;
  }
};

} // namespace
