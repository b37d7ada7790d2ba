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
// The gather of I and the GEMM's body are shared with the CPU backend
// (Common/ConvToGemm.h); reading through a zero tensor.pad, viewing the
// input of a pointwise convolution as I and the layout of F are the GPU's.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "passes/Codegen/Common/ConvToGemm.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
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
  FailureOr<sits::codegen::ConvGemm> match =
      sits::codegen::matchConvAsGemm(conv);
  if (failed(match))
    return failure();
  Value input = match->input;

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

  Location loc = conv.getLoc();
  MLIRContext *ctx = conv.getContext();
  rewriter.setInsertionPoint(conv);

  // The gather of patches. A 1x1, stride-1, unpadded convolution reads the
  // input as it is: I is X viewed as [n, c, oh, ow].
  bool pointwise = match->kh == 1 && match->kw == 1 && match->strides[0] == 1 &&
                   match->strides[1] == 1 && padding[0] == 0 &&
                   padding[1] == 0 && inputType.getDimSize(2) == match->oh &&
                   inputType.getDimSize(3) == match->ow;
  Value patches = pointwise ? input
                            : sits::codegen::buildPatchGather(
                                  rewriter, loc, input, *match, padding);

  // The filter as a matrix: a reshape, no data moves.
  Value matrix = tensor::CollapseShapeOp::create(
      rewriter, loc, match->filter,
      SmallVector<ReassociationIndices>{{0}, {1, 2, 3}});

  // Loops: 0 = n, 1 = f, 2 = oh, 3 = ow, 4 = k. The body is the
  // convolution's own (multiply, accumulate), with the filter second.
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  SmallVector<AffineMap> maps = {
      AffineMap::get(5, 0, {d(0), d(4), d(2), d(3)}, ctx),
      AffineMap::get(5, 0, {d(1), d(4)}, ctx),
      AffineMap::get(5, 0, {d(0), d(1), d(2), d(3)}, ctx)};
  SmallVector<utils::IteratorType> iterators(4, utils::IteratorType::parallel);
  iterators.push_back(utils::IteratorType::reduction);
  linalg::GenericOp gemm = sits::codegen::buildConvGemm(
      rewriter, conv, match->initType, ValueRange{patches, matrix}, match->init,
      maps, iterators);
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
