//===- WeightValues.cpp - Constant weights as numbers ---------------------===//
//
// Pruning decides from weight magnitudes and rewrites weights by gathering
// the kept slices; these helpers read constants as doubles and write them
// back in their own element type and storage (inline or resource).
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Prune/WeightValues.h"

#include "passes/Transforms/ConstantData.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace mlir::sits;

ElementsAttr prune::getConstantElements(Value value) {
  Attribute attr;
  if (!value || !matchPattern(value, m_Constant(&attr)))
    return {};
  return dyn_cast<ElementsAttr>(attr);
}

double prune::toDouble(APFloat value) {
  bool lost;
  value.convert(APFloat::IEEEdouble(), APFloat::rmNearestTiesToEven, &lost);
  return value.convertToDouble();
}

/// The elements of a statically shaped float constant as doubles, row-major.
std::optional<std::vector<double>> prune::readFloats(ElementsAttr value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape() || !isa<FloatType>(type.getElementType()))
    return std::nullopt;
  auto floatType = cast<FloatType>(type.getElementType());
  std::vector<double> out(type.getNumElements());
  if (auto dense = dyn_cast<DenseElementsAttr>(value);
      dense && dense.isSplat()) {
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
      out[i] =
          toDouble(APFloat(floatType.getFloatSemantics(), APInt(width, bits)));
    }
  }
  return out;
}

/// A constant like `original` (a resource when it is one) of `type` holding
/// `values` rounded to the element type.
TypedAttr prune::writeFloats(ElementsAttr original, RankedTensorType type,
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
int64_t prune::getStorageBytes(ElementsAttr value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return 0;
  int64_t bits = type.getElementType().getIntOrFloatBitWidth();
  auto dense = dyn_cast<DenseElementsAttr>(value);
  int64_t elements = dense && dense.isSplat() ? 1 : type.getNumElements();
  return (elements * bits + 7) / 8;
}

/// Row-major strides of `shape`.
SmallVector<int64_t> prune::getStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = int64_t(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

/// max |v| over each index of dimension `dim`.
SmallVector<double> prune::maxAbsAlong(ArrayRef<double> values,
                                       ArrayRef<int64_t> shape, int64_t dim) {
  SmallVector<double> result(shape[dim], 0.0);
  int64_t inner = getStrides(shape)[dim];
  int64_t extent = shape[dim];
  if (inner == 0 || extent == 0)
    return result;
  // In storage order: [outer, extent, inner], no division per element.
  const double *v = values.data();
  for (size_t base = 0; base < values.size(); base += extent * inner)
    for (int64_t index = 0; index < extent; ++index, v += inner) {
      double &slot = result[index];
      for (int64_t j = 0; j < inner; ++j) {
        // NaN compares false and so never makes a slice look prunable.
        double magnitude = std::fabs(v[j]);
        if (!(magnitude <= slot))
          slot = magnitude;
      }
    }
  return result;
}

/// The constant `value` keeping only `indices` along dimension `dim`.
FailureOr<TypedAttr> prune::gatherConstant(ElementsAttr value, int64_t dim,
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
  int64_t outer =
      type.getNumElements() * elementBytes / (inner * type.getDimSize(dim));
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(
      outer * indices.size() * inner, /*align=*/64);
  char *out = blob.getMutableData().data();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t index : indices) {
      std::memcpy(out,
                  bytes->data() + (o * type.getDimSize(dim) + index) * inner,
                  inner);
      out += inner;
    }
  return makeConstantLike(value, newType, std::move(blob), ".pruned");
}

/// Whether `value` is a constant gatherConstant can rewrite that no other op
/// shares (splats are one element: sharing them costs nothing).
bool prune::isOwnedConstant(Value value) {
  ElementsAttr attr = getConstantElements(value);
  if (!attr)
    return false;
  if (auto dense = dyn_cast<DenseElementsAttr>(attr); dense && dense.isSplat())
    return true;
  return value.hasOneUse() && getConstantBytes(attr).has_value();
}

Value prune::createConstant(RewriterBase &rewriter, Location loc,
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
           (1.0 +
            std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  case ActivationKind::Silu:
    return x / (1.0 + std::exp(-x));
  case ActivationKind::Sigmoid:
    return 1.0 / (1.0 + std::exp(-x));
  case ActivationKind::Tanh:
    return std::tanh(x);
  }
  llvm_unreachable("unknown activation");
}

RankedTensorType prune::withDim(Type type, int64_t dim, int64_t size) {
  auto ranked = cast<RankedTensorType>(type);
  SmallVector<int64_t> shape(ranked.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, ranked.getElementType(),
                               ranked.getEncoding());
}
