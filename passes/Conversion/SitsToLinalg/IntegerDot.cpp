//===- IntegerDot.cpp - sits.qmatmul as INT8 dot products
//------------------===//
//
// The integer dot-product lowering of sits.qmatmul: the input is quantized
// to INT8 per row and group of K when the code runs, and the contraction
// multiplies INT8 activations by the weight codes in integers, the way
// dot-product instructions (x86 VNNI, AVX2's maddubs) do: 4 multiply-adds per
// 32-bit lane instead of widening every code to a float. Decoding INT4 codes
// to floats costs more instructions than the memory holding them takes to
// stream, so weight-only quantization leaves decode bound by those
// instructions; this form is not.
//
// Three pieces, each a plain linalg op on tensors:
//  1. the row quantization: per (row, group) the largest magnitude, codes
//     round(x * 127 / amax) in [-127, 127] and the scale amax / 127;
//  2. the weight codes re-laid out (kWeightLayoutAttr) so that one 64-byte
//     load holds 4 (INT8) or 8 (INT4) consecutive K codes of 16 columns
//     with a bias that makes them unsigned, as the instructions take them;
//     sits-cpu-pack-weights computes it at compile time for constant
//     weights;
//  3. the contraction over both (kUkernelAttr), which sits-cpu-lower-ukernels
//     replaces by a call of the runtime's `sitsRuntimeQDot`. Its body is the
//     exact arithmetic, in floats, so it means the same without the kernel.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/SitsToLinalg/Patterns.h"
#include "passes/Conversion/SitsToLinalg/Utils.h"

#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::detail;

using utils::IteratorType;

namespace {

AffineMap dims(MLIRContext *ctx, unsigned numDims, ArrayRef<unsigned> pos) {
  return AffineMap::get(
      numDims, 0,
      llvm::map_to_vector(pos,
                          [&](unsigned p) { return getAffineDimExpr(p, ctx); }),
      ctx);
}

/// The activation group for a weight quantized per output channel: up to
/// 128 elements of K, fine enough that one outlier element costs only its
/// own group precision.
int64_t perChannelGroup(int64_t k) {
  for (int64_t g : {128, 64, 32, 16, 8, 4})
    if (k % g == 0)
      return g;
  return 0;
}

/// `x` [M, K] as INT8 codes [M, K/G, G] and f32 scales [M, K/G]: per row and
/// group, scale = amax / 127 and code = round_half_even(x * 127 / amax)
/// (0 for an all-zero group).
std::pair<Value, Value> quantizeRows(OpBuilder &b, Location loc, Value x,
                                     OpFoldResult m, int64_t groups,
                                     int64_t group) {
  MLIRContext *ctx = b.getContext();
  Type f32 = b.getF32Type();
  auto par = IteratorType::parallel, red = IteratorType::reduction;
  SmallVector<OpFoldResult> rowGroups = {m, b.getIndexAttr(groups)};
  SmallVector<OpFoldResult> elements = {m, b.getIndexAttr(groups),
                                        b.getIndexAttr(group)};
  Value xg = expand(b, loc, x, {{0}, {1, 2}}, elements);
  Value amax = buildGeneric(
      b, loc, {xg}, {dims(ctx, 3, {0, 1, 2})},
      filledTensor(b, loc, rowGroups, floatConst(b, loc, f32, 0.0)),
      dims(ctx, 3, {0, 1}), {par, par, red},
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value v = math::AbsFOp::create(nb, l, castFloat(nb, l, args[0], f32));
        return arith::MaximumFOp::create(nb, l, args[1], v);
      });
  Value codes = buildElementwise(
      b, loc, {xg, amax}, {dims(ctx, 3, {0, 1, 2}), dims(ctx, 3, {0, 1})},
      elements, b.getI8Type(),
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Value v = castFloat(nb, l, args[0], f32);
        Value zero = floatConst(nb, l, f32, 0.0);
        Value positive = arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OGT,
                                               args[1], zero);
        Value inverse = arith::DivFOp::create(
            nb, l, floatConst(nb, l, f32, 127.0), args[1]);
        inverse = arith::SelectOp::create(nb, l, positive, inverse, zero);
        Value q = math::RoundEvenOp::create(
            nb, l, arith::MulFOp::create(nb, l, v, inverse));
        // maxnumf/minnumf send NaN (inf * 0) to a bound instead of poison.
        q = arith::MaxNumFOp::create(nb, l, q, floatConst(nb, l, f32, -127.0));
        q = arith::MinNumFOp::create(nb, l, q, floatConst(nb, l, f32, 127.0));
        return arith::FPToSIOp::create(nb, l, nb.getI8Type(), q);
      });
  Value scales = buildElementwise(
      b, loc, {amax}, {dims(ctx, 2, {0, 1})}, rowGroups, f32,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        return arith::DivFOp::create(nb, l, args[0],
                                     floatConst(nb, l, f32, 127.0));
      });
  return {codes, scales};
}

/// INT8 codes `w` [K, N] in the "qdot_i8" layout, [N/16, K/4, 16, 4]: the
/// signed code plus 128 (its top bit flipped).
Value layoutI8(OpBuilder &b, Location loc, Value w, int64_t k, int64_t n) {
  MLIRContext *ctx = b.getContext();
  Value view = expand(b, loc, w, {{0, 1}, {2, 3}},
                      {b.getIndexAttr(k / 4), b.getIndexAttr(4),
                       b.getIndexAttr(n / 16), b.getIndexAttr(16)});
  Value packed = buildElementwise(
      b, loc, {view}, {dims(ctx, 4, {1, 3, 0, 2})},
      {b.getIndexAttr(n / 16), b.getIndexAttr(k / 4), b.getIndexAttr(16),
       b.getIndexAttr(4)},
      b.getI8Type(), [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        return arith::XOrIOp::create(
            nb, l, args[0], arith::ConstantIntOp::create(nb, l, -128, 8));
      });
  packed.getDefiningOp()->setAttr(kWeightLayoutAttr, b.getStringAttr(kQDotI8));
  return packed;
}

/// INT4 codes `w` (storage [K/2, N], rows 2r and 2r + 1 in the low and high
/// nibbles of row r) in the "qdot_i4" layout, [N/16, K/8, 16, 4]: byte
/// (nb, o, j, 2p + t) holds codes 8o + 2p + t (low nibble) and 8o + 4 + 2p + t
/// (high nibble) of column 16nb + j, each plus 8. Loops (nb, o, j, p, t, h),
/// h the nibble of the result, reduced by or-ing the two halves.
Value layoutI4(OpBuilder &b, Location loc, Value w, int64_t k, int64_t n) {
  MLIRContext *ctx = b.getContext();
  Type i8 = b.getI8Type(), i32 = b.getI32Type();
  // Storage row 4o + 2h + p holds codes 8o + 4h + 2p + t, t its nibble.
  Value view =
      expand(b, loc, w, {{0, 1, 2}, {3, 4}},
             {b.getIndexAttr(k / 8), b.getIndexAttr(2), b.getIndexAttr(2),
              b.getIndexAttr(n / 16), b.getIndexAttr(16)});
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(n / 16),
                                     b.getIndexAttr(k / 8), b.getIndexAttr(16),
                                     b.getIndexAttr(2), b.getIndexAttr(2)};
  auto par = IteratorType::parallel;
  Value packed = buildGeneric(
      b, loc, {view}, {dims(ctx, 6, {1, 5, 3, 0, 2})},
      filledTensor(b, loc, sizes, arith::ConstantIntOp::create(b, loc, 0, 8)),
      dims(ctx, 6, {0, 1, 2, 3, 4}),
      {par, par, par, par, par, IteratorType::reduction},
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        auto c32 = [&](int64_t v) {
          return arith::ConstantIntOp::create(nb, l, i32, v);
        };
        auto index = [&](unsigned d) {
          return arith::IndexCastUIOp::create(
              nb, l, i32, linalg::IndexOp::create(nb, l, d));
        };
        Value byte = arith::ExtUIOp::create(nb, l, i32, args[0]);
        Value nibble = arith::AndIOp::create(
            nb, l,
            arith::ShRUIOp::create(
                nb, l, byte, arith::MulIOp::create(nb, l, index(4), c32(4))),
            c32(15));
        Value biased = arith::XOrIOp::create(nb, l, nibble, c32(8));
        Value placed = arith::ShLIOp::create(
            nb, l, biased, arith::MulIOp::create(nb, l, index(5), c32(4)));
        return arith::OrIOp::create(nb, l, args[1],
                                    arith::TruncIOp::create(nb, l, i8, placed));
      });
  packed.getDefiningOp()->setAttr(kWeightLayoutAttr, b.getStringAttr(kQDotI4));
  return collapse(b, loc, packed, {{0}, {1}, {2}, {3, 4}});
}

} // namespace

FailureOr<Value>
mlir::sits::lowerQMatmulToIntegerDot(OpBuilder &b, QMatmulOp op,
                                     QMatmulOp::Adaptor operands) {
  MLIRContext *ctx = b.getContext();
  Location loc = op.getLoc();
  RankedTensorType weightType = op.getWeight().getType();
  RankedTensorType resultType = op.getType();
  auto inputType = cast<RankedTensorType>(op.getInput().getType());
  auto scaleType = cast<RankedTensorType>(op.getScale().getType());
  auto integer = dyn_cast<IntegerType>(weightType.getElementType());
  if (!integer || integer.isUnsigned() || op.getZeroPoint() ||
      op.getFloatInput() || op.getTransposeWeight() ||
      !weightType.hasStaticShape() || inputType.getRank() < 2 ||
      !isa<FloatType>(inputType.getElementType()))
    return failure();
  int64_t k = weightType.getDimSize(0), n = weightType.getDimSize(1);
  unsigned bits = integer.getWidth();
  PackedEncodingAttr packed = getPackedEncoding(weightType);
  std::optional<int64_t> axis = optionalInt(op.getAxisAttr());
  std::optional<int64_t> blockSize = optionalInt(op.getBlockSizeAttr());
  if (n % 16 != 0 || !axis)
    return failure();
  int64_t normalizedAxis = *axis < 0 ? *axis + 2 : *axis;
  // Grouped along K (scale [K/G, N]) or per output channel (scale [N]).
  bool perChannel = !blockSize && normalizedAxis == 1 &&
                    scaleType.getRank() == 1 && bits == 8;
  bool grouped = blockSize && normalizedAxis == 0 && scaleType.getRank() == 2;
  if (!perChannel && !grouped)
    return failure();
  int64_t group = grouped ? *blockSize : perChannelGroup(k);
  int64_t quad = bits == 4 ? 8 : 4;
  if (group <= 0 || group % quad != 0 || k % group != 0)
    return failure();
  bool layoutKnown = bits == 4 ? packed && packed.getAxis() == 0 &&
                                     packed.getStorage().getWidth() == 8
                               : bits == 8 && !packed;
  if (!layoutKnown)
    return failure();
  int64_t groups = k / group;

  QMatmulRows rows = foldLeadingRows(b, loc, operands.getInput(), resultType);
  OpFoldResult m = rows.m;
  auto [codes, rowScales] = quantizeRows(b, loc, rows.x, m, groups, group);

  Type f32 = b.getF32Type();
  Value weight = bits == 4 ? layoutI4(b, loc, operands.getWeight(), k, n)
                           : layoutI8(b, loc, operands.getWeight(), k, n);
  // [N/16, K/quad, 16, 4] seen per group.
  weight = expand(b, loc, weight, {{0}, {1, 2}, {3}, {4}},
                  {b.getIndexAttr(n / 16), b.getIndexAttr(groups),
                   b.getIndexAttr(group / quad), b.getIndexAttr(16),
                   b.getIndexAttr(4)});
  Value scale = operands.getScale();
  if (scaleType.getElementType() != f32) {
    int64_t rank = scaleType.getRank();
    SmallVector<OpFoldResult> scaleSizes;
    for (int64_t size : scaleType.getShape())
      scaleSizes.push_back(b.getIndexAttr(size));
    scale = buildElementwise(b, loc, {scale}, {b.getMultiDimIdentityMap(rank)},
                             scaleSizes, f32,
                             [&](OpBuilder &nb, Location l, ValueRange args) {
                               return castFloat(nb, l, args[0], f32);
                             });
  }
  scale = perChannel ? expand(b, loc, scale, {{0, 1}},
                              {b.getIndexAttr(n / 16), b.getIndexAttr(16)})
                     : expand(b, loc, scale, {{0}, {1, 2}},
                              {b.getIndexAttr(groups), b.getIndexAttr(n / 16),
                               b.getIndexAttr(16)});

  // Loops (m, nb, j, g, o, [h,] b): k = g G + quad o [+ 4 h] + b.
  auto par = IteratorType::parallel, red = IteratorType::reduction;
  unsigned numLoops = bits == 4 ? 7 : 6;
  SmallVector<unsigned> codeDims = bits == 4
                                       ? SmallVector<unsigned>{0, 3, 4, 5, 6}
                                       : SmallVector<unsigned>{0, 3, 4, 5};
  SmallVector<OpFoldResult> codeSizes = {m, b.getIndexAttr(groups),
                                         b.getIndexAttr(group / quad)};
  if (bits == 4)
    codeSizes.push_back(b.getIndexAttr(2));
  codeSizes.push_back(b.getIndexAttr(4));
  SmallVector<ReassociationIndices> codeSplit = {{0}, {1}, {2, 3}};
  if (bits == 4)
    codeSplit = {{0}, {1}, {2, 3, 4}};
  codes = expand(b, loc, codes, codeSplit, codeSizes);
  unsigned last = numLoops - 1;
  SmallVector<AffineMap> maps = {dims(ctx, numLoops, codeDims),
                                 dims(ctx, numLoops, {1, 3, 4, 2, last}),
                                 dims(ctx, numLoops, {0, 3}),
                                 perChannel ? dims(ctx, numLoops, {1, 2})
                                            : dims(ctx, numLoops, {3, 1, 2})};
  SmallVector<IteratorType> iterators = {par, par, par};
  iterators.append(numLoops - 3, red);
  SmallVector<OpFoldResult> accSizes = {m, b.getIndexAttr(n / 16),
                                        b.getIndexAttr(16)};
  Value acc = buildGeneric(
      b, loc, {codes, weight, rowScales, scale}, maps,
      filledTensor(b, loc, accSizes, floatConst(b, loc, f32, 0.0)),
      dims(ctx, numLoops, {0, 1, 2}), iterators,
      [&](OpBuilder &nb, Location l, ValueRange args) -> Value {
        Type i32 = nb.getI32Type();
        auto c32 = [&](int64_t v) {
          return arith::ConstantIntOp::create(nb, l, i32, v);
        };
        Value byte = arith::ExtUIOp::create(nb, l, i32, args[1]);
        Value code;
        if (bits == 4) {
          Value h = arith::IndexCastUIOp::create(
              nb, l, i32, linalg::IndexOp::create(nb, l, 5));
          Value shifted = arith::ShRUIOp::create(
              nb, l, byte, arith::MulIOp::create(nb, l, h, c32(4)));
          code = arith::SubIOp::create(
              nb, l, arith::AndIOp::create(nb, l, shifted, c32(15)), c32(8));
        } else {
          code = arith::SubIOp::create(nb, l, byte, c32(128));
        }
        Value xq = arith::SIToFPOp::create(
            nb, l, f32, arith::ExtSIOp::create(nb, l, i32, args[0]));
        Value product = arith::MulFOp::create(
            nb, l, xq, arith::SIToFPOp::create(nb, l, f32, code));
        Value factor = arith::MulFOp::create(nb, l, args[2], args[3]);
        return arith::AddFOp::create(
            nb, l, args[4], arith::MulFOp::create(nb, l, product, factor));
      });
  acc.getDefiningOp()->setAttr(kUkernelAttr,
                               b.getStringAttr(bits == 4 ? kQDotI4 : kQDotI8));

  acc = collapse(b, loc, acc, {{0}, {1, 2}});
  return finishRows(b, loc, acc, rows, operands.getBias(), op.getActivation(),
                    resultType);
}

void mlir::sits::populateIntegerDotPatterns(TypeConverter &typeConverter,
                                            RewritePatternSet &patterns) {
  // Ahead of the default lowering, which takes what this one does not.
  patterns.add<SitsOpLowering<QMatmulOp, lowerQMatmulToIntegerDot>>(
      typeConverter, patterns.getContext(), /*benefit=*/2);
}
