//===- OutlineDispatches.cpp - One function per distinct fusion group -----===//
//
// Tiling, vectorization and bufferization cost time per op they see; a
// transformer shows them every layer's ops though they are the same ops on
// other weights. Before tiling, each fusion group (the ops tiling will fuse
// into one loop nest) moves into a function of its own, weights and
// activations as arguments and its destination passed in, so equal groups
// are one function and everything after sees each distinct group once.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/Common/FusionGroups.h"
#include "passes/Transforms/Outline.h"

#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUOUTLINEDISPATCHES
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

/// An empty tensor, or a reshape or cast of one.
bool isEmptyLike(Value value) {
  Operation *def = value.getDefiningOp();
  if (isa_and_present<tensor::ExpandShapeOp, tensor::CollapseShapeOp,
                      tensor::CastOp>(def))
    return isEmptyLike(def->getOperand(0));
  return isa_and_present<tensor::EmptyOp>(def);
}

/// The empty tensors made to be passed to a dispatch as its destination.
using Destinations = llvm::DenseSet<Operation *>;

/// Values cloned into a dispatch rather than passed in:
/// - scalar and splat constants (their values let the kernel fold; as
///   arguments they would also make equal groups differ), while weights
///   and other tensor constants are arguments;
/// - views (slices, reshapes, casts), so that every tensor argument is a
///   whole buffer: once buffers, a function argument has the identity
///   layout, which a slice's strided buffer does not;
/// - fills of empty tensors, and empty tensors but `destinations`: scratch
///   the group allocates for itself.
bool isClonedIntoDispatch(Value value, const Destinations &destinations) {
  Operation *def = value.getDefiningOp();
  if (!def)
    return false;
  if (isa<ub::PoisonOp>(def))
    return true;
  if (def->hasTrait<OpTrait::ConstantLike>())
    return isScalarOrSplatConstant(value);
  if (isa<tensor::ExtractSliceOp, tensor::ExpandShapeOp,
          tensor::CollapseShapeOp, tensor::CastOp>(def))
    return true;
  if (auto fill = dyn_cast<linalg::FillOp>(def))
    return isEmptyLike(fill.getOutputs()[0]);
  return isa<tensor::EmptyOp>(def) && !destinations.contains(def);
}

/// Gives `root` destinations of its own, passed in: an empty tensor used by
/// nothing else (added to `destinations`), filled when the destination was
/// a fill of an empty tensor, a copy when it was another value cloned into
/// the dispatch (a view, a constant). Shared with the group's other ops
/// (CSE merges equal empty tensors), the argument would be their scratch
/// too, whose contents bufferization must then preserve by copies; and a
/// result written into something cloned would be a buffer the function
/// allocates and returns. Returns the copies made, which join the group.
SmallVector<Operation *> giveOwnDestinations(OpBuilder &builder,
                                             linalg::LinalgOp root,
                                             Destinations &destinations) {
  SmallVector<Operation *> copies;
  builder.setInsertionPoint(root);
  Location loc = root.getLoc();
  for (OpOperand &init : root.getDpsInitsMutable()) {
    Value value = init.get();
    if (!isClonedIntoDispatch(value, destinations))
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    // A fill's extents are its destination's: asked of the fill's result,
    // they would keep the fill alive, to be outlined as a dispatch of its
    // own that computes what nothing reads.
    auto fill = value.getDefiningOp<linalg::FillOp>();
    Value shaped = fill ? fill.getOutputs()[0] : value;
    auto own = tensor::EmptyOp::create(
        builder, loc, tensor::getMixedSizes(builder, loc, shaped),
        type.getElementType());
    destinations.insert(own);
    Value destination = own.getResult();
    if (destination.getType() != type)
      destination = tensor::CastOp::create(builder, loc, type, destination);
    if (fill) {
      destination =
          linalg::FillOp::create(builder, loc, fill.getInputs()[0], destination)
              .getResult(0);
    } else if (!isEmptyLike(value)) {
      auto copy = linalg::CopyOp::create(builder, loc, value, destination);
      copies.push_back(copy);
      destination = copy.getResult(0);
    }
    init.set(destination);
  }
  return copies;
}

struct SitsCpuOutlineDispatchesPass
    : sits::cpu::impl::SitsCpuOutlineDispatchesBase<
          SitsCpuOutlineDispatchesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    KernelOutliner outliner(module);
    for (func::FuncOp func : getOutliningRoots(module))
      outlineGroups(func, outliner);
    numFunctions = outliner.numFunctions();
  }

  /// Forms groups as tiling does, from the last op up: each root with the
  /// producers only it uses (see codegen::computeDispatchGroup).
  void outlineGroups(func::FuncOp func, KernelOutliner &outliner) {
    Block &body = func.getBody().front();
    SmallVector<Operation *> ops;
    llvm::DenseMap<Operation *, unsigned> position;
    for (Operation &op : body) {
      position[&op] = ops.size();
      ops.push_back(&op);
    }
    // Outlined ops are erased: their entries are skipped, never read.
    llvm::DenseSet<Operation *> done;
    OpBuilder builder(func.getContext());
    Destinations destinations;
    auto cloned = [&](Value value) {
      return isClonedIntoDispatch(value, destinations);
    };
    unsigned count = 0;
    for (Operation *op : llvm::reverse(ops)) {
      if (done.contains(op))
        continue;
      auto root = dyn_cast<linalg::LinalgOp>(op);
      if (!root || !root.hasPureTensorSemantics())
        continue;
      // A fill every user of which cloned it.
      if (isOpTriviallyDead(op)) {
        done.insert(op);
        op->erase();
        continue;
      }
      llvm::SetVector<Operation *> group = codegen::computeDispatchGroup(root);
      // Fills of empty tensors are cloned wherever they are read, whether or
      // not other groups read them too: equal groups then have equal bodies
      // whichever group was outlined first.
      SmallVector<Operation *> members;
      for (Operation *member : group)
        if (member == op || !isa<linalg::FillOp>(member) ||
            !cloned(member->getResult(0)))
          members.push_back(member);
      llvm::sort(members, [&](Operation *a, Operation *b) {
        return position.lookup(a) < position.lookup(b);
      });
      std::string name =
          (func.getSymName() + "_dispatch_" + Twine(count++)).str();
      for (Operation *member : members)
        done.insert(member);
      SmallVector<Operation *> copies =
          giveOwnDestinations(builder, root, destinations);
      members.insert(members.end() - 1, copies.begin(), copies.end());
      if (outliner.outline(members, name, CapturePolicy{cloned}))
        ++numDispatches;
    }
    // Empty tensors every reader of which cloned them.
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
      if (isa<tensor::EmptyOp>(op) && op.use_empty())
        op.erase();
  }
};

} // namespace
