//===- OutlineLayers.cpp - A model's repeated layers as one function ------===//
//
// Every pass after import costs time per op it sees, and a transformer shows
// them every layer's ops though they are one layer's ops on other weights.
// The repeated blocks of a function become calls of one private function
// before the graph passes, so that compile time follows the distinct layers
// of the model, not its depth.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Outline.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSOUTLINELAYERS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

namespace {

/// A tensor constant each layer may hold its own of: left in the caller.
bool isWeight(Operation *op) {
  return op->hasTrait<OpTrait::ConstantLike>() && op->getNumResults() == 1 &&
         isa<TensorType>(op->getResult(0).getType()) &&
         !isScalarOrSplatConstant(op->getResult(0));
}

/// What must agree for two ops to be the same op of two layers: everything
/// but operand identities and, for weights, their values; a paged
/// attention's layer is left out (it becomes an operand).
llvm::hash_code signature(Operation *op) {
  if (isWeight(op))
    return llvm::hash_combine(op->getName(), op->getResult(0).getType());
  if (auto attention = dyn_cast<PagedAttentionOp>(op)) {
    return llvm::hash_combine(op->getName(), op->getDiscardableAttrDictionary(),
                              attention.getScaleAttr(), op->getResultTypes(),
                              op->getOperandTypes());
  }
  return OperationEquivalence::computeHash(
      op, OperationEquivalence::ignoreHashValue,
      OperationEquivalence::ignoreHashValue,
      OperationEquivalence::IgnoreLocations);
}

/// `count` consecutive blocks of `period` ops from `start`.
struct Repeat {
  unsigned start = 0, period = 0, count = 0;
  uint64_t coverage() const { return uint64_t(period) * count; }
};

/// The repeat covering the most ops among `sigs`: for every signature that
/// occurs at evenly spaced positions, the blocks of that spacing around its
/// occurrences in which every position agrees across all blocks. A first or
/// last block that differs (the first layer computing what all read) is
/// left out.
std::optional<Repeat> findRepeat(ArrayRef<llvm::hash_code> sigs,
                                 unsigned minOps) {
  llvm::MapVector<llvm::hash_code, SmallVector<unsigned>> positions;
  for (auto [i, sig] : llvm::enumerate(sigs))
    positions[sig].push_back(i);
  std::optional<Repeat> best;
  llvm::DenseSet<std::tuple<unsigned, unsigned, unsigned>> tried;
  int64_t n = sigs.size();
  // The blocks of `period` ops agreeing around `anchor`, `count` of them.
  auto blocksAround = [&](unsigned anchor, unsigned period,
                          unsigned count) -> std::optional<Repeat> {
    auto agrees = [&](int64_t j) {
      if (j < 0 || j + int64_t(count - 1) * period >= n)
        return false;
      for (unsigned r = 1; r < count; ++r)
        if (sigs[j + r * period] != sigs[j])
          return false;
      return true;
    };
    int64_t lo = anchor, hi = anchor;
    while (hi - lo + 1 < period && agrees(hi + 1))
      ++hi;
    while (hi - lo + 1 < period && agrees(lo - 1))
      --lo;
    if (hi - lo + 1 < period)
      return std::nullopt;
    return Repeat{unsigned(lo), period, count};
  };
  for (auto &[sig, at] : positions) {
    unsigned count = at.size();
    if (count < 2)
      continue;
    unsigned period = at[1] - at[0];
    if (period < minOps ||
        !llvm::all_of(
            llvm::seq<unsigned>(1, count),
            [&](unsigned r) { return at[r] - at[r - 1] == period; }))
      continue;
    for (auto [first, blocks] : {std::pair(0u, count), std::pair(1u, count - 1),
                                 std::pair(0u, count - 1)}) {
      if (blocks < 2 || (best && uint64_t(period) * blocks <= best->coverage()))
        continue;
      // Anchors in one run of blocks find the same blocks.
      if (!tried.insert({period, blocks, (at[first] - at[0]) / period}).second)
        continue;
      if (std::optional<Repeat> found = blocksAround(at[first], period, blocks))
        best = found;
    }
  }
  return best;
}

/// Whether block `r` of `repeat` in `ops` is block 0 on other values: ops
/// equal position by position (weights by type only), values defined
/// inside the blocks in the same places, and the values read from outside
/// in one-to-one correspondence (scalar and splat constants, cloned into
/// the layer, by value).
bool isSameBlock(ArrayRef<Operation *> ops, const Repeat &repeat, unsigned r,
                 const llvm::DenseMap<Operation *, unsigned> &position) {
  llvm::DenseMap<Value, Value> inside, outside, reverse;
  unsigned first = repeat.start, base = repeat.start + r * repeat.period;
  // The top-level op `value` is defined in (or by), if it is one of `ops`.
  auto topLevel = [&](Value value) -> std::optional<unsigned> {
    Operation *def = value.getDefiningOp();
    if (!def)
      def = cast<BlockArgument>(value).getOwner()->getParentOp();
    Block *body = ops.front()->getBlock();
    Operation *ancestor = def ? body->findAncestorOpInBlock(*def) : nullptr;
    if (!ancestor)
      return std::nullopt;
    auto it = position.find(ancestor);
    return it == position.end() ? std::nullopt
                                : std::optional<unsigned>(it->second);
  };
  auto inBlock = [&](std::optional<unsigned> at, unsigned from) {
    return at && *at >= from && *at < from + repeat.period;
  };
  auto check = [&](Value a, Value b) -> LogicalResult {
    if (auto it = inside.find(a); it != inside.end())
      return success(it->second == b);
    // Defined inside a block but not mapped: a block's value read by the
    // other at another place.
    if (inBlock(topLevel(a), first) || inBlock(topLevel(b), base))
      return failure();
    if (isScalarOrSplatConstant(a) || isScalarOrSplatConstant(b)) {
      Attribute x, y;
      return success(matchPattern(a, m_Constant(&x)) &&
                     matchPattern(b, m_Constant(&y)) && x == y &&
                     a.getType() == b.getType());
    }
    auto [it, added] = outside.try_emplace(a, b);
    auto [rit, radded] = reverse.try_emplace(b, a);
    return success(it->second == b && rit->second == a);
  };
  auto mark = [&](Value a, Value b) { inside[a] = b; };
  for (unsigned j = 0; j < repeat.period; ++j) {
    Operation *x = ops[first + j], *y = ops[base + j];
    if (isWeight(x) || isa<PagedAttentionOp>(x)) {
      // Equal signatures already; what they read is compared here.
      if (x->getName() != y->getName())
        return false;
      for (auto [a, b] : llvm::zip(x->getOperands(), y->getOperands()))
        if (failed(check(a, b)))
          return false;
      for (auto [a, b] : llvm::zip(x->getResults(), y->getResults()))
        mark(a, b);
      continue;
    }
    if (!OperationEquivalence::isEquivalentTo(
            x, y, check, mark, OperationEquivalence::IgnoreLocations))
      return false;
  }
  return true;
}

struct SitsOutlineLayersPass
    : sits::impl::SitsOutlineLayersBase<SitsOutlineLayersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    KernelOutliner outliner(module);
    for (func::FuncOp func : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (!func.isPublic() || func.isExternal())
        continue;
      SmallVector<Operation *> ops;
      for (Operation &op : func.getBody().front().without_terminator())
        ops.push_back(&op);
      auto sigs = llvm::map_to_vector<0>(ops, signature);
      outlineRepeats(func, ops, sigs, 0, ops.size(), outliner);
    }
    numFunctions = outliner.numFunctions();
  }

  /// Outlines the largest repeat among `ops[begin, end)`, then searches
  /// what precedes and follows it.
  void outlineRepeats(func::FuncOp func, SmallVectorImpl<Operation *> &ops,
                      SmallVectorImpl<llvm::hash_code> &sigs, unsigned begin,
                      unsigned end, KernelOutliner &outliner) {
    if (end - begin < 2 * uint64_t(minOps))
      return;
    std::optional<Repeat> found =
        findRepeat(ArrayRef(sigs).slice(begin, end - begin), unsigned(minOps));
    if (!found)
      return;
    Repeat repeat = *found;
    repeat.start += begin;
    // A small repeat (two embedding lookups, say) would cost a call
    // boundary, which fusion does not cross, for little compile time.
    if (repeat.coverage() * 10 < ops.size())
      return;
    auto same = [&](const Repeat &candidate) {
      llvm::DenseMap<Operation *, unsigned> position;
      for (unsigned i = begin; i < end; ++i)
        position[ops[i]] = i;
      return llvm::all_of(
          llvm::seq<unsigned>(1, candidate.count),
          [&](unsigned r) { return isSameBlock(ops, candidate, r, position); });
    };
    if (std::optional<Repeat> longer = withFirstBlock(ops, sigs, begin, repeat);
        longer && same(*longer))
      repeat = *longer;
    // Constants stay in the caller: a block of constants alone (weights
    // that canonicalization hoisted together) has nothing to outline.
    unsigned computing = llvm::count_if(
        ArrayRef(ops).slice(repeat.start, repeat.period),
        [](Operation *op) { return !op->hasTrait<OpTrait::ConstantLike>(); });
    if (computing >= minOps && same(repeat))
      outlineBlocks(func, ops, repeat, outliner);
    outlineRepeats(func, ops, sigs, begin, repeat.start, outliner);
    outlineRepeats(func, ops, sigs, repeat.start + repeat.period * repeat.count,
                   end, outliner);
  }

  /// The first of a model's layers often computes what every layer then
  /// reads (the rotary tables reshaped for the heads, say), so it is the
  /// others' block plus those ops. Moves them before it, when they read
  /// nothing of it, and returns `repeat` grown by that block.
  static std::optional<Repeat>
  withFirstBlock(SmallVectorImpl<Operation *> &ops,
                 SmallVectorImpl<llvm::hash_code> &sigs, unsigned begin,
                 const Repeat &repeat) {
    unsigned s = repeat.start, g = repeat.period;
    if (repeat.count < 2 || s < begin + g)
      return std::nullopt;
    llvm::DenseMap<Operation *, unsigned> position;
    unsigned lo = s >= begin + 2 * g ? s - 2 * g : begin;
    for (unsigned i = lo; i < s; ++i)
      position[ops[i]] = i;
    auto definedBefore = [&](Value v) -> std::optional<unsigned> {
      Operation *def = v.getDefiningOp();
      Operation *top =
          def ? ops[s]->getBlock()->findAncestorOpInBlock(*def) : nullptr;
      auto it = top ? position.find(top) : position.end();
      return it == position.end() ? std::nullopt
                                  : std::optional<unsigned>(it->second);
    };
    auto reads = [](Operation *op) {
      llvm::SetVector<Value> values(op->operand_begin(), op->operand_end());
      getUsedValuesDefinedAbove(op->getRegions(), values);
      return values;
    };
    // What the second and third blocks read alike from before the second:
    // values every layer shares, and the ops computing them.
    llvm::SetVector<unsigned> hoisted;
    SmallVector<unsigned> worklist;
    for (unsigned j = 0; j < g; ++j) {
      llvm::SetVector<Value> a = reads(ops[s + j]), b = reads(ops[s + g + j]);
      if (a.size() != b.size())
        return std::nullopt;
      for (auto [x, y] : llvm::zip(a, b))
        if (x == y)
          if (std::optional<unsigned> at = definedBefore(x))
            worklist.push_back(*at);
    }
    while (!worklist.empty()) {
      unsigned at = worklist.pop_back_val();
      if (!hoisted.insert(at))
        continue;
      for (Value v : reads(ops[at]))
        if (std::optional<unsigned> def = definedBefore(v))
          worklist.push_back(*def);
    }
    // The first block: the g ops right before the second but those.
    SmallVector<unsigned> block;
    for (unsigned i = s; i > lo && block.size() < g;)
      if (!hoisted.contains(--i))
        block.push_back(i);
    if (block.size() < g || hoisted.empty())
      return std::nullopt;
    unsigned first = block.back();
    SmallVector<unsigned> moved;
    for (unsigned i = first; i < s; ++i)
      if (hoisted.contains(i))
        moved.push_back(i);
    if (moved.empty())
      return std::nullopt;
    // What they read must be computed before the block, or by each other.
    for (unsigned i : moved)
      for (Value v : reads(ops[i]))
        if (std::optional<unsigned> def = definedBefore(v);
            def && *def >= first && !hoisted.contains(*def))
          return std::nullopt;
    SmallVector<Operation *> order;
    SmallVector<llvm::hash_code> orderSigs;
    for (unsigned i : moved) {
      order.push_back(ops[i]);
      orderSigs.push_back(sigs[i]);
    }
    for (unsigned i : llvm::reverse(block)) {
      order.push_back(ops[i]);
      orderSigs.push_back(sigs[i]);
    }
    for (Operation *op : ArrayRef(order).take_front(moved.size()))
      op->moveBefore(ops[first]);
    llvm::copy(order, ops.begin() + first);
    llvm::copy(orderSigs, sigs.begin() + first);
    if (!llvm::equal(ArrayRef(sigs).slice(s - g, g),
                     ArrayRef(sigs).slice(s, g)))
      return std::nullopt;
    return Repeat{s - g, g, repeat.count + 1};
  }

  void outlineBlocks(func::FuncOp func, ArrayRef<Operation *> ops,
                     const Repeat &repeat, KernelOutliner &outliner) {
    OpBuilder builder(func.getContext());
    // Each paged attention reads its layer from an index constant made
    // before the blocks: an argument of the layer, not cloned into it.
    llvm::DenseSet<Value> layerIndices;
    builder.setInsertionPoint(ops[repeat.start]);
    for (unsigned i = repeat.start,
                  e = repeat.start + repeat.period * repeat.count;
         i < e; ++i)
      if (auto attention = dyn_cast<PagedAttentionOp>(ops[i]);
          attention && attention.getLayer())
        layerIndices.insert(makeLayerOperand(builder, attention));
    auto cloned = [&](Value value) {
      return !layerIndices.contains(value) && isScalarOrSplatConstant(value);
    };
    CapturePolicy policy{cloned};
    // Every block returns what any block's results are read for outside
    // it (the last layer's hidden state only by the final norm, say), so
    // that all have one signature.
    auto blockOp = [&](unsigned r, unsigned j) {
      return ops[repeat.start + r * repeat.period + j];
    };
    llvm::SetVector<std::pair<unsigned, unsigned>> escaping;
    for (unsigned r = 0; r < repeat.count; ++r) {
      Block *body = blockOp(r, 0)->getBlock();
      Operation *first = blockOp(r, 0), *last = blockOp(r, repeat.period - 1);
      for (unsigned j = 0; j < repeat.period; ++j)
        for (OpResult result : blockOp(r, j)->getResults())
          if (llvm::any_of(result.getUsers(), [&](Operation *user) {
                Operation *top = body->findAncestorOpInBlock(*user);
                return !top || last->isBeforeInBlock(top) ||
                       top->isBeforeInBlock(first);
              }))
            escaping.insert({j, result.getResultNumber()});
    }
    std::string name = (func.getSymName() + "_layer").str();
    func::FuncOp callee;
    for (unsigned r = 0; r < repeat.count; ++r) {
      SmallVector<Operation *> group;
      // Constants stay where they are: weights are passed in, the others
      // cloned into the layer wherever it reads them (never results).
      for (unsigned j = 0; j < repeat.period; ++j)
        if (!blockOp(r, j)->hasTrait<OpTrait::ConstantLike>())
          group.push_back(blockOp(r, j));
      llvm::DenseSet<Value> returned;
      for (auto [j, result] : escaping)
        returned.insert(blockOp(r, j)->getResult(result));
      func::CallOp call = outliner.outline(group, name, policy, returned);
      if (!call)
        continue;
      ++numLayers;
      auto target = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (target != callee) {
        callee = target;
        markLayer(callee);
      }
    }
  }

  /// Gives `attention` its layer as an index operand, made at the builder's
  /// insertion point; returns it.
  static Value makeLayerOperand(OpBuilder &builder,
                                PagedAttentionOp attention) {
    Value layer = arith::ConstantIndexOp::create(
        builder, attention.getLoc(), int64_t(*attention.getLayer()));
    attention.getLayerIndexMutable().assign(layer);
    attention.removeLayerAttr();
    return layer;
  }

  /// Marks `func` a layer, and each of its results that is a pool its paged
  /// attention wrote into an argument as that argument updated.
  static void markLayer(func::FuncOp func) {
    func->setAttr(kLayerAttr, UnitAttr::get(func.getContext()));
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      auto attention = value.getDefiningOp<PagedAttentionOp>();
      if (!attention || value != attention.getUpdatedPool())
        continue;
      auto arg = dyn_cast<BlockArgument>(attention.getPool());
      if (arg && arg.getOwner() == &func.getBody().front())
        func.setResultAttr(
            i, kUpdatesAttr,
            IntegerAttr::get(IntegerType::get(func.getContext(), 64),
                             arg.getArgNumber()));
    }
  }
};

} // namespace
