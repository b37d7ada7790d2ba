//===- Normalization.cpp - layer_norm, rms_norm, softmax to linalg --------===//
//
// The normalizations over the trailing axes (sits.layer_norm: mean and
// variance reductions; sits.rms_norm: mean of squares) and along one axis
// (sits.softmax: max, exp(x - max), sum, division); each reduces and
// normalizes in the compute type.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/SitsToLinalg/Patterns.h"
#include "passes/Conversion/SitsToLinalg/Utils.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::detail;

using utils::IteratorType;

//===----------------------------------------------------------------------===//
// Per-op lowerings
//===----------------------------------------------------------------------===//

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
    layout.sizes.push_back(
        sizeOr(b, resultType, dim, [&] { return dimOf(b, loc, input, dim); }));
  layout.identity = b.getMultiDimIdentityMap(layout.rank);
  layout.outer = withoutDims(ctx, layout.rank, layout.axis, layout.rank);
  layout.inner = withoutDims(ctx, layout.rank, 0, layout.axis);
  layout.reductionIterators.assign(layout.rank, kParallel);
  for (int64_t dim = layout.axis; dim < layout.rank; ++dim)
    layout.reductionIterators[dim] = kReduction;
  layout.count = sizeAsFloat(
      b, loc, productOf(b, loc, ArrayRef(layout.sizes).drop_front(layout.axis)),
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
  Value sums = buildGeneric(b, loc, {input}, {layout.identity},
                            filledTensor(b, loc, outerSizes, zero),
                            layout.outer, layout.reductionIterators,
                            [&](OpBuilder &nb, Location l, ValueRange args) {
                              return arith::AddFOp::create(
                                  nb, l, args[1],
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
            arith::SubFOp::create(nb, l, castFloat(nb, l, args[0], computeType),
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

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

void mlir::sits::detail::populateNormalizationPatterns(
    TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SitsOpLowering<LayerNormOp, lowerLayerNormOp>,
               SitsOpLowering<RMSNormOp, lowerRMSNormOp>,
               SitsOpLowering<SoftmaxOp, lowerSoftmaxOp>>(typeConverter, ctx);
}
