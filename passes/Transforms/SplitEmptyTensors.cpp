//===- SplitEmptyTensors.cpp - One tensor.empty per use -------------------===//
//
// CSE merges equal tensor.empty ops, so one value ends up as the
// destination of every same-shaped op of every layer. One-Shot Bufferize
// analyses all of them as writes into one buffer, at a cost quadratic in
// their number; a tensor.empty per use keeps its alias sets per op. An
// insert over the whole of an empty tensor is a reshape of its source.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"
#include "mlir/IR/Builders.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSSPLITEMPTYTENSORS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;

namespace {

/// `insert` writes its source over the whole of a tensor.empty (a padded
/// image given back its unit batch dimension): the result is the source
/// itself, reshaped. Bufferized as written, it would be a new buffer and a
/// copy of the source into it.
bool replaceWholeInsertIntoEmpty(OpBuilder &b, tensor::InsertSliceOp insert) {
  RankedTensorType source = insert.getSourceType();
  RankedTensorType dest = insert.getDestType();
  if (!insert.getDest().getDefiningOp<tensor::EmptyOp>() ||
      !dest.hasStaticShape() ||
      !llvm::all_of(insert.getMixedOffsets(), isZeroInteger) ||
      !llvm::all_of(insert.getMixedStrides(), isOneInteger) ||
      !llvm::equal(insert.getStaticSizes(), dest.getShape()))
    return false;
  Value whole = insert.getSource();
  if (source != dest) {
    std::optional<SmallVector<ReassociationIndices>> groups =
        getReassociationIndicesForReshape(source, dest);
    if (!groups)
      return false;
    b.setInsertionPoint(insert);
    whole =
        tensor::ExpandShapeOp::create(b, insert.getLoc(), dest, whole, *groups);
  }
  insert.replaceAllUsesWith(whole);
  insert.erase();
  return true;
}

struct SitsSplitEmptyTensorsPass
    : sits::impl::SitsSplitEmptyTensorsBase<SitsSplitEmptyTensorsPass> {
  void runOnOperation() override {
    {
      SmallVector<tensor::InsertSliceOp> inserts;
      getOperation()->walk(
          [&](tensor::InsertSliceOp op) { inserts.push_back(op); });
      OpBuilder b(&getContext());
      for (tensor::InsertSliceOp insert : inserts)
        numWholeInserts += replaceWholeInsertIntoEmpty(b, insert);
    }
    SmallVector<tensor::EmptyOp> empties;
    getOperation()->walk([&](tensor::EmptyOp op) {
      if (!op->getResult(0).hasOneUse() && !op->use_empty())
        empties.push_back(op);
    });
    OpBuilder b(&getContext());
    for (tensor::EmptyOp empty : empties) {
      // Users in the empty's block get a clone right before them (its
      // dynamic sizes dominate them); users in nested regions keep the
      // original, which a clone in a loop body would allocate once per
      // iteration.
      SmallVector<OpOperand *> uses;
      for (OpOperand &use : empty->getResult(0).getUses())
        if (use.getOwner()->getBlock() == empty->getBlock())
          uses.push_back(&use);
      if (uses.size() == size_t(std::distance(empty->getUses().begin(),
                                              empty->getUses().end())))
        uses.pop_back(); // one use keeps the original
      for (OpOperand *use : uses) {
        b.setInsertionPoint(use->getOwner());
        use->set(b.clone(*empty)->getResult(0));
        ++numSplit;
      }
    }
  }
};

} // namespace
