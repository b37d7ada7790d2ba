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

namespace {

/// The indices of one element of the patches I[n, k, oh, ow]: k decoded
/// as (c, kh, kw).
struct PatchIndex {
  Value n, c, kh, kw, oh, ow;
};

/// A tensor of `type` whose element at each index is `value(b, indices)`:
/// an all-parallel linalg.generic reading its indices with linalg.index.
Value buildFromIndices(
    OpBuilder &builder, Location loc, RankedTensorType type,
    llvm::function_ref<Value(OpBuilder &, ArrayRef<Value>)> value) {
  unsigned rank = type.getRank();
  Value init = tensor::EmptyOp::create(builder, loc, type.getShape(),
                                       type.getElementType());
  auto generic = linalg::GenericOp::create(
      builder, loc, type, ValueRange{}, ValueRange{init},
      SmallVector<AffineMap>{
          AffineMap::getMultiDimIdentityMap(rank, builder.getContext())},
      SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
      [&](OpBuilder &b, Location, ValueRange) {
        SmallVector<Value> indices;
        for (unsigned d = 0; d < rank; ++d)
          indices.push_back(linalg::IndexOp::create(b, loc, d));
        linalg::YieldOp::create(b, loc, value(b, indices));
      });
  return generic.getResult(0);
}

/// The patches of `gemm` (element type `element`) whose element at each
/// index, k decoded, is `read(b, index)`.
Value buildPatches(
    OpBuilder &builder, Location loc, const codegen::ConvGemm &gemm,
    Type element,
    llvm::function_ref<Value(OpBuilder &, const PatchIndex &)> read) {
  int64_t kh = gemm.kh, kw = gemm.kw;
  auto type =
      RankedTensorType::get({gemm.n, gemm.k, gemm.oh, gemm.ow}, element);
  return buildFromIndices(
      builder, loc, type, [&](OpBuilder &b, ArrayRef<Value> indices) {
        auto idx = [&](int64_t v) -> Value {
          return arith::ConstantIndexOp::create(b, loc, v);
        };
        PatchIndex index;
        index.n = indices[0];
        index.oh = indices[2];
        index.ow = indices[3];
        index.c = arith::DivUIOp::create(b, loc, indices[1], idx(kh * kw));
        Value r = arith::RemUIOp::create(b, loc, indices[1], idx(kh * kw));
        index.kh = arith::DivUIOp::create(b, loc, r, idx(kw));
        index.kw = arith::RemUIOp::create(b, loc, r, idx(kw));
        return read(b, index);
      });
}

} // namespace

Value codegen::buildPatchGather(OpBuilder &builder, Location loc, Value input,
                                const ConvGemm &gemm,
                                std::array<int64_t, 2> padding) {
  auto inputType = cast<RankedTensorType>(input.getType());
  int64_t h = inputType.getDimSize(2), w = inputType.getDimSize(3);
  bool padded = padding[0] != 0 || padding[1] != 0;
  auto read = [&](OpBuilder &b, const PatchIndex &index) -> Value {
    auto idx = [&](int64_t v) -> Value {
      return arith::ConstantIndexOp::create(b, loc, v);
    };
    auto at = [&](Value o, int64_t s, Value t, int64_t dl, int64_t p) -> Value {
      Value a = arith::MulIOp::create(b, loc, o, idx(s));
      Value c2 = arith::MulIOp::create(b, loc, t, idx(dl));
      Value sum = arith::AddIOp::create(b, loc, a, c2);
      return p ? arith::SubIOp::create(b, loc, sum, idx(p)).getResult() : sum;
    };
    Value ih =
        at(index.oh, gemm.strides[0], index.kh, gemm.dilations[0], padding[0]);
    Value iw =
        at(index.ow, gemm.strides[1], index.kw, gemm.dilations[1], padding[1]);
    if (!padded)
      return tensor::ExtractOp::create(b, loc, input,
                                       ValueRange{index.n, index.c, ih, iw});
    // Outside the image: read element 0 (always there) and yield 0.
    auto inside = [&](Value i, int64_t extent) {
      Value lo =
          arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, i, idx(0));
      Value hi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i,
                                       idx(extent));
      return arith::AndIOp::create(b, loc, lo, hi).getResult();
    };
    Value valid = arith::AndIOp::create(b, loc, inside(ih, h), inside(iw, w));
    Value zeroIdx = idx(0);
    Value ihSafe = arith::SelectOp::create(b, loc, valid, ih, zeroIdx);
    Value iwSafe = arith::SelectOp::create(b, loc, valid, iw, zeroIdx);
    Value v = tensor::ExtractOp::create(
        b, loc, input, ValueRange{index.n, index.c, ihSafe, iwSafe});
    Value zero = arith::ConstantOp::create(
        b, loc, b.getZeroAttr(inputType.getElementType()));
    return arith::SelectOp::create(b, loc, valid, v, zero);
  };
  return buildPatches(builder, loc, gemm, inputType.getElementType(), read);
}

FailureOr<Value> codegen::buildPhaseSplitPatchGather(OpBuilder &builder,
                                                     Location loc, Value input,
                                                     const ConvGemm &gemm) {
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
  Value phases = buildFromIndices(
      builder, loc, splitType, [&](OpBuilder &b, ArrayRef<Value> indices) {
        Value base = arith::MulIOp::create(b, loc, indices[4], idx(b, sw));
        Value wIdx = arith::AddIOp::create(b, loc, base, indices[3]);
        // Only the last column of a phase can fall past W, when sw does not
        // divide it.
        if (w % sw == 0)
          return tensor::ExtractOp::create(
                     b, loc, input,
                     ValueRange{indices[0], indices[1], indices[2], wIdx})
              .getResult();
        Value inside = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt,
                                             wIdx, idx(b, w));
        Value safe = arith::SelectOp::create(b, loc, inside, wIdx, idx(b, 0));
        Value v = tensor::ExtractOp::create(
            b, loc, input,
            ValueRange{indices[0], indices[1], indices[2], safe});
        Value zero = arith::ConstantOp::create(b, loc, b.getZeroAttr(element));
        return arith::SelectOp::create(b, loc, inside, v, zero).getResult();
      });

  auto read = [&](OpBuilder &b, const PatchIndex &index) -> Value {
    Value rowBase =
        arith::MulIOp::create(b, loc, index.oh, idx(b, gemm.strides[0]));
    Value rowOffset =
        arith::MulIOp::create(b, loc, index.kh, idx(b, gemm.dilations[0]));
    Value ih = arith::AddIOp::create(b, loc, rowBase, rowOffset);
    // Column ow * sw + kw * dw is phase (kw * dw) % sw, column
    // ow + (kw * dw) / sw of that phase.
    Value offset =
        arith::MulIOp::create(b, loc, index.kw, idx(b, gemm.dilations[1]));
    Value q = arith::RemUIOp::create(b, loc, offset, idx(b, sw));
    Value shift = arith::DivUIOp::create(b, loc, offset, idx(b, sw));
    Value col = arith::AddIOp::create(b, loc, index.ow, shift);
    return tensor::ExtractOp::create(b, loc, phases,
                                     ValueRange{index.n, index.c, ih, q, col});
  };
  return buildPatches(builder, loc, gemm, element, read);
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
