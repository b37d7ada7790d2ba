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
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "passes/Transforms/ConstantData.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/IRMapping.h"
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
AsmResourceBlob filterPanels(ArrayRef<char> bytes, ArrayRef<int64_t> shape,
                             int64_t elementBytes, int64_t nr) {
  int64_t f = shape[0], k = shape[1] * shape[2] * shape[3];
  AsmResourceBlob blob = HeapAsmResourceBlob::allocate(bytes.size(), 64);
  MutableArrayRef<char> out = blob.getMutableData();
  for (int64_t fb = 0; fb < f / nr; ++fb)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < nr; ++j)
        std::memcpy(out.data() + ((fb * k + kk) * nr + j) * elementBytes,
                    bytes.data() + ((fb * nr + j) * k + kk) * elementBytes,
                    elementBytes);
  return blob;
}

LogicalResult rewriteConvAsPanelGemm(RewriterBase &rewriter,
                                     linalg::Conv2DNchwFchwOp conv,
                                     int64_t nr) {
  if (!conv.hasPureTensorSemantics())
    return failure();
  Value input = conv.getDpsInputOperand(0)->get();
  Value filter = conv.getDpsInputOperand(1)->get();
  Value init = conv.getDpsInitOperand(0)->get();
  auto inputType = cast<RankedTensorType>(input.getType());
  auto filterType = cast<RankedTensorType>(filter.getType());
  auto initType = cast<RankedTensorType>(init.getType());
  if (!inputType.hasStaticShape() || !filterType.hasStaticShape() ||
      !initType.hasStaticShape() || filterType.getEncoding())
    return failure();
  auto constant = filter.getDefiningOp<arith::ConstantOp>();
  auto value = constant ? dyn_cast<ElementsAttr>(constant.getValue()) : nullptr;
  std::optional<ArrayRef<char>> bytes =
      value ? getConstantBytes(value) : std::nullopt;
  ArrayRef<int64_t> fs = filterType.getShape();
  if (!bytes || fs[0] % nr != 0)
    return failure();

  int64_t n = initType.getDimSize(0), f = fs[0], c = fs[1], kh = fs[2],
          kw = fs[3], oh = initType.getDimSize(2), ow = initType.getDimSize(3);
  int64_t k = c * kh * kw, panels = f / nr;
  SmallVector<int64_t> strides = llvm::to_vector(conv.getStrides().getValues<int64_t>());
  SmallVector<int64_t> dilations =
      llvm::to_vector(conv.getDilations().getValues<int64_t>());
  Type element = initType.getElementType();
  Location loc = conv.getLoc();
  MLIRContext *ctx = conv.getContext();
  rewriter.setInsertionPoint(conv);

  // The filter, once, in panels.
  auto panelType =
      RankedTensorType::get({panels, k, nr}, filterType.getElementType());
  Value panelsValue = arith::ConstantOp::create(
      rewriter, loc,
      makeConstantLike(value, panelType,
                       filterPanels(*bytes, fs, getElementBytes(filterType), nr),
                       ".panels"));

  // The gather of input patches, k-major: for one k the patches along a row
  // of output pixels are a row of the input (strided by the convolution's
  // stride), so the innermost loop vectorizes as one read, and the index
  // arithmetic on k is hoisted out of it.
  auto idx = [&](OpBuilder &b, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  auto patchesType =
      RankedTensorType::get({n, k, oh, ow}, inputType.getElementType());
  Value patchesInit = tensor::EmptyOp::create(
      rewriter, loc, patchesType.getShape(), patchesType.getElementType());
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  SmallVector<utils::IteratorType> par4(4, utils::IteratorType::parallel);
  auto patches = linalg::GenericOp::create(
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
        auto at = [&](Value o, int64_t s, Value w, int64_t dl) -> Value {
          Value a = arith::MulIOp::create(b, loc, o, idx(b, s));
          Value c2 = arith::MulIOp::create(b, loc, w, idx(b, dl));
          return arith::AddIOp::create(b, loc, a, c2);
        };
        Value ih = at(ohIdx, strides[0], khIdx, dilations[0]);
        Value iw = at(owIdx, strides[1], kwIdx, dilations[1]);
        Value v = tensor::ExtractOp::create(b, loc, input,
                                            ValueRange{nIdx, cIdx, ih, iw});
        linalg::YieldOp::create(b, loc, v);
      });

  // The GEMM on panels. A filled initial value (the usual case) seeds the
  // accumulator; any other is added in the transpose below. Pixels are two
  // M loops (oh, ow): a register block is 8 pixels of one output row.
  auto accType = RankedTensorType::get({n, panels, oh, ow, nr}, element);
  Value accInit = tensor::EmptyOp::create(rewriter, loc, accType.getShape(), element);
  auto initFill = init.getDefiningOp<linalg::FillOp>();
  Value seed = initFill ? initFill.getDpsInputOperand(0)->get()
                        : arith::ConstantOp::create(rewriter, loc,
                                                    rewriter.getZeroAttr(element))
                              .getResult();
  Value acc = linalg::FillOp::create(rewriter, loc, seed, accInit).getResult(0);
  // Loops: 0 = n, 1 = fb, 2 = oh, 3 = ow, 4 = j, 5 = k.
  SmallVector<AffineMap> gemmMaps = {
      AffineMap::get(6, 0, {d(0), d(5), d(2), d(3)}, ctx),
      AffineMap::get(6, 0, {d(1), d(5), d(4)}, ctx),
      AffineMap::get(6, 0, {d(0), d(1), d(2), d(3), d(4)}, ctx)};
  SmallVector<utils::IteratorType> gemmIterators(5, utils::IteratorType::parallel);
  gemmIterators.push_back(utils::IteratorType::reduction);
  Block *body = conv.getBlock();
  auto gemm = linalg::GenericOp::create(
      rewriter, loc, accType, ValueRange{patches.getResult(0), panelsValue},
      ValueRange{acc}, gemmMaps, gemmIterators,
      [&](OpBuilder &b, Location, ValueRange args) {
        IRMapping mapping;
        mapping.map(body->getArguments(), args);
        for (Operation &inner : *body)
          b.clone(inner, mapping);
      });

  // Back to NCHW: Y viewed as [n, fb, j, oh, ow] is a transpose of C, which
  // tiles and fuses like any elementwise op; the view is free.
  auto out5Type = RankedTensorType::get({n, panels, nr, oh, ow}, element);
  SmallVector<ReassociationIndices> splitChannels = {{0}, {1, 2}, {3}, {4}};
  Value out5Init =
      tensor::EmptyOp::create(rewriter, loc, out5Type.getShape(), element);
  AffineMap fromAcc = AffineMap::get(5, 0, {d(0), d(1), d(3), d(4), d(2)}, ctx);
  AffineMap identity = AffineMap::getMultiDimIdentityMap(5, ctx);
  SmallVector<Value> inputs = {gemm.getResult(0)};
  SmallVector<AffineMap> outMaps = {fromAcc};
  if (!initFill) {
    inputs.push_back(
        tensor::ExpandShapeOp::create(rewriter, loc, out5Type, init, splitChannels));
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
      rewriter, loc, initType, out5.getResult(0), splitChannels);
  rewriter.replaceOp(conv, result);
  if (constant->use_empty())
    rewriter.eraseOp(constant);
  return success();
}

struct SitsCpuConvToGemmPass
    : cpu::impl::SitsCpuConvToGemmBase<SitsCpuConvToGemmPass> {
  void runOnOperation() override {
    cpu::CpuTilingConfig config = cpu::getCpuTilingConfig(getOperation());
    SmallVector<linalg::Conv2DNchwFchwOp> convs;
    getOperation().walk([&](linalg::Conv2DNchwFchwOp op) { convs.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::Conv2DNchwFchwOp conv : convs)
      if (succeeded(rewriteConvAsPanelGemm(rewriter, conv, config.nr)))
        ++numRewritten;
  }
};

} // namespace
