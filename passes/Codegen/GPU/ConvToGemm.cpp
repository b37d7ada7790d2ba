//===- ConvToGemm.cpp - Convolutions as a patch gather and a GEMM ---------===//
//
//   I[n, k, oh, ow] = X[n, c, oh * sh + kh * dh - ph, ow * sw + kw * dw - pw]
//                     (k = (c * KH + kh) * KW + kw; zero outside X)
//   Y[n, f, oh, ow] = Y0[n, f, oh, ow] + sum_k F[f, k] * I[n, k, oh, ow]
//
// F is the filter [F, C, KH, KW] viewed as [F, C * KH * KW]. Y keeps the
// convolution's NCHW layout, so the GEMM's M is the output channels and its
// N the output pixels.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUCONVTOGEMM
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// The spatial zero padding of `pad` (low == high not required), when it
/// pads only the two spatial dimensions of an NCHW tensor with zero.
std::optional<std::array<int64_t, 2>> zeroSpatialPadding(tensor::PadOp pad) {
  SmallVector<OpFoldResult> low = pad.getMixedLowPad();
  SmallVector<OpFoldResult> high = pad.getMixedHighPad();
  if (low.size() != 4)
    return std::nullopt;
  for (unsigned d : {0u, 1u})
    if (!isConstantIntValue(low[d], 0) || !isConstantIntValue(high[d], 0))
      return std::nullopt;
  std::optional<int64_t> ph = getConstantIntValue(low[2]);
  std::optional<int64_t> pw = getConstantIntValue(low[3]);
  if (!ph || !pw || !getConstantIntValue(high[2]) ||
      !getConstantIntValue(high[3]))
    return std::nullopt;
  Value padding = pad.getConstantPaddingValue();
  if (!padding || (!matchPattern(padding, m_AnyZeroFloat()) &&
                   !matchPattern(padding, m_Zero())))
    return std::nullopt;
  return std::array<int64_t, 2>{*ph, *pw};
}

LogicalResult rewriteConvAsGemm(RewriterBase &rewriter,
                                linalg::Conv2DNchwFchwOp conv) {
  if (!conv.hasPureTensorSemantics())
    return failure();
  Value input = conv.getDpsInputOperand(0)->get();
  Value filter = conv.getDpsInputOperand(1)->get();
  Value init = conv.getDpsInitOperand(0)->get();
  auto filterType = cast<RankedTensorType>(filter.getType());
  auto initType = cast<RankedTensorType>(init.getType());
  if (!cast<RankedTensorType>(input.getType()).hasStaticShape() ||
      !filterType.hasStaticShape() || !initType.hasStaticShape() ||
      filterType.getEncoding())
    return failure();

  // Zero padding is read as zeros by the gather instead of a padded copy.
  std::array<int64_t, 2> padding = {0, 0};
  if (auto pad = input.getDefiningOp<tensor::PadOp>())
    if (std::optional<std::array<int64_t, 2>> p = zeroSpatialPadding(pad)) {
      padding = *p;
      input = pad.getSource();
    }
  auto inputType = cast<RankedTensorType>(input.getType());
  if (!inputType.hasStaticShape())
    return failure();

  ArrayRef<int64_t> fs = filterType.getShape();
  int64_t n = initType.getDimSize(0), c = fs[1], kh = fs[2],
          kw = fs[3], oh = initType.getDimSize(2), ow = initType.getDimSize(3);
  int64_t h = inputType.getDimSize(2), w = inputType.getDimSize(3);
  int64_t k = c * kh * kw;
  SmallVector<int64_t> strides =
      llvm::to_vector(conv.getStrides().getValues<int64_t>());
  SmallVector<int64_t> dilations =
      llvm::to_vector(conv.getDilations().getValues<int64_t>());
  Location loc = conv.getLoc();
  MLIRContext *ctx = conv.getContext();
  rewriter.setInsertionPoint(conv);

  // The gather of patches. A 1x1, stride-1, unpadded convolution reads the
  // input as it is: I is X viewed as [n, c, oh, ow].
  auto patchesType =
      RankedTensorType::get({n, k, oh, ow}, inputType.getElementType());
  Value patches;
  bool pointwise = kh == 1 && kw == 1 && strides[0] == 1 && strides[1] == 1 &&
                   padding[0] == 0 && padding[1] == 0 && h == oh && w == ow;
  if (pointwise) {
    patches = input;
  } else {
    auto idx = [&](OpBuilder &b, int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, v);
    };
    Value patchesInit = tensor::EmptyOp::create(
        rewriter, loc, patchesType.getShape(), patchesType.getElementType());
    SmallVector<utils::IteratorType> par4(4, utils::IteratorType::parallel);
    bool padded = padding[0] != 0 || padding[1] != 0;
    auto gather = linalg::GenericOp::create(
        rewriter, loc, patchesType, ValueRange{}, ValueRange{patchesInit},
        SmallVector<AffineMap>{AffineMap::getMultiDimIdentityMap(4, ctx)}, par4,
        [&](OpBuilder &b, Location, ValueRange) {
          Value nIdx = linalg::IndexOp::create(b, loc, 0);
          Value kIdx = linalg::IndexOp::create(b, loc, 1);
          Value ohIdx = linalg::IndexOp::create(b, loc, 2);
          Value owIdx = linalg::IndexOp::create(b, loc, 3);
          Value cIdx = arith::DivUIOp::create(b, loc, kIdx, idx(b, kh * kw));
          Value r = arith::RemUIOp::create(b, loc, kIdx, idx(b, kh * kw));
          Value khIdx = arith::DivUIOp::create(b, loc, r, idx(b, kw));
          Value kwIdx = arith::RemUIOp::create(b, loc, r, idx(b, kw));
          auto at = [&](Value o, int64_t s, Value t, int64_t dl,
                        int64_t p) -> Value {
            Value a = arith::MulIOp::create(b, loc, o, idx(b, s));
            Value c2 = arith::MulIOp::create(b, loc, t, idx(b, dl));
            Value sum = arith::AddIOp::create(b, loc, a, c2);
            return p ? arith::SubIOp::create(b, loc, sum, idx(b, p)).getResult()
                     : sum;
          };
          Value ih = at(ohIdx, strides[0], khIdx, dilations[0], padding[0]);
          Value iw = at(owIdx, strides[1], kwIdx, dilations[1], padding[1]);
          if (!padded) {
            Value v = tensor::ExtractOp::create(
                b, loc, input, ValueRange{nIdx, cIdx, ih, iw});
            linalg::YieldOp::create(b, loc, v);
            return;
          }
          // Outside the image: read element 0 (always there) and yield 0.
          auto inside = [&](Value i, int64_t extent) {
            Value lo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge,
                                             i, idx(b, 0));
            Value hi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                             i, idx(b, extent));
            return arith::AndIOp::create(b, loc, lo, hi).getResult();
          };
          Value valid = arith::AndIOp::create(b, loc, inside(ih, h),
                                              inside(iw, w));
          Value zeroIdx = idx(b, 0);
          Value ihSafe = arith::SelectOp::create(b, loc, valid, ih, zeroIdx);
          Value iwSafe = arith::SelectOp::create(b, loc, valid, iw, zeroIdx);
          Value v = tensor::ExtractOp::create(
              b, loc, input, ValueRange{nIdx, cIdx, ihSafe, iwSafe});
          Value zero = arith::ConstantOp::create(
              b, loc, b.getZeroAttr(inputType.getElementType()));
          linalg::YieldOp::create(
              b, loc, arith::SelectOp::create(b, loc, valid, v, zero).getResult());
        });
    patches = gather.getResult(0);
  }

  // The filter as a matrix: a reshape, no data moves.
  Value matrix = tensor::CollapseShapeOp::create(
      rewriter, loc, filter, SmallVector<ReassociationIndices>{{0}, {1, 2, 3}});

  // Loops: 0 = n, 1 = f, 2 = oh, 3 = ow, 4 = k. The body is the
  // convolution's own (multiply, accumulate), with the filter second.
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineMap> maps = {
      AffineMap::get(5, 0, {d(0), d(4), d(2), d(3)}, ctx),
      AffineMap::get(5, 0, {d(1), d(4)}, ctx),
      AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx)};
  SmallVector<utils::IteratorType> iterators(4, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  Block *body = conv.getBlock();
  auto gemm = linalg::GenericOp::create(
      rewriter, loc, initType, ValueRange{patches, matrix}, ValueRange{init},
      maps, iterators, [&](OpBuilder &b, Location, ValueRange args) {
        IRMapping mapping;
        mapping.map(body->getArguments(), args);
        for (Operation &inner : *body)
          b.clone(inner, mapping);
      });
  rewriter.replaceOp(conv, gemm.getResults());
  return success();
}

struct SitsGpuConvToGemmPass
    : sits::gpu::impl::SitsGpuConvToGemmBase<SitsGpuConvToGemmPass> {
  void runOnOperation() override {
    SmallVector<linalg::Conv2DNchwFchwOp> convs;
    getOperation().walk(
        [&](linalg::Conv2DNchwFchwOp op) { convs.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::Conv2DNchwFchwOp conv : convs) {
      Value input = conv.getDpsInputOperand(0)->get();
      if (failed(rewriteConvAsGemm(rewriter, conv)))
        continue;
      ++numRewritten;
      // A pad the gather reads through is dead once no other op uses it.
      if (auto pad = input.getDefiningOp<tensor::PadOp>())
        if (pad->use_empty())
          rewriter.eraseOp(pad);
    }
  }
};

} // namespace
