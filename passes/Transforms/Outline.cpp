//===- Outline.cpp - Ops into functions, one per distinct body ------------===//

#include "passes/Transforms/Outline.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

using namespace mlir;
using namespace mlir::sits;

namespace {

/// Hashes a function's signature and the structure of its body (op names,
/// attributes, types), not the identity of its values, nor the static
/// offsets of subviews: functions that may become one hash equal.
llvm::hash_code hashBody(func::FuncOp func) {
  llvm::hash_code hash = hash_value(func.getFunctionType());
  func.getBody().walk([&](Operation *op) {
    if (auto subview = dyn_cast<memref::SubViewOp>(op)) {
      hash = llvm::hash_combine(
          hash, op->getName(), subview.getType(), subview.getSourceType(),
          subview.getStaticSizes(), subview.getStaticStrides());
      return;
    }
    hash =
        llvm::hash_combine(hash, OperationEquivalence::computeHash(
                                     op, OperationEquivalence::ignoreHashValue,
                                     OperationEquivalence::ignoreHashValue,
                                     OperationEquivalence::IgnoreLocations));
  });
  return hash;
}

/// The ops of a function body in pre-order: an op's operands are defined
/// before it in this order (structured control flow, one block a region).
SmallVector<Operation *> preorder(func::FuncOp func) {
  SmallVector<Operation *> ops;
  func.getBody().walk<WalkOrder::PreOrder>(
      [&](Operation *op) { ops.push_back(op); });
  return ops;
}

/// Equal ops but for their operands and regions' contents.
bool isShallowEqual(Operation *a, Operation *b) {
  if (a->getName() != b->getName() ||
      a->getNumOperands() != b->getNumOperands() ||
      a->getResultTypes() != b->getResultTypes() ||
      a->getOperandTypes() != b->getOperandTypes() ||
      a->getRawDictionaryAttrs() != b->getRawDictionaryAttrs() ||
      a->getPropertiesAsAttribute() != b->getPropertiesAsAttribute() ||
      a->getNumRegions() != b->getNumRegions())
    return false;
  for (auto [ra, rb] : llvm::zip(a->getRegions(), b->getRegions())) {
    if (!llvm::hasSingleElement(ra) || !llvm::hasSingleElement(rb))
      return ra.empty() && rb.empty();
    if (ra.front().getArgumentTypes() != rb.front().getArgumentTypes())
      return false;
  }
  return true;
}

/// A static subview offset that differs between functions which are
/// otherwise one: the layer of a cache shared by all layers.
struct OffsetSite {
  unsigned op;  // position in the pre-order of the body
  unsigned dim; // offset index
  bool operator==(const OffsetSite &o) const {
    return op == o.op && dim == o.dim;
  }
};

/// Whether `b` is `a` but for static subview offsets whose result layouts
/// have a dynamic offset already (so that passing them in changes no
/// type); fills `sites` with those offsets.
bool matchUpToOffsets(func::FuncOp a, func::FuncOp b,
                      SmallVectorImpl<OffsetSite> &sites) {
  if (a.getFunctionType() != b.getFunctionType())
    return false;
  SmallVector<Operation *> opsA = preorder(a), opsB = preorder(b);
  if (opsA.size() != opsB.size())
    return false;
  llvm::DenseMap<Value, Value> values;
  for (auto [x, y] : llvm::zip(a.getArguments(), b.getArguments()))
    values[x] = y;
  for (unsigned i = 0; i < opsA.size(); ++i) {
    Operation *x = opsA[i], *y = opsB[i];
    auto sx = dyn_cast<memref::SubViewOp>(x);
    auto sy = dyn_cast<memref::SubViewOp>(y);
    if (sx && sy && sx.getStaticOffsets() != sy.getStaticOffsets()) {
      auto layout = dyn_cast<StridedLayoutAttr>(sx.getType().getLayout());
      if (!layout || !ShapedType::isDynamic(layout.getOffset()) ||
          sx.getType() != sy.getType() ||
          sx.getStaticSizes() != sy.getStaticSizes() ||
          sx.getStaticStrides() != sy.getStaticStrides() ||
          sx->getNumOperands() != sy->getNumOperands())
        return false;
      for (auto [d, pair] : llvm::enumerate(
               llvm::zip(sx.getStaticOffsets(), sy.getStaticOffsets()))) {
        auto [ox, oy] = pair;
        if (ox == oy)
          continue;
        if (ShapedType::isDynamic(ox) || ShapedType::isDynamic(oy))
          return false;
        sites.push_back({i, unsigned(d)});
      }
    } else if (!isShallowEqual(x, y)) {
      return false;
    }
    for (auto [vx, vy] : llvm::zip(x->getOperands(), y->getOperands()))
      if (values.lookup(vx) != vy)
        return false;
    for (auto [vx, vy] : llvm::zip(x->getResults(), y->getResults()))
      values[vx] = vy;
    for (auto [rx, ry] : llvm::zip(x->getRegions(), y->getRegions()))
      if (!rx.empty())
        for (auto [ax, ay] :
             llvm::zip(rx.front().getArguments(), ry.front().getArguments()))
          values[ax] = ay;
  }
  return true;
}

int64_t staticOffset(func::FuncOp func, OffsetSite site) {
  return cast<memref::SubViewOp>(preorder(func)[site.op])
      .getStaticOffsets()[site.dim];
}

} // namespace

/// One distinct function: the one every equal group calls, the first
/// group's body as it was outlined (what later groups are compared with),
/// the offsets passed in as trailing arguments, and the calls.
struct KernelOutliner::Distinct {
  func::FuncOp callee;
  OwningOpRef<func::FuncOp> pattern;
  SmallVector<OffsetSite> sites;
  SmallVector<func::CallOp> calls;

  /// Passes the offset at `site` to `callee` as a new trailing argument;
  /// the calls so far pass the pattern's value, which they had.
  void addOffsetArgument(OffsetSite site) {
    Location loc = callee.getLoc();
    IndexType index = IndexType::get(callee.getContext());
    // Appending an argument to a function with one block cannot fail.
    (void)callee.insertArgument(callee.getNumArguments(), index,
                                DictionaryAttr(), loc);
    Value offset = callee.getArguments().back();

    auto subview = cast<memref::SubViewOp>(preorder(callee)[site.op]);
    SmallVector<OpFoldResult> offsets = subview.getMixedOffsets();
    offsets[site.dim] = offset;
    OpBuilder builder(subview);
    auto replacement = memref::SubViewOp::create(
        builder, subview.getLoc(), subview.getType(), subview.getSource(),
        offsets, subview.getMixedSizes(), subview.getMixedStrides());
    subview.replaceAllUsesWith(replacement.getResult());
    subview.erase();

    int64_t value = staticOffset(*pattern, site);
    for (func::CallOp call : calls) {
      builder.setInsertionPoint(call);
      Value constant =
          arith::ConstantIndexOp::create(builder, call.getLoc(), value);
      call->insertOperands(call->getNumOperands(), constant);
    }
    sites.push_back(site);
  }
};

bool mlir::sits::isScalarOrSplatConstant(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def || !def->hasTrait<OpTrait::ConstantLike>())
    return false;
  if (!isa<TensorType>(value.getType()))
    return true;
  Attribute attr;
  auto elements = matchPattern(value, m_Constant(&attr))
                      ? dyn_cast<DenseElementsAttr>(attr)
                      : DenseElementsAttr();
  return elements && elements.isSplat();
}

SmallVector<func::FuncOp> mlir::sits::getOutliningRoots(ModuleOp module) {
  SmallVector<func::FuncOp> functions;
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isExternal() && (func.isPublic() || func->hasAttr(kLayerAttr)))
      functions.push_back(func);
  return functions;
}

KernelOutliner::KernelOutliner(ModuleOp module) : symbols(module) {}
KernelOutliner::~KernelOutliner() = default;

func::CallOp KernelOutliner::outline(ArrayRef<Operation *> ops, StringRef name,
                                     const CapturePolicy &policy,
                                     const llvm::DenseSet<Value> &returned) {
  Operation *last = ops.back();
  llvm::SmallPtrSet<Operation *, 8> members(ops.begin(), ops.end());
  SmallVector<Value> results;
  for (Operation *op : ops)
    for (Value result : op->getResults()) {
      bool escapes = returned.contains(result);
      for (Operation *user : result.getUsers()) {
        Operation *outside = last->getBlock()->findAncestorOpInBlock(*user);
        if (outside && members.contains(outside))
          continue;
        if (!outside || outside->isBeforeInBlock(last))
          return nullptr;
        escapes = true;
      }
      if (escapes)
        results.push_back(result);
    }

  MLIRContext *ctx = last->getContext();
  Location loc = last->getLoc();
  OpBuilder builder(ctx);
  OwningOpRef<func::FuncOp> func =
      func::FuncOp::create(builder, loc, name, FunctionType::get(ctx, {}, {}));
  func->setPrivate();
  Block *entry = func->addEntryBlock();
  builder.setInsertionPointToStart(entry);

  // Captured values in first-use order; cloned ones bring what they read.
  IRMapping mapping;
  SmallVector<Value> captured;
  std::function<void(Value)> resolve;
  // Clones `op` after what it reads, operands and values its regions use.
  auto cloneAfterReads = [&](Operation *op) {
    for (Value operand : op->getOperands())
      resolve(operand);
    llvm::SetVector<Value> above;
    getUsedValuesDefinedAbove(op->getRegions(), above);
    for (Value v : above)
      resolve(v);
    builder.clone(*op, mapping);
  };
  resolve = [&](Value value) {
    if (mapping.contains(value))
      return;
    Operation *def = value.getDefiningOp();
    if (def && policy.clone && policy.clone(value))
      return cloneAfterReads(def);
    mapping.map(value, entry->addArgument(value.getType(), value.getLoc()));
    captured.push_back(value);
  };
  for (Operation *op : ops)
    cloneAfterReads(op);
  SmallVector<Value> returnedValues =
      llvm::map_to_vector(results, [&](Value v) { return mapping.lookup(v); });
  func::ReturnOp::create(builder, loc, returnedValues);
  func->setType(FunctionType::get(ctx, entry->getArgumentTypes(),
                                  ValueRange(returnedValues).getTypes()));
  // A tensor result written into an argument (through destination-style
  // ops) is that argument updated: once buffers, the caller's own.
  llvm::SmallDenseSet<unsigned> updated;
  for (auto [i, value] : llvm::enumerate(returnedValues)) {
    if (!isa<TensorType>(value.getType()))
      continue;
    Value source = value;
    while (auto dps = source.getDefiningOp<DestinationStyleOpInterface>())
      source = dps.getTiedOpOperand(cast<OpResult>(source))->get();
    auto arg = dyn_cast<BlockArgument>(source);
    if (arg && arg.getOwner() == entry &&
        updated.insert(arg.getArgNumber()).second)
      func->setResultAttr(i, kUpdatesAttr,
                          builder.getI64IntegerAttr(arg.getArgNumber()));
  }

  // The distinct function this one is, up to offsets passed in.
  auto &bucket = distinct[hashBody(*func)];
  Distinct *same = nullptr;
  SmallVector<OffsetSite> sites;
  for (auto &candidate : bucket) {
    sites.clear();
    if (matchUpToOffsets(*candidate->pattern, *func, sites)) {
      same = candidate.get();
      break;
    }
  }
  if (!same) {
    auto added = std::make_unique<Distinct>();
    added->callee = cast<func::FuncOp>(func->getOperation()->clone());
    symbols.insert(added->callee);
    added->pattern = std::move(func);
    same = bucket.emplace_back(std::move(added)).get();
    ++functions;
  } else {
    for (OffsetSite site : sites)
      if (!llvm::is_contained(same->sites, site))
        same->addOffsetArgument(site);
  }

  // The call passes this group's own offsets (its body, or the pattern's
  // when it became the pattern).
  func::FuncOp own = func ? *func : *same->pattern;
  builder.setInsertionPoint(last);
  SmallVector<Value> arguments(captured);
  for (OffsetSite site : same->sites)
    arguments.push_back(
        arith::ConstantIndexOp::create(builder, loc, staticOffset(own, site)));
  auto call = func::CallOp::create(builder, loc, same->callee, arguments);
  same->calls.push_back(call);
  for (auto [result, replacement] : llvm::zip(results, call.getResults()))
    result.replaceAllUsesWith(replacement);
  for (Operation *op : llvm::reverse(ops))
    op->erase();
  return call;
}
