//===- SplitEmptyTensors.cpp - One tensor.empty per use -------------------===//
//
// CSE merges equal tensor.empty ops, so one value ends up as the
// destination of every same-shaped op of every layer. One-Shot Bufferize
// analyses all of them as writes into one buffer, at a cost quadratic in
// their number; a tensor.empty per use keeps its alias sets per op.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSSPLITEMPTYTENSORS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;

namespace {

struct SitsSplitEmptyTensorsPass
    : sits::impl::SitsSplitEmptyTensorsBase<SitsSplitEmptyTensorsPass> {
  void runOnOperation() override {
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
