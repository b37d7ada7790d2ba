//===- Quantization.cpp - quantize, dequantize to linalg ------------------===//
//
// The lowerings of sits.quantize (one elementwise generic, or a reduction
// over the packing factor when the result is packed) and sits.dequantize
// (one elementwise generic reading and unpacking the quantized input).
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/SitsToLinalg/Patterns.h"
#include "passes/Conversion/SitsToLinalg/Utils.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::detail;

using utils::IteratorType;

//===----------------------------------------------------------------------===//
// Quantization helpers
//===----------------------------------------------------------------------===//

namespace {

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
          Value z = zeroPoint
                        ? readQuantized(nb, l, args[2], zeroPointType, paramMap)
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
  AffineMap paramMap =
      quantParamMap(ctx, rank, scaleType, axis, blockSize).compose(logicalMap);
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
// Patterns
//===----------------------------------------------------------------------===//

void mlir::sits::detail::populateQuantizationPatterns(
    TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SitsOpLowering<QuantizeOp, lowerQuantizeOp>,
               SitsOpLowering<DequantizeOp, lowerDequantizeOp>>(typeConverter,
                                                                ctx);
}
