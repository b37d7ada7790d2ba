//===- ConvToGemm.cpp - Convolutions as a patch gather and a GEMM ---------===//

#include "passes/Codegen/Common/ConvToGemm.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/IRMapping.h"

using namespace mlir;
using namespace mlir::sits;

FailureOr<codegen::ConvGemm>
codegen::matchConvAsGemm(linalg::Conv2DNchwFchwOp conv) {
  if (!conv.hasPureTensorSemantics())
    return failure();
  ConvGemm gemm;
  gemm.input = conv.getDpsInputOperand(0)->get();
  gemm.filter = conv.getDpsInputOperand(1)->get();
  gemm.init = conv.getDpsInitOperand(0)->get();
  gemm.filterType = cast<RankedTensorType>(gemm.filter.getType());
  gemm.initType = cast<RankedTensorType>(gemm.init.getType());
  if (!cast<RankedTensorType>(gemm.input.getType()).hasStaticShape() ||
      !gemm.filterType.hasStaticShape() || !gemm.initType.hasStaticShape() ||
      gemm.filterType.getEncoding())
    return failure();
  ArrayRef<int64_t> fs = gemm.filterType.getShape();
  gemm.n = gemm.initType.getDimSize(0);
  gemm.f = fs[0];
  gemm.c = fs[1];
  gemm.kh = fs[2];
  gemm.kw = fs[3];
  gemm.oh = gemm.initType.getDimSize(2);
  gemm.ow = gemm.initType.getDimSize(3);
  gemm.k = gemm.c * gemm.kh * gemm.kw;
  auto strides = conv.getStrides().getValues<int64_t>();
  auto dilations = conv.getDilations().getValues<int64_t>();
  gemm.strides = {strides[0], strides[1]};
  gemm.dilations = {dilations[0], dilations[1]};
  return gemm;
}

Value codegen::buildPatchGather(OpBuilder &builder, Location loc, Value input,
                                const ConvGemm &gemm,
                                std::array<int64_t, 2> padding) {
  MLIRContext *ctx = builder.getContext();
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t h = inputType.getDimSize(2), w = inputType.getDimSize(3);
  int64_t kh = gemm.kh, kw = gemm.kw;
  auto idx = [&](OpBuilder &b, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  auto patchesType = RankedTensorType::get({gemm.n, gemm.k, gemm.oh, gemm.ow},
                                           inputType.getElementType());
  Value patchesInit = tensor::EmptyOp::create(
      builder, loc, patchesType.getShape(), patchesType.getElementType());
  SmallVector<utils::IteratorType> par4(4, utils::IteratorType::parallel);
  bool padded = padding[0] != 0 || padding[1] != 0;
  auto gather = linalg::GenericOp::create(
      builder, loc, patchesType, ValueRange{}, ValueRange{patchesInit},
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
        Value ih =
            at(ohIdx, gemm.strides[0], khIdx, gemm.dilations[0], padding[0]);
        Value iw =
            at(owIdx, gemm.strides[1], kwIdx, gemm.dilations[1], padding[1]);
        if (!padded) {
          Value v = tensor::ExtractOp::create(b, loc, input,
                                              ValueRange{nIdx, cIdx, ih, iw});
          linalg::YieldOp::create(b, loc, v);
          return;
        }
        // Outside the image: read element 0 (always there) and yield 0.
        auto inside = [&](Value i, int64_t extent) {
          Value lo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, i,
                                           idx(b, 0));
          Value hi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i,
                                           idx(b, extent));
          return arith::AndIOp::create(b, loc, lo, hi).getResult();
        };
        Value valid =
            arith::AndIOp::create(b, loc, inside(ih, h), inside(iw, w));
        Value zeroIdx = idx(b, 0);
        Value ihSafe = arith::SelectOp::create(b, loc, valid, ih, zeroIdx);
        Value iwSafe = arith::SelectOp::create(b, loc, valid, iw, zeroIdx);
        Value v = tensor::ExtractOp::create(
            b, loc, input, ValueRange{nIdx, cIdx, ihSafe, iwSafe});
        Value zero = arith::ConstantOp::create(
            b, loc, b.getZeroAttr(inputType.getElementType()));
        Value result = arith::SelectOp::create(b, loc, valid, v, zero);
        linalg::YieldOp::create(b, loc, result);
      });
  return gather.getResult(0);
}

FailureOr<Value> codegen::buildPhaseSplitPatchGather(OpBuilder &builder,
                                                     Location loc, Value input,
                                                     const ConvGemm &gemm) {
  MLIRContext *ctx = builder.getContext();
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t sw = gemm.strides[1];
  if (sw <= 1 || !inputType.hasStaticShape())
    return failure();
  int64_t n = inputType.getDimSize(0), c = inputType.getDimSize(1);
  int64_t h = inputType.getDimSize(2), w = inputType.getDimSize(3);
  int64_t columns = llvm::divideCeil(w, sw);
  Type element = inputType.getElementType();
  auto idx = [&](OpBuilder &b, int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  // X'[n, c, h, q, w'] = X[n, c, h, w' * sw + q], zero past W.
  auto splitType = RankedTensorType::get({n, c, h, sw, columns}, element);
  Value splitInit =
      tensor::EmptyOp::create(builder, loc, splitType.getShape(), element);
  SmallVector<utils::IteratorType> par5(5, utils::IteratorType::parallel);
  auto split = linalg::GenericOp::create(
      builder, loc, splitType, ValueRange{}, ValueRange{splitInit},
      SmallVector<AffineMap>{AffineMap::getMultiDimIdentityMap(5, ctx)}, par5,
      [&](OpBuilder &b, Location, ValueRange) {
        Value nIdx = linalg::IndexOp::create(b, loc, 0);
        Value cIdx = linalg::IndexOp::create(b, loc, 1);
        Value hIdx = linalg::IndexOp::create(b, loc, 2);
        Value q = linalg::IndexOp::create(b, loc, 3);
        Value col = linalg::IndexOp::create(b, loc, 4);
        Value base = arith::MulIOp::create(b, loc, col, idx(b, sw));
        Value wIdx = arith::AddIOp::create(b, loc, base, q);
        Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                             wIdx, idx(b, w));
        Value safe = arith::SelectOp::create(b, loc, inside, wIdx, idx(b, 0));
        Value v = tensor::ExtractOp::create(b, loc, input,
                                            ValueRange{nIdx, cIdx, hIdx, safe});
        Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(element));
        linalg::YieldOp::create(
            b, loc,
            arith::SelectOp::create(b, loc, inside, v, zero).getResult());
      });
  Value phases = split.getResult(0);

  int64_t kh = gemm.kh, kw = gemm.kw;
  auto patchesType =
      RankedTensorType::get({gemm.n, gemm.k, gemm.oh, gemm.ow}, element);
  Value patchesInit = tensor::EmptyOp::create(
      builder, loc, patchesType.getShape(), patchesType.getElementType());
  SmallVector<utils::IteratorType> par4(4, utils::IteratorType::parallel);
  auto gather = linalg::GenericOp::create(
      builder, loc, patchesType, ValueRange{}, ValueRange{patchesInit},
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
        Value rowBase =
            arith::MulIOp::create(b, loc, ohIdx, idx(b, gemm.strides[0]));
        Value rowOffset =
            arith::MulIOp::create(b, loc, khIdx, idx(b, gemm.dilations[0]));
        Value ih = arith::AddIOp::create(b, loc, rowBase, rowOffset);
        // Column ow * sw + kw * dw is phase (kw * dw) % sw, column
        // ow + (kw * dw) / sw of that phase.
        Value offset =
            arith::MulIOp::create(b, loc, kwIdx, idx(b, gemm.dilations[1]));
        Value q = arith::RemUIOp::create(b, loc, offset, idx(b, sw));
        Value shift = arith::DivUIOp::create(b, loc, offset, idx(b, sw));
        Value col = arith::AddIOp::create(b, loc, owIdx, shift);
        Value v = tensor::ExtractOp::create(b, loc, phases,
                                            ValueRange{nIdx, cIdx, ih, q, col});
        linalg::YieldOp::create(b, loc, v);
      });
  return gather.getResult(0);
}

linalg::GenericOp
codegen::buildConvGemm(OpBuilder &builder, linalg::Conv2DNchwFchwOp conv,
                       Type resultType, ValueRange inputs, Value init,
                       ArrayRef<AffineMap> maps,
                       ArrayRef<utils::IteratorType> iterators) {
  Block *body = conv.getBlock();
  return linalg::GenericOp::create(
      builder, conv.getLoc(), resultType, inputs, ValueRange{init}, maps,
      iterators, [&](OpBuilder &b, Location, ValueRange args) {
        IRMapping mapping;
        mapping.map(body->getArguments(), args);
        for (Operation &inner : *body)
          b.clone(inner, mapping);
      });
}
