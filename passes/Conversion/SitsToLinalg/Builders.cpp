//===- Builders.cpp - Builders shared by the SITS lowerings ---------------===//
//
// The helpers declared in Utils.h: sizes, constants and casts, reshapes,
// indexing maps, linalg.generic builders, and the reading and
// dequantization of quantized operands.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/SitsToLinalg/Utils.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::sits;

//===----------------------------------------------------------------------===//
// Builders shared by the lowerings
//===----------------------------------------------------------------------===//

namespace mlir::sits::detail {

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
  return floatConst(
      b, loc, type,
      APFloat::getLargest(cast<FloatType>(type).getFloatSemantics(),
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

namespace {

SmallVector<int64_t> staticShapeOf(ArrayRef<OpFoldResult> sizes) {
  return llvm::map_to_vector(sizes, [](OpFoldResult size) {
    return getConstantIntValue(size).value_or(ShapedType::kDynamic);
  });
}

} // namespace

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

AffineMap dimsMap(MLIRContext *ctx, unsigned numDims, ArrayRef<int64_t> dims) {
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

namespace {

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

} // namespace

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

} // namespace mlir::sits::detail

//===----------------------------------------------------------------------===//
// Quantization helpers
//===----------------------------------------------------------------------===//

namespace mlir::sits::detail {

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
    Value index = evalIndexExpr(b, loc, logicalMap.getResult(packed.getAxis()));
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

namespace {

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
        return mulSizes(b, loc, stored,
                        b.getIndexAttr(packed.getPackingFactor(
                            logicalType.getElementType())));
      return stored;
    }));
  }
  return sizes;
}

} // namespace

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
  AffineMap paramMap = quantParamMap(ctx, rank, scaleType, q.axis, q.blockSize);
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

} // namespace mlir::sits::detail
