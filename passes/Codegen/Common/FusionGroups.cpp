//===- FusionGroups.cpp - Fusion groups and tile-size helpers -------------===//

#include "passes/Codegen/Common/FusionGroups.h"
#include "passes/Codegen/Common/Ukernels.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Interfaces/TilingInterface.h"

using namespace mlir;
using namespace mlir::sits;

bool codegen::isSafelyTileable(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp)
    return isa<TilingInterface>(op);
  // A runtime kernel computes the whole op (it splits it across threads).
  if (op->hasAttr(kUkernelAttr))
    return false;
  return llvm::all_of(linalgOp.getIndexingMapsArray(), [](AffineMap map) {
    return llvm::all_of(map.getResults(), [](AffineExpr e) {
      bool linear = true;
      e.walk([&](AffineExpr sub) {
        auto kind = sub.getKind();
        if (kind == AffineExprKind::Mod || kind == AffineExprKind::FloorDiv ||
            kind == AffineExprKind::CeilDiv)
          linear = false;
      });
      return linear;
    });
  });
}

bool codegen::isContraction(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalg::isaContractionOpInterface(linalgOp);
}

bool codegen::isCheapToRecompute(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp)
    return isa<tensor::PadOp>(op);
  return linalg::isElementwise(linalgOp) ||
         isa<linalg::FillOp, linalg::BroadcastOp, linalg::TransposeOp,
             linalg::CopyOp>(op);
}

bool codegen::isLinearPartition(AffineMap map) {
  SmallVector<int> uses(map.getNumDims(), 0);
  for (AffineExpr e : map.getResults()) {
    bool linear = true;
    e.walk([&](AffineExpr sub) {
      if (auto dim = dyn_cast<AffineDimExpr>(sub))
        ++uses[dim.getPosition()];
      else if (sub.getKind() != AffineExprKind::Add &&
               sub.getKind() != AffineExprKind::Mul &&
               !isa<AffineConstantExpr>(sub))
        linear = false;
    });
    if (!linear || !e.isPureAffine())
      return false;
  }
  return llvm::all_of(uses, [](int n) { return n == 1; });
}

std::pair<linalg::LinalgOp, AffineMap>
codegen::findAnchorContraction(linalg::LinalgOp root) {
  if (isContraction(root))
    return {root, AffineMap::getMultiDimIdentityMap(root.getNumLoops(),
                                                    root.getContext())};
  if (root.getNumReductionLoops() != 0)
    return {};
  for (OpOperand *input : root.getDpsInputOperands()) {
    auto producer = input->get().getDefiningOp<linalg::LinalgOp>();
    AffineMap map = root.getMatchingIndexingMap(input);
    if (producer && isContraction(producer) && isLinearPartition(map))
      return {producer, map};
  }
  return {};
}

bool codegen::dependsOn(Value value, Value iv, int depth) {
  if (value == iv)
    return true;
  Operation *def = value.getDefiningOp();
  if (!def || depth == 0)
    return false;
  return llvm::any_of(def->getOperands(), [&](Value operand) {
    return dependsOn(operand, iv, depth - 1);
  });
}

bool codegen::isDisjointPerTile(tensor::ExtractSliceOp slice) {
  auto forall = slice->getParentOfType<scf::ForallOp>();
  if (!forall)
    return true;
  ArrayRef<int64_t> lbs = forall.getStaticLowerBound();
  ArrayRef<int64_t> ubs = forall.getStaticUpperBound();
  ArrayRef<int64_t> steps = forall.getStaticStep();
  for (auto [i, iv] : llvm::enumerate(forall.getInductionVars())) {
    bool isStatic = !ShapedType::isDynamic(lbs[i]) &&
                    !ShapedType::isDynamic(ubs[i]) &&
                    !ShapedType::isDynamic(steps[i]);
    if (isStatic && ubs[i] - lbs[i] <= steps[i])
      continue; // A single iteration: nothing is repeated.
    bool used = llvm::any_of(slice.getOffsets(), [&](Value offset) {
      return dependsOn(offset, iv);
    });
    if (!used)
      return false;
  }
  return true;
}

/// Grows `root`'s group to a fixpoint: producers in its block whose every
/// use is by a group op, through an edge `joins` allows.
static llvm::SetVector<Operation *>
growGroup(linalg::LinalgOp root,
          llvm::function_ref<bool(Operation *, OpOperand &)> joins) {
  llvm::SetVector<Operation *> group;
  group.insert(root);
  bool changed = true;
  while (changed) {
    changed = false;
    for (unsigned i = 0; i < group.size(); ++i) {
      for (Value operand : group[i]->getOperands()) {
        Operation *producer = operand.getDefiningOp();
        if (!producer || group.contains(producer) ||
            !codegen::isSafelyTileable(producer) ||
            producer->getBlock() != root->getBlock())
          continue;
        bool exclusive = llvm::all_of(producer->getUses(), [&](OpOperand &u) {
          return group.contains(u.getOwner()) && joins(producer, u);
        });
        if (exclusive) {
          group.insert(producer);
          changed = true;
        }
      }
    }
  }
  return group;
}

llvm::SetVector<Operation *>
codegen::computeFusionGroup(linalg::LinalgOp root) {
  return growGroup(root, [](Operation *, OpOperand &) { return true; });
}

bool codegen::isDequantizing(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalg::isElementwise(linalgOp) &&
         llvm::any_of(linalgOp.getDpsInputs(),
                      [](Value v) {
                        return isa<IntegerType>(
                            getElementTypeOrSelf(v.getType()));
                      }) &&
         isa<FloatType>(getElementTypeOrSelf(linalgOp->getResult(0)));
}

bool codegen::isPatchGather(Operation *op) {
  auto generic = dyn_cast<linalg::GenericOp>(op);
  return generic && generic.getNumDpsInputs() == 0 &&
         generic.getNumReductionLoops() == 0 &&
         llvm::any_of(generic.getBody()->getOperations(),
                      [](Operation &op) { return isa<tensor::ExtractOp>(op); });
}

llvm::SetVector<Operation *>
codegen::computeDispatchGroup(linalg::LinalgOp root) {
  return growGroup(root, [](Operation *producer, OpOperand &use) {
    return !isContraction(use.getOwner()) || isa<linalg::FillOp>(producer) ||
           isDequantizing(producer) || isPatchGather(producer);
  });
}

SmallVector<OpFoldResult> codegen::asFoldResults(MLIRContext *ctx,
                                                 ArrayRef<int64_t> sizes) {
  Builder b(ctx);
  return llvm::map_to_vector(
      sizes, [&](int64_t s) -> OpFoldResult { return b.getIndexAttr(s); });
}
