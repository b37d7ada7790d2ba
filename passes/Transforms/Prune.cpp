//===- Prune.cpp - Graph pruning ------------------------------------------===//
//
// Folding, identity removal, dead code elimination and structured pruning of
// channels and attention heads. Every rewrite here is a FailureOr<> function
// over one op (declared in Passes.h); the pass collects candidates, applies
// them and records what they removed in `sits.report.pruning`.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/ConstantData.h"

#include "dialects/Target/KnownTargets.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/Sequence.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace mlir::sits {
#define GEN_PASS_DEF_SITSPRUNE
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

//===----------------------------------------------------------------------===//
// Constant data as numbers
//===----------------------------------------------------------------------===//

static ElementsAttr getConstantElements(Value value) {
  Attribute attr;
  if (!value || !matchPattern(value, m_Constant(&attr)))
    return {};
  return dyn_cast<ElementsAttr>(attr);
}

static double toDouble(APFloat value) {
  bool lost;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return value.convertToDouble();
}

/// The elements of a statically shaped float constant as doubles, row-major.
static std::optional<std::vector<double>> readFloats(ElementsAttr value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape() || !isa<FloatType>(type.getElementType()))
    return std::nullopt;
  auto floatType = cast<FloatType>(type.getElementType());
  std::vector<double> out(type.getNumElements());
  if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && dense.isSplat()) {
    std::fill(out.begin(), out.end(), toDouble(dense.getSplatValue<APFloat>()));
    return out;
  }
  std::optional<ArrayRef<char>> bytes = getConstantBytes(value);
  if (!bytes)
    return std::nullopt;
  unsigned width = floatType.getWidth();
  for (size_t i = 0; i < out.size(); ++i) {
    const char *element = bytes->data() + i * (width / 8);
    if (floatType.isF32()) {
      float f;
      std::memcpy(&f, element, sizeof(f));
      out[i] = f;
    } else if (floatType.isF64()) {
      std::memcpy(&out[i], element, sizeof(double));
    } else {
      uint64_t bits = 0;
      std::memcpy(&bits, element, width / 8);
      out[i] = toDouble(APFloat(floatType.getFloatSemantics(), APInt(width, bits)));
    }
  }
  return out;
}

/// A constant like `original` (a resource when it is one) of `type` holding
/// `values` rounded to the element type.
static TypedAttr writeFloats(ElementsAttr original, RankedTensorType type,
                             ArrayRef<double> values, StringRef suffix) {
  auto floatType = cast<FloatType>(type.getElementType());
  unsigned bytes = floatType.getWidth() / 8;
  AsmResourceBlob blob =
      HeapAsmResourceBlob::allocate(values.size() * bytes, /*align=*/64);
  char *out = blob.getMutableData().data();
  for (size_t i = 0; i < values.size(); ++i) {
    APFloat value(values[i]);
    bool lost;
    value.convert(floatType.getFloatSemantics(), APFloat::rmNearestTiesToEven,
                  &lost);
    uint64_t bits = value.bitcastToAPInt().getZExtValue();
    std::memcpy(out + i * bytes, &bits, bytes);
  }
  return makeConstantLike(original, type, std::move(blob), suffix);
}

/// Bytes a constant occupies in the weights (splats count one element).
static int64_t getStorageBytes(ElementsAttr value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return 0;
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  auto dense = dyn_cast<DenseElementsAttr>(value);
  int64_t elements = dense && dense.isSplat() ? 1 : type.getNumElements();
  return (elements * bits + 7) / 8;
}

/// Row-major strides of `shape`.
static SmallVector<int64_t> getStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// max |v| over each index of dimension `dim`.
static SmallVector<double> maxAbsAlong(ArrayRef<double> values,
                                       ArrayRef<int64_t> shape, int64_t dim) {
  SmallVector<double> result(shape[dim], 0.0);
  int64_t inner = getStrides(shape)[dim];
  for (size_t i = 0; i < values.size(); ++i) {
    int64_t index = (int64_t(i) / inner) % shape[dim];
    // NaN compares false and so never makes a slice look prunable.
    double magnitude = std::fabs(values[i]);
    if (!(magnitude <= result[index]))
      result[index] = magnitude;
  }
  return result;
}

/// The constant `value` keeping only `indices` along dimension `dim`.
static FailureOr<TypedAttr> gatherConstant(ElementsAttr value, int64_t dim,
                                           ArrayRef<int64_t> indices) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = indices.size();
  auto newType = RankedTensorType::get(shape, type.getElementType());
  if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && dense.isSplat())
    return TypedAttr(dense.resizeSplat(newType));
  std::optional<ArrayRef<char>> bytes = getConstantBytes(value);
  if (!bytes)
    return failure();
  int64_t elementBytes = getElementBytes(type);
  int64_t inner = getStrides(type.getShape())[dim] * elementBytes;
  int64_t outer = type.getNumElements() * elementBytes / (inner * type.getDimSize(dim));
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
      outer * indices.size() * inner, /*align=*/64);
  char *out = blob.getMutableData().data();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t index : indices) {
      std::memcpy(out, bytes->data() + (o * type.getDimSize(dim) + index) * inner,
                  inner);
      out += inner;
    }
  return makeConstantLike(value, newType, std::move(blob), ".pruned");
}

/// Whether `value` is a constant gatherConstant can rewrite that no other op
/// shares (splats are one element: sharing them costs nothing).
static bool isOwnedConstant(Value value) {
  ElementsAttr attr = getConstantElements(value);
  if (!attr)
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr); dense && dense.isSplat())
    return true;
  return value.hasOneUse() && getConstantBytes(attr).has_value();
}

static Value createConstant(RewriterBase &rewriter, Location loc,
                            TypedAttr value) {
  return arith::ConstantOp::create(rewriter, loc, value);
}

double mlir::sits::evaluateActivation(ActivationKind kind, double x) {
  switch (kind) {
  case ActivationKind::None:
    return x;
  case ActivationKind::Relu:
    return x > 0 ? x : 0.0;
  case ActivationKind::Gelu:
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  case ActivationKind::GeluTanh:
    return 0.5 * x *
           (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case ActivationKind::Silu:
    return x / (1.0 + std::exp(-x));
  case ActivationKind::Sigmoid:
    return 1.0 / (1.0 + std::exp(-x));
  case ActivationKind::Tanh:
    return std::tanh(x);
  }
  llvm_unreachable("unknown activation");
}

std::string mlir::sits::getReportName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(inner))
        return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

//===----------------------------------------------------------------------===//
// Constant folding
//===----------------------------------------------------------------------===//

/// Transposes row-major `bytes` of `shape` by `permutation`.
static AsmResourceBlob transposeBytes(ArrayRef<char> bytes, int64_t elementBytes,
                                      ArrayRef<int64_t> shape,
                                      ArrayRef<int64_t> permutation) {
  int64_t rank = shape.size();
  SmallVector<int64_t> inStrides = getStrides(shape), outShape(rank),
                       strideOfOut(rank);
  for (int64_t d = 0; d < rank; ++d) {
    outShape[d] = shape[permutation[d]];
    strideOfOut[d] = inStrides[permutation[d]];
  }
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(bytes.size(), 64);
  char *out = blob.getMutableData().data();
  SmallVector<int64_t> index(rank, 0);
  int64_t elements = int64_t(bytes.size()) / elementBytes;
  for (int64_t i = 0; i < elements; ++i) {
    int64_t source = 0;
    for (int64_t d = 0; d < rank; ++d)
      source += index[d] * strideOfOut[d];
    std::memcpy(out + i * elementBytes, bytes.data() + source * elementBytes,
                elementBytes);
    for (int64_t d = rank - 1; d >= 0 && ++index[d] == outShape[d]; --d)
      index[d] = 0;
  }
  return blob;
}

/// Resources cannot be read by upstream folders: hand them inline data.
static Attribute asFoldOperand(Attribute attr) {
  auto resource = dyn_cast_or_null<DenseResourceElementsAttr>(attr);
  if (!resource)
    return attr;
  std::optional<ArrayRef<char>> bytes = getConstantBytes(resource);
  if (!bytes)
    return {};
  return DenseElementsAttr::getFromRawBuffer(resource.getType(), *bytes);
}

FailureOr<Value> mlir::sits::foldConstantSubgraph(RewriterBase &rewriter,
                                                  Operation *op) {
  if (op->getNumResults() != 1 || isa<arith::ConstantOp>(op) || !isPure(op))
    return failure();
  auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!resultType || !resultType.hasStaticShape())
    return failure();
  // Ops whose folders evaluate constant operands (arith on tensors, the
  // tensor reshapes, casts and slices), and transposes evaluated here. Any
  // other op would have its constant operands copied for nothing.
  auto transpose = dyn_cast<linalg::TransposeOp>(op);
  if (!transpose && !isa<arith::ArithDialect>(op->getDialect()) &&
      !isa<tensor::ExpandShapeOp, tensor::CollapseShapeOp, tensor::ReshapeOp,
           tensor::CastOp, tensor::ExtractSliceOp>(op))
    return failure();
  SmallVector<Value> inputs =
      transpose ? SmallVector<Value>{transpose.getInput()}
                : SmallVector<Value>(op->getOperands());
  SmallVector<Attribute> operands;
  for (Value input : inputs) {
    Attribute attr;
    if (!matchPattern(input, m_Constant(&attr)))
      return failure();
    // Folding must not duplicate weights: a non-splat constant operand has
    // to die with this op.
    auto dense = dyn_cast<DenseElementsAttr>(attr);
    if (isa<ElementsAttr>(attr) && !(dense && dense.isSplat()) &&
        !input.hasOneUse())
      return failure();
    operands.push_back(attr);
  }

  TypedAttr folded;
  StringRef suffix = ".folded";
  if (transpose) {
    auto value = dyn_cast<ElementsAttr>(operands[0]);
    auto dense = dyn_cast_or_null<DenseElementsAttr>(value);
    if (dense && dense.isSplat()) {
      folded = dense.resizeSplat(resultType);
    } else {
      std::optional<ArrayRef<char>> bytes =
          value ? getConstantBytes(value) : std::nullopt;
      if (!bytes)
        return failure();
      auto type = cast<RankedTensorType>(value.getType());
      folded = makeConstantLike(
          value, resultType,
          transposeBytes(*bytes, getElementBytes(type), type.getShape(),
                         transpose.getPermutation()),
          ".t");
    }
  } else {
    for (Attribute &attr : operands)
      if (!(attr = asFoldOperand(attr)))
        return failure();
    SmallVector<OpFoldResult> results;
    if (failed(op->fold(operands, results)) || results.size() != 1)
      return failure();
    auto value = dyn_cast_or_null<DenseElementsAttr>(
        dyn_cast<Attribute>(results[0]));
    if (!value || value.getType() != resultType)
      return failure();
    folded = value;
    // Large results go back into a resource, not into the IR text.
    if (!value.isSplat() && getStorageBytes(value) >= 1024) {
      ArrayRef<char> raw = value.getRawData();
      AsmResourceBlob blob = HeapAsmResourceBlob::allocate(raw.size(), 64);
      std::memcpy(blob.getMutableData().data(), raw.data(), raw.size());
      auto &manager =
          DenseResourceElementsHandle::getManagerInterface(op->getContext());
      folded = DenseResourceElementsAttr::get(
          resultType,
          manager.insert(getReportName(op->getLoc()) + suffix.str(),
                         std::move(blob)));
    }
  }
  rewriter.setInsertionPoint(op);
  Value constant = createConstant(rewriter, op->getLoc(), folded);
  rewriter.replaceOp(op, constant);
  return constant;
}

//===----------------------------------------------------------------------===//
// Identities
//===----------------------------------------------------------------------===//

/// Whether `value` is a constant whose every element equals `expected`.
static bool isConstantSplat(Value value, double expected) {
  Attribute attr;
  if (!matchPattern(value, m_Constant(&attr)))
    return false;
  if (auto scalar = dyn_cast<FloatAttr>(attr))
    return scalar.getValueAsDouble() == expected;
  auto dense = dyn_cast<DenseFPElementsAttr>(attr);
  return dense && dense.isSplat() &&
         toDouble(dense.getSplatValue<APFloat>()) == expected;
}

/// The operand `op` passes through unchanged, if it is an identity.
static Value getIdentitySource(Operation *op) {
  if (op->getNumResults() != 1)
    return {};
  Type type = op->getResult(0).getType();
  auto sameType = [&](Value v) { return v && v.getType() == type ? v : Value(); };
  if (isa<tensor::ReshapeOp, tensor::CastOp, tensor::ExpandShapeOp,
          tensor::CollapseShapeOp, arith::ExtFOp, arith::TruncFOp>(op))
    return sameType(op->getOperand(0));
  if (auto transpose = dyn_cast<linalg::TransposeOp>(op)) {
    ArrayRef<int64_t> perm = transpose.getPermutation();
    for (int64_t d = 0, e = perm.size(); d < e; ++d)
      if (perm[d] != d)
        return {};
    return sameType(transpose.getInput());
  }
  if (auto activation = dyn_cast<ActivationOp>(op))
    return activation.getKind() == ActivationKind::None ? activation.getInput()
                                                        : Value();
  if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
    auto sourceType = slice.getSourceType();
    bool full = sourceType.hasStaticShape() &&
                llvm::all_of(slice.getStaticOffsets(), [](int64_t o) { return o == 0; }) &&
                llvm::all_of(slice.getStaticStrides(), [](int64_t s) { return s == 1; }) &&
                slice.getStaticSizes() == sourceType.getShape();
    return full ? sameType(slice.getSource()) : Value();
  }
  if (auto pad = dyn_cast<tensor::PadOp>(op)) {
    auto zero = [](int64_t p) { return p == 0; };
    return llvm::all_of(pad.getStaticLow(), zero) &&
                   llvm::all_of(pad.getStaticHigh(), zero)
               ? sameType(pad.getSource())
               : Value();
  }
  // x * 1, 1 * x, x / 1, x + 0, 0 + x, x - 0: `+ 0` may turn a -0 into +0,
  // the only difference it makes.
  Value lhs = op->getNumOperands() == 2 ? op->getOperand(0) : Value();
  Value rhs = op->getNumOperands() == 2 ? op->getOperand(1) : Value();
  if (isa<arith::MulFOp>(op)) {
    if (isConstantSplat(rhs, 1.0))
      return sameType(lhs);
    if (isConstantSplat(lhs, 1.0))
      return sameType(rhs);
  }
  if (isa<arith::DivFOp>(op) && isConstantSplat(rhs, 1.0))
    return sameType(lhs);
  if (isa<arith::AddFOp>(op)) {
    if (isConstantSplat(rhs, 0.0))
      return sameType(lhs);
    if (isConstantSplat(lhs, 0.0))
      return sameType(rhs);
  }
  if (isa<arith::SubFOp>(op) && isConstantSplat(rhs, 0.0))
    return sameType(lhs);
  return {};
}

FailureOr<Value> mlir::sits::removeIdentityOp(RewriterBase &rewriter,
                                              Operation *op) {
  Value source = getIdentitySource(op);
  if (!source)
    return rewriter.notifyMatchFailure(op, "not an identity");
  rewriter.replaceOp(op, source);
  return source;
}

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
    c.positionInvariant =
        llvm::all_of(conv.getPaddingOrDefault(), [](int64_t p) { return p == 0; });
  } else {
    return std::nullopt;
  }
  c.input = op->getOperand(0);
  c.weight = getConstantElements(op->getOperand(1));
  if (!c.weight || cast<ShapedType>(c.weight.getType()).getRank() <
                       (isa<MatmulOp>(op) ? 2 : 3) ||
      (isa<MatmulOp>(op) && cast<ShapedType>(c.weight.getType()).getRank() != 2))
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

static RankedTensorType withDim(Type type, int64_t dim, int64_t size) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, ranked.getElementType(),
                               ranked.getEncoding());
}

FailureOr<PrunedStructure>
mlir::sits::pruneContractionChannels(RewriterBase &rewriter, Operation *op,
                                     double threshold, int64_t multiple) {
  std::optional<ChannelContraction> producer = getChannelContraction(op);
  if (!producer)
    return rewriter.notifyMatchFailure(op, "not a contraction with constant weights");
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
  if (!isOwnedConstant(op->getOperand(1)) || !isOwnedConstant(user->getOperand(1)) ||
      (producer->bias && !isOwnedConstant(op->getOperand(2))))
    return rewriter.notifyMatchFailure(op, "weights are shared with other ops");

  SmallVector<double> written = maxAbsAlong(*w1, w1Type.getShape(), producer->outDim);
  SmallVector<double> read = maxAbsAlong(*w2, w2Type.getShape(), consumer->inDim);
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
    llvm::stable_sort(byWeight, [&](int64_t a, int64_t b) { return read[a] > read[b]; });
    for (int64_t j : ArrayRef<int64_t>(byWeight).take_front(keep - live.size())) {
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

  FailureOr<TypedAttr> newW1 = gatherConstant(producer->weight, producer->outDim, live);
  FailureOr<TypedAttr> newW2 = gatherConstant(consumer->weight, consumer->inDim, live);
  FailureOr<TypedAttr> newB1 =
      producer->bias ? gatherConstant(producer->bias, 0, live) : FailureOr<TypedAttr>(TypedAttr());
  if (failed(newW1) || failed(newW2) || failed(newB1))
    return rewriter.notifyMatchFailure(op, "weights are not plain dense data");
  int64_t before = getStorageBytes(producer->weight) + getStorageBytes(consumer->weight) +
                   (producer->bias ? getStorageBytes(producer->bias) : 0);
  int64_t after = getStorageBytes(cast<ElementsAttr>(*newW1)) +
                  getStorageBytes(cast<ElementsAttr>(*newW2)) +
                  (*newB1 ? getStorageBytes(cast<ElementsAttr>(*newB1)) : 0);
  result.bytesRemoved = before - after;

  rewriter.setInsertionPoint(op);
  setWeightOrBias(rewriter, op, 1, createConstant(rewriter, op->getLoc(), *newW1));
  if (*newB1)
    setWeightOrBias(rewriter, op, 2, createConstant(rewriter, op->getLoc(), *newB1));
  int64_t kept = live.size();
  rewriter.modifyOpInPlace(op, [&] {
    op->getResult(0).setType(withDim(op->getResult(0).getType(), channelDim, kept));
  });
  if (between)
    rewriter.modifyOpInPlace(between, [&] {
      between->getResult(0).setType(op->getResult(0).getType());
    });
  rewriter.setInsertionPoint(user);
  setWeightOrBias(rewriter, user, 1, createConstant(rewriter, user->getLoc(), *newW2));
  if (newBias) {
    auto biasType = RankedTensorType::get(
        {outChannels}, w2Type.getElementType());
    ElementsAttr like = consumer->bias ? consumer->bias : consumer->weight;
    setWeightOrBias(rewriter, user, 2,
                    createConstant(rewriter, user->getLoc(),
                                   writeFloats(like, biasType, *newBias, ".bias")));
  }
  return result;
}

//===----------------------------------------------------------------------===//
// Attention heads
//===----------------------------------------------------------------------===//

namespace {

/// `[B, T, H*D]` columns of a projection -> `[B, H, T, D]` heads:
/// (matmul | extract_slice of a matmul's columns) -> expand_shape -> transpose,
/// which the attention reads directly or after a KV cache: `tensor.concat`
/// along the sequence of past heads and these.
struct HeadProjection {
  Value read;  // what the attention reads: `heads` or the cache
  Value heads;
  tensor::ConcatOp cache; // null without a KV cache
  Value past;
  linalg::TransposeOp transpose;
  tensor::ExpandShapeOp expand;
  tensor::ExtractSliceOp slice; // null when the matmul's result is used whole
  MatmulOp source;
  ElementsAttr weight, bias;
  int64_t outDim;  // weight dimension of the columns
  int64_t offset;  // first column in the source
  int64_t numHeads, headDim;
};

} // namespace

static bool isHeadTranspose(linalg::TransposeOp op) {
  return op && op.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3};
}

static bool isSplitLastDim(ArrayRef<ReassociationIndices> reassociation) {
  return reassociation.size() == 3 && reassociation[0] == ReassociationIndices{0} &&
         reassociation[1] == ReassociationIndices{1} &&
         reassociation[2] == ReassociationIndices{2, 3};
}

static std::optional<HeadProjection> matchHeadProjection(Value read) {
  HeadProjection p;
  p.read = read;
  Value heads = read;
  if ((p.cache = read.getDefiningOp<tensor::ConcatOp>())) {
    if (p.cache.getDim() != 2 || p.cache.getInputs().size() != 2 ||
        !p.cache.getType().hasStaticShape())
      return std::nullopt;
    p.past = p.cache.getInputs()[0];
    heads = p.cache.getInputs()[1];
    if (!heads.hasOneUse())
      return std::nullopt;
  }
  p.heads = heads;
  p.transpose = heads.getDefiningOp<linalg::TransposeOp>();
  if (!isHeadTranspose(p.transpose))
    return std::nullopt;
  p.expand = p.transpose.getInput().getDefiningOp<tensor::ExpandShapeOp>();
  if (!p.expand || !p.expand->hasOneUse() || !p.expand.getResultType().hasStaticShape() ||
      !isSplitLastDim(p.expand.getReassociationIndices()))
    return std::nullopt;
  p.numHeads = p.expand.getResultType().getDimSize(2);
  p.headDim = p.expand.getResultType().getDimSize(3);
  Value columns = p.expand.getSrc();
  p.offset = 0;
  if ((p.slice = columns.getDefiningOp<tensor::ExtractSliceOp>())) {
    ArrayRef<int64_t> offsets = p.slice.getStaticOffsets();
    if (!p.slice->hasOneUse() || p.slice.getSourceType().getRank() != 3 ||
        !p.slice.getSourceType().hasStaticShape() ||
        p.slice.getType().getRank() != 3 || offsets[0] != 0 || offsets[1] != 0 ||
        ShapedType::isDynamic(offsets[2]) ||
        !llvm::all_of(p.slice.getStaticStrides(), [](int64_t s) { return s == 1; }) ||
        p.slice.getStaticSizes().take_front(2) !=
            p.slice.getSourceType().getShape().take_front(2))
      return std::nullopt;
    p.offset = offsets[2];
    columns = p.slice.getSource();
  }
  p.source = columns.getDefiningOp<MatmulOp>();
  if (!p.source || p.source.getTransposeLhs() ||
      p.source.getActivation() != ActivationKind::None)
    return std::nullopt;
  p.weight = getConstantElements(p.source.getRhs());
  p.bias = p.source.getBias() ? getConstantElements(p.source.getBias()) : ElementsAttr();
  if (!p.weight || cast<ShapedType>(p.weight.getType()).getRank() != 2 ||
      (p.source.getBias() && !p.bias))
    return std::nullopt;
  p.outDim = p.source.getTransposeRhs() ? 0 : 1;
  return p;
}

/// Max-abs of each head's columns in a projection's weight and bias.
static std::optional<SmallVector<double>> headMagnitudes(const HeadProjection &p) {
  std::optional<std::vector<double>> w = readFloats(p.weight);
  std::optional<std::vector<double>> b;
  if (p.bias && !(b = readFloats(p.bias)))
    return std::nullopt;
  if (!w)
    return std::nullopt;
  auto type = cast<RankedTensorType>(p.weight.getType());
  SmallVector<double> columns = maxAbsAlong(*w, type.getShape(), p.outDim);
  SmallVector<double> result(p.numHeads, 0.0);
  for (int64_t h = 0; h < p.numHeads; ++h)
    for (int64_t d = 0; d < p.headDim; ++d) {
      int64_t column = p.offset + h * p.headDim + d;
      result[h] = std::max(result[h], columns[column]);
      if (b)
        result[h] = std::max(result[h], std::fabs((*b)[column]));
    }
  return result;
}

/// Runs of consecutive equal values of `keep`: (first, count, value).
static SmallVector<std::tuple<int64_t, int64_t, bool>> getRuns(ArrayRef<bool> keep) {
  SmallVector<std::tuple<int64_t, int64_t, bool>> runs;
  for (int64_t h = 0, e = keep.size(); h < e; ++h) {
    if (!runs.empty() && std::get<2>(runs.back()) == keep[h])
      ++std::get<1>(runs.back());
    else
      runs.push_back({h, 1, keep[h]});
  }
  return runs;
}

static Value sliceHeads(RewriterBase &rewriter, Location loc, Value heads,
                        int64_t first, int64_t count) {
  auto type = cast<RankedTensorType>(heads.getType());
  if (first == 0 && count == type.getDimSize(1))
    return heads;
  SmallVector<OpFoldResult> offsets(4, rewriter.getIndexAttr(0)), strides(4, rewriter.getIndexAttr(1)), sizes;
  offsets[1] = rewriter.getIndexAttr(first);
  for (int64_t d = 0; d < 4; ++d)
    sizes.push_back(rewriter.getIndexAttr(d == 1 ? count : type.getDimSize(d)));
  return tensor::ExtractSliceOp::create(rewriter, loc, heads, offsets, sizes, strides);
}

static Value concatHeads(RewriterBase &rewriter, Location loc, ValueRange pieces) {
  return pieces.size() == 1 ? pieces[0]
                            : tensor::ConcatOp::create(rewriter, loc, 1, pieces).getResult();
}

/// The heads `live` of `heads` ([B, H, T, D]), in order.
static Value selectHeads(RewriterBase &rewriter, Location loc, Value heads,
                         ArrayRef<bool> live) {
  SmallVector<Value> pieces;
  for (auto [first, count, keep] : getRuns(live))
    if (keep)
      pieces.push_back(sliceHeads(rewriter, loc, heads, first, count));
  return concatHeads(rewriter, loc, pieces);
}

/// All heads, from `liveHeads` (the live ones, in order) and zeros.
static Value reconstructHeads(RewriterBase &rewriter, Location loc,
                              Value liveHeads, ArrayRef<bool> live) {
  auto type = cast<RankedTensorType>(liveHeads.getType());
  SmallVector<Value> pieces;
  int64_t next = 0;
  for (auto [first, count, keep] : getRuns(live)) {
    if (keep) {
      pieces.push_back(sliceHeads(rewriter, loc, liveHeads, next, count));
      next += count;
      continue;
    }
    auto zerosType = withDim(type, 1, count);
    pieces.push_back(createConstant(
        rewriter, loc,
        DenseElementsAttr::get(zerosType, rewriter.getZeroAttr(type.getElementType()))));
  }
  // Whole-tensor slices of the live heads fold away in canonicalization.
  return concatHeads(rewriter, loc, pieces);
}

FailureOr<PrunedStructure>
mlir::sits::pruneAttentionHeads(RewriterBase &rewriter, AttentionOp attention,
                                double threshold) {
  // The output side: [B, H, T, Dv] -> transpose -> [B, T, H*Dv] -> matmul.
  Value result = attention.getResult();
  auto resultType = cast<RankedTensorType>(result.getType());
  if (!resultType.hasStaticShape() || resultType.getRank() != 4)
    return rewriter.notifyMatchFailure(attention, "not static [B, H, T, D]");
  int64_t numHeads = resultType.getDimSize(1), valueDim = resultType.getDimSize(3);
  // Grouped-query attention: query head h reads key/value head h / group.
  int64_t numKVHeads = cast<ShapedType>(attention.getKey().getType()).getDimSize(1);
  if (ShapedType::isDynamic(numKVHeads) || numKVHeads <= 0 || numHeads % numKVHeads)
    return rewriter.notifyMatchFailure(attention, "key/value heads do not divide query heads");
  int64_t group = numHeads / numKVHeads;
  linalg::TransposeOp outTranspose;
  tensor::CollapseShapeOp collapse;
  MatmulOp projection;
  ElementsAttr projectionWeight;
  if (result.hasOneUse() &&
      isHeadTranspose(outTranspose = dyn_cast<linalg::TransposeOp>(*result.getUsers().begin())) &&
      outTranspose->getResult(0).hasOneUse() &&
      (collapse = dyn_cast<tensor::CollapseShapeOp>(*outTranspose->getResult(0).getUsers().begin())) &&
      isSplitLastDim(collapse.getReassociationIndices()) && collapse->hasOneUse() &&
      (projection = dyn_cast<MatmulOp>(*collapse->getUsers().begin())) &&
      projection.getLhs() == collapse.getResult() && !projection.getTransposeLhs())
    projectionWeight = getConstantElements(projection.getRhs());
  if (projectionWeight && cast<ShapedType>(projectionWeight.getType()).getRank() != 2)
    projectionWeight = {};

  std::optional<HeadProjection> query = matchHeadProjection(attention.getQuery());
  std::optional<HeadProjection> key = matchHeadProjection(attention.getKey());
  std::optional<HeadProjection> value = matchHeadProjection(attention.getValue());

  // Heads contributing nothing: zero rows of the output projection, or zero
  // value columns and bias (softmax-weighted averages of zero vectors).
  // `magnitude[h]` bounds what head h contributes (the smaller of its
  // output rows' and its value head's max-abs).
  SmallVector<bool> live(numHeads, true);
  SmallVector<double> magnitude(numHeads, std::numeric_limits<double>::infinity());
  std::optional<std::vector<double>> wo;
  int64_t projectionInDim = projection && projection.getTransposeRhs() ? 1 : 0;
  if (projectionWeight && (wo = readFloats(projectionWeight))) {
    auto type = cast<RankedTensorType>(projectionWeight.getType());
    SmallVector<double> rows = maxAbsAlong(*wo, type.getShape(), projectionInDim);
    for (int64_t h = 0; h < numHeads; ++h)
      magnitude[h] = *std::max_element(rows.begin() + h * valueDim,
                                       rows.begin() + (h + 1) * valueDim);
  }
  std::optional<SmallVector<double>> valueMagnitudes;
  if (value && value->numHeads == numKVHeads && (valueMagnitudes = headMagnitudes(*value)))
    for (int64_t h = 0; h < numHeads; ++h)
      magnitude[h] = std::min(magnitude[h], (*valueMagnitudes)[h / group]);
  for (int64_t h = 0; h < numHeads; ++h)
    if (magnitude[h] <= threshold)
      live[h] = false;
  int64_t numLive = llvm::count(live, true);
  int64_t numDead = numHeads - numLive;
  if (numLive == numHeads)
    return rewriter.notifyMatchFailure(attention, "no prunable head");

  auto remark = [&](StringRef why) {
    attention.emitRemark() << numDead << " of " << numHeads
                           << " heads contribute nothing but are not pruned: "
                           << why;
    return failure();
  };
  if (numLive == 0)
    return remark("the attention would have no head left");
  if (!projectionWeight || !wo)
    return remark("the output is not read by a recognised output projection "
                  "(transpose, collapse_shape, sits.matmul with constant weights)");
  if (!query || !key || !value)
    return remark("the query, key and value are not recognised head "
                  "projections (sits.matmul, extract_slice, expand_shape, "
                  "transpose)");
  if (query->numHeads != numHeads || key->numHeads != numKVHeads ||
      value->numHeads != numKVHeads)
    return rewriter.notifyMatchFailure(attention, "projections disagree with the head counts");
  if (Value mask = attention.getMask()) {
    auto maskType = cast<ShapedType>(mask.getType());
    if (maskType.getRank() >= 3 && maskType.getDimSize(maskType.getRank() - 3) != 1)
      return remark("the mask differs per head");
  }
  SmallVector<HeadProjection *> projections = {&*query, &*key, &*value};
  // A cache that is also returned stays whole; the attention would read a
  // copy of its live heads, and copying the past costs more than the pruned
  // weights save (gpt_decode on a CPU: 18% slower).
  for (HeadProjection *p : projections)
    if (p->cache && !p->read.hasOneUse())
      return remark("the keys or values are read from a KV cache that is also "
                    "returned, and selecting their live heads would copy it");
  if (query->read == key->read || key->read == value->read ||
      query->read == value->read)
    return remark("query, key and value share a tensor");

  // Every key/value head that keeps a query head must keep the same number
  // of them: the new attention maps query head h to key/value head
  // h / (Hq' / Hkv'), which is the old mapping only when the groups stay
  // equal (with MHA, groups of one, this always holds). Groups keep as many
  // heads as the fullest one, putting back the prunable heads contributing
  // the most (exactly zero ones change nothing); groups left without a head
  // go with their key/value head.
  SmallVector<int64_t> groupLive(numKVHeads, 0);
  for (int64_t h = 0; h < numHeads; ++h)
    groupLive[h / group] += live[h];
  int64_t keepPerGroup = *llvm::max_element(groupLive);
  int64_t putBack = 0;
  for (int64_t j = 0; j < numKVHeads; ++j) {
    if (groupLive[j] == 0 || groupLive[j] == keepPerGroup)
      continue;
    SmallVector<int64_t> prunable;
    for (int64_t h = j * group; h < (j + 1) * group; ++h)
      if (!live[h])
        prunable.push_back(h);
    llvm::stable_sort(prunable, [&](int64_t a, int64_t b) { return magnitude[a] > magnitude[b]; });
    for (int64_t h : ArrayRef(prunable).take_front(keepPerGroup - groupLive[j]))
      live[h] = true;
    putBack += keepPerGroup - groupLive[j];
  }
  numLive += putBack;
  if (numLive == numHeads)
    return remark("removing them would leave key/value heads with different "
                  "numbers of query heads (query head h reads key/value head "
                  "h / (Hq / Hkv))");
  SmallVector<bool> kvLive(numKVHeads);
  for (int64_t j = 0; j < numKVHeads; ++j)
    kvLive[j] = groupLive[j] > 0;
  int64_t numKVLive = llvm::count(kvLive, true);
  // The heads kept of projection i (query, key, value).
  auto liveOf = [&](unsigned i) -> ArrayRef<bool> { return i == 0 ? live : kvLive; };
  auto numLiveOf = [&](unsigned i) { return i == 0 ? numLive : numKVLive; };

  // Per projection: drop the pruned heads' columns ("shrink") unless other
  // users of its per-head tensor need them; they can be rebuilt as zeros
  // when they are exactly zero.
  SmallVector<bool> shrink;
  for (auto [i, p] : llvm::enumerate(projections)) {
    ArrayRef<bool> kept = liveOf(i);
    bool othersUsers = llvm::any_of(p->read.getUsers(), [&](Operation *user) {
      return user != attention.getOperation();
    });
    bool exactZero = false;
    if (othersUsers) {
      std::optional<SmallVector<double>> magnitudes = headMagnitudes(*p);
      exactZero = magnitudes && llvm::all_of(llvm::seq<int64_t>(0, p->numHeads), [&](int64_t h) {
                    return kept[h] || (*magnitudes)[h] == 0.0;
                  });
    }
    shrink.push_back(!othersUsers || exactZero);
  }
  // A source matmul is rebuilt with fewer columns only when all its users
  // are projections of this attention.
  llvm::MapVector<Operation *, SmallVector<unsigned>> sources;
  for (auto [i, p] : llvm::enumerate(projections))
    sources[p->source].push_back(i);
  llvm::DenseSet<Operation *> rebuilt;
  for (auto &[source, members] : sources) {
    bool all = llvm::all_of(source->getUsers(), [&](Operation *user) {
      return llvm::any_of(members, [&](unsigned i) {
        return user == projections[i]->slice.getOperation() ||
               user == projections[i]->expand.getOperation();
      });
    });
    // Rebuilding a source whose weights another op keeps would add bytes.
    auto matmul = cast<MatmulOp>(source);
    if (all && isOwnedConstant(matmul.getRhs()) &&
        (!matmul.getBias() || isOwnedConstant(matmul.getBias())))
      rebuilt.insert(source);
  }

  PrunedStructure pruned;
  pruned.total = numHeads;
  pruned.kvTotal = numKVHeads;
  pruned.keptForGroups = putBack;
  for (int64_t h = 0; h < numHeads; ++h)
    if (!live[h])
      pruned.removed.push_back(h);
  for (int64_t j = 0; j < numKVHeads; ++j)
    if (!kvLive[j])
      pruned.kvRemoved.push_back(j);

  // Everything that can fail comes before the first change to the IR.
  SmallVector<int64_t> rows;
  for (int64_t h = 0; h < numHeads; ++h)
    if (live[h])
      for (int64_t d = 0; d < valueDim; ++d)
        rows.push_back(h * valueDim + d);
  FailureOr<TypedAttr> newWo = gatherConstant(projectionWeight, projectionInDim, rows);
  if (failed(newWo))
    return rewriter.notifyMatchFailure(attention, "weights are not plain dense data");
  pruned.bytesRemoved += getStorageBytes(projectionWeight) - getStorageBytes(cast<ElementsAttr>(*newWo));

  Location loc = attention.getLoc();
  SmallVector<Value> liveInputs(3);
  for (auto &[sourceOp, members] : sources) {
    auto source = cast<MatmulOp>(sourceOp);
    if (!rebuilt.contains(sourceOp)) {
      // Keep the columns; the attention reads the live heads out of them.
      rewriter.setInsertionPoint(attention);
      for (unsigned i : members)
        liveInputs[i] = selectHeads(rewriter, loc, projections[i]->read, liveOf(i));
      continue;
    }
    // Columns still needed, projection by projection.
    HeadProjection &first = *projections[members.front()];
    SmallVector<int64_t> columns;
    SmallVector<int64_t> newOffset(3, 0);
    SmallVector<unsigned> byOffset(members);
    llvm::sort(byOffset, [&](unsigned a, unsigned b) {
      return projections[a]->offset < projections[b]->offset;
    });
    for (unsigned i : byOffset) {
      HeadProjection &p = *projections[i];
      newOffset[i] = columns.size();
      for (int64_t h = 0; h < p.numHeads; ++h)
        if (liveOf(i)[h] || !shrink[i])
          for (int64_t d = 0; d < p.headDim; ++d)
            columns.push_back(p.offset + h * p.headDim + d);
    }
    FailureOr<TypedAttr> weight = gatherConstant(first.weight, first.outDim, columns);
    FailureOr<TypedAttr> bias =
        first.bias ? gatherConstant(first.bias, 0, columns) : FailureOr<TypedAttr>(TypedAttr());
    if (failed(weight) || failed(bias))
      return rewriter.notifyMatchFailure(attention, "weights are not plain dense data");
    pruned.bytesRemoved += getStorageBytes(first.weight) - getStorageBytes(cast<ElementsAttr>(*weight));
    if (first.bias)
      pruned.bytesRemoved += getStorageBytes(first.bias) - getStorageBytes(cast<ElementsAttr>(*bias));

    rewriter.setInsertionPoint(source);
    Location sourceLoc = source.getLoc();
    Value weightConstant = createConstant(rewriter, sourceLoc, *weight);
    Value biasConstant = *bias ? createConstant(rewriter, sourceLoc, *bias) : Value();
    auto newSource = cast<MatmulOp>(rewriter.clone(*source));
    newSource.getRhsMutable().assign(weightConstant);
    if (biasConstant)
      newSource.getBiasMutable().assign(biasConstant);
    auto columnsType = withDim(source.getType(), 2, columns.size());
    newSource->getResult(0).setType(columnsType);
    for (unsigned i : members) {
      HeadProjection &p = *projections[i];
      int64_t count = shrink[i] ? numLiveOf(i) : p.numHeads;
      Value slice = newSource.getResult();
      if (count * p.headDim != int64_t(columns.size())) {
        SmallVector<OpFoldResult> offsets = {rewriter.getIndexAttr(0), rewriter.getIndexAttr(0),
                                             rewriter.getIndexAttr(newOffset[i])};
        SmallVector<OpFoldResult> sizes = {rewriter.getIndexAttr(columnsType.getDimSize(0)),
                                           rewriter.getIndexAttr(columnsType.getDimSize(1)),
                                           rewriter.getIndexAttr(count * p.headDim)};
        SmallVector<OpFoldResult> strides(3, rewriter.getIndexAttr(1));
        slice = tensor::ExtractSliceOp::create(rewriter, p.expand.getLoc(), slice, offsets,
                                               sizes, strides);
      }
      auto expandedType = withDim(p.expand.getResultType(), 2, count);
      Value expanded = tensor::ExpandShapeOp::create(
          rewriter, p.expand.getLoc(), expandedType, slice, p.expand.getReassociationIndices());
      auto headsType = withDim(p.heads.getType(), 1, count);
      Value init = tensor::EmptyOp::create(rewriter, p.transpose.getLoc(), headsType.getShape(),
                                           headsType.getElementType());
      Value heads = linalg::TransposeOp::create(rewriter, p.transpose.getLoc(), expanded, init,
                                                ArrayRef<int64_t>{0, 2, 1, 3})
                        ->getResult(0);
      bool otherUsers = llvm::any_of(p.read.getUsers(), [&](Operation *user) {
        return user != attention.getOperation();
      });
      Value all = heads;
      if (shrink[i] && otherUsers)
        all = reconstructHeads(rewriter, p.transpose.getLoc(), heads, liveOf(i));
      {
        // The attention reads the live heads, after the live heads of the
        // cache when there is one.
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPoint(attention);
        Value liveHeads = shrink[i] ? heads : selectHeads(rewriter, loc, heads, liveOf(i));
        liveInputs[i] = liveHeads;
        if (p.cache)
          liveInputs[i] = tensor::ConcatOp::create(
              rewriter, p.cache.getLoc(), 2,
              ValueRange{selectHeads(rewriter, loc, p.past, liveOf(i)), liveHeads});
      }
      // Everyone else (returned keys and values) sees every head, as before.
      // (A cache with other users was refused above.)
      if (otherUsers)
        rewriter.replaceUsesWithIf(p.read, all, [&](OpOperand &use) {
          return use.getOwner() != attention.getOperation();
        });
    }
  }

  // The attention over the live heads, and the output projection without
  // the pruned heads' rows.
  rewriter.setInsertionPoint(attention);
  auto newAttention = cast<AttentionOp>(rewriter.clone(*attention));
  newAttention.getQueryMutable().assign(liveInputs[0]);
  newAttention.getKeyMutable().assign(liveInputs[1]);
  newAttention.getValueMutable().assign(liveInputs[2]);
  newAttention->getResult(0).setType(withDim(resultType, 1, numLive));
  auto transposedType = withDim(outTranspose->getResult(0).getType(), 2, numLive);
  Value init = tensor::EmptyOp::create(rewriter, outTranspose.getLoc(), transposedType.getShape(),
                                       transposedType.getElementType());
  Value transposed = linalg::TransposeOp::create(rewriter, outTranspose.getLoc(),
                                                 newAttention.getResult(), init,
                                                 ArrayRef<int64_t>{0, 2, 1, 3})
                         ->getResult(0);
  Value collapsed = tensor::CollapseShapeOp::create(rewriter, collapse.getLoc(), transposed,
                                                    collapse.getReassociationIndices());
  rewriter.setInsertionPoint(projection);
  Value woConstant = createConstant(rewriter, projection.getLoc(), *newWo);
  rewriter.modifyOpInPlace(projection, [&] {
    projection.getLhsMutable().assign(collapsed);
    projection.getRhsMutable().assign(woConstant);
  });
  return pruned;
}

//===----------------------------------------------------------------------===//
// Dead code
//===----------------------------------------------------------------------===//

int64_t mlir::sits::eraseDeadOps(RewriterBase &rewriter, Region &region) {
  int64_t erased = 0;
  for (Block &block : region)
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isOpTriviallyDead(&op)) {
        rewriter.eraseOp(&op);
        ++erased;
      }
  return erased;
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {

struct SitsPrunePass : sits::impl::SitsPruneBase<SitsPrunePass> {
  using SitsPruneBase::SitsPruneBase;

  SmallVector<Attribute> report;

  void record(Operation *op, StringRef kind, ArrayRef<NamedAttribute> extra) {
    Builder b(&getContext());
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("op", b.getStringAttr(getReportName(op->getLoc()))),
        b.getNamedAttr("kind", b.getStringAttr(kind))};
    llvm::append_range(fields, extra);
    report.push_back(b.getDictionaryAttr(fields));
  }

  void recordStructure(Operation *op, StringRef kind, const PrunedStructure &pruned,
                       Operation *consumer, int64_t multiple = 1) {
    Builder b(&getContext());
    SmallVector<NamedAttribute> fields = {
        b.getNamedAttr("removed", b.getI64IntegerAttr(pruned.removed.size())),
        b.getNamedAttr("total", b.getI64IntegerAttr(pruned.total)),
        b.getNamedAttr("indices", b.getI64ArrayAttr(pruned.removed)),
        b.getNamedAttr("bytes", b.getI64IntegerAttr(pruned.bytesRemoved)),
        b.getNamedAttr("threshold", b.getF64FloatAttr(threshold))};
    if (consumer) {
      fields.push_back(b.getNamedAttr(
          "consumer", b.getStringAttr(getReportName(consumer->getLoc()))));
      fields.push_back(b.getNamedAttr("multiple", b.getI64IntegerAttr(multiple)));
    }
    if (pruned.foldedIntoBias)
      fields.push_back(b.getNamedAttr("folded_into_bias",
                                      b.getI64IntegerAttr(pruned.foldedIntoBias)));
    // Grouped-query attention: key/value heads are not the query heads.
    if (pruned.kvTotal && pruned.kvTotal != pruned.total) {
      fields.push_back(b.getNamedAttr("kv_removed", b.getI64IntegerAttr(pruned.kvRemoved.size())));
      fields.push_back(b.getNamedAttr("kv_total", b.getI64IntegerAttr(pruned.kvTotal)));
      fields.push_back(b.getNamedAttr("kv_indices", b.getI64ArrayAttr(pruned.kvRemoved)));
      fields.push_back(b.getNamedAttr("kept_for_groups", b.getI64IntegerAttr(pruned.keptForGroups)));
    }
    record(op, kind, fields);
  }

  int64_t constantBytes() {
    int64_t bytes = 0;
    getOperation()->walk([&](arith::ConstantOp op) {
      if (auto value = dyn_cast<ElementsAttr>(op.getValue()))
        bytes += getStorageBytes(value);
    });
    return bytes;
  }

  void runOnOperation() override {
    if (!(threshold >= 0.0) || std::isinf(threshold)) {
      getOperation().emitError()
          << "sits-prune: 'threshold' must be a finite number >= 0, got "
          << threshold;
      return signalPassFailure();
    }
    if (channelMultiple < 0) {
      getOperation().emitError()
          << "sits-prune: 'channel-multiple' must be >= 0, got "
          << static_cast<int64_t>(channelMultiple);
      return signalPassFailure();
    }
    // 0: the target's SIMD width (float lanes of a CPU, a GPU's warp);
    // without a target, no rounding.
    int64_t multiple = channelMultiple;
    if (multiple == 0) {
      multiple = 1;
      if (const target::TargetInfo *info = getModuleTarget(getOperation()))
        multiple = std::max<int64_t>(1, info->simdWidth);
    }
    IRRewriter rewriter(&getContext());
    Builder b(&getContext());
    int64_t bytesBefore = constantBytes();

    getOperation()->walk([&](FunctionOpInterface func) {
      if (func.isExternal())
        return;
      // Program order: a folded producer makes its consumer foldable.
      SmallVector<Operation *> ops;
      func->walk([&](Operation *op) {
        if (op->getParentOp() == func.getOperation())
          ops.push_back(op);
      });
      for (Operation *op : ops) {
        std::string name = getReportName(op->getLoc());
        StringRef opName = op->getName().getStringRef();
        if (succeeded(foldConstantSubgraph(rewriter, op))) {
          ++numFolded;
          report.push_back(b.getDictionaryAttr(
              {b.getNamedAttr("op", b.getStringAttr(name)),
               b.getNamedAttr("kind", b.getStringAttr("constant_fold")),
               b.getNamedAttr("what", b.getStringAttr(opName))}));
          continue;
        }
        if (succeeded(removeIdentityOp(rewriter, op))) {
          ++numIdentities;
          report.push_back(b.getDictionaryAttr(
              {b.getNamedAttr("op", b.getStringAttr(name)),
               b.getNamedAttr("kind", b.getStringAttr("identity")),
               b.getNamedAttr("what", b.getStringAttr(opName))}));
        }
      }
      int64_t dead = eraseDeadOps(rewriter, func.getFunctionBody());
      if (dead)
        record(func, "dead_code", {b.getNamedAttr("ops", b.getI64IntegerAttr(dead))});
      numDead += dead;
      if (!structured)
        return;

      // Channels in program order: pruning a consumer's input channels
      // leaves it a valid producer for the next pair.
      SmallVector<Operation *> contractions;
      func->walk([&](Operation *op) {
        if (isa<MatmulOp, ConvOp>(op))
          contractions.push_back(op);
      });
      for (Operation *op : contractions) {
        Operation *consumer = nullptr;
        if (op->getResult(0).hasOneUse()) {
          consumer = *op->getResult(0).getUsers().begin();
          if (isa<ActivationOp>(consumer) && consumer->getResult(0).hasOneUse())
            consumer = *consumer->getResult(0).getUsers().begin();
        }
        FailureOr<PrunedStructure> pruned =
            pruneContractionChannels(rewriter, op, threshold, multiple);
        if (failed(pruned))
          continue;
        numChannels += pruned->removed.size();
        recordStructure(op, isa<ConvOp>(op) ? "conv_channels" : "ffn_channels",
                        *pruned, consumer, multiple);
      }
      SmallVector<AttentionOp> attentions;
      func->walk([&](AttentionOp op) { attentions.push_back(op); });
      for (AttentionOp op : attentions) {
        FailureOr<PrunedStructure> pruned =
            pruneAttentionHeads(rewriter, op, threshold);
        if (failed(pruned))
          continue;
        numHeads += pruned->removed.size();
        if (pruned->kvTotal != pruned->total)
          numKVHeads += pruned->kvRemoved.size();
        recordStructure(op, "attention_heads", *pruned, nullptr);
      }
      numDead += eraseDeadOps(rewriter, func.getFunctionBody());
    });

    int64_t bytesAfter = constantBytes();
    numBytes += bytesBefore - bytesAfter;
    record(getOperation(), "summary",
           {b.getNamedAttr("constant_bytes_before", b.getI64IntegerAttr(bytesBefore)),
            b.getNamedAttr("constant_bytes_after", b.getI64IntegerAttr(bytesAfter)),
            b.getNamedAttr("threshold", b.getF64FloatAttr(threshold))});
    getOperation()->setAttr("sits.report.pruning", b.getArrayAttr(report));
  }
};

} // namespace
