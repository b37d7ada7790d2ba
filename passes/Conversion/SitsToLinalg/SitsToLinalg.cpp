//===- SitsToLinalg.cpp - Lower SITS ops to linalg on tensors -------------===//
//
// One function per SITS op builds its computation with upstream ops on
// tensors; thin OpConversionPatterns apply them under a type converter that
// turns #sits.packed tensors into their storage and unsigned integers into
// signless ones. Conventions shared by every lowering:
//
// * Arithmetic runs in the op's float type widened to at least f32 (the
//   "compute type"): f16/bf16 contractions accumulate in f32 and normalize,
//   reduce and activate in f32; one cast to the result type comes last.
// * Contractions accumulate into a zero-filled `linalg.fill` and end with one
//   elementwise `linalg.generic` (bias, activation, cast) that consumes the
//   contraction directly, before any reshape back to the result shape, so
//   elementwise fusion can put it in the contraction's epilogue.
// * Broadcasts of static size-1 extents are expressed by collapsing the unit
//   dimension away and leaving it out of the indexing map; dynamic extents
//   are assumed not to broadcast.
// * Sizes prefer the static extents of the op's declared result type, then
//   static operand extents, then `tensor.dim`; a `tensor.cast` reconciles the
//   lowered value with a declared type that is less static.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/Passes.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

namespace mlir::sits {
#define GEN_PASS_DEF_SITSCONVERTTOLINALG
#include "passes/Conversion/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

using utils::IteratorType;

//===----------------------------------------------------------------------===//
// Type conversion
//===----------------------------------------------------------------------===//

PackedEncodingAttr mlir::sits::getPackedEncoding(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? dyn_cast_or_null<PackedEncodingAttr>(tensor.getEncoding())
                : PackedEncodingAttr();
}

RankedTensorType
SitsToLinalgTypeConverter::convertTensorType(RankedTensorType type) {
  Type element = type.getElementType();
  if (PackedEncodingAttr packed = getPackedEncoding(type)) {
    SmallVector<int64_t> shape(type.getShape());
    int64_t &extent = shape[packed.getAxis()];
    if (!ShapedType::isDynamic(extent))
      extent /= packed.getPackingFactor(element);
    return RankedTensorType::get(shape, packed.getStorage());
  }
  auto integer = dyn_cast<IntegerType>(element);
  if (!integer || integer.isSignless())
    return type;
  return RankedTensorType::get(
      type.getShape(),
      IntegerType::get(type.getContext(), integer.getWidth()),
      type.getEncoding());
}

SitsToLinalgTypeConverter::SitsToLinalgTypeConverter() {
  // Tried last: everything else is legal as is.
  addConversion([](Type type) { return type; });
  addConversion([](RankedTensorType type) -> Type {
    return convertTensorType(type);
  });
}

//===----------------------------------------------------------------------===//
// Builders shared by the lowerings
//===----------------------------------------------------------------------===//

namespace {

constexpr IteratorType kParallel = IteratorType::parallel;
constexpr IteratorType kReduction = IteratorType::reduction;

/// The float type arithmetic runs in: the element type widened to f32.
FloatType getComputeType(Type elementType) {
  auto type = cast<FloatType>(elementType);
  if (type.getWidth() < 32)
    return Float32Type::get(type.getContext());
  return type;
}

Value floatConst(OpBuilder &b, Location loc, Type type, const APFloat &value) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
}

Value floatConst(OpBuilder &b, Location loc, Type type, double value) {
  return arith::ConstantOp::create(b, loc, b.getFloatAttr(type, value));
}

/// The most negative finite value of a float type: what masked attention
/// scores are set to.
Value lowestConst(OpBuilder &b, Location loc, Type type) {
  return floatConst(b, loc, type,
                    APFloat::getLargest(
                        cast<FloatType>(type).getFloatSemantics(),
                        /*Negative=*/true));
}

Value negInfConst(OpBuilder &b, Location loc, Type type) {
  return floatConst(
      b, loc, type,
      APFloat::getInf(cast<FloatType>(type).getFloatSemantics(), true));
}

/// Converts a float scalar to another float type.
Value castFloat(OpBuilder &b, Location loc, Value value, Type to) {
  Type from = value.getType();
  if (from == to)
    return value;
  unsigned fromWidth = from.getIntOrFloatBitWidth();
  unsigned toWidth = to.getIntOrFloatBitWidth();
  if (fromWidth < toWidth)
    return arith::ExtFOp::create(b, loc, to, value);
  if (fromWidth > toWidth)
    return arith::TruncFOp::create(b, loc, to, value);
  // Same width, different format (f16 <-> bf16): through f32, exactly.
  Value wide = arith::ExtFOp::create(b, loc, b.getF32Type(), value);
  return arith::TruncFOp::create(b, loc, to, wide);
}

Value indexValue(OpBuilder &b, Location loc, OpFoldResult size) {
  return getValueOrCreateConstantIndexOp(b, loc, size);
}

OpFoldResult mulSizes(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y) {
  std::optional<int64_t> cx = getConstantIntValue(x);
  std::optional<int64_t> cy = getConstantIntValue(y);
  if (cx && cy)
    return b.getIndexAttr(*cx * *cy);
  if (cx == 1)
    return y;
  if (cy == 1)
    return x;
  return arith::MulIOp::create(b, loc, indexValue(b, loc, x),
                               indexValue(b, loc, y))
      .getResult();
}

/// Exact division of two non-negative sizes.
OpFoldResult divSizes(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y) {
  std::optional<int64_t> cx = getConstantIntValue(x);
  std::optional<int64_t> cy = getConstantIntValue(y);
  if (cx && cy)
    return b.getIndexAttr(*cx / *cy);
  if (cy == 1)
    return x;
  return arith::DivUIOp::create(b, loc, indexValue(b, loc, x),
                                indexValue(b, loc, y))
      .getResult();
}

OpFoldResult addSizes(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y) {
  std::optional<int64_t> cx = getConstantIntValue(x);
  std::optional<int64_t> cy = getConstantIntValue(y);
  if (cx && cy)
    return b.getIndexAttr(*cx + *cy);
  return arith::AddIOp::create(b, loc, indexValue(b, loc, x),
                               indexValue(b, loc, y))
      .getResult();
}

OpFoldResult subSizes(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y) {
  std::optional<int64_t> cx = getConstantIntValue(x);
  std::optional<int64_t> cy = getConstantIntValue(y);
  if (cx && cy)
    return b.getIndexAttr(*cx - *cy);
  return arith::SubIOp::create(b, loc, indexValue(b, loc, x),
                               indexValue(b, loc, y))
      .getResult();
}

OpFoldResult productOf(OpBuilder &b, Location loc,
                       ArrayRef<OpFoldResult> sizes) {
  OpFoldResult product = b.getIndexAttr(1);
  for (OpFoldResult size : sizes)
    product = mulSizes(b, loc, product, size);
  return product;
}

SmallVector<int64_t> staticShapeOf(ArrayRef<OpFoldResult> sizes) {
  return llvm::map_to_vector(sizes, [](OpFoldResult size) {
    return getConstantIntValue(size).value_or(ShapedType::kDynamic);
  });
}

/// Extent `dim` of a tensor value: a constant when static, `tensor.dim`
/// otherwise.
OpFoldResult dimOf(OpBuilder &b, Location loc, Value tensor, int64_t dim) {
  return tensor::getMixedSize(b, loc, tensor, dim);
}

/// Extent `dim` of `type` when static, `fallback()` otherwise.
OpFoldResult sizeOr(OpBuilder &b, RankedTensorType type, int64_t dim,
                    function_ref<OpFoldResult()> fallback) {
  if (!type.isDynamicDim(dim))
    return b.getIndexAttr(type.getDimSize(dim));
  return fallback();
}

/// The first static extent among `(tensor, dim)` pairs, else the first one's
/// `tensor.dim`.
OpFoldResult staticFirst(OpBuilder &b, Location loc,
                         ArrayRef<std::pair<Value, int64_t>> candidates) {
  for (auto [tensor, dim] : candidates) {
    auto type = cast<RankedTensorType>(tensor.getType());
    if (!type.isDynamicDim(dim))
      return b.getIndexAttr(type.getDimSize(dim));
  }
  return dimOf(b, loc, candidates.front().first, candidates.front().second);
}

/// An index size as a float of `type`.
Value sizeAsFloat(OpBuilder &b, Location loc, OpFoldResult size, Type type) {
  if (std::optional<int64_t> c = getConstantIntValue(size))
    return floatConst(b, loc, type, static_cast<double>(*c));
  Value i64 = arith::IndexCastUIOp::create(b, loc, b.getI64Type(),
                                           indexValue(b, loc, size));
  return arith::UIToFPOp::create(b, loc, type, i64);
}

Value emptyTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                  Type elementType) {
  return tensor::EmptyOp::create(b, loc, sizes, elementType);
}

/// A tensor of `sizes` filled with `value` (linalg.fill).
Value filledTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                   Value value) {
  Value empty = emptyTensor(b, loc, sizes, value.getType());
  return linalg::FillOp::create(b, loc, ValueRange{value}, ValueRange{empty})
      .getResult(0);
}

/// Reassociation groups that drop the dimensions where `keep` is false: a
/// dropped (unit) dimension joins the next kept one, or the last kept one
/// when no kept dimension follows. No kept dimension: no groups (rank 0).
SmallVector<ReassociationIndices> groupsKeeping(ArrayRef<bool> keep) {
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices pending;
  for (auto [dim, kept] : llvm::enumerate(keep)) {
    pending.push_back(dim);
    if (kept) {
      groups.push_back(pending);
      pending.clear();
    }
  }
  if (!pending.empty() && !groups.empty())
    groups.back().append(pending.begin(), pending.end());
  return groups;
}

/// Groups {[0, split), then one group per remaining dimension}.
SmallVector<ReassociationIndices> groupsMergingLeading(int64_t rank,
                                                       int64_t count) {
  SmallVector<ReassociationIndices> groups;
  ReassociationIndices first;
  for (int64_t d = 0; d < count; ++d)
    first.push_back(d);
  groups.push_back(first);
  for (int64_t d = count; d < rank; ++d)
    groups.push_back({d});
  return groups;
}

/// Groups splitting dimension `dim` of a rank-`rank` tensor in two.
SmallVector<ReassociationIndices> groupsSplitting(int64_t rank, int64_t dim) {
  SmallVector<ReassociationIndices> groups;
  for (int64_t d = 0, out = 0; d < rank; ++d) {
    if (d == dim) {
      groups.push_back({out, out + 1});
      out += 2;
    } else {
      groups.push_back({out++});
    }
  }
  return groups;
}

/// `value` with exactly `type`, through tensor.cast when only the static
/// information differs.
Value castToType(OpBuilder &b, Location loc, Value value,
                 RankedTensorType type) {
  if (value.getType() == type)
    return value;
  return tensor::CastOp::create(b, loc, type, value);
}

Value collapse(OpBuilder &b, Location loc, Value source,
               ArrayRef<ReassociationIndices> groups) {
  if (static_cast<int64_t>(groups.size()) ==
      cast<RankedTensorType>(source.getType()).getRank())
    return source;
  return tensor::CollapseShapeOp::create(b, loc, source, groups);
}

/// Expands `source` to `sizes` along `groups`.
Value expand(OpBuilder &b, Location loc, Value source,
             ArrayRef<ReassociationIndices> groups,
             ArrayRef<OpFoldResult> sizes) {
  if (groups.size() == sizes.size())
    return source;
  auto sourceType = cast<RankedTensorType>(source.getType());
  SmallVector<int64_t> shape = staticShapeOf(sizes);
  // A dynamic source extent split into static ones must be cast static
  // first: expand_shape takes the static product from the source.
  SmallVector<int64_t> sourceShape(sourceType.getShape());
  for (auto [dim, group] : llvm::enumerate(groups)) {
    if (!ShapedType::isDynamic(sourceShape[dim]))
      continue;
    if (llvm::any_of(group, [&](int64_t out) {
          return ShapedType::isDynamic(shape[out]);
        }))
      continue;
    int64_t product = 1;
    for (int64_t out : group)
      product *= shape[out];
    sourceShape[dim] = product;
  }
  source = castToType(
      b, loc, source,
      RankedTensorType::get(sourceShape, sourceType.getElementType()));
  auto type = RankedTensorType::get(shape, sourceType.getElementType());
  return tensor::ExpandShapeOp::create(b, loc, type, source, groups, sizes);
}

AffineMap dimsMap(MLIRContext *ctx, unsigned numDims,
                  ArrayRef<int64_t> dims) {
  SmallVector<AffineExpr> exprs = llvm::map_to_vector(
      dims, [&](int64_t d) { return getAffineDimExpr(d, ctx); });
  return AffineMap::get(numDims, 0, exprs, ctx);
}

/// The identity map of `numDims` dimensions without those in [from, to).
AffineMap withoutDims(MLIRContext *ctx, unsigned numDims, int64_t from,
                      int64_t to) {
  SmallVector<int64_t> dims;
  for (int64_t d = 0; d < numDims; ++d)
    if (d < from || d >= to)
      dims.push_back(d);
  return dimsMap(ctx, numDims, dims);
}

/// Builds a generic's body from its block arguments (inputs, then the
/// output) and returns the value to yield.
using BodyBuilder = function_ref<Value(OpBuilder &, Location, ValueRange)>;

/// A linalg.generic with one output.
Value buildGeneric(OpBuilder &b, Location loc, ValueRange inputs,
                   ArrayRef<AffineMap> inputMaps, Value init, AffineMap initMap,
                   ArrayRef<IteratorType> iterators, BodyBuilder body) {
  SmallVector<AffineMap> maps(inputMaps);
  maps.push_back(initMap);
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{init.getType()}, inputs, ValueRange{init}, maps,
      iterators, [&](OpBuilder &nb, Location nloc, ValueRange args) {
        linalg::YieldOp::create(nb, nloc, body(nb, nloc, args));
      });
  return generic.getResult(0);
}

/// An all-parallel generic over `sizes` writing a new tensor of
/// `elementType`, the output indexed by the identity.
Value buildElementwise(OpBuilder &b, Location loc, ValueRange inputs,
                       ArrayRef<AffineMap> inputMaps,
                       ArrayRef<OpFoldResult> sizes, Type elementType,
                       BodyBuilder body) {
  unsigned rank = sizes.size();
  Value init = emptyTensor(b, loc, sizes, elementType);
  return buildGeneric(b, loc, inputs, inputMaps, init,
                      b.getMultiDimIdentityMap(rank),
                      SmallVector<IteratorType>(rank, kParallel), body);
}

/// Evaluates an index expression of the enclosing generic's loops
/// (non-negative, so divisions are unsigned).
Value evalIndexExpr(OpBuilder &b, Location loc, AffineExpr expr) {
  if (auto dim = dyn_cast<AffineDimExpr>(expr))
    return linalg::IndexOp::create(b, loc, dim.getPosition());
  if (auto constant = dyn_cast<AffineConstantExpr>(expr))
    return arith::ConstantIndexOp::create(b, loc, constant.getValue());
  auto binary = cast<AffineBinaryOpExpr>(expr);
  Value lhs = evalIndexExpr(b, loc, binary.getLHS());
  Value rhs = evalIndexExpr(b, loc, binary.getRHS());
  switch (expr.getKind()) {
  case AffineExprKind::Add:
    return arith::AddIOp::create(b, loc, lhs, rhs);
  case AffineExprKind::Mul:
    return arith::MulIOp::create(b, loc, lhs, rhs);
  case AffineExprKind::FloorDiv:
    return arith::DivUIOp::create(b, loc, lhs, rhs);
  case AffineExprKind::CeilDiv:
    return arith::CeilDivUIOp::create(b, loc, lhs, rhs);
  case AffineExprKind::Mod:
    return arith::RemUIOp::create(b, loc, lhs, rhs);
  default:
    llvm_unreachable("unexpected affine expression");
  }
}

/// `a * b + acc` in the accumulator's type: the body of a contraction.
Value multiplyAccumulate(OpBuilder &b, Location loc, Value x, Value y,
                         Value acc) {
  Type type = acc.getType();
  Value wideX = castFloat(b, loc, x, type);
  Value wideY = castFloat(b, loc, y, type);
  Value product = arith::MulFOp::create(b, loc, wideX, wideY);
  return arith::AddFOp::create(b, loc, acc, product);
}

std::optional<int64_t> optionalInt(IntegerAttr attr) {
  if (!attr)
    return std::nullopt;
  return attr.getInt();
}

} // namespace

//===----------------------------------------------------------------------===//
// Activations and the contraction epilogue
//===----------------------------------------------------------------------===//

Value mlir::sits::buildActivation(OpBuilder &b, Location loc,
                                  ActivationKind kind, Value x) {
  Type type = x.getType();
  auto c = [&](double value) { return floatConst(b, loc, type, value); };
  auto mul = [&](Value l, Value r) -> Value {
    return arith::MulFOp::create(b, loc, l, r);
  };
  auto add = [&](Value l, Value r) -> Value {
    return arith::AddFOp::create(b, loc, l, r);
  };
  // 1 / (1 + exp(-x)): saturates to 0 and 1 without NaN.
  // (Operands are built one statement at a time: the order in which C++
  // evaluates call arguments, hence the printed IR, is unspecified.)
  auto sigmoid = [&](Value v) -> Value {
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, v));
    Value denominator = add(c(1.0), e);
    return arith::DivFOp::create(b, loc, c(1.0), denominator);
  };
  switch (kind) {
  case ActivationKind::None:
    return x;
  case ActivationKind::Relu:
    return arith::MaximumFOp::create(b, loc, x, c(0.0));
  case ActivationKind::Gelu: {
    // 0.5 x (1 + erf(x / sqrt(2))), written 0.5 x erfc(-x / sqrt(2)): the
    // same function, without the cancellation of 1 + erf for x << 0 (which
    // would cost f32 up to 1e-3 relative error in the negative tail).
    Value scaled = mul(x, c(-llvm::numbers::inv_sqrt2));
    Value erfc = math::ErfcOp::create(b, loc, scaled);
    return mul(mul(c(0.5), x), erfc);
  }
  case ActivationKind::GeluTanh: {
    // 0.5 x (1 + tanh(u)), u = sqrt(2 / pi) (x + 0.044715 x^3), written
    // x sigmoid(2 u) for the same reason.
    Value cube = mul(mul(x, x), x);
    Value poly = add(x, mul(c(0.044715), cube));
    return mul(x, sigmoid(mul(c(2.0 * 0.7978845608028654), poly)));
  }
  case ActivationKind::Silu:
    return mul(x, sigmoid(x));
  case ActivationKind::Sigmoid:
    return sigmoid(x);
  case ActivationKind::Tanh:
    return math::TanhOp::create(b, loc, x);
  }
  llvm_unreachable("unknown activation");
}

namespace {

/// The elementwise consumer of a contraction's accumulator `acc` (of
/// `sizes`): adds `bias` (read through `biasMap`; may be null), applies
/// `activation` and converts to `resultElementType`. Returns `acc` when
/// there is nothing to do.
Value buildEpilogue(OpBuilder &b, Location loc, Value acc,
                    ArrayRef<OpFoldResult> sizes, Value bias, AffineMap biasMap,
                    ActivationKind activation, Type resultElementType) {
  Type computeType = cast<RankedTensorType>(acc.getType()).getElementType();
  if (!bias && activation == ActivationKind::None &&
      computeType == resultElementType)
    return acc;
  SmallVector<Value> inputs = {acc};
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(sizes.size())};
  if (bias) {
    inputs.push_back(bias);
    maps.push_back(biasMap);
  }
  return buildElementwise(
      b, loc, inputs, maps, sizes, resultElementType,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value v = args[0];
        if (bias)
          v = arith::AddFOp::create(nb, l, v,
                                    castFloat(nb, l, args[1], computeType));
        v = buildActivation(nb, l, activation, v);
        return castFloat(nb, l, v, resultElementType);
      });
}

/// The matmul of all contractions: `act(op(lhs) x op(rhs) + bias)` with
/// NumPy batch broadcasting, producing `resultType`.
Value buildMatmul(OpBuilder &b, Location loc, Value lhs, Value rhs,
                  bool transposeLhs, bool transposeRhs, Value bias,
                  ActivationKind activation, RankedTensorType resultType) {
  MLIRContext *ctx = b.getContext();
  auto lhsType = cast<RankedTensorType>(lhs.getType());
  auto rhsType = cast<RankedTensorType>(rhs.getType());
  int64_t lhsBatch = lhsType.getRank() - 2, rhsBatch = rhsType.getRank() - 2;
  int64_t batch = resultType.getRank() - 2;
  Type resultElement = resultType.getElementType();
  FloatType computeType = getComputeType(resultElement);

  // Which result batch dimensions each operand really has: a static extent
  // of 1 broadcasts (and is dropped), a missing leading dimension too.
  SmallVector<bool> lhsHas(batch), rhsHas(batch);
  SmallVector<OpFoldResult> sizes;
  for (int64_t p = 0; p < batch; ++p) {
    int64_t li = p - (batch - lhsBatch), ri = p - (batch - rhsBatch);
    lhsHas[p] = li >= 0 && lhsType.getDimSize(li) != 1;
    rhsHas[p] = ri >= 0 && rhsType.getDimSize(ri) != 1;
    sizes.push_back(sizeOr(b, resultType, p, [&]() -> OpFoldResult {
      SmallVector<std::pair<Value, int64_t>> candidates;
      if (lhsHas[p])
        candidates.push_back({lhs, li});
      if (rhsHas[p])
        candidates.push_back({rhs, ri});
      if (candidates.empty())
        return b.getIndexAttr(1);
      return staticFirst(b, loc, candidates);
    }));
  }
  OpFoldResult m = sizeOr(b, resultType, batch, [&] {
    return dimOf(b, loc, lhs, transposeLhs ? lhsBatch + 1 : lhsBatch);
  });
  OpFoldResult n = sizeOr(b, resultType, batch + 1, [&] {
    return dimOf(b, loc, rhs, transposeRhs ? rhsBatch : rhsBatch + 1);
  });
  SmallVector<OpFoldResult> resultSizes(sizes);
  resultSizes.append({m, n});

  SmallVector<int64_t> effective;
  for (int64_t p = 0; p < batch; ++p)
    if (lhsHas[p] || rhsHas[p])
      effective.push_back(p);
  bool lhsAll = llvm::all_of(effective, [&](int64_t p) { return lhsHas[p]; });
  bool lhsNone = llvm::none_of(lhsHas, [](bool has) { return has; });
  bool rhsAll = llvm::all_of(effective, [&](int64_t p) { return rhsHas[p]; });
  bool rhsNone = llvm::none_of(rhsHas, [](bool has) { return has; });

  Value zero = floatConst(b, loc, computeType, 0.0);
  auto d = [&](unsigned pos) { return getAffineDimExpr(pos, ctx); };
  Value acc;
  SmallVector<OpFoldResult> accSizes;
  SmallVector<ReassociationIndices> resultGroups;

  // After bufferization, memref.expand_shape takes at most one dynamic
  // extent per group, so dimensions are merged only when at most one of
  // them is dynamic; otherwise the contraction generic keeps them apart.
  auto mergeable = [](ArrayRef<OpFoldResult> merged) {
    return llvm::count_if(merged, [](OpFoldResult s) {
             return !getConstantIntValue(s).has_value();
           }) <= 1;
  };
  bool mergeIntoM = mergeable(ArrayRef(resultSizes).drop_back());
  bool mergeBatch = mergeable(sizes);

  if ((effective.empty() || (rhsNone && !transposeLhs)) && mergeIntoM) {
    // No batch left, or only the lhs has one and it folds into M: a 2-D
    // linalg.matmul on [batch... * M, K] x [K, N].
    Value lhs2 = lhsBatch > 0
                     ? collapse(b, loc, lhs,
                                groupsMergingLeading(lhsType.getRank(),
                                                     lhsBatch + 1))
                     : lhs;
    Value rhs2 = rhsBatch > 0
                     ? collapse(b, loc, rhs,
                                groupsMergingLeading(rhsType.getRank(),
                                                     rhsBatch + 1))
                     : rhs;
    accSizes = {productOf(b, loc, ArrayRef(resultSizes).drop_back()), n};
    Value init = filledTensor(b, loc, accSizes, zero);
    // (m, n, k)
    AffineMap lhsMap = AffineMap::get(
        3, 0,
        transposeLhs ? SmallVector<AffineExpr>{d(2), d(0)}
                     : SmallVector<AffineExpr>{d(0), d(2)},
        ctx);
    AffineMap rhsMap = AffineMap::get(
        3, 0,
        transposeRhs ? SmallVector<AffineExpr>{d(1), d(2)}
                     : SmallVector<AffineExpr>{d(2), d(1)},
        ctx);
    auto matmul = linalg::MatmulOp::create(b, loc, TypeRange{init.getType()},
                                           ValueRange{lhs2, rhs2},
                                           ValueRange{init});
    if (transposeLhs || transposeRhs)
      matmul.setIndexingMapsAttr(b.getAffineMapArrayAttr(
          {lhsMap, rhsMap, AffineMap::get(3, 0, {d(0), d(1)}, ctx)}));
    acc = matmul.getResult(0);
    resultGroups = groupsMergingLeading(batch + 2, batch + 1);
  } else if ((lhsAll || lhsNone) && (rhsAll || rhsNone) &&
             !(lhsNone && transposeLhs) && !(rhsNone && transposeRhs) &&
             mergeBatch && !effective.empty()) {
    // Every operand has all batch dimensions or none (a broadcast
    // linalg.batch_matmul can express): collapse them into one.
    auto toBatched = [&](Value operand, RankedTensorType type,
                         int64_t operandBatch, bool all) -> Value {
      if (all)
        return operandBatch > 1
                   ? collapse(b, loc, operand,
                              groupsMergingLeading(type.getRank(),
                                                   operandBatch))
                   : operand;
      return operandBatch > 0
                 ? collapse(b, loc, operand,
                            groupsMergingLeading(type.getRank(),
                                                 operandBatch + 1))
                 : operand;
    };
    Value lhs3 = toBatched(lhs, lhsType, lhsBatch, lhsAll);
    Value rhs3 = toBatched(rhs, rhsType, rhsBatch, rhsAll);
    accSizes = {productOf(b, loc, sizes), m, n};
    Value init = filledTensor(b, loc, accSizes, zero);
    // (b, m, n, k)
    SmallVector<AffineExpr> lhsExprs, rhsExprs;
    if (lhsAll)
      lhsExprs.push_back(d(0));
    lhsExprs.append(transposeLhs ? SmallVector<AffineExpr>{d(3), d(1)}
                                 : SmallVector<AffineExpr>{d(1), d(3)});
    if (rhsAll)
      rhsExprs.push_back(d(0));
    rhsExprs.append(transposeRhs ? SmallVector<AffineExpr>{d(2), d(3)}
                                 : SmallVector<AffineExpr>{d(3), d(2)});
    auto batchMatmul = linalg::BatchMatmulOp::create(
        b, loc, TypeRange{init.getType()}, ValueRange{lhs3, rhs3},
        ValueRange{init});
    if (!lhsAll || !rhsAll || transposeLhs || transposeRhs)
      batchMatmul.setIndexingMapsAttr(b.getAffineMapArrayAttr(
          {AffineMap::get(4, 0, lhsExprs, ctx),
           AffineMap::get(4, 0, rhsExprs, ctx),
           AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)}));
    acc = batchMatmul.getResult(0);
    resultGroups = groupsMergingLeading(batch + 2, batch);
  } else {
    // Partial batch broadcasts: a contraction generic over the batch
    // dimensions that remain, (batch..., m, n, k).
    int64_t numBatch = effective.size();
    int64_t mDim = numBatch, nDim = numBatch + 1, kDim = numBatch + 2;
    auto operandMap = [&](Value &operand, RankedTensorType type,
                          int64_t operandBatch, bool transpose,
                          bool isLhs) -> AffineMap {
      SmallVector<bool> keep;
      SmallVector<AffineExpr> exprs;
      for (int64_t i = 0; i < type.getRank(); ++i) {
        bool kept = i >= operandBatch || type.getDimSize(i) != 1;
        keep.push_back(kept);
        if (kept && i < operandBatch) {
          int64_t p = i + (batch - operandBatch);
          exprs.push_back(d(llvm::find(effective, p) - effective.begin()));
        }
      }
      operand = collapse(b, loc, operand, groupsKeeping(keep));
      unsigned outer = isLhs ? mDim : nDim;
      bool rowMajorOuter = isLhs != transpose; // lhs [m, k], rhs^T [n, k]
      if (rowMajorOuter)
        exprs.append({d(outer), d(kDim)});
      else
        exprs.append({d(kDim), d(outer)});
      return AffineMap::get(numBatch + 3, 0, exprs, ctx);
    };
    Value lhsG = lhs, rhsG = rhs;
    AffineMap lhsMap =
        operandMap(lhsG, lhsType, lhsBatch, transposeLhs, /*isLhs=*/true);
    AffineMap rhsMap =
        operandMap(rhsG, rhsType, rhsBatch, transposeRhs, /*isLhs=*/false);
    SmallVector<int64_t> outDims;
    for (int64_t i = 0; i < numBatch; ++i) {
      outDims.push_back(i);
      accSizes.push_back(sizes[effective[i]]);
    }
    outDims.append({mDim, nDim});
    accSizes.append({m, n});
    Value init = filledTensor(b, loc, accSizes, zero);
    SmallVector<IteratorType> iterators(numBatch + 2, kParallel);
    iterators.push_back(kReduction);
    acc = buildGeneric(b, loc, {lhsG, rhsG}, {lhsMap, rhsMap}, init,
                       dimsMap(ctx, numBatch + 3, outDims), iterators,
                       [](OpBuilder &nb, Location l, ValueRange args) {
                         return multiplyAccumulate(nb, l, args[0], args[1],
                                                   args[2]);
                       });
    SmallVector<bool> keepResult;
    for (int64_t p = 0; p < batch + 2; ++p)
      keepResult.push_back(p >= batch || lhsHas[p] || rhsHas[p]);
    resultGroups = groupsKeeping(keepResult);
  }

  unsigned accRank = accSizes.size();
  Value y = buildEpilogue(b, loc, acc, accSizes, bias,
                          dimsMap(ctx, accRank, {accRank - 1}), activation,
                          resultElement);
  y = expand(b, loc, y, resultGroups, resultSizes);
  return castToType(b, loc, y, resultType);
}

} // namespace

//===----------------------------------------------------------------------===//
// Quantization helpers
//===----------------------------------------------------------------------===//

namespace {

/// The map from the loops of a generic over a quantized tensor of `rank` to
/// the indices of its quantization parameter of type `paramType`: nothing
/// (per tensor), `axis` (per channel), or the identity with the axis divided
/// by the block size (per group).
AffineMap quantParamMap(MLIRContext *ctx, int64_t rank,
                        RankedTensorType paramType, std::optional<int64_t> axis,
                        std::optional<int64_t> blockSize) {
  if (paramType.getRank() == 0)
    return AffineMap::get(rank, 0, {}, ctx);
  int64_t a = *axis < 0 ? *axis + rank : *axis;
  if (!blockSize)
    return AffineMap::get(rank, 0, {getAffineDimExpr(a, ctx)}, ctx);
  SmallVector<AffineExpr> exprs;
  for (int64_t d = 0; d < rank; ++d) {
    AffineExpr e = getAffineDimExpr(d, ctx);
    exprs.push_back(d == a ? e.floorDiv(*blockSize) : e);
  }
  return AffineMap::get(rank, 0, exprs, ctx);
}

/// The map reading the storage of a tensor of `logicalType` that a generic
/// indexes with `logicalMap`: the packing axis index divided by the packing
/// factor.
AffineMap storageMap(AffineMap logicalMap, RankedTensorType logicalType) {
  PackedEncodingAttr packed = getPackedEncoding(logicalType);
  if (!packed)
    return logicalMap;
  int64_t factor = packed.getPackingFactor(logicalType.getElementType());
  SmallVector<AffineExpr> exprs(logicalMap.getResults());
  exprs[packed.getAxis()] = exprs[packed.getAxis()].floorDiv(factor);
  return AffineMap::get(logicalMap.getNumDims(), 0, exprs,
                        logicalMap.getContext());
}

/// The logical element of a quantized operand inside a generic, from its
/// block argument `arg`: for a packed tensor, the `index % factor`-th field
/// of the storage word (the first element in the low bits), where `index` is
/// the logical index along the packing axis. Integers come back signless of
/// their logical width, fp8 values as fp8.
Value readQuantized(OpBuilder &b, Location loc, Value arg,
                    RankedTensorType logicalType, AffineMap logicalMap) {
  Type element = logicalType.getElementType();
  unsigned bits = element.getIntOrFloatBitWidth();
  Value narrow = arg;
  if (PackedEncodingAttr packed = getPackedEncoding(logicalType)) {
    IntegerType storage = packed.getStorage();
    int64_t factor = packed.getPackingFactor(element);
    Value index =
        evalIndexExpr(b, loc, logicalMap.getResult(packed.getAxis()));
    Value field = arith::RemUIOp::create(
        b, loc, index, arith::ConstantIndexOp::create(b, loc, factor));
    Value fieldIndex = arith::IndexCastUIOp::create(b, loc, storage, field);
    Value width = arith::ConstantIntOp::create(b, loc, storage, bits);
    Value shift = arith::MulIOp::create(b, loc, fieldIndex, width);
    Value shifted = arith::ShRUIOp::create(b, loc, arg, shift);
    narrow = arith::TruncIOp::create(b, loc, b.getIntegerType(bits), shifted);
    if (isa<FloatType>(element))
      return arith::BitcastOp::create(b, loc, element, narrow);
  }
  return narrow;
}

/// A logical integer element (signless of its width) extended to i32,
/// sign- or zero-extending by the logical signedness.
Value quantizedToI32(OpBuilder &b, Location loc, Value value,
                     Type logicalElement) {
  Type i32 = b.getI32Type();
  if (cast<IntegerType>(logicalElement).isUnsigned())
    return arith::ExtUIOp::create(b, loc, i32, value);
  return arith::ExtSIOp::create(b, loc, i32, value);
}

/// Logical sizes of a quantized tensor from its converted value.
SmallVector<OpFoldResult> logicalSizes(OpBuilder &b, Location loc, Value value,
                                       RankedTensorType logicalType,
                                       RankedTensorType preferred) {
  PackedEncodingAttr packed = getPackedEncoding(logicalType);
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < logicalType.getRank(); ++d) {
    sizes.push_back(sizeOr(b, preferred, d, [&]() -> OpFoldResult {
      if (!logicalType.isDynamicDim(d))
        return b.getIndexAttr(logicalType.getDimSize(d));
      OpFoldResult stored = dimOf(b, loc, value, d);
      if (packed && packed.getAxis() == d)
        return mulSizes(
            b, loc, stored,
            b.getIndexAttr(
                packed.getPackingFactor(logicalType.getElementType())));
      return stored;
    }));
  }
  return sizes;
}

/// The operands of a dequantization, as a lowering sees them.
struct DequantizeOperands {
  Value input;                 // converted
  RankedTensorType inputType;  // logical
  Value scale;
  Value zeroPoint;             // converted, may be null
  RankedTensorType zeroPointType;
  std::optional<int64_t> axis, blockSize;
};

/// `(input - zero_point) * scale` over the logical shape of the input,
/// producing `resultType` (whose static extents are used where the input's
/// are dynamic). The arithmetic runs in the compute type of the result.
Value buildDequantize(OpBuilder &b, Location loc, const DequantizeOperands &q,
                      RankedTensorType resultType) {
  MLIRContext *ctx = b.getContext();
  int64_t rank = q.inputType.getRank();
  Type element = q.inputType.getElementType();
  Type resultElement = resultType.getElementType();
  FloatType computeType = getComputeType(resultElement);
  auto scaleType = cast<RankedTensorType>(q.scale.getType());

  AffineMap identity = b.getMultiDimIdentityMap(rank);
  AffineMap paramMap =
      quantParamMap(ctx, rank, scaleType, q.axis, q.blockSize);
  SmallVector<Value> inputs = {q.input, q.scale};
  SmallVector<AffineMap> maps = {storageMap(identity, q.inputType), paramMap};
  if (q.zeroPoint) {
    inputs.push_back(q.zeroPoint);
    maps.push_back(storageMap(paramMap, q.zeroPointType));
  }
  SmallVector<OpFoldResult> sizes =
      logicalSizes(b, loc, q.input, q.inputType, resultType);
  Value result = buildElementwise(
      b, loc, inputs, maps, sizes, resultElement,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = readQuantized(nb, l, args[0], q.inputType, identity);
        Value real;
        if (isa<FloatType>(element)) {
          real = castFloat(nb, l, x, computeType);
        } else {
          Value xi = quantizedToI32(nb, l, x, element);
          if (q.zeroPoint) {
            Value z = readQuantized(nb, l, args[2], q.zeroPointType, paramMap);
            xi = arith::SubIOp::create(
                nb, l, xi,
                quantizedToI32(nb, l, z, q.zeroPointType.getElementType()));
          }
          real = arith::SIToFPOp::create(nb, l, computeType, xi);
        }
        Value scaled = arith::MulFOp::create(
            nb, l, real, castFloat(nb, l, args[1], computeType));
        return castFloat(nb, l, scaled, resultElement);
      });
  return castToType(b, loc, result, resultType);
}

/// `saturate(round_half_to_even(x / scale) + zero_point)` in `element`
/// (integers come back signless of their width; fp8 as fp8). `zeroPoint`
/// is the logical zero point element, or null.
Value quantizeScalar(OpBuilder &b, Location loc, Value x, Value scale,
                     Value zeroPoint, Type element) {
  FloatType computeType = getComputeType(x.getType());
  Value wideX = castFloat(b, loc, x, computeType);
  Value wideScale = castFloat(b, loc, scale, computeType);
  Value v = arith::DivFOp::create(b, loc, wideX, wideScale);
  if (auto fp8 = dyn_cast<FloatType>(element)) {
    // Saturate to the largest finite value (infinities included); NaN stays
    // NaN.
    double max = APFloat::getLargest(fp8.getFloatSemantics()).convertToDouble();
    Value largest = floatConst(b, loc, computeType, max);
    Value lowest = floatConst(b, loc, computeType, -max);
    v = arith::MinimumFOp::create(b, loc, v, largest);
    v = arith::MaximumFOp::create(b, loc, v, lowest);
    return arith::TruncFOp::create(b, loc, fp8, v);
  }
  auto integer = cast<IntegerType>(element);
  unsigned width = integer.getWidth();
  bool isUnsigned = integer.isUnsigned();
  Value rounded = math::RoundEvenOp::create(b, loc, v);
  if (zeroPoint) {
    Value z = arith::SIToFPOp::create(
        b, loc, computeType, quantizedToI32(b, loc, zeroPoint, element));
    rounded = arith::AddFOp::create(b, loc, rounded, z);
  }
  double qmin = isUnsigned ? 0.0 : -std::ldexp(1.0, width - 1);
  double qmax = isUnsigned ? std::ldexp(1.0, width) - 1.0
                           : std::ldexp(1.0, width - 1) - 1.0;
  // maxnumf/minnumf clamp NaN to qmin rather than producing poison.
  Value clamped = arith::MaxNumFOp::create(
      b, loc, rounded, floatConst(b, loc, computeType, qmin));
  clamped = arith::MinNumFOp::create(b, loc, clamped,
                                     floatConst(b, loc, computeType, qmax));
  Type signless = b.getIntegerType(width);
  if (isUnsigned)
    return arith::FPToUIOp::create(b, loc, signless, clamped);
  return arith::FPToSIOp::create(b, loc, signless, clamped);
}

} // namespace

//===----------------------------------------------------------------------===//
// Per-op lowerings
//===----------------------------------------------------------------------===//

FailureOr<Value> mlir::sits::lowerMatmulOp(OpBuilder &b, MatmulOp op,
                                           MatmulOp::Adaptor operands) {
  return buildMatmul(b, op.getLoc(), operands.getLhs(), operands.getRhs(),
                     op.getTransposeLhs(), op.getTransposeRhs(),
                     operands.getBias(), op.getActivation(), op.getType());
}

namespace {

/// A weight quantized per group of G consecutive K elements (INT4 packed F
/// codes per byte, or one 8-bit code per byte), without packed zero points.
/// K is split as [K / G, G / F, F], so every access is a projection: the
/// dequantization is an elementwise generic producing the [K / G, G / F, F,
/// N] weights in the compute type, which the CPU tiling fuses into each
/// output tile (the f32 weights live in cache, one panel at a time, and
/// memory streams the stored codes), and the contraction reduces over the
/// three K loops. Fails when the weight does not have that form.
FailureOr<Value> buildGroupedQMatmul(OpBuilder &b, Location loc, QMatmulOp op,
                                     QMatmulOp::Adaptor operands) {
  MLIRContext *ctx = b.getContext();
  RankedTensorType weightType = op.getWeight().getType();
  RankedTensorType resultType = op.getType();
  auto inputType = cast<RankedTensorType>(op.getInput().getType());
  auto integer = dyn_cast<IntegerType>(weightType.getElementType());
  std::optional<int64_t> groupSize = optionalInt(op.getBlockSizeAttr());
  std::optional<int64_t> axis = optionalInt(op.getAxisAttr());
  bool transposed = op.getTransposeWeight();
  int64_t kAxis = transposed ? 1 : 0;
  if (!integer || !groupSize || !axis || !weightType.hasStaticShape() ||
      inputType.getRank() < 2 || (*axis < 0 ? *axis + 2 : *axis) != kAxis)
    return failure();
  PackedEncodingAttr packed = getPackedEncoding(weightType);
  if (packed && packed.getAxis() != kAxis)
    return failure();
  int64_t factor = packed ? packed.getPackingFactor(integer) : 1;
  int64_t k = weightType.getDimSize(kAxis);
  int64_t n = weightType.getDimSize(1 - kAxis);
  int64_t group = *groupSize;
  if (group % factor != 0 || k % group != 0)
    return failure();
  Value zeroPoint = operands.getZeroPoint();
  RankedTensorType zeroPointType;
  if (zeroPoint) {
    zeroPointType = cast<RankedTensorType>(op.getZeroPoint().getType());
    if (getPackedEncoding(zeroPointType))
      return failure();
  }
  // Leading input dimensions fold into M (expand_shape takes at most one
  // dynamic extent per group after bufferization).
  SmallVector<OpFoldResult> leading;
  for (int64_t d = 0; d + 1 < resultType.getRank(); ++d)
    leading.push_back(sizeOr(b, resultType, d, [&] {
      return dimOf(b, loc, operands.getInput(), d);
    }));
  if (llvm::count_if(leading, [](OpFoldResult s) {
        return !getConstantIntValue(s).has_value();
      }) > 1)
    return failure();

  FloatType computeType = getComputeType(resultType.getElementType());
  int64_t groups = k / group, perWord = group / factor;
  auto d = [&](unsigned pos) { return getAffineDimExpr(pos, ctx); };

  // Dequantized weights D[g, w, f, n] = W[g * G + w * F + f, n], loops
  // (g, w, f, n).
  Value storage = operands.getWeight();
  SmallVector<OpFoldResult> storageSizes =
      transposed ? SmallVector<OpFoldResult>{b.getIndexAttr(n),
                                             b.getIndexAttr(groups),
                                             b.getIndexAttr(perWord)}
                 : SmallVector<OpFoldResult>{b.getIndexAttr(groups),
                                             b.getIndexAttr(perWord),
                                             b.getIndexAttr(n)};
  storage = expand(b, loc, storage,
                   transposed ? SmallVector<ReassociationIndices>{{0}, {1, 2}}
                              : SmallVector<ReassociationIndices>{{0, 1}, {2}},
                   storageSizes);
  AffineMap storageMap = AffineMap::get(
      4, 0,
      transposed ? SmallVector<AffineExpr>{d(3), d(0), d(1)}
                 : SmallVector<AffineExpr>{d(0), d(1), d(3)},
      ctx);
  AffineMap paramMap = AffineMap::get(
      4, 0,
      transposed ? SmallVector<AffineExpr>{d(3), d(0)}
                 : SmallVector<AffineExpr>{d(0), d(3)},
      ctx);
  SmallVector<Value> inputs = {storage, operands.getScale()};
  SmallVector<AffineMap> maps = {storageMap, paramMap};
  if (zeroPoint) {
    inputs.push_back(zeroPoint);
    maps.push_back(paramMap);
  }
  unsigned bits = integer.getWidth();
  bool isUnsigned = integer.isUnsigned();
  Value weight = buildElementwise(
      b, loc, inputs, maps,
      {b.getIndexAttr(groups), b.getIndexAttr(perWord),
       b.getIndexAttr(factor), b.getIndexAttr(n)},
      computeType, [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Type i32 = nb.getI32Type();
        Value code;
        if (!packed) {
          code = quantizedToI32(nb, l, args[0], integer);
        } else {
          // Field f of the word (the first in the low bits), extended by
          // the logical signedness: shifted to the top of an i32 and back.
          Value word = arith::ExtUIOp::create(nb, l, i32, args[0]);
          Value field = arith::IndexCastUIOp::create(
              nb, l, i32, linalg::IndexOp::create(nb, l, 2));
          auto c32 = [&](int64_t v) {
            return arith::ConstantIntOp::create(nb, l, i32, v);
          };
          Value low = arith::MulIOp::create(nb, l, field, c32(bits));
          Value up = arith::SubIOp::create(nb, l, c32(32 - bits), low);
          Value top = arith::ShLIOp::create(nb, l, word, up);
          if (isUnsigned)
            code = arith::ShRUIOp::create(nb, l, top, c32(32 - bits));
          else
            code = arith::ShRSIOp::create(nb, l, top, c32(32 - bits));
        }
        if (zeroPoint)
          code = arith::SubIOp::create(
              nb, l, code,
              quantizedToI32(nb, l, args[2], zeroPointType.getElementType()));
        Value real = arith::SIToFPOp::create(nb, l, computeType, code);
        return arith::MulFOp::create(nb, l, real,
                                     castFloat(nb, l, args[1], computeType));
      });

  // x [M, K] seen as [M, K / G, G / F, F]; loops (m, n, g, w, f).
  OpFoldResult m = productOf(b, loc, leading);
  Value x = collapse(b, loc, operands.getInput(),
                     groupsMergingLeading(inputType.getRank(),
                                          inputType.getRank() - 1));
  x = expand(b, loc, x, {{0}, {1, 2, 3}},
             {m, b.getIndexAttr(groups), b.getIndexAttr(perWord),
              b.getIndexAttr(factor)});
  SmallVector<OpFoldResult> accSizes = {m, b.getIndexAttr(n)};
  Value init = filledTensor(b, loc, accSizes, floatConst(b, loc, computeType, 0.0));
  Value acc = buildGeneric(
      b, loc, {x, weight},
      {AffineMap::get(5, 0, {d(0), d(2), d(3), d(4)}, ctx),
       AffineMap::get(5, 0, {d(2), d(3), d(4), d(1)}, ctx)},
      init, AffineMap::get(5, 0, {d(0), d(1)}, ctx),
      {kParallel, kParallel, kReduction, kReduction, kReduction},
      [](OpBuilder &nb, Location l, ValueRange args) {
        return multiplyAccumulate(nb, l, args[0], args[1], args[2]);
      });
  Value y = buildEpilogue(b, loc, acc, accSizes, operands.getBias(),
                          dimsMap(ctx, 2, {1}), op.getActivation(),
                          resultType.getElementType());
  SmallVector<OpFoldResult> resultSizes(leading);
  resultSizes.push_back(b.getIndexAttr(n));
  y = expand(b, loc, y,
             groupsMergingLeading(resultType.getRank(),
                                  resultType.getRank() - 1),
             resultSizes);
  return castToType(b, loc, y, resultType);
}

} // namespace

FailureOr<Value> mlir::sits::lowerQMatmulOp(OpBuilder &b, QMatmulOp op,
                                            QMatmulOp::Adaptor operands) {
  Location loc = op.getLoc();
  RankedTensorType weightType = op.getWeight().getType();
  DequantizeOperands q;
  q.input = operands.getWeight();
  q.inputType = weightType;
  q.scale = operands.getScale();
  q.zeroPoint = operands.getZeroPoint();
  if (q.zeroPoint)
    q.zeroPointType = cast<RankedTensorType>(op.getZeroPoint().getType());
  q.axis = optionalInt(op.getAxisAttr());
  q.blockSize = optionalInt(op.getBlockSizeAttr());

  // One scale per output channel (or per tensor) is constant along K, so it
  // factors out of the sum: act((x . q) * s + b). The contraction then reads
  // the 8-bit codes themselves and widens them in registers (linalg.matmul's
  // signed cast), instead of streaming a dequantized f32 copy of the weight.
  auto scaleType = cast<RankedTensorType>(op.getScale().getType());
  auto resultType = op.getType();
  Type weightElement = weightType.getElementType();
  int64_t nAxis = op.getTransposeWeight() ? 0 : 1;
  bool perChannel =
      !q.blockSize &&
      (scaleType.getRank() == 0 ||
       (q.axis && (*q.axis == nAxis || *q.axis == nAxis - 2)));
  auto integer = dyn_cast<IntegerType>(weightElement);
  if (perChannel && !q.zeroPoint && !getPackedEncoding(weightType) &&
      weightElement.getIntOrFloatBitWidth() == 8 && integer &&
      !(integer && integer.isUnsigned()) &&
      resultType.getElementType().isF32()) {
    Value acc = buildMatmul(b, loc, operands.getInput(), q.input, false,
                            op.getTransposeWeight(), Value(),
                            ActivationKind::None, resultType);
    MLIRContext *ctx = b.getContext();
    int64_t rank = resultType.getRank();
    SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, acc);
    AffineMap lastDim =
        AffineMap::get(rank, 0, {getAffineDimExpr(rank - 1, ctx)}, ctx);
    AffineMap scaleMap = scaleType.getRank() == 0
                             ? AffineMap::get(rank, 0, {}, ctx)
                             : lastDim;
    Value scaled = buildElementwise(
        b, loc, {acc, q.scale}, {b.getMultiDimIdentityMap(rank), scaleMap},
        sizes, resultType.getElementType(),
        [](OpBuilder &nb, Location l, ValueRange args) -> Value {
          return arith::MulFOp::create(nb, l, args[0], args[1]);
        });
    return buildEpilogue(b, loc, scaled, sizes, operands.getBias(), lastDim,
                         op.getActivation(), resultType.getElementType());
  }

  if (FailureOr<Value> grouped = buildGroupedQMatmul(b, loc, op, operands);
      succeeded(grouped))
    return *grouped;

  // The weight dequantized to the input's type, as sits.dequantize would.
  auto dequantizedType = RankedTensorType::get(
      weightType.getShape(), op.getInput().getType().getElementType());
  Value weight = buildDequantize(b, loc, q, dequantizedType);
  return buildMatmul(b, loc, operands.getInput(), weight, false,
                     op.getTransposeWeight(), operands.getBias(),
                     op.getActivation(), op.getType());
}

namespace {

/// `a * w + acc` in the accumulator's type, `w` a float or a signed integer
/// code (a qconv filter, widened in registers).
Value multiplyAccumulateCode(OpBuilder &b, Location loc, Value x, Value w,
                             Value acc) {
  if (isa<IntegerType>(w.getType()))
    w = arith::SIToFPOp::create(b, loc, acc.getType(), w);
  return multiplyAccumulate(b, loc, x, w, acc);
}

/// `acc * scale[o]`, the per-output-channel scale of a qconv read through
/// `scaleMap`; `acc` unchanged without a scale.
Value scaleAccumulator(OpBuilder &b, Location loc, Value acc,
                       ArrayRef<OpFoldResult> sizes, Value scale,
                       AffineMap scaleMap) {
  if (!scale)
    return acc;
  Type computeType = cast<RankedTensorType>(acc.getType()).getElementType();
  return buildElementwise(
      b, loc, {acc, scale}, {b.getMultiDimIdentityMap(sizes.size()), scaleMap},
      sizes, computeType, [&](OpBuilder &nb, Location l, ValueRange args) {
        return arith::MulFOp::create(nb, l, args[0],
                                     castFloat(nb, l, args[1], computeType))
            .getResult();
      });
}

/// sits.conv, and sits.qconv with its `scale`: the per-output-channel scale
/// is constant over the reduction (input channels and window), so the
/// convolution reads the INT8 codes (the linalg convolutions' signed cast
/// widens them) and the scale multiplies the accumulator before the
/// epilogue.
template <typename OpTy>
FailureOr<Value> lowerConvolution(OpBuilder &b, OpTy op,
                                  typename OpTy::Adaptor operands,
                                  Value scale) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value input = operands.getInput(), filter = operands.getFilter();
  RankedTensorType resultType = op.getType();
  Type resultElement = resultType.getElementType();
  FloatType computeType = getComputeType(resultElement);
  int64_t k = op.getNumSpatialDims();
  SmallVector<int64_t> strides = op.getStridesOrDefault();
  SmallVector<int64_t> dilations = op.getDilationsOrDefault();
  SmallVector<int64_t> padding = op.getPaddingOrDefault();
  int64_t groups = op.getGroups();

  // Zero padding of the spatial dimensions.
  if (llvm::any_of(padding, [](int64_t p) { return p != 0; })) {
    SmallVector<OpFoldResult> low(2, b.getIndexAttr(0));
    SmallVector<OpFoldResult> high(2, b.getIndexAttr(0));
    for (int64_t i = 0; i < k; ++i) {
      low.push_back(b.getIndexAttr(padding[i]));
      high.push_back(b.getIndexAttr(padding[k + i]));
    }
    auto inputType = cast<RankedTensorType>(input.getType());
    SmallVector<int64_t> paddedShape(inputType.getShape());
    for (int64_t i = 0; i < k; ++i)
      if (!ShapedType::isDynamic(paddedShape[i + 2]))
        paddedShape[i + 2] += padding[i] + padding[k + i];
    auto paddedType =
        RankedTensorType::get(paddedShape, inputType.getElementType());
    Value zero = floatConst(b, loc, inputType.getElementType(), 0.0);
    input = tensor::PadOp::create(b, loc, paddedType, input, low, high, zero);
  }

  // Result sizes [N, O, E...], E = (padded - dilated kernel) / stride + 1.
  SmallVector<OpFoldResult> sizes = {
      sizeOr(b, resultType, 0, [&] { return dimOf(b, loc, input, 0); }),
      sizeOr(b, resultType, 1, [&] { return dimOf(b, loc, filter, 0); })};
  for (int64_t i = 0; i < k; ++i) {
    sizes.push_back(sizeOr(b, resultType, i + 2, [&] {
      OpFoldResult span = addSizes(
          b, loc,
          mulSizes(b, loc,
                   subSizes(b, loc, dimOf(b, loc, filter, i + 2),
                            b.getIndexAttr(1)),
                   b.getIndexAttr(dilations[i])),
          b.getIndexAttr(1));
      OpFoldResult room =
          subSizes(b, loc, dimOf(b, loc, input, i + 2), span);
      return addSizes(b, loc, divSizes(b, loc, room,
                                       b.getIndexAttr(strides[i])),
                      b.getIndexAttr(1));
    }));
  }
  Value zero = floatConst(b, loc, computeType, 0.0);
  auto stridesAttr = b.getI64TensorAttr(strides);
  auto dilationsAttr = b.getI64TensorAttr(dilations);

  if (groups == 1) {
    Value init = filledTensor(b, loc, sizes, zero);
    Type accType = init.getType();
    Value acc;
    if (k == 1)
      acc = linalg::Conv1DNcwFcwOp::create(b, loc, TypeRange{accType},
                                           ValueRange{input, filter},
                                           ValueRange{init}, stridesAttr,
                                           dilationsAttr)
                .getResult(0);
    else if (k == 2)
      acc = linalg::Conv2DNchwFchwOp::create(b, loc, TypeRange{accType},
                                             ValueRange{input, filter},
                                             ValueRange{init}, stridesAttr,
                                             dilationsAttr)
                .getResult(0);
    else
      acc = linalg::Conv3DNcdhwFcdhwOp::create(b, loc, TypeRange{accType},
                                               ValueRange{input, filter},
                                               ValueRange{init}, stridesAttr,
                                               dilationsAttr)
                .getResult(0);
    acc = scaleAccumulator(b, loc, acc, sizes, scale, dimsMap(ctx, k + 2, {1}));
    Value y = buildEpilogue(b, loc, acc, sizes, operands.getBias(),
                            dimsMap(ctx, k + 2, {1}), op.getActivation(),
                            resultElement);
    return castToType(b, loc, y, resultType);
  }

  // Grouped: views [N, G, C/G, D...] and [G, O/G, C/G, K...] of the input
  // and filter, output [N, G, O/G, E...].
  OpFoldResult g = b.getIndexAttr(groups);
  OpFoldResult channelsPerGroup = dimOf(b, loc, filter, 1);
  OpFoldResult outPerGroup = divSizes(b, loc, sizes[1], g);
  SmallVector<OpFoldResult> inputSizes = {dimOf(b, loc, input, 0), g,
                                          channelsPerGroup};
  SmallVector<OpFoldResult> filterSizes = {g, outPerGroup, channelsPerGroup};
  SmallVector<OpFoldResult> accSizes = {sizes[0], g, outPerGroup};
  for (int64_t i = 0; i < k; ++i) {
    inputSizes.push_back(dimOf(b, loc, input, i + 2));
    filterSizes.push_back(dimOf(b, loc, filter, i + 2));
    accSizes.push_back(sizes[i + 2]);
  }
  Value groupedInput =
      expand(b, loc, input, groupsSplitting(k + 2, 1), inputSizes);
  Value groupedFilter =
      expand(b, loc, filter, groupsSplitting(k + 2, 0), filterSizes);
  Value init = filledTensor(b, loc, accSizes, zero);
  Value acc;
  if (k == 2) {
    acc = linalg::Conv2DNgchwGfchwOp::create(
              b, loc, TypeRange{init.getType()},
              ValueRange{groupedInput, groupedFilter}, ValueRange{init},
              stridesAttr, dilationsAttr)
              .getResult(0);
  } else {
    // Loops (n, g, f, e_1..e_k, c, w_1..w_k).
    unsigned numLoops = 4 + 2 * k;
    auto d = [&](unsigned pos) { return getAffineDimExpr(pos, ctx); };
    SmallVector<AffineExpr> inExprs = {d(0), d(1), d(3 + k)};
    SmallVector<AffineExpr> filterExprs = {d(1), d(2), d(3 + k)};
    SmallVector<AffineExpr> outExprs = {d(0), d(1), d(2)};
    for (int64_t i = 0; i < k; ++i) {
      AffineExpr e = d(3 + i), w = d(4 + k + i);
      inExprs.push_back(e * strides[i] + w * dilations[i]);
      filterExprs.push_back(w);
      outExprs.push_back(e);
    }
    SmallVector<IteratorType> iterators(3 + k, kParallel);
    iterators.append(1 + k, kReduction);
    acc = buildGeneric(b, loc, {groupedInput, groupedFilter},
                       {AffineMap::get(numLoops, 0, inExprs, ctx),
                        AffineMap::get(numLoops, 0, filterExprs, ctx)},
                       init, AffineMap::get(numLoops, 0, outExprs, ctx),
                       iterators,
                       [](OpBuilder &nb, Location l, ValueRange args) {
                         return multiplyAccumulateCode(nb, l, args[0], args[1],
                                                       args[2]);
                       });
  }
  if (scale)
    acc = scaleAccumulator(b, loc, acc, accSizes,
                           expand(b, loc, scale, {{0, 1}}, {g, outPerGroup}),
                           dimsMap(ctx, k + 3, {1, 2}));
  Value bias = operands.getBias();
  if (bias)
    bias = expand(b, loc, bias, {{0, 1}}, {g, outPerGroup});
  Value y = buildEpilogue(b, loc, acc, accSizes, bias,
                          dimsMap(ctx, k + 3, {1, 2}), op.getActivation(),
                          resultElement);
  SmallVector<ReassociationIndices> outGroups = {{0}, {1, 2}};
  for (int64_t i = 0; i < k; ++i)
    outGroups.push_back({3 + i});
  y = collapse(b, loc, y, outGroups);
  return castToType(b, loc, y, resultType);
}

} // namespace

FailureOr<Value> mlir::sits::lowerConvOp(OpBuilder &b, ConvOp op,
                                         ConvOp::Adaptor operands) {
  return lowerConvolution(b, op, operands, Value());
}

FailureOr<Value> mlir::sits::lowerQConvOp(OpBuilder &b, QConvOp op,
                                          QConvOp::Adaptor operands) {
  return lowerConvolution(b, op, operands, operands.getScale());
}

namespace {

/// Where causal attention places query `i`: at absolute position `i + offset`
/// and seeing keys `j <= i + offset`. The offset is `Tk - Tq` for every row
/// (bottom-right aligned) or, with `perBatch` (an i64 tensor `[B]`), one per
/// batch entry.
struct CausalPlacement {
  bool enabled = false;
  Value perBatch;
};

/// Q·Kᵀ, scale + masks, max-subtracted exp, row sums, ·V, normalization, on
/// `query [B, Hq, Tq, D]`, `key [B, Hkv, Tk, D]` and `value [B, Hkv, Tk, Dv]`.
Value buildAttention(OpBuilder &b, Location loc, Value query, Value key,
                     Value value, Value mask, RankedTensorType resultType,
                     std::optional<double> fixedScale, CausalPlacement causal) {
  MLIRContext *ctx = b.getContext();
  Type resultElement = resultType.getElementType();
  FloatType computeType = getComputeType(resultElement);
  auto qType = cast<RankedTensorType>(query.getType());
  auto kType = cast<RankedTensorType>(key.getType());

  OpFoldResult batch = sizeOr(b, resultType, 0, [&] {
    return staticFirst(b, loc, {{query, 0}, {key, 0}, {value, 0}});
  });
  OpFoldResult qHeads =
      sizeOr(b, resultType, 1, [&] { return dimOf(b, loc, query, 1); });
  OpFoldResult qLen =
      sizeOr(b, resultType, 2, [&] { return dimOf(b, loc, query, 2); });
  OpFoldResult vDim =
      sizeOr(b, resultType, 3, [&] { return dimOf(b, loc, value, 3); });
  OpFoldResult kvHeads = staticFirst(b, loc, {{key, 1}, {value, 1}});
  OpFoldResult kvLen = staticFirst(b, loc, {{key, 2}, {value, 2}});

  // Grouped-query attention: query head h = hk * G + g reads key/value head
  // hk = h / G. Splitting the query's head dimension into (Hkv, G) keeps
  // every indexing map a projected permutation; K and V are not copied.
  bool grouped = qType.isDynamicDim(1) || kType.isDynamicDim(1) ||
                 qType.getDimSize(1) != kType.getDimSize(1);
  SmallVector<OpFoldResult> heads = {batch};
  if (grouped) {
    OpFoldResult groupSize = divSizes(b, loc, qHeads, kvHeads);
    heads.append({kvHeads, groupSize});
    query = expand(b, loc, query, groupsSplitting(4, 1),
                   {batch, kvHeads, groupSize, qLen,
                    staticFirst(b, loc, {{query, 3}, {key, 3}})});
  } else {
    heads.push_back(qHeads);
  }
  int64_t nh = heads.size();     // head loops: (b, h) or (b, hk, g)
  int64_t iDim = nh, jDim = nh + 1;
  auto d = [&](unsigned pos) { return getAffineDimExpr(pos, ctx); };
  SmallVector<AffineExpr> headExprs, kvHeadExprs = {d(0), d(1)};
  for (int64_t h = 0; h < nh; ++h)
    headExprs.push_back(d(h));

  // scores = Q K^T, loops (heads..., i, j, c).
  SmallVector<OpFoldResult> scoreSizes(heads);
  scoreSizes.append({qLen, kvLen});
  Value zero = floatConst(b, loc, computeType, 0.0);
  Value scores;
  {
    unsigned numLoops = nh + 3;
    SmallVector<AffineExpr> qExprs(headExprs), kExprs(kvHeadExprs),
        outExprs(headExprs);
    qExprs.append({d(iDim), d(nh + 2)});
    kExprs.append({d(jDim), d(nh + 2)});
    outExprs.append({d(iDim), d(jDim)});
    SmallVector<IteratorType> iterators(nh + 2, kParallel);
    iterators.push_back(kReduction);
    scores = buildGeneric(
        b, loc, {query, key},
        {AffineMap::get(numLoops, 0, qExprs, ctx),
         AffineMap::get(numLoops, 0, kExprs, ctx)},
        filledTensor(b, loc, scoreSizes, zero),
        AffineMap::get(numLoops, 0, outExprs, ctx), iterators,
        [](OpBuilder &nb, Location l, ValueRange args) {
          return multiplyAccumulate(nb, l, args[0], args[1], args[2]);
        });
  }

  // Scale and masks.
  Value scale;
  if (std::optional<double> s = fixedScale) {
    scale = floatConst(b, loc, computeType, *s);
  } else {
    Value headDim = sizeAsFloat(
        b, loc, staticFirst(b, loc, {{query, grouped ? 4 : 3}, {key, 3}}),
        computeType);
    Value root = math::SqrtOp::create(b, loc, headDim);
    scale = arith::DivFOp::create(b, loc, floatConst(b, loc, computeType, 1.0),
                                  root);
  }
  unsigned scoreRank = nh + 2;
  AffineMap scoreIdentity = b.getMultiDimIdentityMap(scoreRank);
  SmallVector<Value> maskInputs = {scores};
  SmallVector<AffineMap> maskMaps = {scoreIdentity};
  Type maskElement;
  if (mask) {
    // Right-align the mask with [B, Hq, Tq, Tk]; drop its unit dimensions
    // (they broadcast) and split a query-head dimension like the query's.
    auto maskType = cast<RankedTensorType>(mask.getType());
    maskElement = maskType.getElementType();
    int64_t offset = 4 - maskType.getRank();
    SmallVector<bool> keep;
    SmallVector<int64_t> positions;
    for (int64_t i = 0; i < maskType.getRank(); ++i) {
      keep.push_back(maskType.getDimSize(i) != 1);
      if (keep.back())
        positions.push_back(i + offset);
    }
    Value collapsed = collapse(b, loc, mask, groupsKeeping(keep));
    SmallVector<AffineExpr> exprs;
    SmallVector<OpFoldResult> collapsedSizes =
        tensor::getMixedSizes(b, loc, collapsed);
    SmallVector<OpFoldResult> expandedSizes;
    SmallVector<ReassociationIndices> splitGroups;
    for (auto [index, position] : llvm::enumerate(positions)) {
      int64_t out = expandedSizes.size();
      if (position == 1 && grouped) {
        splitGroups.push_back({out, out + 1});
        expandedSizes.append({heads[1], heads[2]});
        exprs.append({d(1), d(2)});
        continue;
      }
      splitGroups.push_back({out});
      expandedSizes.push_back(collapsedSizes[index]);
      exprs.push_back(position == 0   ? d(0)
                      : position == 1 ? d(1)
                      : position == 2 ? d(iDim)
                                      : d(jDim));
    }
    maskInputs.push_back(
        expand(b, loc, collapsed, splitGroups, expandedSizes));
    maskMaps.push_back(AffineMap::get(scoreRank, 0, exprs, ctx));
  }
  // Masked scores follow onnxruntime's CPU Attention kernel: a `false` mask
  // entry or a causally hidden key sets the score to the lowest finite value
  // (ORT adds numeric_limits::lowest(), which absorbs any finite score), so
  // masked keys get weight exp(lowest - max) = 0 and a fully masked row,
  // whose scores are then all equal, averages V instead of producing NaN. A
  // float mask is added as given (a row of -inf gives NaN, as in ORT).
  // Causal: query i sits at absolute position i + (Tk - Tq).
  Value causalOffset;
  int64_t offsetArg = -1;
  if (causal.perBatch) {
    offsetArg = maskInputs.size();
    maskInputs.push_back(causal.perBatch);
    maskMaps.push_back(AffineMap::get(scoreRank, 0, {d(0)}, ctx));
  } else if (causal.enabled) {
    causalOffset = indexValue(b, loc, subSizes(b, loc, kvLen, qLen));
  }
  Value lowest = lowestConst(b, loc, computeType);
  Value masked = buildElementwise(
      b, loc, maskInputs, maskMaps, scoreSizes, computeType,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value s = arith::MulFOp::create(nb, l, args[0], scale);
        if (mask && isa<FloatType>(maskElement))
          s = arith::AddFOp::create(nb, l, s,
                                    castFloat(nb, l, args[1], computeType));
        if (mask && !isa<FloatType>(maskElement))
          s = arith::SelectOp::create(nb, l, args[1], s, lowest);
        if (causalOffset || offsetArg >= 0) {
          Value i = linalg::IndexOp::create(nb, l, iDim);
          Value j = linalg::IndexOp::create(nb, l, jDim);
          Value offset = causalOffset;
          if (offsetArg >= 0) {
            // In i64: a padding query's position is negative.
            Type i64 = nb.getI64Type();
            i = arith::IndexCastOp::create(nb, l, i64, i);
            j = arith::IndexCastOp::create(nb, l, i64, j);
            offset = args[offsetArg];
          }
          Value last = arith::AddIOp::create(nb, l, i, offset);
          Value hidden = arith::CmpIOp::create(
              nb, l, arith::CmpIPredicate::sgt, j, last);
          s = arith::SelectOp::create(nb, l, hidden, lowest, s);
        }
        return s;
      });

  // Softmax along j, normalized after the product with V.
  SmallVector<OpFoldResult> rowSizes(heads);
  rowSizes.push_back(qLen);
  AffineMap rowMap = withoutDims(ctx, scoreRank, jDim, jDim + 1);
  SmallVector<IteratorType> rowIterators(scoreRank, kParallel);
  rowIterators.back() = kReduction;
  Value rowMax = buildGeneric(
      b, loc, {masked}, {scoreIdentity},
      filledTensor(b, loc, rowSizes, negInfConst(b, loc, computeType)),
      rowMap, rowIterators, [](OpBuilder &nb, Location l, ValueRange args) {
        return arith::MaximumFOp::create(nb, l, args[0], args[1]);
      });
  Value exps = buildElementwise(
      b, loc, {masked, rowMax}, {scoreIdentity, rowMap}, scoreSizes,
      computeType, [](OpBuilder &nb, Location l, ValueRange args) {
        return math::ExpOp::create(
            nb, l, arith::SubFOp::create(nb, l, args[0], args[1]));
      });
  Value rowSum = buildGeneric(
      b, loc, {exps}, {scoreIdentity}, filledTensor(b, loc, rowSizes, zero),
      rowMap, rowIterators, [](OpBuilder &nb, Location l, ValueRange args) {
        return arith::AddFOp::create(nb, l, args[1], args[0]);
      });

  // out = exps V, loops (heads..., i, e, j); then out / rowSum.
  SmallVector<OpFoldResult> outSizes(heads);
  outSizes.append({qLen, vDim});
  Value weighted;
  {
    unsigned numLoops = nh + 3;
    int64_t eDim = nh + 1, kvDim = nh + 2;
    SmallVector<AffineExpr> pExprs(headExprs), vExprs(kvHeadExprs),
        outExprs(headExprs);
    pExprs.append({d(iDim), d(kvDim)});
    vExprs.append({d(kvDim), d(eDim)});
    outExprs.append({d(iDim), d(eDim)});
    SmallVector<IteratorType> iterators(nh + 2, kParallel);
    iterators.push_back(kReduction);
    weighted = buildGeneric(
        b, loc, {exps, value},
        {AffineMap::get(numLoops, 0, pExprs, ctx),
         AffineMap::get(numLoops, 0, vExprs, ctx)},
        filledTensor(b, loc, outSizes, zero),
        AffineMap::get(numLoops, 0, outExprs, ctx), iterators,
        [](OpBuilder &nb, Location l, ValueRange args) {
          return multiplyAccumulate(nb, l, args[0], args[1], args[2]);
        });
  }
  Value out = buildElementwise(
      b, loc, {weighted, rowSum},
      {b.getMultiDimIdentityMap(scoreRank),
       withoutDims(ctx, scoreRank, scoreRank - 1, scoreRank)},
      outSizes, resultElement,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value normalized = arith::DivFOp::create(nb, l, args[0], args[1]);
        return castFloat(nb, l, normalized, resultElement);
      });
  if (grouped)
    out = collapse(b, loc, out, {{0}, {1, 2}, {3}, {4}});
  return castToType(b, loc, out, resultType);
}

} // namespace

FailureOr<Value> mlir::sits::lowerAttentionOp(OpBuilder &b, AttentionOp op,
                                              AttentionOp::Adaptor operands) {
  return buildAttention(b, op.getLoc(), operands.getQuery(),
                        operands.getKey(), operands.getValue(),
                        operands.getMask(), op.getType(),
                        op.getScaleOrDefault(),
                        CausalPlacement{op.getCausal(), Value()});
}

namespace {

/// Writes the new tokens' K and V (`[B, Hkv, S, D]`) of layer `layer` into
/// `pool` at the slots of `slots` (`[B, S]` i64), skipping negative and
/// out-of-range slots: `scf.for` over (b, s) inserting one `[Hkv, D]` slice
/// per kind, which bufferizes in place when the pool is.
Value writeSlots(OpBuilder &b, Location loc, Value pool, Value key,
                 Value value, Value slots, int64_t layer) {
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  OpFoldResult blockSize = dimOf(b, loc, pool, 4);
  Value capacity = arith::IndexCastOp::create(
      b, loc, b.getI64Type(),
      indexValue(b, loc, mulSizes(b, loc, dimOf(b, loc, pool, 0), blockSize)));
  Value batch = indexValue(b, loc, dimOf(b, loc, slots, 0));
  Value tokens = indexValue(b, loc, dimOf(b, loc, slots, 1));
  OpFoldResult heads = dimOf(b, loc, key, 1), headDim = dimOf(b, loc, key, 3);
  auto outer = scf::ForOp::create(
      b, loc, c0, batch, c1, ValueRange{pool},
      [&](OpBuilder &ob, Location l, Value bi, ValueRange outerArgs) {
        auto inner = scf::ForOp::create(
            ob, l, c0, tokens, c1, outerArgs,
            [&](OpBuilder &ib, Location il, Value si, ValueRange innerArgs) {
              Value current = innerArgs[0];
              Value slot =
                  tensor::ExtractOp::create(ib, il, slots, ValueRange{bi, si});
              Value zero = arith::ConstantIntOp::create(ib, il, 0, 64);
              Value inRange = arith::AndIOp::create(
                  ib, il,
                  arith::CmpIOp::create(ib, il, arith::CmpIPredicate::sge,
                                        slot, zero),
                  arith::CmpIOp::create(ib, il, arith::CmpIPredicate::slt,
                                        slot, capacity));
              auto write = scf::IfOp::create(
                  ib, il, inRange,
                  [&](OpBuilder &tb, Location tl) {
                    Value index = arith::IndexCastOp::create(
                        tb, tl, tb.getIndexType(), slot);
                    Value bs = indexValue(tb, tl, blockSize);
                    Value block = arith::DivUIOp::create(tb, tl, index, bs);
                    Value offset = arith::RemUIOp::create(tb, tl, index, bs);
                    Value updated = current;
                    for (auto [kind, source] : llvm::enumerate(
                             std::array<Value, 2>{key, value})) {
                      SmallVector<OpFoldResult> one(4, tb.getIndexAttr(1));
                      SmallVector<OpFoldResult> from = {
                          bi, tb.getIndexAttr(0), si, tb.getIndexAttr(0)};
                      SmallVector<OpFoldResult> sizes = {
                          tb.getIndexAttr(1), heads, tb.getIndexAttr(1),
                          headDim};
                      auto sliceType =
                          tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
                              2, cast<RankedTensorType>(source.getType()),
                              sizes);
                      Value slice = tensor::ExtractSliceOp::create(
                          tb, tl, sliceType, source, from, sizes, one);
                      SmallVector<OpFoldResult> to = {
                          block, tb.getIndexAttr(layer),
                          tb.getIndexAttr(kind), tb.getIndexAttr(0),
                          offset, tb.getIndexAttr(0)};
                      SmallVector<OpFoldResult> toSizes = {
                          tb.getIndexAttr(1), tb.getIndexAttr(1),
                          tb.getIndexAttr(1), heads, tb.getIndexAttr(1),
                          headDim};
                      updated = tensor::InsertSliceOp::create(
                          tb, tl, slice, updated, to, toSizes,
                          SmallVector<OpFoldResult>(6, tb.getIndexAttr(1)));
                    }
                    scf::YieldOp::create(tb, tl, updated);
                  },
                  [&](OpBuilder &eb, Location el) {
                    scf::YieldOp::create(eb, el, current);
                  });
              scf::YieldOp::create(ib, il, write.getResult(0));
            });
        scf::YieldOp::create(ob, l, inner.getResult(0));
      });
  return outer.getResult(0);
}

/// One kind (0: K, 1: V) of layer `layer` for every sequence, contiguous:
/// `[B, Hkv, M * block_size, D]` with `M` the block tables' width. Position
/// `m * block_size + o` comes from block `tables[b, m]`; block numbers out of
/// the pool's range read block 0 (their positions are masked or unused).
/// Whole blocks are copied (`[Hkv, block_size, D]`, contiguous in the pool)
/// by an `scf.for` of slice inserts: element-wise reads through the table
/// would vectorize to gathers.
Value gatherContext(OpBuilder &b, Location loc, Value pool, Value tables,
                    int64_t layer, int64_t kind) {
  auto poolType = cast<RankedTensorType>(pool.getType());
  OpFoldResult batch = dimOf(b, loc, tables, 0),
               width = dimOf(b, loc, tables, 1),
               heads = dimOf(b, loc, pool, 3),
               blockSize = dimOf(b, loc, pool, 4),
               headDim = dimOf(b, loc, pool, 5);
  Value numBlocks = indexValue(b, loc, dimOf(b, loc, pool, 0));
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  Value init = emptyTensor(b, loc, {batch, heads, width, blockSize, headDim},
                           poolType.getElementType());
  OpFoldResult one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
  auto outer = scf::ForOp::create(
      b, loc, c0, indexValue(b, loc, batch), c1, ValueRange{init},
      [&](OpBuilder &ob, Location l, Value bi, ValueRange outerArgs) {
        auto inner = scf::ForOp::create(
            ob, l, c0, indexValue(ob, l, width), c1, outerArgs,
            [&](OpBuilder &ib, Location il, Value mi, ValueRange innerArgs) {
              Value entry = tensor::ExtractOp::create(ib, il, tables,
                                                      ValueRange{bi, mi});
              Value block = arith::IndexCastOp::create(
                  ib, il, ib.getIndexType(), entry);
              // Unsigned compare: a negative block number is huge.
              Value inRange = arith::CmpIOp::create(
                  ib, il, arith::CmpIPredicate::ult, block, numBlocks);
              block = arith::SelectOp::create(ib, il, inRange, block, c0);
              SmallVector<OpFoldResult> from = {
                  block, ib.getIndexAttr(layer), ib.getIndexAttr(kind),
                  zero,  zero,                   zero};
              SmallVector<OpFoldResult> sizes = {one,   one,       one,
                                                 heads, blockSize, headDim};
              auto chunkType =
                  tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
                      3, poolType, sizes);
              Value chunk = tensor::ExtractSliceOp::create(
                  ib, il, chunkType, pool, from, sizes,
                  SmallVector<OpFoldResult>(6, one));
              Value updated = tensor::InsertSliceOp::create(
                  ib, il, chunk, innerArgs[0],
                  SmallVector<OpFoldResult>{bi, zero, mi, zero, zero},
                  SmallVector<OpFoldResult>{one, heads, one, blockSize,
                                            headDim},
                  SmallVector<OpFoldResult>(5, one));
              scf::YieldOp::create(ib, il, updated);
            });
        scf::YieldOp::create(ob, l, inner.getResult(0));
      });
  return collapse(b, loc, outer.getResult(0), {{0}, {1}, {2, 3}, {4}});
}

} // namespace

FailureOr<SmallVector<Value>>
mlir::sits::lowerPagedAttentionOp(OpBuilder &b, PagedAttentionOp op,
                                  PagedAttentionOp::Adaptor operands) {
  Location loc = op.getLoc();
  int64_t layer = static_cast<int64_t>(op.getLayer());
  Value pool = writeSlots(b, loc, operands.getPool(), operands.getKey(),
                          operands.getValue(), operands.getSlotMapping(),
                          layer);
  Value key = gatherContext(b, loc, pool, operands.getBlockTables(), layer, 0);
  Value value =
      gatherContext(b, loc, pool, operands.getBlockTables(), layer, 1);
  // Query s of sequence b sits at position context_lens[b] - S + s.
  Value lens = operands.getContextLens();
  Value newTokens = arith::IndexCastOp::create(
      b, loc, b.getI64Type(),
      indexValue(b, loc, dimOf(b, loc, operands.getQuery(), 2)));
  Value offsets = buildElementwise(
      b, loc, {lens}, {b.getMultiDimIdentityMap(1)},
      {dimOf(b, loc, lens, 0)}, b.getI64Type(),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value len = arith::ExtSIOp::create(nb, l, nb.getI64Type(), args[0]);
        return arith::SubIOp::create(nb, l, len, newTokens);
      });
  Value out = buildAttention(
      b, loc, operands.getQuery(), key, value, Value(),
      cast<RankedTensorType>(op.getResult().getType()),
      op.getScaleOrDefault(), CausalPlacement{true, offsets});
  return SmallVector<Value>{out, pool};
}

namespace {

/// Shared by layer_norm and rms_norm: sizes, the number of normalized
/// elements as a float, and the maps of a normalization over [axis, rank).
struct NormalizationLayout {
  SmallVector<OpFoldResult> sizes;
  int64_t axis;
  int64_t rank;
  AffineMap identity, outer, inner;
  SmallVector<IteratorType> reductionIterators;
  Value count; // compute type
};

NormalizationLayout getNormalizationLayout(OpBuilder &b, Location loc,
                                           Value input, int64_t axis,
                                           RankedTensorType resultType,
                                           Type computeType) {
  MLIRContext *ctx = b.getContext();
  NormalizationLayout layout;
  layout.rank = resultType.getRank();
  layout.axis = axis < 0 ? axis + layout.rank : axis;
  for (int64_t dim = 0; dim < layout.rank; ++dim)
    layout.sizes.push_back(sizeOr(
        b, resultType, dim, [&] { return dimOf(b, loc, input, dim); }));
  layout.identity = b.getMultiDimIdentityMap(layout.rank);
  layout.outer = withoutDims(ctx, layout.rank, layout.axis, layout.rank);
  layout.inner = withoutDims(ctx, layout.rank, 0, layout.axis);
  layout.reductionIterators.assign(layout.rank, kParallel);
  for (int64_t dim = layout.axis; dim < layout.rank; ++dim)
    layout.reductionIterators[dim] = kReduction;
  layout.count = sizeAsFloat(
      b, loc,
      productOf(b, loc, ArrayRef(layout.sizes).drop_front(layout.axis)),
      computeType);
  return layout;
}

/// 1 / sqrt(sum / count + epsilon) for every row of `sums`.
Value buildReciprocalStd(OpBuilder &b, Location loc, Value sums,
                         const NormalizationLayout &layout, double epsilon) {
  Type computeType = cast<RankedTensorType>(sums.getType()).getElementType();
  ArrayRef<OpFoldResult> outerSizes =
      ArrayRef(layout.sizes).take_front(layout.axis);
  Value eps = floatConst(b, loc, computeType, epsilon);
  Value one = floatConst(b, loc, computeType, 1.0);
  return buildElementwise(
      b, loc, {sums}, {b.getMultiDimIdentityMap(layout.axis)}, outerSizes,
      computeType, [&](OpBuilder &nb, Location l, ValueRange args) {
        Value mean = arith::DivFOp::create(nb, l, args[0], layout.count);
        Value variance = arith::AddFOp::create(nb, l, mean, eps);
        return arith::DivFOp::create(nb, l, one,
                                     math::SqrtOp::create(nb, l, variance));
      });
}

} // namespace

FailureOr<Value> mlir::sits::lowerLayerNormOp(OpBuilder &b, LayerNormOp op,
                                              LayerNormOp::Adaptor operands) {
  Location loc = op.getLoc();
  Value input = operands.getInput();
  RankedTensorType resultType = op.getType();
  Type resultElement = resultType.getElementType();
  FloatType computeType = getComputeType(resultElement);
  NormalizationLayout layout = getNormalizationLayout(
      b, loc, input, op.getAxisAttr().getInt(), resultType, computeType);
  ArrayRef<OpFoldResult> outerSizes =
      ArrayRef(layout.sizes).take_front(layout.axis);
  Value zero = floatConst(b, loc, computeType, 0.0);

  // Two passes: the mean, then the mean of squared deviations from it.
  Value sums = buildGeneric(
      b, loc, {input}, {layout.identity},
      filledTensor(b, loc, outerSizes, zero), layout.outer,
      layout.reductionIterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        return arith::AddFOp::create(nb, l, args[1],
                                     castFloat(nb, l, args[0], computeType));
      });
  Value means = buildElementwise(
      b, loc, {sums}, {b.getMultiDimIdentityMap(layout.axis)}, outerSizes,
      computeType, [&](OpBuilder &nb, Location l, ValueRange args) {
        return arith::DivFOp::create(nb, l, args[0], layout.count);
      });
  Value squares = buildGeneric(
      b, loc, {input, means}, {layout.identity, layout.outer},
      filledTensor(b, loc, outerSizes, zero), layout.outer,
      layout.reductionIterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value dev = arith::SubFOp::create(
            nb, l, castFloat(nb, l, args[0], computeType), args[1]);
        return arith::AddFOp::create(nb, l, args[2],
                                     arith::MulFOp::create(nb, l, dev, dev));
      });
  Value rstd = buildReciprocalStd(b, loc, squares, layout,
                                  op.getEpsilon().convertToDouble());

  Value bias = operands.getBias();
  SmallVector<Value> inputs = {input, means, rstd, operands.getScale()};
  SmallVector<AffineMap> maps = {layout.identity, layout.outer, layout.outer,
                                 layout.inner};
  if (bias) {
    inputs.push_back(bias);
    maps.push_back(layout.inner);
  }
  Value y = buildElementwise(
      b, loc, inputs, maps, layout.sizes, resultElement,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = castFloat(nb, l, args[0], computeType);
        Value v = arith::MulFOp::create(
            nb, l, arith::SubFOp::create(nb, l, x, args[1]), args[2]);
        v = arith::MulFOp::create(nb, l, v,
                                  castFloat(nb, l, args[3], computeType));
        if (bias)
          v = arith::AddFOp::create(nb, l, v,
                                    castFloat(nb, l, args[4], computeType));
        return castFloat(nb, l, v, resultElement);
      });
  return castToType(b, loc, y, resultType);
}

FailureOr<Value> mlir::sits::lowerRMSNormOp(OpBuilder &b, RMSNormOp op,
                                            RMSNormOp::Adaptor operands) {
  Location loc = op.getLoc();
  Value input = operands.getInput();
  RankedTensorType resultType = op.getType();
  Type resultElement = resultType.getElementType();
  FloatType computeType = getComputeType(resultElement);
  NormalizationLayout layout = getNormalizationLayout(
      b, loc, input, op.getAxisAttr().getInt(), resultType, computeType);
  ArrayRef<OpFoldResult> outerSizes =
      ArrayRef(layout.sizes).take_front(layout.axis);
  Value squares = buildGeneric(
      b, loc, {input}, {layout.identity},
      filledTensor(b, loc, outerSizes, floatConst(b, loc, computeType, 0.0)),
      layout.outer, layout.reductionIterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = castFloat(nb, l, args[0], computeType);
        return arith::AddFOp::create(nb, l, args[1],
                                     arith::MulFOp::create(nb, l, x, x));
      });
  Value rstd = buildReciprocalStd(b, loc, squares, layout,
                                  op.getEpsilon().convertToDouble());
  Value y = buildElementwise(
      b, loc, {input, rstd, operands.getScale()},
      {layout.identity, layout.outer, layout.inner}, layout.sizes,
      resultElement, [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = castFloat(nb, l, args[0], computeType);
        Value v = arith::MulFOp::create(nb, l, x, args[1]);
        v = arith::MulFOp::create(nb, l, v,
                                  castFloat(nb, l, args[2], computeType));
        return castFloat(nb, l, v, resultElement);
      });
  return castToType(b, loc, y, resultType);
}

FailureOr<Value> mlir::sits::lowerSoftmaxOp(OpBuilder &b, SoftmaxOp op,
                                            SoftmaxOp::Adaptor operands) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value input = operands.getInput();
  RankedTensorType resultType = op.getType();
  Type resultElement = resultType.getElementType();
  FloatType computeType = getComputeType(resultElement);
  int64_t rank = resultType.getRank();
  int64_t axis = op.getAxisAttr().getInt();
  if (axis < 0)
    axis += rank;

  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, input);
  SmallVector<OpFoldResult> rowSizes(sizes);
  rowSizes.erase(rowSizes.begin() + axis);
  AffineMap identity = b.getMultiDimIdentityMap(rank);
  AffineMap rowMap = withoutDims(ctx, rank, axis, axis + 1);
  SmallVector<IteratorType> iterators(rank, kParallel);
  iterators[axis] = kReduction;

  Value rowMax = buildGeneric(
      b, loc, {input}, {identity},
      filledTensor(b, loc, rowSizes, negInfConst(b, loc, computeType)), rowMap,
      iterators, [&](OpBuilder &nb, Location l, ValueRange args) {
        return arith::MaximumFOp::create(
            nb, l, castFloat(nb, l, args[0], computeType), args[1]);
      });
  Value exps = buildElementwise(
      b, loc, {input, rowMax}, {identity, rowMap}, sizes, computeType,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        return math::ExpOp::create(
            nb, l,
            arith::SubFOp::create(nb, l,
                                  castFloat(nb, l, args[0], computeType),
                                  args[1]));
      });
  Value rowSum = buildGeneric(
      b, loc, {exps}, {identity},
      filledTensor(b, loc, rowSizes, floatConst(b, loc, computeType, 0.0)),
      rowMap, iterators, [](OpBuilder &nb, Location l, ValueRange args) {
        return arith::AddFOp::create(nb, l, args[1], args[0]);
      });
  Value y = buildElementwise(
      b, loc, {exps, rowSum}, {identity, rowMap}, sizes, resultElement,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        return castFloat(nb, l, arith::DivFOp::create(nb, l, args[0], args[1]),
                         resultElement);
      });
  return castToType(b, loc, y, resultType);
}

FailureOr<Value>
mlir::sits::lowerActivationOp(OpBuilder &b, ActivationOp op,
                              ActivationOp::Adaptor operands) {
  Location loc = op.getLoc();
  Value input = operands.getInput();
  RankedTensorType type = op.getType();
  Type element = type.getElementType();
  FloatType computeType = getComputeType(element);
  ActivationKind kind = op.getKind();
  Value y = buildElementwise(
      b, loc, {input}, {b.getMultiDimIdentityMap(type.getRank())},
      tensor::getMixedSizes(b, loc, input), element,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value x = castFloat(nb, l, args[0], computeType);
        return castFloat(nb, l, buildActivation(nb, l, kind, x), element);
      });
  return castToType(b, loc, y, type);
}

FailureOr<Value> mlir::sits::lowerDequantizeOp(OpBuilder &b, DequantizeOp op,
                                               DequantizeOp::Adaptor operands) {
  DequantizeOperands q;
  q.input = operands.getInput();
  q.inputType = op.getInput().getType();
  q.scale = operands.getScale();
  q.zeroPoint = operands.getZeroPoint();
  if (q.zeroPoint)
    q.zeroPointType = cast<RankedTensorType>(op.getZeroPoint().getType());
  q.axis = optionalInt(op.getAxisAttr());
  q.blockSize = optionalInt(op.getBlockSizeAttr());
  return buildDequantize(b, op.getLoc(), q, op.getType());
}

FailureOr<Value> mlir::sits::lowerQuantizeOp(OpBuilder &b, QuantizeOp op,
                                             QuantizeOp::Adaptor operands) {
  Location loc = op.getLoc();
  MLIRContext *ctx = b.getContext();
  Value input = operands.getInput(), scale = operands.getScale(),
        zeroPoint = operands.getZeroPoint();
  RankedTensorType resultType = op.getType();
  RankedTensorType storageType =
      SitsToLinalgTypeConverter::convertTensorType(resultType);
  RankedTensorType zeroPointType =
      zeroPoint ? cast<RankedTensorType>(op.getZeroPoint().getType())
                : RankedTensorType();
  Type element = resultType.getElementType();
  int64_t rank = resultType.getRank();
  std::optional<int64_t> axis = optionalInt(op.getAxisAttr());
  std::optional<int64_t> blockSize = optionalInt(op.getBlockSizeAttr());
  auto scaleType = cast<RankedTensorType>(scale.getType());
  SmallVector<OpFoldResult> sizes;
  for (int64_t d = 0; d < rank; ++d)
    sizes.push_back(
        sizeOr(b, resultType, d, [&] { return dimOf(b, loc, input, d); }));

  PackedEncodingAttr packed = getPackedEncoding(resultType);
  if (!packed) {
    AffineMap paramMap = quantParamMap(ctx, rank, scaleType, axis, blockSize);
    SmallVector<Value> inputs = {input, scale};
    SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank), paramMap};
    if (zeroPoint) {
      inputs.push_back(zeroPoint);
      maps.push_back(storageMap(paramMap, zeroPointType));
    }
    Value y = buildElementwise(
        b, loc, inputs, maps, sizes, storageType.getElementType(),
        [&](OpBuilder &nb, Location l, ValueRange args) {
          Value z = zeroPoint ? readQuantized(nb, l, args[2], zeroPointType,
                                              paramMap)
                              : Value();
          return quantizeScalar(nb, l, args[0], args[1], z, element);
        });
    return castToType(b, loc, y, storageType);
  }

  // Packed result: view the input's packing axis as [D / f, f] and reduce
  // each group of f quantized fields into one storage word (the first in
  // the low bits). Loops: the storage dimensions with the field loop right
  // after the packing axis.
  int64_t packAxis = packed.getAxis();
  int64_t factor = packed.getPackingFactor(element);
  unsigned bits = element.getIntOrFloatBitWidth();
  IntegerType storage = packed.getStorage();
  int64_t fieldDim = packAxis + 1;
  unsigned numLoops = rank + 1;
  SmallVector<OpFoldResult> storageSizes(sizes), expandedSizes;
  storageSizes[packAxis] =
      divSizes(b, loc, sizes[packAxis], b.getIndexAttr(factor));
  for (int64_t d = 0; d < rank; ++d) {
    expandedSizes.push_back(storageSizes[d]);
    if (d == packAxis)
      expandedSizes.push_back(b.getIndexAttr(factor));
  }
  Value expanded =
      expand(b, loc, input, groupsSplitting(rank, packAxis), expandedSizes);
  // Loops to logical indices.
  SmallVector<AffineExpr> logical;
  for (int64_t d = 0; d < rank; ++d) {
    if (d < packAxis)
      logical.push_back(getAffineDimExpr(d, ctx));
    else if (d == packAxis)
      logical.push_back(getAffineDimExpr(d, ctx) * factor +
                        getAffineDimExpr(fieldDim, ctx));
    else
      logical.push_back(getAffineDimExpr(d + 1, ctx));
  }
  AffineMap logicalMap = AffineMap::get(numLoops, 0, logical, ctx);
  AffineMap paramMap = quantParamMap(ctx, rank, scaleType, axis, blockSize)
                           .compose(logicalMap);
  SmallVector<Value> inputs = {expanded, scale};
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(numLoops), paramMap};
  if (zeroPoint) {
    inputs.push_back(zeroPoint);
    maps.push_back(storageMap(paramMap, zeroPointType));
  }
  SmallVector<IteratorType> iterators(numLoops, kParallel);
  iterators[fieldDim] = kReduction;
  Value init = filledTensor(b, loc, storageSizes,
                            arith::ConstantIntOp::create(b, loc, storage, 0));
  Value y = buildGeneric(
      b, loc, inputs, maps, init,
      withoutDims(ctx, numLoops, fieldDim, fieldDim + 1), iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value z = zeroPoint
                      ? readQuantized(nb, l, args[2], zeroPointType, paramMap)
                      : Value();
        Value q = quantizeScalar(nb, l, args[0], args[1], z, element);
        if (isa<FloatType>(q.getType()))
          q = arith::BitcastOp::create(nb, l, nb.getIntegerType(bits), q);
        Value word = arith::ExtUIOp::create(nb, l, storage, q);
        Value field = arith::IndexCastUIOp::create(
            nb, l, storage, linalg::IndexOp::create(nb, l, fieldDim));
        Value shift = arith::MulIOp::create(
            nb, l, field, arith::ConstantIntOp::create(nb, l, storage, bits));
        word = arith::ShLIOp::create(nb, l, word, shift);
        return arith::OrIOp::create(nb, l, args.back(), word);
      });
  return castToType(b, loc, y, storageType);
}

//===----------------------------------------------------------------------===//
// Preconditions
//===----------------------------------------------------------------------===//

LogicalResult
mlir::sits::checkSitsOpLowerable(Operation *op,
                                 function_ref<InFlightDiagnostic()> emitError) {
  // Which operands and results may be #sits.packed: the quantized side of
  // the quantization ops.
  auto mayBePacked = [&](Value value) {
    if (auto q = dyn_cast<DequantizeOp>(op))
      return value == q.getInput() || value == q.getZeroPoint();
    if (auto q = dyn_cast<QuantizeOp>(op))
      return value == q.getResult() || value == q.getZeroPoint();
    if (auto q = dyn_cast<QMatmulOp>(op))
      return value == q.getWeight() || value == q.getZeroPoint();
    return false;
  };
  for (OpOperand &operand : op->getOpOperands()) {
    if (getPackedEncoding(operand.get().getType()) &&
        !mayBePacked(operand.get()))
      return emitError() << "operand #" << operand.getOperandNumber()
                         << " of type " << operand.get().getType()
                         << " is packed; only the quantized operands of "
                            "sits.dequantize, sits.quantize and sits.qmatmul "
                            "may carry a #sits.packed encoding";
  }
  for (OpResult result : op->getResults())
    if (getPackedEncoding(result.getType()) && !mayBePacked(result))
      return emitError() << "result #" << result.getResultNumber()
                         << " of type " << result.getType()
                         << " is packed; only the result of sits.quantize "
                            "may carry a #sits.packed encoding";
  return success();
}

namespace {

/// The first type of `op` (operands, results, function signature) the
/// conversion changes, or null.
Type findConvertedType(Operation *op) {
  auto changes = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor &&
           SitsToLinalgTypeConverter::convertTensorType(tensor) != tensor;
  };
  for (Type type : op->getOperandTypes())
    if (changes(type))
      return type;
  for (Type type : op->getResultTypes())
    if (changes(type))
      return type;
  if (auto func = dyn_cast<FunctionOpInterface>(op)) {
    for (Type type : func.getArgumentTypes())
      if (changes(type))
        return type;
    for (Type type : func.getResultTypes())
      if (changes(type))
        return type;
  }
  return {};
}

} // namespace

LogicalResult mlir::sits::checkSitsToLinalgPreconditions(Operation *root) {
  bool ok = true;
  // Pre-order, so that the ops nested in a reported op are not reported
  // again.
  root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isa<SitsDialect>(op->getDialect())) {
      if (failed(checkSitsOpLowerable(op, [&] {
            return op->emitOpError("cannot be lowered to linalg: ");
          })))
        ok = false;
      return WalkResult::advance();
    }
    Type type = findConvertedType(op);
    if (!type || isa<func::FuncOp, func::CallOp, func::ReturnOp>(op))
      return WalkResult::advance();
    bool packed = getPackedEncoding(type) != nullptr;
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (isa<DenseElementsAttr, DenseResourceElementsAttr>(
              constant.getValue()))
        return WalkResult::advance();
      op->emitOpError("cannot be converted by sits-convert-to-linalg: its ")
          << type << " value is neither dense elements nor a dense resource";
      ok = false;
      return WalkResult::advance();
    }
    if (!packed && isa<tensor::TensorDialect>(op->getDialect()) &&
        op->getNumRegions() == 0)
      return WalkResult::advance();
    if (packed)
      op->emitOpError("cannot be converted by sits-convert-to-linalg: it uses ")
          << type
          << ", a #sits.packed tensor, which only SITS ops, function "
             "signatures, calls, returns and constants may use";
    else
      op->emitOpError("cannot be converted by sits-convert-to-linalg: it uses ")
          << type
          << ", a tensor of signed or unsigned integers, which only SITS ops, "
             "function signatures, calls, returns, constants and tensor ops "
             "without regions may use";
    ok = false;
    return WalkResult::skip();
  });
  return success(ok);
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

/// Lowers one SITS op with its lower...Op function.
template <typename OpTy, typename Results,
          FailureOr<Results> (*Lower)(OpBuilder &, OpTy,
                                      typename OpTy::Adaptor)>
struct SitsOpLoweringImpl : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpTy::Adaptor;

  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(checkSitsOpLowerable(op, [] { return InFlightDiagnostic(); })))
      return rewriter.notifyMatchFailure(
          op, "not lowerable (see checkSitsOpLowerable)");
    FailureOr<Results> result = Lower(rewriter, op, adaptor);
    if (failed(result))
      return rewriter.notifyMatchFailure(op, "lowering failed");
    rewriter.replaceOp(op, *result);
    return success();
  }
};

template <typename OpTy, FailureOr<Value> (*Lower)(OpBuilder &, OpTy,
                                                   typename OpTy::Adaptor)>
using SitsOpLowering = SitsOpLoweringImpl<OpTy, Value, Lower>;

/// Repacks a constant of a #sits.packed or signed/unsigned integer tensor
/// type into its converted type. A dense resource is reinterpreted as is:
/// its blob is expected to hold the storage words.
FailureOr<TypedAttr> convertConstantValue(Attribute value,
                                          RankedTensorType type,
                                          RankedTensorType converted) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value))
    return cast<TypedAttr>(
        DenseResourceElementsAttr::get(converted, resource.getRawHandle()));
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return failure();
  PackedEncodingAttr packed = getPackedEncoding(type);
  Type element = type.getElementType();
  auto toBits = [&](int64_t index) -> APInt {
    if (isa<FloatType>(element))
      return dense.getValues<APFloat>()[index].bitcastToAPInt();
    return dense.getValues<APInt>()[index];
  };
  if (!packed) {
    // Same width and bits, signless type.
    SmallVector<APInt> values;
    for (int64_t i = 0, e = dense.getNumElements(); i < e; ++i)
      values.push_back(toBits(i));
    return cast<TypedAttr>(DenseElementsAttr::get(converted, values));
  }
  unsigned bits = element.getIntOrFloatBitWidth();
  unsigned storageBits = packed.getStorage().getWidth();
  int64_t factor = packed.getPackingFactor(element);
  int64_t axis = packed.getAxis();
  ArrayRef<int64_t> shape = type.getShape();
  // Row-major strides of the logical shape.
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  ArrayRef<int64_t> storageShape = converted.getShape();
  int64_t numWords = converted.getNumElements();
  SmallVector<APInt> words;
  words.reserve(numWords);
  SmallVector<int64_t> index(storageShape.size(), 0);
  for (int64_t w = 0; w < numWords; ++w) {
    APInt word(storageBits, 0);
    for (int64_t f = 0; f < factor; ++f) {
      int64_t linear = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t i = static_cast<int64_t>(d) == axis ? index[d] * factor + f
                                                    : index[d];
        linear += i * strides[d];
      }
      APInt field = (dense.isSplat() ? toBits(0) : toBits(linear))
                        .zextOrTrunc(bits)
                        .zext(storageBits);
      word |= field.shl(f * bits);
    }
    words.push_back(word);
    // Next storage index, row-major.
    for (int64_t d = static_cast<int64_t>(index.size()) - 1; d >= 0; --d) {
      if (++index[d] < storageShape[d])
        break;
      index[d] = 0;
    }
  }
  return cast<TypedAttr>(DenseElementsAttr::get(converted, words));
}

struct ConvertConstant : OpConversionPattern<arith::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(arith::ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op.getType());
    if (!type)
      return failure();
    auto converted =
        getTypeConverter()->convertType<RankedTensorType>(type);
    if (!converted || converted == type)
      return failure();
    FailureOr<TypedAttr> value =
        convertConstantValue(op.getValue(), type, converted);
    if (failed(value))
      return rewriter.notifyMatchFailure(op, "unsupported constant value");
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, *value);
    return success();
  }
};

/// Retypes a tensor-dialect op without regions (reshapes, slices, casts,
/// concatenations) whose only change is the signedness of its integers.
struct RetypeTensorOp : ConversionPattern {
  RetypeTensorOp(const TypeConverter &typeConverter, MLIRContext *ctx)
      : ConversionPattern(typeConverter, MatchAnyOpTypeTag(), /*benefit=*/1,
                          ctx) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa<tensor::TensorDialect>(op->getDialect()) ||
        op->getNumRegions() != 0 || getTypeConverter()->isLegal(op))
      return failure();
    FailureOr<Operation *> converted =
        convertOpResultTypes(op, operands, *getTypeConverter(), rewriter);
    if (failed(converted))
      return failure();
    rewriter.replaceOp(op, (*converted)->getResults());
    return success();
  }
};

} // namespace

void mlir::sits::populateSitsToLinalgConversionPatterns(
    TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SitsOpLowering<MatmulOp, lowerMatmulOp>,
               SitsOpLowering<ConvOp, lowerConvOp>,
               SitsOpLowering<QConvOp, lowerQConvOp>,
               SitsOpLowering<QMatmulOp, lowerQMatmulOp>,
               SitsOpLowering<AttentionOp, lowerAttentionOp>,
               SitsOpLoweringImpl<PagedAttentionOp, SmallVector<Value>,
                                  lowerPagedAttentionOp>,
               SitsOpLowering<LayerNormOp, lowerLayerNormOp>,
               SitsOpLowering<RMSNormOp, lowerRMSNormOp>,
               SitsOpLowering<SoftmaxOp, lowerSoftmaxOp>,
               SitsOpLowering<ActivationOp, lowerActivationOp>,
               SitsOpLowering<QuantizeOp, lowerQuantizeOp>,
               SitsOpLowering<DequantizeOp, lowerDequantizeOp>,
               ConvertConstant, RetypeTensorOp>(typeConverter, ctx);
  populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(
      patterns, typeConverter);
  populateCallOpTypeConversionPattern(patterns, typeConverter);
  populateReturnOpTypeConversionPattern(patterns, typeConverter);
}

void mlir::sits::configureSitsToLinalgConversionTarget(
    ConversionTarget &target, const TypeConverter &typeConverter) {
  target.addIllegalDialect<SitsDialect>();
  target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
    return typeConverter.isSignatureLegal(op.getFunctionType()) &&
           typeConverter.isLegal(&op.getBody());
  });
  target.addDynamicallyLegalOp<func::CallOp, func::ReturnOp>(
      [&](Operation *op) { return typeConverter.isLegal(op); });
  target.addDynamicallyLegalOp<arith::ConstantOp>([&](arith::ConstantOp op) {
    return typeConverter.isLegal(op.getType());
  });
  target.addDynamicallyLegalDialect<tensor::TensorDialect>(
      [&](Operation *op) { return typeConverter.isLegal(op); });
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {

struct SitsConvertToLinalgPass
    : sits::impl::SitsConvertToLinalgBase<SitsConvertToLinalgPass> {
  void runOnOperation() override {
    Operation *root = getOperation();
    // Every case the patterns cannot handle becomes a located error here,
    // before anything is rewritten.
    if (failed(checkSitsToLinalgPreconditions(root)))
      return signalPassFailure();
    SitsToLinalgTypeConverter typeConverter;
    ConversionTarget target(getContext());
    configureSitsToLinalgConversionTarget(target, typeConverter);
    RewritePatternSet patterns(&getContext());
    populateSitsToLinalgConversionPatterns(typeConverter, patterns);
    if (failed(applyPartialConversion(root, target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
