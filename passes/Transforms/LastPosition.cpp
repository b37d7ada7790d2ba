//===- LastPosition.cpp - Results for the last sequence position only -----===//
//
// A served decoder needs the logits of each sequence's last new token only;
// computing the LM head for every prompt position makes it the largest
// matmul of a prefill. The results keep their last position, and the slice
// moves up through position-wise ops so that they run on it alone.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "dialects/Sits/IR/SitsOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSLASTPOSITION
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

namespace {

/// Whether the only result of `op` holds, at each position along `axis`,
/// a function of its first operand at that position alone (and of operands
/// without that axis): slicing the result equals slicing the operand.
bool isPositionwise(Operation *op, int64_t axis) {
  if (op->getNumResults() != 1 || op->getNumOperands() == 0)
    return false;
  auto input = dyn_cast<RankedTensorType>(op->getOperand(0).getType());
  auto result = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!input || !result || input.getRank() != result.getRank())
    return false;
  int64_t rank = input.getRank();
  auto normalizesAfter = [&](int64_t normAxis) {
    return (normAxis < 0 ? normAxis + rank : normAxis) > axis;
  };
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return cast<RankedTensorType>(matmul.getRhs().getType()).getRank() == 2 &&
           !matmul.getTransposeLhs() && axis < rank - 1;
  if (auto norm = dyn_cast<RMSNormOp>(op))
    return normalizesAfter(norm.getAxis());
  if (auto norm = dyn_cast<LayerNormOp>(op))
    return normalizesAfter(norm.getAxis());
  return isa<ActivationOp>(op);
}

/// `type` with a dynamic extent at `axis`.
RankedTensorType dynamicAt(RankedTensorType type, int64_t axis) {
  SmallVector<int64_t> shape(type.getShape());
  shape[axis] = ShapedType::kDynamic;
  return type.clone(shape);
}

/// The last min(S, 1) positions of `value` along `axis` (S its extent).
Value lastPosition(OpBuilder &b, Location loc, Value value, int64_t axis) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, value);
  SmallVector<OpFoldResult> strides(type.getRank(), b.getIndexAttr(1));
  Value extent = getValueOrCreateConstantIndexOp(b, loc, sizes[axis]);
  Value one = arith::ConstantIndexOp::create(b, loc, 1);
  Value size = arith::MinSIOp::create(b, loc, extent, one);
  offsets[axis] = arith::SubIOp::create(b, loc, extent, size).getResult();
  sizes[axis] = size;
  return tensor::ExtractSliceOp::create(b, loc, dynamicAt(type, axis), value,
                                        offsets, sizes, strides);
}

struct SitsLastPositionPass
    : sits::impl::SitsLastPositionBase<SitsLastPositionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto main = module.lookupSymbol<func::FuncOp>("main");
    if (!main || main.isExternal() || !main.isPublic() ||
        !main.getBody().hasOneBlock()) {
      module.emitError("sits-last-position needs a public function @main "
                       "with one block");
      return signalPassFailure();
    }
    if (axis < 0) {
      module.emitError("sits-last-position: axis must be non-negative, got ")
          << static_cast<int64_t>(axis);
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(main.getBody().front().getTerminator());
    OpBuilder b(&getContext());
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      if (main.getResultAttr(i, "sits.updates"))
        continue;
      Value result = ret.getOperand(i);
      auto type = dyn_cast<RankedTensorType>(result.getType());
      // The position axis must not be the innermost (feature) one.
      if (!type || type.getRank() < axis + 2 || type.getDimSize(axis) == 0 ||
          type.getDimSize(axis) == 1)
        continue;
      // Position-wise producers whose result only the chain reads, from
      // the return upwards.
      SmallVector<Operation *> chain;
      Value top = result;
      while (top.hasOneUse()) {
        Operation *def = top.getDefiningOp();
        if (!def || !isPositionwise(def, axis))
          break;
        chain.push_back(def);
        top = def->getOperand(0);
      }
      b.setInsertionPoint(chain.empty() ? ret.getOperation() : chain.back());
      Value sliced = lastPosition(b, result.getLoc(), top, axis);
      // Each op is rebuilt where it was: its other operands (weights) may
      // be defined anywhere above it.
      for (Operation *op : llvm::reverse(chain)) {
        b.setInsertionPoint(op);
        Operation *clone = b.clone(*op);
        clone->setOperand(0, sliced);
        clone->getResult(0).setType(dynamicAt(
            cast<RankedTensorType>(op->getResult(0).getType()), axis));
        sliced = clone->getResult(0);
      }
      ret.setOperand(i, sliced);
      for (Operation *op : chain)
        op->erase();
      ++numResults;
      numHoisted += chain.size();
    }
    main.setFunctionType(FunctionType::get(
        &getContext(), main.getArgumentTypes(), ret.getOperandTypes()));
  }
};

} // namespace
