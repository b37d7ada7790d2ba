//===- ConvToGemm.cpp - Convolutions as a gather and a panel GEMM ---------===//
//
//   I[n, k, oh, ow]         = X[n, c, oh * sh + kh * dh, ow * sw + kw * dw]
//                             (k = (c * KH + kh) * KW + kw)
//   C[n, fb, oh, ow, j]     = c0 + sum_k I[n, k, oh, ow] * F[fb, k, j]
//   Y[n, fb, j, oh, ow]     = C[n, fb, oh, ow, j]          (f = fb * nr + j)
//
// c0 is the convolution's initial value when that is a fill; any other
// initial value is added to Y instead.
//
// F is the filter re-laid out at compile time. A register block of C is
// 8 pixels of an output row by nr channels; per k it reads 8 consecutive
// values of I and one row of a panel of F.
//
// The gather of I and the GEMM's body are shared with the GPU backend
// (Common/ConvToGemm.h); the panel layout of F and of C is the CPU's.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "passes/Codegen/Common/ConvToGemm.h"
#include "passes/Transforms/ConstantData.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/PatternMatch.h"

#include <cstring>

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUCONVTOGEMM
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

/// The filter [F, C, KH, KW] as panels [F / nr, C * KH * KW, nr].
TypedAttr filterPanels(ElementsAttr value, int64_t nr) {
  auto type = cast<RankedTensorType>(value.getType());
  ArrayRef<char> bytes = *getConstantBytes(value);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t elementBytes = getElementBytes(type);
  int64_t f = shape[0], k = shape[1] * shape[2] * shape[3];
  AsmResourceBlob blob =
      makeWeightBlob(bytes.size(), [&](MutableArrayRef<char> out) {
        for (int64_t fb = 0; fb < f / nr; ++fb)
          for (int64_t kk = 0; kk < k; ++kk)
            for (int64_t j = 0; j < nr; ++j)
              std::memcpy(out.data() + ((fb * k + kk) * nr + j) * elementBytes,
                          bytes.data() +
                              ((fb * nr + j) * k + kk) * elementBytes,
                          elementBytes);
      });
  auto panelType =
      RankedTensorType::get({f / nr, k, nr}, type.getElementType());
  return makeConstantLike(value, panelType, std::move(blob), ".panels");
}

/// Whether the pixels form one M loop (p = oh * OW + ow) rather than two:
/// when output rows are narrower than a register block (the deep layers of
/// a CNN, 4 x 4 pixels), per-row blocks would be mostly empty and each
/// panel chunk would be read once per row. Flat, the blocks span rows; the
/// transpose back then reads the accumulator at a computed index, which
/// costs more than the permuted read, so rows are kept where flattening
/// saves less than a quarter of the blocks.
bool flattensPixels(int64_t oh, int64_t ow, int64_t mr) {
  return 4 * llvm::divideCeil(oh * ow, mr) <= 3 * oh * llvm::divideCeil(ow, mr);
}

LogicalResult rewriteConvAsPanelGemm(RewriterBase &rewriter,
                                     linalg::Conv2DNchwFchwOp conv, int64_t mr,
                                     int64_t nr, const CallSites &calls) {
  FailureOr<codegen::ConvGemm> match = codegen::matchConvAsGemm(conv);
  if (failed(match))
    return failure();
  Value init = match->init, filter = match->filter;
  SmallVector<ConstantSource> sources = getConstantSources(filter, calls);
  if (sources.empty() || match->f % nr != 0 ||
      !llvm::all_of(sources, [](const ConstantSource &source) {
        return getConstantBytes(source.value).has_value();
      }))
    return failure();

  int64_t n = match->n, oh = match->oh, ow = match->ow;
  int64_t panels = match->f / nr;
  Type element = match->initType.getElementType();
  Location loc = conv.getLoc();
  MLIRContext *ctx = conv.getContext();
  rewriter.setInsertionPoint(conv);

  // The filter, once, in panels.
  Value panelsValue = deriveConstant(rewriter, filter, sources,
                                     [&](const ConstantSource &source) {
                                       return filterPanels(source.value, nr);
                                     });

  // The gather of input patches (k-major, see Common/ConvToGemm.h); with
  // a column stride, from the input split by column phase, so that each
  // patch row is one contiguous read rather than a vector gather.
  FailureOr<Value> split =
      codegen::buildPhaseSplitPatchGather(rewriter, loc, match->input, *match);
  Value patches =
      succeeded(split)
          ? *split
          : codegen::buildPatchGather(rewriter, loc, match->input, *match);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };

  // The GEMM on panels. A filled initial value (the usual case) seeds the
  // accumulator; any other is added in the transpose below. Pixels are two
  // M loops (oh, ow), a register block 8 pixels of one output row, or one
  // (see flattensPixels).
  bool flat = flattensPixels(oh, ow, mr);
  if (flat)
    patches = tensor::CollapseShapeOp::create(
        rewriter, loc, patches,
        SmallVector<ReassociationIndices>{{0}, {1}, {2, 3}});
  SmallVector<int64_t> accShape =
      flat ? SmallVector<int64_t>{n, panels, oh * ow, nr}
           : SmallVector<int64_t>{n, panels, oh, ow, nr};
  auto accType = RankedTensorType::get(accShape, element);
  Value accInit =
      tensor::EmptyOp::create(rewriter, loc, accType.getShape(), element);
  auto initFill = init.getDefiningOp<linalg::FillOp>();
  Value seed = initFill ? initFill.getDpsInputOperand(0)->get()
                        : arith::ConstantOp::create(
                              rewriter, loc, rewriter.getZeroAttr(element))
                              .getResult();
  Value acc = linalg::FillOp::create(rewriter, loc, seed, accInit).getResult(0);
  // Loops: 0 = n, 1 = fb, 2 = oh, 3 = ow, 4 = j, 5 = k; flat: 0 = n,
  // 1 = fb, 2 = p, 3 = j, 4 = k.
  SmallVector<AffineMap> gemmMaps =
      flat ? SmallVector<AffineMap>{AffineMap::get(5, 0, {d(0), d(4), d(2)},
                                                   ctx),
                                    AffineMap::get(5, 0, {d(1), d(4), d(3)},
                                                   ctx),
                                    AffineMap::get(
                                        5, 0, {d(0), d(1), d(2), d(3)}, ctx)}
           : SmallVector<AffineMap>{
                 AffineMap::get(6, 0, {d(0), d(5), d(2), d(3)}, ctx),
                 AffineMap::get(6, 0, {d(1), d(5), d(4)}, ctx),
                 AffineMap::get(6, 0, {d(0), d(1), d(2), d(3), d(4)}, ctx)};
  SmallVector<utils::IteratorType> gemmIterators(accShape.size(),
                                                 utils::IteratorType::parallel);
  gemmIterators.push_back(utils::IteratorType::reduction);
  linalg::GenericOp gemm = codegen::buildConvGemm(
      rewriter, conv, accType, ValueRange{patches, panelsValue}, acc, gemmMaps,
      gemmIterators);

  // Back to NCHW: Y viewed as [n, fb, j, oh, ow] is a transpose of C, which
  // tiles and fuses like any elementwise op; the view is free.
  auto out5Type = RankedTensorType::get({n, panels, nr, oh, ow}, element);
  SmallVector<ReassociationIndices> splitChannels = {{0}, {1, 2}, {3}, {4}};
  Value out5Init =
      tensor::EmptyOp::create(rewriter, loc, out5Type.getShape(), element);
  AffineMap fromAcc =
      flat ? AffineMap::get(5, 0, {d(0), d(1), d(3) * ow + d(4), d(2)}, ctx)
           : AffineMap::get(5, 0, {d(0), d(1), d(3), d(4), d(2)}, ctx);
  AffineMap identity = AffineMap::getMultiDimIdentityMap(5, ctx);
  SmallVector<Value> inputs = {gemm.getResult(0)};
  SmallVector<AffineMap> outMaps = {fromAcc};
  if (!initFill) {
    inputs.push_back(tensor::ExpandShapeOp::create(rewriter, loc, out5Type,
                                                   init, splitChannels));
    outMaps.push_back(identity);
  }
  outMaps.push_back(identity);
  SmallVector<utils::IteratorType> par5(5, utils::IteratorType::parallel);
  auto out5 = linalg::GenericOp::create(
      rewriter, loc, out5Type, inputs, ValueRange{out5Init}, outMaps, par5,
      [&](OpBuilder &b, Location, ValueRange args) {
        Value v = args[0];
        if (!initFill)
          v = isa<FloatType>(element)
                  ? arith::AddFOp::create(b, loc, args[1], v).getResult()
                  : arith::AddIOp::create(b, loc, args[1], v).getResult();
        linalg::YieldOp::create(b, loc, v);
      });
  Value result = tensor::CollapseShapeOp::create(
      rewriter, loc, match->initType, out5.getResult(0), splitChannels);
  rewriter.replaceOp(conv, result);
  eraseIfUnused(rewriter, filter, sources);
  return success();
}

struct SitsCpuConvToGemmPass
    : cpu::impl::SitsCpuConvToGemmBase<SitsCpuConvToGemmPass> {
  void runOnOperation() override {
    cpu::CpuTilingConfig config = cpu::getCpuTilingConfig(getOperation());
    CallSites calls(getOperation());
    SmallVector<linalg::Conv2DNchwFchwOp> convs;
    getOperation().walk(
        [&](linalg::Conv2DNchwFchwOp op) { convs.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::Conv2DNchwFchwOp conv : convs)
      if (succeeded(rewriteConvAsPanelGemm(rewriter, conv, config.mr, config.nr,
                                           calls)))
        ++numRewritten;
  }
};

} // namespace
