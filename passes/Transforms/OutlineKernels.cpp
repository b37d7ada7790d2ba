//===- OutlineKernels.cpp - One function per distinct loop nest -----------===//
//
// A model repeats itself: every layer of a transformer is the same loop
// nests on other weights and caches. Outlining each loop nest with what it
// reads as arguments makes the repetitions identical functions, and keeping
// one of each makes everything downstream (lowering, LLVM) proportional to
// the distinct kernels rather than to the depth of the model.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSOUTLINEKERNELS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

namespace {

/// Top-level ops worth a function of their own: the loop nests tiling made,
/// linalg ops left on buffers, and copies between buffers (strided ones
/// become loop nests; a decoder makes several per layer for its caches).
/// Ops yielding buffers stay: returning a buffer from a function would move
/// its ownership.
bool isKernel(Operation *op) {
  if (!isa<scf::ForallOp, scf::ForOp, scf::ParallelOp, scf::WhileOp,
           linalg::LinalgOp, memref::CopyOp>(op))
    return false;
  return llvm::none_of(op->getResultTypes(),
                       [](Type t) { return isa<BaseMemRefType>(t); });
}

/// Values cloned into the kernel instead of passed: constants other than
/// buffers (a loop bound or a vector splat in the body lets LLVM fold it;
/// as an argument it would also make equal kernels differ).
bool isCloned(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def || isa<BaseMemRefType>(value.getType()))
    return false;
  return isa<ub::PoisonOp>(def) || def->hasTrait<OpTrait::ConstantLike>();
}

/// Hashes a function's signature and the structure of its body (op names,
/// attributes, types), not the identity of its values, nor the static
/// offsets of subviews: kernels that may become one hash equal.
llvm::hash_code hashKernel(func::FuncOp func) {
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

/// A static subview offset that differs between kernels which are
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

/// One distinct kernel: the function every equal kernel calls, the first
/// kernel's body as it was outlined (what later kernels are compared with),
/// the offsets passed in as trailing arguments, and the calls.
struct DistinctKernel {
  func::FuncOp callee;
  OwningOpRef<func::FuncOp> pattern;
  SmallVector<OffsetSite> sites;
  SmallVector<func::CallOp> calls;
};

struct SitsOutlineKernelsPass
    : sits::impl::SitsOutlineKernelsBase<SitsOutlineKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    llvm::DenseMap<llvm::hash_code,
                   SmallVector<std::unique_ptr<DistinctKernel>, 1>>
        distinct;

    SmallVector<func::FuncOp> entries;
    for (auto func : module.getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal())
        entries.push_back(func);
    for (func::FuncOp func : entries) {
      SmallVector<Operation *> kernels;
      for (Operation &op : func.getBody().getOps())
        if (isKernel(&op))
          kernels.push_back(&op);
      unsigned count = 0;
      for (Operation *kernel : kernels) {
        std::string name =
            (func.getSymName() + "_kernel_" + Twine(count++)).str();
        outline(kernel, name, symbols, distinct);
      }
    }
  }

  /// Replaces `kernel` by a call to a function with its body: an existing
  /// one when an equal kernel was outlined before.
  void outline(Operation *kernel, StringRef name, SymbolTable &symbols,
               llvm::DenseMap<llvm::hash_code,
                              SmallVector<std::unique_ptr<DistinctKernel>, 1>>
                   &distinct) {
    MLIRContext *ctx = kernel->getContext();
    // Globals read inside become arguments like any other buffer: small
    // per-layer constants (norm weights) stay globals of their own.
    SmallVector<memref::GetGlobalOp> globals;
    kernel->walk([&](memref::GetGlobalOp get) { globals.push_back(get); });
    for (memref::GetGlobalOp get : globals)
      get->moveBefore(kernel);

    llvm::SetVector<Value> captured;
    for (Value operand : kernel->getOperands())
      captured.insert(operand);
    getUsedValuesDefinedAbove(kernel->getRegions(), captured);

    SmallVector<Value> arguments;
    SmallVector<Type> argumentTypes;
    for (Value value : captured)
      if (!isCloned(value)) {
        arguments.push_back(value);
        argumentTypes.push_back(value.getType());
      }

    OpBuilder builder(ctx);
    OwningOpRef<func::FuncOp> func = func::FuncOp::create(
        builder, kernel->getLoc(), name,
        FunctionType::get(ctx, argumentTypes, kernel->getResultTypes()));
    func->setPrivate();
    Block *entry = func->addEntryBlock();
    builder.setInsertionPointToStart(entry);
    IRMapping mapping;
    unsigned next = 0;
    for (Value value : captured) {
      if (isCloned(value))
        builder.clone(*value.getDefiningOp(), mapping);
      else
        mapping.map(value, entry->getArgument(next++));
    }
    Operation *body = builder.clone(*kernel, mapping);
    func::ReturnOp::create(builder, kernel->getLoc(), body->getResults());

    // The distinct kernel this one is, up to offsets passed in.
    auto &bucket = distinct[hashKernel(*func)];
    DistinctKernel *same = nullptr;
    SmallVector<OffsetSite> sites;
    for (auto &candidate : bucket) {
      sites.clear();
      if (matchUpToOffsets(*candidate->pattern, *func, sites)) {
        same = candidate.get();
        break;
      }
    }
    if (!same) {
      auto added = std::make_unique<DistinctKernel>();
      added->callee = cast<func::FuncOp>(func->getOperation()->clone());
      symbols.insert(added->callee);
      added->pattern = std::move(func);
      same = bucket.emplace_back(std::move(added)).get();
      ++numFunctions;
    } else {
      for (OffsetSite site : sites)
        if (!llvm::is_contained(same->sites, site))
          addOffsetArgument(*same, site);
    }

    // The call passes this kernel's own offsets (its body, or the pattern's
    // when it became the pattern).
    func::FuncOp own = func ? *func : *same->pattern;
    builder.setInsertionPoint(kernel);
    for (OffsetSite site : same->sites)
      arguments.push_back(arith::ConstantIndexOp::create(
          builder, kernel->getLoc(), staticOffset(own, site)));
    auto call = func::CallOp::create(builder, kernel->getLoc(), same->callee,
                                     arguments);
    same->calls.push_back(call);
    kernel->replaceAllUsesWith(call.getResults());
    kernel->erase();
    ++numKernels;
  }

  /// Passes the offset at `site` to `kernel.callee` as a new trailing
  /// argument; the calls so far pass the pattern's value, which they had.
  void addOffsetArgument(DistinctKernel &kernel, OffsetSite site) {
    func::FuncOp callee = kernel.callee;
    Location loc = callee.getLoc();
    IndexType index = IndexType::get(callee.getContext());
    if (failed(callee.insertArgument(callee.getNumArguments(), index,
                                     DictionaryAttr(), loc)))
      return signalPassFailure();
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

    int64_t value = staticOffset(*kernel.pattern, site);
    for (func::CallOp call : kernel.calls) {
      builder.setInsertionPoint(call);
      Value constant =
          arith::ConstantIndexOp::create(builder, call.getLoc(), value);
      call->insertOperands(call->getNumOperands(), constant);
    }
    kernel.sites.push_back(site);
  }
};

} // namespace
