//===- Contraction.cpp - matmul, qmatmul, conv, qconv to linalg -----------===//
//
// The contraction lowerings: sits.matmul and sits.qmatmul through one
// matmul builder (linalg.matmul, linalg.batch_matmul or a contraction
// generic), sits.conv and sits.qconv through the linalg convolutions; each
// accumulates into a zero-filled tensor and ends with one elementwise
// epilogue (bias, activation, cast).
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/SitsToLinalg/Patterns.h"
#include "passes/Conversion/SitsToLinalg/Utils.h"

#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::detail;

using utils::IteratorType;

//===----------------------------------------------------------------------===//
// The contraction epilogue and the matmul
//===----------------------------------------------------------------------===//

/// The elementwise consumer of a contraction's accumulator `acc` (of
/// `sizes`): adds `bias` (read through `biasMap`; may be null), applies
/// `activation` and converts to `resultElementType`. Returns `acc` when
/// there is nothing to do.
Value mlir::sits::detail::buildEpilogue(OpBuilder &b, Location loc, Value acc,
                                        ArrayRef<OpFoldResult> sizes,
                                        Value bias, AffineMap biasMap,
                                        ActivationKind activation,
                                        Type resultElementType) {
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
  return buildElementwise(b, loc, inputs, maps, sizes, resultElementType,
                          [&](OpBuilder &nb, Location l, ValueRange args) {
                            Value v = args[0];
                            if (bias)
                              v = arith::AddFOp::create(
                                  nb, l, v,
                                  castFloat(nb, l, args[1], computeType));
                            v = buildActivation(nb, l, activation, v);
                            return castFloat(nb, l, v, resultElementType);
                          });
}

/// A contraction's input [..., M, K] as rows [M, K]: every leading
/// dimension, dynamic ones too (a decoder's batch and tokens), folds into M
/// so that one weight read serves every row; sits-resolve-expand-shapes
/// expands the result back (finishRows).
QMatmulRows mlir::sits::detail::foldLeadingRows(OpBuilder &b, Location loc,
                                                Value input,
                                                RankedTensorType resultType) {
  QMatmulRows rows;
  for (int64_t d = 0; d + 1 < resultType.getRank(); ++d)
    rows.leading.push_back(
        sizeOr(b, resultType, d, [&] { return dimOf(b, loc, input, d); }));
  rows.m = productOf(b, loc, rows.leading);
  int64_t rank = cast<RankedTensorType>(input.getType()).getRank();
  rows.x = collapse(b, loc, input, groupsMergingLeading(rank, rank - 1));
  return rows;
}

/// The rows' result `acc` [M, N] with the epilogue (bias, activation, cast)
/// and the leading dimensions of `rows` expanded back: `resultType`.
Value mlir::sits::detail::finishRows(OpBuilder &b, Location loc, Value acc,
                                     const QMatmulRows &rows, Value bias,
                                     ActivationKind activation,
                                     RankedTensorType resultType) {
  int64_t n = resultType.getShape().back();
  Value y = buildEpilogue(b, loc, acc, {rows.m, b.getIndexAttr(n)}, bias,
                          dimsMap(b.getContext(), 2, {1}), activation,
                          resultType.getElementType());
  SmallVector<OpFoldResult> resultSizes(rows.leading);
  resultSizes.push_back(b.getIndexAttr(n));
  y = expand(
      b, loc, y,
      groupsMergingLeading(resultType.getRank(), resultType.getRank() - 1),
      resultSizes);
  return castToType(b, loc, y, resultType);
}

namespace {

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

  if (effective.empty() || (rhsNone && !transposeLhs)) {
    // No batch left, or only the lhs has one and it folds into M: a 2-D
    // linalg.matmul on [batch... * M, K] x [K, N].
    Value lhs2 =
        lhsBatch > 0
            ? collapse(b, loc, lhs,
                       groupsMergingLeading(lhsType.getRank(), lhsBatch + 1))
            : lhs;
    Value rhs2 =
        rhsBatch > 0
            ? collapse(b, loc, rhs,
                       groupsMergingLeading(rhsType.getRank(), rhsBatch + 1))
            : rhs;
    accSizes = {productOf(b, loc, ArrayRef(resultSizes).drop_back()), n};
    Value init = filledTensor(b, loc, accSizes, zero);
    // (m, n, k)
    AffineMap lhsMap =
        AffineMap::get(3, 0,
                       transposeLhs ? SmallVector<AffineExpr>{d(2), d(0)}
                                    : SmallVector<AffineExpr>{d(0), d(2)},
                       ctx);
    AffineMap rhsMap =
        AffineMap::get(3, 0,
                       transposeRhs ? SmallVector<AffineExpr>{d(1), d(2)}
                                    : SmallVector<AffineExpr>{d(2), d(1)},
                       ctx);
    auto matmul =
        linalg::MatmulOp::create(b, loc, TypeRange{init.getType()},
                                 ValueRange{lhs2, rhs2}, ValueRange{init});
    if (transposeLhs || transposeRhs)
      matmul.setIndexingMapsAttr(b.getAffineMapArrayAttr(
          {lhsMap, rhsMap, AffineMap::get(3, 0, {d(0), d(1)}, ctx)}));
    acc = matmul.getResult(0);
    resultGroups = groupsMergingLeading(batch + 2, batch + 1);
  } else if ((lhsAll || lhsNone) && (rhsAll || rhsNone) &&
             !(lhsNone && transposeLhs) && !(rhsNone && transposeRhs) &&
             !effective.empty()) {
    // Every operand has all batch dimensions or none (a broadcast
    // linalg.batch_matmul can express): collapse them into one.
    auto toBatched = [&](Value operand, RankedTensorType type,
                         int64_t operandBatch, bool all) -> Value {
      if (all)
        return operandBatch > 1 ? collapse(b, loc, operand,
                                           groupsMergingLeading(type.getRank(),
                                                                operandBatch))
                                : operand;
      return operandBatch > 0 ? collapse(b, loc, operand,
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
    auto batchMatmul =
        linalg::BatchMatmulOp::create(b, loc, TypeRange{init.getType()},
                                      ValueRange{lhs3, rhs3}, ValueRange{init});
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
  QMatmulRows rows = foldLeadingRows(b, loc, operands.getInput(), resultType);

  FloatType computeType = getComputeType(resultType.getElementType());
  int64_t groups = k / group, perWord = group / factor;
  auto d = [&](unsigned pos) { return getAffineDimExpr(pos, ctx); };

  // Dequantized weights D[g, w, f, n] = W[g * G + w * F + f, n], loops
  // (g, w, f, n).
  Value storage = operands.getWeight();
  SmallVector<OpFoldResult> storageSizes =
      transposed
          ? SmallVector<OpFoldResult>{b.getIndexAttr(n), b.getIndexAttr(groups),
                                      b.getIndexAttr(perWord)}
          : SmallVector<OpFoldResult>{b.getIndexAttr(groups),
                                      b.getIndexAttr(perWord),
                                      b.getIndexAttr(n)};
  storage = expand(b, loc, storage,
                   transposed ? SmallVector<ReassociationIndices>{{0}, {1, 2}}
                              : SmallVector<ReassociationIndices>{{0, 1}, {2}},
                   storageSizes);
  AffineMap storageMap =
      AffineMap::get(4, 0,
                     transposed ? SmallVector<AffineExpr>{d(3), d(0), d(1)}
                                : SmallVector<AffineExpr>{d(0), d(1), d(3)},
                     ctx);
  AffineMap paramMap =
      AffineMap::get(4, 0,
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
      {b.getIndexAttr(groups), b.getIndexAttr(perWord), b.getIndexAttr(factor),
       b.getIndexAttr(n)},
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
  OpFoldResult m = rows.m;
  Value x = expand(b, loc, rows.x, {{0}, {1, 2, 3}},
                   {m, b.getIndexAttr(groups), b.getIndexAttr(perWord),
                    b.getIndexAttr(factor)});
  SmallVector<OpFoldResult> accSizes = {m, b.getIndexAttr(n)};
  Value init =
      filledTensor(b, loc, accSizes, floatConst(b, loc, computeType, 0.0));
  Value acc = buildGeneric(
      b, loc, {x, weight},
      {AffineMap::get(5, 0, {d(0), d(2), d(3), d(4)}, ctx),
       AffineMap::get(5, 0, {d(2), d(3), d(4), d(1)}, ctx)},
      init, AffineMap::get(5, 0, {d(0), d(1)}, ctx),
      {kParallel, kParallel, kReduction, kReduction, kReduction},
      [](OpBuilder &nb, Location l, ValueRange args) {
        return multiplyAccumulate(nb, l, args[0], args[1], args[2]);
      });
  return finishRows(b, loc, acc, rows, operands.getBias(), op.getActivation(),
                    resultType);
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
      !q.blockSize && (scaleType.getRank() == 0 ||
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
    AffineMap scaleMap =
        scaleType.getRank() == 0 ? AffineMap::get(rank, 0, {}, ctx) : lastDim;
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
      OpFoldResult span =
          addSizes(b, loc,
                   mulSizes(b, loc,
                            subSizes(b, loc, dimOf(b, loc, filter, i + 2),
                                     b.getIndexAttr(1)),
                            b.getIndexAttr(dilations[i])),
                   b.getIndexAttr(1));
      OpFoldResult room = subSizes(b, loc, dimOf(b, loc, input, i + 2), span);
      return addSizes(b, loc,
                      divSizes(b, loc, room, b.getIndexAttr(strides[i])),
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
      acc = linalg::Conv1DNcwFcwOp::create(
                b, loc, TypeRange{accType}, ValueRange{input, filter},
                ValueRange{init}, stridesAttr, dilationsAttr)
                .getResult(0);
    else if (k == 2)
      acc = linalg::Conv2DNchwFchwOp::create(
                b, loc, TypeRange{accType}, ValueRange{input, filter},
                ValueRange{init}, stridesAttr, dilationsAttr)
                .getResult(0);
    else
      acc = linalg::Conv3DNcdhwFcdhwOp::create(
                b, loc, TypeRange{accType}, ValueRange{input, filter},
                ValueRange{init}, stridesAttr, dilationsAttr)
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
    acc = buildGeneric(
        b, loc, {groupedInput, groupedFilter},
        {AffineMap::get(numLoops, 0, inExprs, ctx),
         AffineMap::get(numLoops, 0, filterExprs, ctx)},
        init, AffineMap::get(numLoops, 0, outExprs, ctx), iterators,
        [](OpBuilder &nb, Location l, ValueRange args) {
          return multiplyAccumulateCode(nb, l, args[0], args[1], args[2]);
        });
  }
  if (scale)
    acc = scaleAccumulator(b, loc, acc, accSizes,
                           expand(b, loc, scale, {{0, 1}}, {g, outPerGroup}),
                           dimsMap(ctx, k + 3, {1, 2}));
  Value bias = operands.getBias();
  if (bias)
    bias = expand(b, loc, bias, {{0, 1}}, {g, outPerGroup});
  Value y =
      buildEpilogue(b, loc, acc, accSizes, bias, dimsMap(ctx, k + 3, {1, 2}),
                    op.getActivation(), resultElement);
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

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

void mlir::sits::detail::populateContractionPatterns(
    TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SitsOpLowering<MatmulOp, lowerMatmulOp>,
               SitsOpLowering<ConvOp, lowerConvOp>,
               SitsOpLowering<QConvOp, lowerQConvOp>,
               SitsOpLowering<QMatmulOp, lowerQMatmulOp>>(typeConverter, ctx);
}
