//===- Attention.cpp - attention, paged attention to linalg ---------------===//
//
// The lowerings of sits.attention (Q·Kᵀ, scale and masks, max-subtracted
// exp, row sums, ·V, normalization) and sits.paged_attention (K/V written
// into the pool through the slot mapping, each sequence's context gathered
// through its block table, then causal attention; or, on CPU targets, the
// attention as sits.ukernel.paged_attention, which reads the pool in place).
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
// Per-op lowerings
//===----------------------------------------------------------------------===//

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
  int64_t nh = heads.size(); // head loops: (b, h) or (b, hk, g)
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
    scores = buildGeneric(b, loc, {query, key},
                          {AffineMap::get(numLoops, 0, qExprs, ctx),
                           AffineMap::get(numLoops, 0, kExprs, ctx)},
                          filledTensor(b, loc, scoreSizes, zero),
                          AffineMap::get(numLoops, 0, outExprs, ctx), iterators,
                          [](OpBuilder &nb, Location l, ValueRange args) {
                            return multiplyAccumulate(nb, l, args[0], args[1],
                                                      args[2]);
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
    maskInputs.push_back(expand(b, loc, collapsed, splitGroups, expandedSizes));
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
          Value hidden =
              arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sgt, j, last);
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
      filledTensor(b, loc, rowSizes, negInfConst(b, loc, computeType)), rowMap,
      rowIterators, [](OpBuilder &nb, Location l, ValueRange args) {
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
      outSizes, resultElement, [&](OpBuilder &nb, Location l, ValueRange args) {
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
  return buildAttention(b, op.getLoc(), operands.getQuery(), operands.getKey(),
                        operands.getValue(), operands.getMask(), op.getType(),
                        op.getScaleOrDefault(),
                        CausalPlacement{op.getCausal(), Value()});
}

namespace {

/// The element type of `pool`.
Type poolElement(Value pool) {
  return cast<ShapedType>(pool.getType()).getElementType();
}

/// Whether `pool` holds quantized rows (INT8 or FP8 codes, then their f32
/// scale).
bool isQuantizedPool(Value pool) {
  return isQuantizedKVElement(poolElement(pool));
}

/// The largest code of a quantized pool's element type: 127 (INT8) or 448
/// (FP8 E4M3).
double largestCode(Type element) {
  return element.isInteger(8) ? 127.0 : 448.0;
}

/// The pieces of one kind's rows that go into the pool: each a `[B, Hkv, S,
/// w]` tensor written at column `column` of the pool's rows.
struct RowPiece {
  Value source;
  OpFoldResult column;
};

/// K or V rows `[B, Hkv, S, D]` as the pieces of a quantized pool's rows
/// (codes of type `element`, whose largest value is m): D codes x · (m /
/// max|x|) rounded to nearest even (all zero when the row is), then the 4
/// bytes of the scale max|x| / m, little-endian as the runtime reads them,
/// at column D.
SmallVector<RowPiece> quantizeRows(OpBuilder &b, Location loc, Value rows,
                                   Type element) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i8 = b.getI8Type(), i32 = b.getI32Type();
  const double top = largestCode(element);
  const bool integer = element.isInteger(8);
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, rows);
  SmallVector<OpFoldResult> perRow(sizes.begin(), sizes.begin() + 3);
  AffineMap identity = b.getMultiDimIdentityMap(4);
  AffineMap rowMap = withoutDims(ctx, 4, 3, 4);
  Value absMax =
      buildGeneric(b, loc, {rows}, {identity},
                   filledTensor(b, loc, perRow, floatConst(b, loc, f32, 0.0)),
                   rowMap, {kParallel, kParallel, kParallel, kReduction},
                   [&](OpBuilder &nb, Location l, ValueRange args) {
                     Value x = castFloat(nb, l, args[0], f32);
                     return arith::MaximumFOp::create(
                         nb, l, args[1], math::AbsFOp::create(nb, l, x));
                   });
  Value codes = buildElementwise(
      b, loc, {rows, absMax}, {identity, rowMap}, sizes, element,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value x = castFloat(nb, l, args[0], f32), largest = args[1];
        Value zero = floatConst(nb, l, f32, 0.0);
        Value limit = floatConst(nb, l, f32, top);
        Value positive = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT,
                                               largest, zero);
        Value inverse = arith::SelectOp::create(
            nb, l, positive, arith::DivFOp::create(nb, l, limit, largest),
            zero);
        Value q = arith::MulFOp::create(nb, l, x, inverse);
        if (integer)
          q = math::RoundEvenOp::create(nb, l, q);
        // |q| <= m up to rounding: clamped, the codes never overflow.
        q = arith::MinimumFOp::create(
            nb, l,
            arith::MaximumFOp::create(nb, l, q, floatConst(nb, l, f32, -top)),
            limit);
        if (integer)
          return arith::FPToSIOp::create(nb, l, i8, q);
        return arith::TruncFOp::create(nb, l, element, q);
      });
  SmallVector<OpFoldResult> byteSizes = perRow;
  byteSizes.push_back(b.getIndexAttr(kKVScaleBytes));
  Value bytes = buildElementwise(
      b, loc, {absMax}, {rowMap}, byteSizes, element,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value scale =
            arith::DivFOp::create(nb, l, args[0], floatConst(nb, l, f32, top));
        Value bits = arith::BitcastOp::create(nb, l, i32, scale);
        Value byte = arith::IndexCastOp::create(
            nb, l, i32, linalg::IndexOp::create(nb, l, 3));
        Value shift = arith::MulIOp::create(
            nb, l, byte, arith::ConstantIntOp::create(nb, l, i32, 8));
        Value part = arith::TruncIOp::create(
            nb, l, i8, arith::ShRUIOp::create(nb, l, bits, shift));
        if (integer)
          return part;
        return arith::BitcastOp::create(nb, l, element, part);
      });
  return {{codes, b.getIndexAttr(0)}, {bytes, sizes[3]}};
}

/// A quantized pool's rows `[B, Hkv, P, D + 4]` as f32 values `[B, Hkv, P,
/// D]`: code × the scale the row's last 4 bytes hold.
Value dequantizeRows(OpBuilder &b, Location loc, Value rows) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type(), i8 = b.getI8Type(), i32 = b.getI32Type();
  const bool integer =
      cast<ShapedType>(rows.getType()).getElementType().isInteger(8);
  SmallVector<OpFoldResult> sizes = tensor::getMixedSizes(b, loc, rows);
  OpFoldResult headDim =
      subSizes(b, loc, sizes[3], b.getIndexAttr(kKVScaleBytes));
  SmallVector<OpFoldResult> codeSizes = {sizes[0], sizes[1], sizes[2], headDim};
  SmallVector<OpFoldResult> byteSizes = {sizes[0], sizes[1], sizes[2],
                                         b.getIndexAttr(kKVScaleBytes)};
  SmallVector<OpFoldResult> zeros(4, b.getIndexAttr(0)),
      ones(4, b.getIndexAttr(1));
  SmallVector<OpFoldResult> byteOffsets = {zeros[0], zeros[1], zeros[2],
                                           headDim};
  Value codes =
      tensor::ExtractSliceOp::create(b, loc, rows, zeros, codeSizes, ones);
  Value bytes = tensor::ExtractSliceOp::create(b, loc, rows, byteOffsets,
                                               byteSizes, ones);
  AffineMap identity = b.getMultiDimIdentityMap(4);
  AffineMap rowMap = withoutDims(ctx, 4, 3, 4);
  SmallVector<OpFoldResult> perRow(sizes.begin(), sizes.begin() + 3);
  Value bits = buildGeneric(
      b, loc, {bytes}, {identity},
      filledTensor(b, loc, perRow,
                   arith::ConstantIntOp::create(b, loc, i32, 0)),
      rowMap, {kParallel, kParallel, kParallel, kReduction},
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value part =
            integer ? args[0] : arith::BitcastOp::create(nb, l, i8, args[0]);
        Value byte = arith::ExtUIOp::create(nb, l, i32, part);
        Value index = arith::IndexCastOp::create(
            nb, l, i32, linalg::IndexOp::create(nb, l, 3));
        Value shift = arith::MulIOp::create(
            nb, l, index, arith::ConstantIntOp::create(nb, l, i32, 8));
        return arith::OrIOp::create(nb, l, args[1],
                                    arith::ShLIOp::create(nb, l, byte, shift));
      });
  return buildElementwise(
      b, loc, {codes, bits}, {identity, rowMap}, codeSizes, f32,
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value code =
            integer ? arith::SIToFPOp::create(nb, l, f32, args[0]).getResult()
                    : arith::ExtFOp::create(nb, l, f32, args[0]).getResult();
        Value scale = arith::BitcastOp::create(nb, l, f32, args[1]);
        return arith::MulFOp::create(nb, l, code, scale);
      });
}

/// The pieces of `rows` (`[B, Hkv, S, D]` new K or V) as rows of `pool`:
/// the rows themselves, or their codes and scales.
SmallVector<RowPiece> poolRows(OpBuilder &b, Location loc, Value pool,
                               Value rows) {
  if (isQuantizedPool(pool))
    return quantizeRows(b, loc, rows, poolElement(pool));
  return {{rows, b.getIndexAttr(0)}};
}

/// Writes the new tokens' K and V (`[B, Hkv, S, D]`) of layer `layer` into
/// `pool` at the slots of `slots` (`[B, S]` i64), skipping negative and
/// out-of-range slots: `scf.for` over (b, s) inserting one `[Hkv, w]` slice
/// per kind and piece of the pool's rows (`poolRows`), which bufferizes in
/// place when the pool is.
Value writeSlots(OpBuilder &b, Location loc, Value pool, Value key, Value value,
                 Value slots, OpFoldResult layer) {
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value c1 = arith::ConstantIndexOp::create(b, loc, 1);
  OpFoldResult blockSize = dimOf(b, loc, pool, 4);
  Value capacity = arith::IndexCastOp::create(
      b, loc, b.getI64Type(),
      indexValue(b, loc, mulSizes(b, loc, dimOf(b, loc, pool, 0), blockSize)));
  Value batch = indexValue(b, loc, dimOf(b, loc, slots, 0));
  Value tokens = indexValue(b, loc, dimOf(b, loc, slots, 1));
  OpFoldResult heads = dimOf(b, loc, key, 1);
  SmallVector<RowPiece> kinds[2] = {poolRows(b, loc, pool, key),
                                    poolRows(b, loc, pool, value)};
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
                  arith::CmpIOp::create(ib, il, arith::CmpIPredicate::sge, slot,
                                        zero),
                  arith::CmpIOp::create(ib, il, arith::CmpIPredicate::slt, slot,
                                        capacity));
              auto write = scf::IfOp::create(
                  ib, il, inRange,
                  [&](OpBuilder &tb, Location tl) {
                    Value index = arith::IndexCastOp::create(
                        tb, tl, tb.getIndexType(), slot);
                    Value bs = indexValue(tb, tl, blockSize);
                    Value block = arith::DivUIOp::create(tb, tl, index, bs);
                    Value offset = arith::RemUIOp::create(tb, tl, index, bs);
                    Value updated = current;
                    for (auto [kind, pieces] : llvm::enumerate(kinds)) {
                      for (const RowPiece &piece : pieces) {
                        OpFoldResult width = dimOf(tb, tl, piece.source, 3);
                        SmallVector<OpFoldResult> one(4, tb.getIndexAttr(1));
                        SmallVector<OpFoldResult> from = {
                            bi, tb.getIndexAttr(0), si, tb.getIndexAttr(0)};
                        SmallVector<OpFoldResult> sizes = {
                            tb.getIndexAttr(1), heads, tb.getIndexAttr(1),
                            width};
                        auto sliceType = tensor::ExtractSliceOp::
                            inferCanonicalRankReducedResultType(
                                2,
                                cast<RankedTensorType>(piece.source.getType()),
                                sizes);
                        Value slice = tensor::ExtractSliceOp::create(
                            tb, tl, sliceType, piece.source, from, sizes, one);
                        SmallVector<OpFoldResult> to = {block,
                                                        layer,
                                                        tb.getIndexAttr(kind),
                                                        tb.getIndexAttr(0),
                                                        offset,
                                                        piece.column};
                        SmallVector<OpFoldResult> toSizes = {
                            tb.getIndexAttr(1), tb.getIndexAttr(1),
                            tb.getIndexAttr(1), heads,
                            tb.getIndexAttr(1), width};
                        updated = tensor::InsertSliceOp::create(
                            tb, tl, slice, updated, to, toSizes,
                            SmallVector<OpFoldResult>(6, tb.getIndexAttr(1)));
                      }
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
/// `[B, Hkv, M * block_size, D]` with `M` the block tables' width (f32
/// values for a quantized pool). Position
/// `m * block_size + o` comes from block `tables[b, m]`; block numbers out of
/// the pool's range read block 0 (their positions are masked or unused).
/// Whole blocks are copied (`[Hkv, block_size, D]`, contiguous in the pool)
/// by an `scf.forall` over (b, m) of parallel slice inserts, which the
/// thread pool splits: element-wise reads through the table would vectorize
/// to gathers.
Value gatherContext(OpBuilder &b, Location loc, Value pool, Value tables,
                    OpFoldResult layer, int64_t kind) {
  auto poolType = cast<RankedTensorType>(pool.getType());
  OpFoldResult batch = dimOf(b, loc, tables, 0),
               width = dimOf(b, loc, tables, 1), heads = dimOf(b, loc, pool, 3),
               blockSize = dimOf(b, loc, pool, 4),
               headDim = dimOf(b, loc, pool, 5);
  Value numBlocks = indexValue(b, loc, dimOf(b, loc, pool, 0));
  Value c0 = arith::ConstantIndexOp::create(b, loc, 0);
  Value init = emptyTensor(b, loc, {batch, heads, width, blockSize, headDim},
                           poolType.getElementType());
  OpFoldResult one = b.getIndexAttr(1), zero = b.getIndexAttr(0);
  auto forall = scf::ForallOp::create(
      b, loc, SmallVector<OpFoldResult>{zero, zero},
      SmallVector<OpFoldResult>{batch, width},
      SmallVector<OpFoldResult>{one, one}, ValueRange{init}, std::nullopt);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(forall.getTerminator());
  Value bi = forall.getInductionVar(0), mi = forall.getInductionVar(1);
  Value entry = tensor::ExtractOp::create(b, loc, tables, ValueRange{bi, mi});
  Value block = arith::IndexCastOp::create(b, loc, b.getIndexType(), entry);
  // Unsigned compare: a negative block number is huge.
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult,
                                        block, numBlocks);
  block = arith::SelectOp::create(b, loc, inRange, block, c0);
  SmallVector<OpFoldResult> from = {block, layer, b.getIndexAttr(kind),
                                    zero,  zero,  zero};
  SmallVector<OpFoldResult> sizes = {one, one, one, heads, blockSize, headDim};
  auto chunkType = tensor::ExtractSliceOp::inferCanonicalRankReducedResultType(
      3, poolType, sizes);
  Value chunk = tensor::ExtractSliceOp::create(
      b, loc, chunkType, pool, from, sizes, SmallVector<OpFoldResult>(6, one));
  b.setInsertionPointToStart(forall.getTerminator().getBody());
  tensor::ParallelInsertSliceOp::create(
      b, loc, chunk, forall.getRegionIterArgs()[0],
      SmallVector<OpFoldResult>{bi, zero, mi, zero, zero},
      SmallVector<OpFoldResult>{one, heads, one, blockSize, headDim},
      SmallVector<OpFoldResult>(5, one));
  b.setInsertionPointAfter(forall);
  Value context =
      collapse(b, loc, forall.getResult(0), {{0}, {1}, {2, 3}, {4}});
  return isQuantizedPool(pool) ? dequantizeRows(b, loc, context) : context;
}

/// The layer `op` reads and writes: static (an attribute) or an operand.
OpFoldResult getLayer(OpBuilder &b, PagedAttentionOp op,
                      PagedAttentionOp::Adaptor operands) {
  return operands.getLayerIndex() ? OpFoldResult(operands.getLayerIndex())
                                  : b.getIndexAttr(*op.getLayer());
}

} // namespace

FailureOr<SmallVector<Value>>
mlir::sits::lowerPagedAttentionOp(OpBuilder &b, PagedAttentionOp op,
                                  PagedAttentionOp::Adaptor operands) {
  // KIVI blocks are written and read by the CPU runtime kernels only
  // (lowerPagedAttentionToKernel).
  if (op.getKivi())
    return op.emitOpError("a KIVI pool (4- or 2-bit KV blocks) is read and "
                          "written by the CPU runtime kernels only: compile "
                          "for the CPU target, or use another kv dtype");
  Location loc = op.getLoc();
  // A static layer gives static pool offsets, a dynamic one dynamic ones.
  OpFoldResult layer = getLayer(b, op, operands);
  Value pool =
      writeSlots(b, loc, operands.getPool(), operands.getKey(),
                 operands.getValue(), operands.getSlotMapping(), layer);
  Value key = gatherContext(b, loc, pool, operands.getBlockTables(), layer, 0);
  Value value =
      gatherContext(b, loc, pool, operands.getBlockTables(), layer, 1);
  // Query s of sequence b sits at position context_lens[b] - S + s.
  Value lens = operands.getContextLens();
  Value newTokens = arith::IndexCastOp::create(
      b, loc, b.getI64Type(),
      indexValue(b, loc, dimOf(b, loc, operands.getQuery(), 2)));
  Value offsets = buildElementwise(
      b, loc, {lens}, {b.getMultiDimIdentityMap(1)}, {dimOf(b, loc, lens, 0)},
      b.getI64Type(), [&](OpBuilder &nb, Location l, ValueRange args) {
        Value len = arith::ExtSIOp::create(nb, l, nb.getI64Type(), args[0]);
        return arith::SubIOp::create(nb, l, len, newTokens);
      });
  auto resultType = cast<RankedTensorType>(op.getResult().getType());
  Value out = buildAttention(b, loc, operands.getQuery(), key, value, Value(),
                             resultType, op.getScaleOrDefault(),
                             CausalPlacement{true, offsets});
  // A query that sees no key (a left-padding token at a negative position)
  // gets zeros rather than buildAttention's average of the gathered rows.
  MLIRContext *ctx = b.getContext();
  Value zero = floatConst(b, loc, resultType.getElementType(), 0.0);
  out = buildElementwise(
      b, loc, {out, offsets},
      {b.getMultiDimIdentityMap(4),
       AffineMap::get(4, 0, {getAffineDimExpr(0, ctx)}, ctx)},
      tensor::getMixedSizes(b, loc, out), resultType.getElementType(),
      [&](OpBuilder &nb, Location l, ValueRange args) {
        Value s = arith::IndexCastOp::create(nb, l, nb.getI64Type(),
                                             linalg::IndexOp::create(nb, l, 2));
        Value position = arith::AddIOp::create(nb, l, args[1], s);
        Value padding =
            arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt, position,
                                  arith::ConstantIntOp::create(nb, l, 0, 64));
        return arith::SelectOp::create(nb, l, padding, zero, args[0]);
      });
  return SmallVector<Value>{castToType(b, loc, out, resultType), pool};
}

FailureOr<SmallVector<Value>>
mlir::sits::lowerPagedAttentionToKernel(OpBuilder &b, PagedAttentionOp op,
                                        PagedAttentionOp::Adaptor operands) {
  auto f32 = [](Value v) {
    return cast<ShapedType>(v.getType()).getElementType().isF32();
  };
  std::optional<double> scale = op.getScaleOrDefault();
  if (op.getKivi()) {
    // The writer kernel fills the tails and quantizes full blocks, then the
    // attention kernel reads them (f32 K/V and queries, verified).
    if (!scale)
      return failure();
    Location loc = op.getLoc();
    Value layer = indexValue(b, loc, getLayer(b, op, operands));
    auto kivi = b.getDenseI64ArrayAttr(*op.getKivi());
    Value pool = operands.getPool();
    pool =
        UkernelKiviWriteOp::create(b, loc, TypeRange{pool.getType()},
                                   operands.getKey(), operands.getValue(),
                                   operands.getSlotMapping(), layer, kivi, pool)
            .getResult()
            .front();
    auto resultType = cast<RankedTensorType>(op.getResult().getType());
    Value init =
        emptyTensor(b, loc, tensor::getMixedSizes(b, loc, operands.getQuery()),
                    resultType.getElementType());
    auto kernel = UkernelPagedAttentionOp::create(
        b, loc, TypeRange{init.getType()}, operands.getQuery(), pool,
        operands.getBlockTables(), operands.getContextLens(), layer,
        b.getF32FloatAttr(*scale), kivi, init);
    return SmallVector<Value>{
        castToType(b, loc, kernel.getResult().front(), resultType), pool};
  }
  // The kernel reads f32 pools, and quantized ones whatever the model's
  // float type (its query and result are then converted).
  const bool quantized = isQuantizedPool(operands.getPool());
  if (!scale ||
      (!quantized && (!f32(operands.getQuery()) || !f32(operands.getKey()) ||
                      !f32(operands.getValue()) || !f32(operands.getPool()) ||
                      !f32(op.getResult()))))
    return failure();
  Location loc = op.getLoc();
  OpFoldResult layer = getLayer(b, op, operands);
  Value pool =
      writeSlots(b, loc, operands.getPool(), operands.getKey(),
                 operands.getValue(), operands.getSlotMapping(), layer);
  auto resultType = cast<RankedTensorType>(op.getResult().getType());
  auto kernelType = resultType.clone(b.getF32Type());
  Value query = castToType(b, loc, operands.getQuery(), kernelType);
  Value init = emptyTensor(b, loc, tensor::getMixedSizes(b, loc, query),
                           kernelType.getElementType());
  auto kernel = UkernelPagedAttentionOp::create(
      b, loc, TypeRange{init.getType()}, query, pool, operands.getBlockTables(),
      operands.getContextLens(), indexValue(b, loc, layer),
      b.getF32FloatAttr(*scale), DenseI64ArrayAttr(), init);
  return SmallVector<Value>{
      castToType(b, loc, kernel.getResult().front(), resultType), pool};
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

void mlir::sits::populatePagedAttentionKernelPatterns(
    TypeConverter &typeConverter, RewritePatternSet &patterns) {
  // Ahead of the default lowering, which takes what this one does not.
  patterns.add<SitsOpLoweringImpl<PagedAttentionOp, SmallVector<Value>,
                                  lowerPagedAttentionToKernel>>(
      typeConverter, patterns.getContext(), /*benefit=*/2);
}

void mlir::sits::detail::populateAttentionPatterns(
    TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<SitsOpLowering<AttentionOp, lowerAttentionOp>,
               SitsOpLoweringImpl<PagedAttentionOp, SmallVector<Value>,
                                  lowerPagedAttentionOp>>(typeConverter, ctx);
}
