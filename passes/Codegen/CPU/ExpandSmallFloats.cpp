//===- ExpandSmallFloats.cpp - fp8 and fp4 conversions in integer code ----===//
//
// LLVM has no 8- or 4-bit float types: memory holds their bits (the LLVM
// type converter maps f8E4M3FN to i8), but arith.extf / arith.truncf to or
// from them have no LLVM lowering. They become integer and f32 arithmetic
// here, with the rounding and special values of APFloat (what the folder
// and the reference implementations compute): round to nearest even,
// overflow to infinity where the format has one and to NaN otherwise
// (saturation is the producer's business: it clamps first).
//
// One expansion serves every signed format of 8 bits or fewer, derived
// from its APFloat semantics (E4M3FN, E5M2, the FNUZ variants, E2M1FN):
// only the width, the bias, the mantissa width and the encodings of NaN,
// infinity and the largest finite value differ. The code is elementwise
// integer arithmetic, so it works on scalars and vectors alike. The
// unsigned E8M0 scale format uses upstream's expansion.
//
// bf16 is an LLVM type, but f32 -> bf16 is one instruction only with
// AVX-512 BF16 or AVX-NE-CONVERT (x86) and FEAT_BF16 (Arm); elsewhere LLVM
// calls __truncsfbf2, which the C runtime of most Linux systems lacks
// (libgcc has it from GCC 13 on), so the code would not load. On such
// targets the conversion is expanded too (upstream's bf16 patterns: round
// to nearest even, NaN stays NaN). LLVM computes bf16 arithmetic in f32
// and rounds every result with the same call, so on those targets bf16
// arithmetic first becomes f32 arithmetic between explicit conversions
// (upstream's emulation; its conversions carry `contract`, so a chain of
// elementwise ops rounds to bf16 once, at its end, as a fused kernel does).
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "dialects/Sits/IR/SitsDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Transforms/DialectConversion.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/APFloat.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUEXPANDSMALLFLOATS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;

namespace {

/// The facts of a small float format the expansion needs.
struct SmallFloatFormat {
  uint32_t width;       // bits, sign included
  int64_t mantissaBits; // explicit mantissa bits
  int64_t bias;
  uint32_t largest;            // bits of the largest finite magnitude
  std::optional<uint32_t> nan; // bits of the canonical NaN
  std::optional<uint32_t> inf;
  /// NaN is the bit pattern of negative zero (the FNUZ formats): there is no
  /// -0, and a zero result drops its sign.
  bool nanIsNegativeZero = false;
  /// NaN is the all-ones magnitude (E4M3FN), not exponent-all-ones with a
  /// nonzero mantissa (IEEE-like).
  bool nanIsAllOnes = false;

  uint32_t signBit() const { return 1u << (width - 1); }
  uint32_t magnitudeMask() const { return signBit() - 1; }
};

std::optional<SmallFloatFormat> getSmallFloatFormat(Type type) {
  auto ft = dyn_cast<FloatType>(type);
  if (!ft || ft.getWidth() > 8)
    return std::nullopt;
  const llvm::fltSemantics &sem = ft.getFloatSemantics();
  // E8M0 (no sign, no mantissa) has its own upstream expansion.
  if (!llvm::APFloat::semanticsHasSignedRepr(sem) ||
      llvm::APFloat::semanticsPrecision(sem) < 2)
    return std::nullopt;
  SmallFloatFormat f;
  f.width = ft.getWidth();
  f.mantissaBits = llvm::APFloat::semanticsPrecision(sem) - 1;
  f.bias = 1 - llvm::APFloat::semanticsMinExponent(sem);
  auto bits = [](const llvm::APFloat &v) {
    return uint32_t(v.bitcastToAPInt().getZExtValue());
  };
  f.largest = bits(llvm::APFloat::getLargest(sem));
  if (llvm::APFloat::semanticsHasNaN(sem))
    f.nan = bits(llvm::APFloat::getQNaN(sem));
  if (llvm::APFloat::semanticsHasInf(sem))
    f.inf = bits(llvm::APFloat::getInf(sem));
  f.nanIsNegativeZero = f.nan == f.signBit();
  f.nanIsAllOnes = f.nan && !f.inf && !f.nanIsNegativeZero;
  return f;
}

/// Builds elementwise constants and ops of the shape of a scalar or vector.
struct ElementwiseBuilder {
  PatternRewriter &rewriter;
  Location loc;
  Type shape; // any type of the right shape

  Type like(Type element) const {
    if (auto vec = dyn_cast<VectorType>(shape))
      return vec.clone(element);
    return element;
  }
  Value i32(uint32_t v) const {
    Type t = like(rewriter.getI32Type());
    auto attr = rewriter.getI32IntegerAttr(int32_t(v));
    if (auto vec = dyn_cast<VectorType>(t))
      return arith::ConstantOp::create(rewriter, loc,
                                       DenseElementsAttr::get(vec, attr));
    return arith::ConstantOp::create(rewriter, loc, attr);
  }
  Value f32(float v) const {
    Type t = like(rewriter.getF32Type());
    auto attr = rewriter.getF32FloatAttr(v);
    if (auto vec = dyn_cast<VectorType>(t))
      return arith::ConstantOp::create(rewriter, loc,
                                       DenseElementsAttr::get(vec, attr));
    return arith::ConstantOp::create(rewriter, loc, attr);
  }
  Value cmp(arith::CmpIPredicate p, Value a, Value b) const {
    return arith::CmpIOp::create(rewriter, loc, p, a, b);
  }
  Value eq(Value a, uint32_t b) const {
    return cmp(arith::CmpIPredicate::eq, a, i32(b));
  }
  Value select(Value c, Value a, Value b) const {
    return arith::SelectOp::create(rewriter, loc, c, a, b);
  }
  Value andI(Value a, uint32_t m) const {
    return arith::AndIOp::create(rewriter, loc, a, i32(m));
  }
  Value orI(Value a, Value b) const {
    return arith::OrIOp::create(rewriter, loc, a, b);
  }
  Value shl(Value a, uint32_t s) const {
    return arith::ShLIOp::create(rewriter, loc, a, i32(s));
  }
  Value shr(Value a, uint32_t s) const {
    return arith::ShRUIOp::create(rewriter, loc, a, i32(s));
  }
  Value add(Value a, Value b) const {
    return arith::AddIOp::create(rewriter, loc, a, b);
  }
  Value sub(Value a, Value b) const {
    return arith::SubIOp::create(rewriter, loc, a, b);
  }
};

/// `value` (any float type) as f32: exact from f16/bf16, rounded from f64.
Value toF32(PatternRewriter &rewriter, Location loc, Value value) {
  Type f32 = rewriter.getF32Type();
  if (auto vec = dyn_cast<VectorType>(value.getType()))
    f32 = vec.clone(f32);
  unsigned width = getElementTypeOrSelf(value).getIntOrFloatBitWidth();
  if (getElementTypeOrSelf(value).isF32())
    return value;
  if (width > 32)
    return arith::TruncFOp::create(rewriter, loc, f32, value);
  return arith::ExtFOp::create(rewriter, loc, f32, value);
}

/// f32 `value` as the float type `type` (exact for every small float).
Value fromF32(PatternRewriter &rewriter, Location loc, Value value, Type type) {
  unsigned width = getElementTypeOrSelf(type).getIntOrFloatBitWidth();
  if (getElementTypeOrSelf(type).isF32())
    return value;
  if (width > 32)
    return arith::ExtFOp::create(rewriter, loc, type, value);
  return arith::TruncFOp::create(rewriter, loc, type, value);
}

/// arith.extf from a small float: decode sign, exponent and mantissa and
/// assemble the f32 bits (subnormals as mantissa * 2^(1 - bias - m)).
struct ExpandSmallFloatExtF : OpRewritePattern<arith::ExtFOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::ExtFOp op,
                                PatternRewriter &rewriter) const override {
    Type srcElement = getElementTypeOrSelf(op.getIn());
    std::optional<SmallFloatFormat> f = getSmallFloatFormat(srcElement);
    if (!f)
      return failure();
    Location loc = op.getLoc();
    ElementwiseBuilder b{rewriter, loc, op.getIn().getType()};
    const uint32_t m = f->mantissaBits, e = f->width - 1 - m;
    const uint32_t mMask = (1u << m) - 1, eMask = (1u << e) - 1;

    Value bits = arith::BitcastOp::create(
        rewriter, loc, b.like(rewriter.getIntegerType(f->width)), op.getIn());
    Value x = arith::ExtUIOp::create(rewriter, loc,
                                     b.like(rewriter.getI32Type()), bits);
    Value exponent = b.andI(b.shr(x, m), eMask);
    Value mantissa = b.andI(x, mMask);

    Value normal = b.orI(b.shl(b.add(exponent, b.i32(127 - f->bias)), 23),
                         b.shl(mantissa, 23 - m));
    Value subnormalF = arith::MulFOp::create(
        rewriter, loc,
        arith::UIToFPOp::create(rewriter, loc, b.like(rewriter.getF32Type()),
                                mantissa),
        b.f32(std::ldexp(1.0f, int(1 - f->bias - int64_t(m)))));
    Value subnormal = arith::BitcastOp::create(
        rewriter, loc, b.like(rewriter.getI32Type()), subnormalF);
    Value magnitude = b.select(b.eq(exponent, 0), subnormal, normal);

    Value isNan;
    if (!f->nan) {
      // E2M1FN: every code is a finite number.
    } else if (f->nanIsNegativeZero) {
      isNan = b.eq(x, f->signBit());
    } else if (f->nanIsAllOnes) {
      isNan = b.eq(b.andI(x, f->magnitudeMask()), f->magnitudeMask());
    } else {
      Value special = b.eq(exponent, eMask);
      Value zeroMantissa = b.eq(mantissa, 0);
      magnitude =
          b.select(arith::AndIOp::create(rewriter, loc, special, zeroMantissa),
                   b.i32(0x7f800000), magnitude);
      isNan = arith::AndIOp::create(
          rewriter, loc, special,
          b.cmp(arith::CmpIPredicate::ne, mantissa, b.i32(0)));
    }
    Value result = b.orI(magnitude, b.shl(b.shr(x, f->width - 1), 31));
    if (isNan)
      result = b.select(isNan, b.i32(0x7fc00000), result);
    Value asF32 = arith::BitcastOp::create(
        rewriter, loc, b.like(rewriter.getF32Type()), result);
    rewriter.replaceOp(op, fromF32(rewriter, loc, asF32, op.getType()));
    return success();
  }
};

/// arith.truncf to a small float: round the f32 mantissa to nearest even
/// in integer arithmetic (normal results) or by scaling and roundeven
/// (subnormal results), then encode overflow and NaN. A format with neither
/// infinity nor NaN (E2M1FN) saturates, and takes NaN to zero.
struct ExpandSmallFloatTruncF : OpRewritePattern<arith::TruncFOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::TruncFOp op,
                                PatternRewriter &rewriter) const override {
    Type dstElement = getElementTypeOrSelf(op.getType());
    std::optional<SmallFloatFormat> f = getSmallFloatFormat(dstElement);
    if (!f)
      return failure();
    if (op.getRoundingmodeAttr() && op.getRoundingmodeAttr().getValue() !=
                                        arith::RoundingMode::to_nearest_even)
      return rewriter.notifyMatchFailure(op, "only round-to-nearest-even");
    Location loc = op.getLoc();
    ElementwiseBuilder b{rewriter, loc, op.getType()};
    const uint32_t m = f->mantissaBits, shift = 23 - m;
    Type i32 = b.like(rewriter.getI32Type());

    Value in = toF32(rewriter, loc, op.getIn());
    Value u = arith::BitcastOp::create(rewriter, loc, i32, in);
    Value sign = b.shr(u, 31);
    Value a = b.andI(u, 0x7fffffff);

    // Normal: add half an ulp minus one, plus the kept lsb (ties to even);
    // a carry out of the mantissa correctly bumps the exponent.
    Value lsb = b.andI(b.shr(a, shift), 1);
    Value rounded = b.add(b.add(a, b.i32((1u << (shift - 1)) - 1)), lsb);
    Value normal =
        b.sub(b.shr(rounded, shift), b.i32(uint32_t(127 - f->bias) << m));
    // Subnormal (|x| below the smallest normal): the mantissa is
    // |x| / 2^(1 - bias - m), rounded to even. It may round up to 2^m, the
    // encoding of the smallest normal.
    Value absF = arith::BitcastOp::create(rewriter, loc,
                                          b.like(rewriter.getF32Type()), a);
    Value scaled = arith::MulFOp::create(
        rewriter, loc, absF, b.f32(std::ldexp(1.0f, int(f->bias - 1 + m))));
    Value subnormal = arith::FPToUIOp::create(
        rewriter, loc, i32, math::RoundEvenOp::create(rewriter, loc, scaled));
    Value isSubnormal = b.cmp(arith::CmpIPredicate::ult, a,
                              b.i32(uint32_t(127 + 1 - f->bias) << 23));
    Value code = b.select(isSubnormal, subnormal, normal);

    Value overflow = b.cmp(arith::CmpIPredicate::ugt, code, b.i32(f->largest));
    code = b.select(overflow,
                    b.i32(f->inf   ? *f->inf
                          : f->nan ? *f->nan
                                   : f->largest),
                    code);
    Value signBit = b.shl(sign, f->width - 1);
    if (f->nanIsNegativeZero) // no -0: zero keeps no sign
      signBit = b.select(b.eq(code, 0), b.i32(0), signBit);
    code = b.orI(code, signBit);
    Value isNan = b.cmp(arith::CmpIPredicate::ugt, a, b.i32(0x7f800000));
    code = b.select(isNan, b.i32(f->nan ? *f->nan : 0), code);

    Value narrow = arith::TruncIOp::create(
        rewriter, loc, b.like(rewriter.getIntegerType(f->width)), code);
    rewriter.replaceOpWithNewOp<arith::BitcastOp>(op, op.getType(), narrow);
    return success();
  }
};

/// Whether LLVM converts f32 to bf16 in one instruction on `info`.
bool hasNativeBf16Truncation(const sits::target::TargetInfo &info) {
  return llvm::any_of(llvm::split(info.features, ','), [](StringRef f) {
    return f == "+avx512bf16" || f == "+avxneconvert" || f == "+bf16";
  });
}

struct SitsCpuExpandSmallFloatsPass
    : sits::cpu::impl::SitsCpuExpandSmallFloatsBase<
          SitsCpuExpandSmallFloatsPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    bool expandBf16 =
        !hasNativeBf16Truncation(sits::getModuleTargetOrHost(getOperation()));
    if (expandBf16 && failed(computeBf16InF32()))
      return signalPassFailure();

    RewritePatternSet patterns(ctx);
    sits::cpu::populateExpandSmallFloatPatterns(patterns);
    if (expandBf16)
      arith::populateExpandBFloat16Patterns(patterns);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }

  /// bf16 arith ops as f32 ops between extf and truncf.
  LogicalResult computeBf16InF32() {
    MLIRContext *ctx = &getContext();
    TypeConverter converter;
    arith::populateEmulateUnsupportedFloatsConversions(
        converter, {BFloat16Type::get(ctx)}, Float32Type::get(ctx));
    RewritePatternSet patterns(ctx);
    arith::populateEmulateUnsupportedFloatsPatterns(patterns, converter);
    ConversionTarget target(*ctx);
    arith::populateEmulateUnsupportedFloatsLegality(target, converter);
    return applyPartialConversion(getOperation(), target, std::move(patterns));
  }
};

} // namespace

void mlir::sits::cpu::populateExpandSmallFloatPatterns(
    RewritePatternSet &patterns) {
  patterns.add<ExpandSmallFloatExtF, ExpandSmallFloatTruncF>(
      patterns.getContext());
  arith::populateExpandF8E8M0Patterns(patterns);
}
