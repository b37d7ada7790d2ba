//===- FuseSiblingMatmuls.cpp - One matmul for siblings of one input ------===//
//
// A decoder layer multiplies one activation by several constant weights:
// the Q, K and V projections, and the gate and up projections of a gated
// MLP. Each becomes a kernel of its own that streams its weight, forks its
// threads and joins them; at decode sizes (a few rows) that is a handful of
// small launches per layer, each too short to reach the memory bandwidth.
// Side by side, the weights are one matrix and the products one matmul
// (one launch, one longer stream), whose column ranges are the siblings'
// results.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/ConstantData.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSFUSESIBLINGMATMULS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

namespace {

/// The constant data of `value` when it is plain dense data (an
/// `arith.constant` whose bytes can be read, or a splat) used only once.
std::optional<ElementsAttr> getSoleConstant(Value value) {
  if (!value || !value.hasOneUse())
    return std::nullopt;
  auto constant = value.getDefiningOp<arith::ConstantOp>();
  auto data = constant ? dyn_cast<ElementsAttr>(constant.getValue()) : nullptr;
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!data || !type || type.getEncoding() ||
      (!getConstantBytes(data) && !getSplatElementBytes(data)))
    return std::nullopt;
  return data;
}

/// Whether `op` can join a sibling group: a constant rank-2 weight (and
/// bias, if any) used only by it, a result whose column count is static.
bool isFusable(MatmulOp op) {
  auto result = cast<RankedTensorType>(op.getType());
  return result.getRank() >= 2 && !result.isDynamicDim(result.getRank() - 1) &&
         cast<RankedTensorType>(op.getRhs().getType()).getRank() == 2 &&
         getSoleConstant(op.getRhs()) &&
         (!op.getBias() || getSoleConstant(op.getBias()));
}

/// Whether `a` and `b` compute the same kind of product of one input, so
/// that their weights can sit side by side: everything but the weight's
/// (and bias's) column count agrees.
bool areSiblings(MatmulOp a, MatmulOp b) {
  auto rhsA = cast<RankedTensorType>(a.getRhs().getType()),
       rhsB = cast<RankedTensorType>(b.getRhs().getType());
  auto resA = cast<RankedTensorType>(a.getType()),
       resB = cast<RankedTensorType>(b.getType());
  int64_t kDim = a.getTransposeRhs() ? 1 : 0;
  return a.getLhs() == b.getLhs() &&
         a.getTransposeLhs() == b.getTransposeLhs() &&
         a.getTransposeRhs() == b.getTransposeRhs() &&
         rhsA.getElementType() == rhsB.getElementType() &&
         rhsA.getDimSize(kDim) == rhsB.getDimSize(kDim) &&
         resA.getElementType() == resB.getElementType() &&
         resA.getShape().drop_back() == resB.getShape().drop_back() &&
         static_cast<bool>(a.getBias()) == static_cast<bool>(b.getBias()) &&
         a->getAttrDictionary() == b->getAttrDictionary();
}

} // namespace

FailureOr<MatmulOp> mlir::sits::fuseSiblingMatmuls(RewriterBase &rewriter,
                                                   ArrayRef<MatmulOp> siblings,
                                                   bool deferJoin) {
  if (siblings.size() < 2)
    return failure();
  MatmulOp first = siblings.front();
  for (MatmulOp op : siblings)
    if (!isFusable(op) || !areSiblings(first, op) ||
        op->getBlock() != first->getBlock() || op->isBeforeInBlock(first))
      return rewriter.notifyMatchFailure(op, "not a fusable sibling");

  // The weight is [K, N] or, transposed, [N, K]; the bias [N].
  bool transposed = first.getTransposeRhs();
  int64_t columns = 0;
  SmallVector<int64_t> widths;
  SmallVector<ElementsAttr> weights, biases;
  for (MatmulOp op : siblings) {
    auto result = cast<RankedTensorType>(op.getType());
    widths.push_back(result.getShape().back());
    columns += widths.back();
    weights.push_back(*getSoleConstant(op.getRhs()));
    if (op.getBias())
      biases.push_back(*getSoleConstant(op.getBias()));
  }
  auto rhsType = cast<RankedTensorType>(first.getRhs().getType());
  SmallVector<int64_t> rhsShape(rhsType.getShape());
  rhsShape[transposed ? 0 : 1] = columns;

  Location loc = rewriter.getFusedLoc(llvm::to_vector(
      llvm::map_range(siblings, [](MatmulOp op) { return op.getLoc(); })));
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(first);
  auto joinedType = RankedTensorType::get(rhsShape, rhsType.getElementType());
  Value rhs;
  if (deferJoin && !transposed &&
      llvm::all_of(weights, [](ElementsAttr weight) {
        return getConstantBytes(weight).has_value();
      })) {
    // The weights stay where they are; whoever lays them out for the
    // kernels reads them side by side (sits-cpu-pack-weights), so no joined
    // copy is ever written. Their constants move up to the join.
    for (MatmulOp op : siblings)
      if (op != first)
        rewriter.moveOpBefore(op.getRhs().getDefiningOp(), first);
    rhs = tensor::ConcatOp::create(
        rewriter, loc, joinedType, /*dim=*/1,
        llvm::map_to_vector(siblings,
                            [](MatmulOp op) -> Value { return op.getRhs(); }));
  } else {
    rhs = arith::ConstantOp::create(
        rewriter, loc, joinConstants(weights, transposed ? 0 : 1, joinedType));
    for (ElementsAttr weight : weights)
      releaseConstantPages(weight);
  }
  Value bias;
  if (!biases.empty()) {
    auto biasType = cast<RankedTensorType>(first.getBias().getType());
    bias = arith::ConstantOp::create(
        rewriter, loc,
        joinConstants(
            biases, 0,
            RankedTensorType::get({columns}, biasType.getElementType())));
    for (ElementsAttr part : biases)
      releaseConstantPages(part);
  }
  auto resultType = cast<RankedTensorType>(first.getType());
  SmallVector<int64_t> resultShape(resultType.getShape());
  resultShape.back() = columns;
  auto fused = cast<MatmulOp>(rewriter.clone(*first));
  fused->setLoc(loc);
  rewriter.modifyOpInPlace(fused, [&] {
    fused.getRhsMutable().assign(rhs);
    if (bias)
      fused.getBiasMutable().assign(bias);
    fused.getResult().setType(
        RankedTensorType::get(resultShape, resultType.getElementType()));
  });

  // Each sibling's result is its column range of the fused one.
  rewriter.setInsertionPointAfter(fused);
  SmallVector<OpFoldResult> sizes =
      tensor::getMixedSizes(rewriter, loc, fused.getResult());
  SmallVector<OpFoldResult> offsets(sizes.size(), rewriter.getIndexAttr(0));
  SmallVector<OpFoldResult> strides(sizes.size(), rewriter.getIndexAttr(1));
  int64_t at = 0;
  for (auto [index, width] : llvm::enumerate(widths)) {
    MatmulOp op = siblings[index];
    offsets.back() = rewriter.getIndexAttr(at);
    sizes.back() = rewriter.getIndexAttr(width);
    Value slice = tensor::ExtractSliceOp::create(
        rewriter, op.getLoc(), cast<RankedTensorType>(op.getType()),
        fused.getResult(), offsets, sizes, strides);
    Value oldRhs = op.getRhs(), oldBias = op.getBias();
    rewriter.replaceOp(op, slice);
    for (Value v : {oldRhs, oldBias})
      if (v && v.use_empty())
        rewriter.eraseOp(v.getDefiningOp());
    at += width;
  }
  return fused;
}

namespace {

struct SitsFuseSiblingMatmulsPass
    : sits::impl::SitsFuseSiblingMatmulsBase<SitsFuseSiblingMatmulsPass> {
  using SitsFuseSiblingMatmulsBase::SitsFuseSiblingMatmulsBase;

  void runOnOperation() override {
    // Groups in IR order: each input's fusable users, split into sibling
    // sets (a group's first member decides what joins it).
    SmallVector<SmallVector<MatmulOp>> groups;
    DenseMap<Value, SmallVector<size_t>> groupsOfInput;
    getOperation()->walk([&](MatmulOp op) {
      if (!isFusable(op))
        return;
      SmallVector<size_t> &candidates = groupsOfInput[op.getLhs()];
      for (size_t g : candidates)
        if (areSiblings(groups[g].front(), op) &&
            op->getBlock() == groups[g].front()->getBlock()) {
          groups[g].push_back(op);
          return;
        }
      candidates.push_back(groups.size());
      groups.push_back({op});
    });
    IRRewriter rewriter(&getContext());
    for (ArrayRef<MatmulOp> group : groups)
      if (group.size() > 1 &&
          succeeded(fuseSiblingMatmuls(rewriter, group, deferJoin)))
        numFused += group.size();
  }
};

} // namespace
