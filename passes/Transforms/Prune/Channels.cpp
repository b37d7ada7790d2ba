//===- Channels.cpp - FFN and convolution channel pruning -----------------===//
//
// Channels between two contractions (`sits.matmul -> [activation] ->
// sits.matmul`, likewise for `sits.conv`) that contribute nothing, or a
// constant folded into the consumer's bias, leave both weights.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/Prune/WeightValues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/Sequence.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::prune;

//===----------------------------------------------------------------------===//
// Channels
//===----------------------------------------------------------------------===//

namespace {

/// A contraction seen as a map from input to output channels: its constant
/// weight (operand 1) and optional constant bias (operand 2).
struct ChannelContraction {
  Operation *op;
  ElementsAttr weight;
  ElementsAttr bias;
  Value input;
  int64_t outDim, inDim; // weight dimensions of output / input channels
  ActivationKind activation;
  // A constant input channel contributes a constant to every output
  // (no padding mixes in zeros at the borders).
  bool positionInvariant;
};

} // namespace

static std::optional<ChannelContraction> getChannelContraction(Operation *op) {
  ChannelContraction c{op, {}, {}, {}, 0, 0, ActivationKind::None, true};
  if (auto matmul = dyn_cast_or_null<MatmulOp>(op)) {
    if (matmul.getTransposeLhs())
      return std::nullopt;
    c.outDim = matmul.getTransposeRhs() ? 0 : 1;
    c.inDim = 1 - c.outDim;
    c.activation = matmul.getActivation();
  } else if (auto conv = dyn_cast_or_null<ConvOp>(op)) {
    if (conv.getGroups() != 1)
      return std::nullopt;
    c.outDim = 0;
    c.inDim = 1;
    c.activation = conv.getActivation();
    c.positionInvariant = llvm::all_of(conv.getPaddingOrDefault(),
                                       [](int64_t p) { return p == 0; });
  } else {
    return std::nullopt;
  }
  c.input = op->getOperand(0);
  c.weight = getConstantElements(op->getOperand(1));
  if (!c.weight ||
      cast<ShapedType>(c.weight.getType()).getRank() <
          (isa<MatmulOp>(op) ? 2 : 3) ||
      (isa<MatmulOp>(op) &&
       cast<ShapedType>(c.weight.getType()).getRank() != 2))
    return std::nullopt;
  if (op->getNumOperands() > 2 &&
      !(c.bias = getConstantElements(op->getOperand(2))))
    return std::nullopt;
  return c;
}

/// Replaces operand `index` of `op` (appending the bias when absent).
static void setWeightOrBias(RewriterBase &rewriter, Operation *op,
                            unsigned index, Value value) {
  rewriter.modifyOpInPlace(op, [&] {
    if (index < op->getNumOperands()) {
      op->setOperand(index, value);
    } else if (auto matmul = dyn_cast<MatmulOp>(op)) {
      matmul.getBiasMutable().assign(value);
    } else {
      cast<ConvOp>(op).getBiasMutable().assign(value);
    }
  });
}

FailureOr<PrunedStructure>
mlir::sits::pruneContractionChannels(RewriterBase &rewriter, Operation *op,
                                     double threshold, int64_t multiple) {
  std::optional<ChannelContraction> producer = getChannelContraction(op);
  if (!producer)
    return rewriter.notifyMatchFailure(
        op, "not a contraction with constant weights");
  // Follow the single-use chain producer -> [sits.activation] -> consumer.
  Value channels = op->getResult(0);
  SmallVector<ActivationKind> activations = {producer->activation};
  ActivationOp between;
  if (!channels.hasOneUse())
    return rewriter.notifyMatchFailure(op, "result has several users");
  if ((between = dyn_cast<ActivationOp>(*channels.getUsers().begin()))) {
    channels = between.getResult();
    activations.push_back(between.getKind());
    if (!channels.hasOneUse())
      return rewriter.notifyMatchFailure(op, "activation has several users");
  }
  Operation *user = *channels.getUsers().begin();
  std::optional<ChannelContraction> consumer = getChannelContraction(user);
  if (!consumer || consumer->input != channels ||
      user->getOperand(1) == channels ||
      (user->getNumOperands() > 2 && user->getOperand(2) == channels) ||
      !isa<MatmulOp, ConvOp>(op) || isa<MatmulOp>(op) != isa<MatmulOp>(user))
    return rewriter.notifyMatchFailure(op, "not feeding a contraction's input");
  int64_t channelDim = isa<MatmulOp>(op)
                           ? cast<ShapedType>(channels.getType()).getRank() - 1
                           : 1;

  auto w1Type = cast<RankedTensorType>(producer->weight.getType());
  auto w2Type = cast<RankedTensorType>(consumer->weight.getType());
  std::optional<std::vector<double>> w1 = readFloats(producer->weight);
  std::optional<std::vector<double>> w2 = readFloats(consumer->weight);
  std::optional<std::vector<double>> b1, b2;
  if (producer->bias)
    b1 = readFloats(producer->bias);
  if (consumer->bias)
    b2 = readFloats(consumer->bias);
  int64_t n = w1Type.getDimSize(producer->outDim);
  if (!w1 || !w2 || (producer->bias && !b1) || (consumer->bias && !b2) ||
      w2Type.getDimSize(consumer->inDim) != n ||
      (b1 && int64_t(b1->size()) != n))
    return rewriter.notifyMatchFailure(op, "weights are not readable floats");
  // Pruning a copy of a weight another op keeps would add bytes.
  if (!isOwnedConstant(op->getOperand(1)) ||
      !isOwnedConstant(user->getOperand(1)) ||
      (producer->bias && !isOwnedConstant(op->getOperand(2))))
    return rewriter.notifyMatchFailure(op, "weights are shared with other ops");

  SmallVector<double> written =
      maxAbsAlong(*w1, w1Type.getShape(), producer->outDim);
  SmallVector<double> read =
      maxAbsAlong(*w2, w2Type.getShape(), consumer->inDim);
  PrunedStructure result;
  result.total = n;
  SmallVector<int64_t> live;
  SmallVector<double> constantValue(n, 0.0); // act(b) of folded channels
  for (int64_t j = 0; j < n; ++j) {
    if (read[j] <= threshold) {
      result.removed.push_back(j);
      continue;
    }
    if (written[j] <= threshold) {
      // Channel j is the constant act(b1[j]) (up to the threshold): its
      // contribution is a constant the consumer's bias can absorb.
      double value = b1 ? (*b1)[j] : 0.0;
      for (ActivationKind kind : activations)
        value = evaluateActivation(kind, value);
      if (value == 0.0 || consumer->positionInvariant) {
        constantValue[j] = value;
        result.removed.push_back(j);
        if (value != 0.0)
          ++result.foldedIntoBias;
        continue;
      }
    }
    live.push_back(j);
  }
  if (result.removed.empty())
    return rewriter.notifyMatchFailure(op, "no prunable channel");
  // Keep a multiple of `multiple` channels: a width that is not one runs
  // partial vectors in every row and can be slower than the unpruned one.
  // The channels put back are those with the largest consumer weights.
  if (multiple > 1 && !live.empty()) {
    int64_t keep = llvm::alignTo(live.size(), multiple);
    if (keep >= n)
      return rewriter.notifyMatchFailure(
          op, "a multiple of the channel granule keeps every channel");
    SmallVector<int64_t> byWeight(result.removed);
    llvm::stable_sort(byWeight,
                      [&](int64_t a, int64_t b) { return read[a] > read[b]; });
    for (int64_t j :
         ArrayRef<int64_t>(byWeight).take_front(keep - live.size())) {
      live.push_back(j);
      llvm::erase(result.removed, j);
      if (constantValue[j] != 0.0)
        --result.foldedIntoBias;
      constantValue[j] = 0.0;
    }
    llvm::sort(live);
  }
  if (live.empty()) {
    op->emitRemark() << "all " << n
                     << " channels contribute nothing; not pruned (the "
                        "tensor between the contractions would be empty)";
    return failure();
  }

  // The consumer's bias absorbs the folded channels' constant contributions:
  // sum over the channel's weights of every other dimension.
  int64_t outChannels = w2Type.getDimSize(consumer->outDim);
  std::optional<std::vector<double>> newBias;
  if (result.foldedIntoBias) {
    newBias = b2 ? *b2 : std::vector<double>(outChannels, 0.0);
    SmallVector<int64_t> strides = getStrides(w2Type.getShape());
    for (size_t i = 0; i < w2->size(); ++i) {
      int64_t j = (int64_t(i) / strides[consumer->inDim]) % n;
      int64_t o = (int64_t(i) / strides[consumer->outDim]) % outChannels;
      if (constantValue[j] != 0.0)
        (*newBias)[o] += constantValue[j] * (*w2)[i];
    }
  }

  FailureOr<TypedAttr> newW1 =
      gatherConstant(producer->weight, producer->outDim, live);
  FailureOr<TypedAttr> newW2 =
      gatherConstant(consumer->weight, consumer->inDim, live);
  FailureOr<TypedAttr> newB1 = producer->bias
                                   ? gatherConstant(producer->bias, 0, live)
                                   : FailureOr<TypedAttr>(TypedAttr());
  if (failed(newW1) || failed(newW2) || failed(newB1))
    return rewriter.notifyMatchFailure(op, "weights are not plain dense data");
  int64_t before = getStorageBytes(producer->weight) +
                   getStorageBytes(consumer->weight) +
                   (producer->bias ? getStorageBytes(producer->bias) : 0);
  int64_t after = getStorageBytes(cast<ElementsAttr>(*newW1)) +
                  getStorageBytes(cast<ElementsAttr>(*newW2)) +
                  (*newB1 ? getStorageBytes(cast<ElementsAttr>(*newB1)) : 0);
  result.bytesRemoved = before - after;

  rewriter.setInsertionPoint(op);
  setWeightOrBias(rewriter, op, 1,
                  createConstant(rewriter, op->getLoc(), *newW1));
  if (*newB1)
    setWeightOrBias(rewriter, op, 2,
                    createConstant(rewriter, op->getLoc(), *newB1));
  int64_t kept = live.size();
  rewriter.modifyOpInPlace(op, [&] {
    op->getResult(0).setType(
        withDim(op->getResult(0).getType(), channelDim, kept));
  });
  if (between)
    rewriter.modifyOpInPlace(between, [&] {
      between->getResult(0).setType(op->getResult(0).getType());
    });
  rewriter.setInsertionPoint(user);
  setWeightOrBias(rewriter, user, 1,
                  createConstant(rewriter, user->getLoc(), *newW2));
  if (newBias) {
    auto biasType =
        RankedTensorType::get({outChannels}, w2Type.getElementType());
    ElementsAttr like = consumer->bias ? consumer->bias : consumer->weight;
    setWeightOrBias(
        rewriter, user, 2,
        createConstant(rewriter, user->getLoc(),
                       writeFloats(like, biasType, *newBias, ".bias")));
  }
  return result;
}
