//===- SitsToLinalg.cpp - Lower SITS ops to linalg on tensors -------------===//
//
// One function per SITS op builds its computation with upstream ops on
// tensors; thin OpConversionPatterns apply them under a type converter that
// turns #sits.packed tensors into their storage and unsigned integers into
// signless ones. Conventions shared by every lowering:
//
// * Arithmetic runs in the op's float type widened to at least f32 (the
//   "compute type"): f16/bf16 contractions accumulate in f32 and normalize,
//   reduce and activate in f32; one cast to the result type comes last.
// * Contractions accumulate into a zero-filled `linalg.fill` and end with one
//   elementwise `linalg.generic` (bias, activation, cast) that consumes the
//   contraction directly, before any reshape back to the result shape, so
//   elementwise fusion can put it in the contraction's epilogue.
// * Broadcasts of static size-1 extents are expressed by collapsing the unit
//   dimension away and leaving it out of the indexing map; dynamic extents
//   are assumed not to broadcast.
// * Sizes prefer the static extents of the op's declared result type, then
//   static operand extents, then `tensor.dim`; a `tensor.cast` reconciles the
//   lowered value with a declared type that is less static.
//
// The lowerings live in one file per family, each adding its patterns
// through a populate function declared in Patterns.h: Contraction.cpp
// (matmul, qmatmul, conv, qconv), Attention.cpp (attention, paged
// attention), Normalization.cpp (layer_norm, rms_norm, softmax),
// Elementwise.cpp (activation) and Quantization.cpp (quantize,
// dequantize). The builders they share are in Builders.cpp (declared in
// Utils.h). This file holds the type conversion, the preconditions, the
// patterns that retype constants and tensor ops, the conversion target
// and the pass.
//
//===----------------------------------------------------------------------===//

#include "passes/Conversion/Passes.h"
#include "passes/Conversion/SitsToLinalg/Patterns.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/STLExtras.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSCONVERTTOLINALG
#include "passes/Conversion/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

//===----------------------------------------------------------------------===//
// Type conversion
//===----------------------------------------------------------------------===//

PackedEncodingAttr mlir::sits::getPackedEncoding(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor ? dyn_cast_or_null<PackedEncodingAttr>(tensor.getEncoding())
                : PackedEncodingAttr();
}

RankedTensorType
SitsToLinalgTypeConverter::convertTensorType(RankedTensorType type) {
  Type element = type.getElementType();
  if (PackedEncodingAttr packed = getPackedEncoding(type)) {
    SmallVector<int64_t> shape(type.getShape());
    int64_t &extent = shape[packed.getAxis()];
    if (!ShapedType::isDynamic(extent))
      extent /= packed.getPackingFactor(element);
    return RankedTensorType::get(shape, packed.getStorage());
  }
  auto integer = dyn_cast<IntegerType>(element);
  if (!integer || integer.isSignless())
    return type;
  return RankedTensorType::get(
      type.getShape(), IntegerType::get(type.getContext(), integer.getWidth()),
      type.getEncoding());
}

SitsToLinalgTypeConverter::SitsToLinalgTypeConverter() {
  // Tried last: everything else is legal as is.
  addConversion([](Type type) { return type; });
  addConversion(
      [](RankedTensorType type) -> Type { return convertTensorType(type); });
}

//===----------------------------------------------------------------------===//
// Preconditions
//===----------------------------------------------------------------------===//

LogicalResult
mlir::sits::checkSitsOpLowerable(Operation *op,
                                 function_ref<InFlightDiagnostic()> emitError) {
  // Which operands and results may be #sits.packed: the quantized side of
  // the quantization ops.
  auto mayBePacked = [&](Value value) {
    if (auto q = dyn_cast<DequantizeOp>(op))
      return value == q.getInput() || value == q.getZeroPoint();
    if (auto q = dyn_cast<QuantizeOp>(op))
      return value == q.getResult() || value == q.getZeroPoint();
    if (auto q = dyn_cast<QMatmulOp>(op))
      return value == q.getWeight() || value == q.getZeroPoint();
    return false;
  };
  for (OpOperand &operand : op->getOpOperands()) {
    if (getPackedEncoding(operand.get().getType()) &&
        !mayBePacked(operand.get()))
      return emitError() << "operand #" << operand.getOperandNumber()
                         << " of type " << operand.get().getType()
                         << " is packed; only the quantized operands of "
                            "sits.dequantize, sits.quantize and sits.qmatmul "
                            "may carry a #sits.packed encoding";
  }
  for (OpResult result : op->getResults())
    if (getPackedEncoding(result.getType()) && !mayBePacked(result))
      return emitError() << "result #" << result.getResultNumber()
                         << " of type " << result.getType()
                         << " is packed; only the result of sits.quantize "
                            "may carry a #sits.packed encoding";
  return success();
}

namespace {

/// The first type of `op` (operands, results, function signature) the
/// conversion changes, or null.
Type findConvertedType(Operation *op) {
  auto changes = [](Type type) {
    auto tensor = dyn_cast<RankedTensorType>(type);
    return tensor &&
           SitsToLinalgTypeConverter::convertTensorType(tensor) != tensor;
  };
  for (Type type : op->getOperandTypes())
    if (changes(type))
      return type;
  for (Type type : op->getResultTypes())
    if (changes(type))
      return type;
  if (auto func = dyn_cast<FunctionOpInterface>(op)) {
    for (Type type : func.getArgumentTypes())
      if (changes(type))
        return type;
    for (Type type : func.getResultTypes())
      if (changes(type))
        return type;
  }
  return {};
}

} // namespace

LogicalResult mlir::sits::checkSitsToLinalgPreconditions(Operation *root) {
  bool ok = true;
  // Pre-order, so that the ops nested in a reported op are not reported
  // again.
  root->walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (isa<SitsDialect>(op->getDialect())) {
      if (failed(checkSitsOpLowerable(op, [&] {
            return op->emitOpError("cannot be lowered to linalg: ");
          })))
        ok = false;
      return WalkResult::advance();
    }
    Type type = findConvertedType(op);
    if (!type || isa<func::FuncOp, func::CallOp, func::ReturnOp>(op))
      return WalkResult::advance();
    bool packed = getPackedEncoding(type) != nullptr;
    if (auto constant = dyn_cast<arith::ConstantOp>(op)) {
      if (isa<DenseElementsAttr, DenseResourceElementsAttr>(
              constant.getValue()))
        return WalkResult::advance();
      op->emitOpError("cannot be converted by sits-convert-to-linalg: its ")
          << type << " value is neither dense elements nor a dense resource";
      ok = false;
      return WalkResult::advance();
    }
    if (!packed && isa<tensor::TensorDialect>(op->getDialect()) &&
        op->getNumRegions() == 0)
      return WalkResult::advance();
    if (packed)
      op->emitOpError("cannot be converted by sits-convert-to-linalg: it uses ")
          << type
          << ", a #sits.packed tensor, which only SITS ops, function "
             "signatures, calls, returns and constants may use";
    else
      op->emitOpError("cannot be converted by sits-convert-to-linalg: it uses ")
          << type
          << ", a tensor of signed or unsigned integers, which only SITS ops, "
             "function signatures, calls, returns, constants and tensor ops "
             "without regions may use";
    ok = false;
    return WalkResult::skip();
  });
  return success(ok);
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

/// Repacks a constant of a #sits.packed or signed/unsigned integer tensor
/// type into its converted type. A dense resource is reinterpreted as is:
/// its blob is expected to hold the storage words.
FailureOr<TypedAttr> convertConstantValue(Attribute value,
                                          RankedTensorType type,
                                          RankedTensorType converted) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value))
    return cast<TypedAttr>(
        DenseResourceElementsAttr::get(converted, resource.getRawHandle()));
  auto dense = dyn_cast<DenseElementsAttr>(value);
  if (!dense)
    return failure();
  PackedEncodingAttr packed = getPackedEncoding(type);
  Type element = type.getElementType();
  auto toBits = [&](int64_t index) -> APInt {
    if (isa<FloatType>(element))
      return dense.getValues<APFloat>()[index].bitcastToAPInt();
    return dense.getValues<APInt>()[index];
  };
  if (!packed) {
    // Same width and bits, signless type.
    SmallVector<APInt> values;
    for (int64_t i = 0, e = dense.getNumElements(); i < e; ++i)
      values.push_back(toBits(i));
    return cast<TypedAttr>(DenseElementsAttr::get(converted, values));
  }
  unsigned bits = element.getIntOrFloatBitWidth();
  unsigned storageBits = packed.getStorage().getWidth();
  int64_t factor = packed.getPackingFactor(element);
  int64_t axis = packed.getAxis();
  ArrayRef<int64_t> shape = type.getShape();
  // Row-major strides of the logical shape.
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  ArrayRef<int64_t> storageShape = converted.getShape();
  int64_t numWords = converted.getNumElements();
  SmallVector<APInt> words;
  words.reserve(numWords);
  SmallVector<int64_t> index(storageShape.size(), 0);
  for (int64_t w = 0; w < numWords; ++w) {
    APInt word(storageBits, 0);
    for (int64_t f = 0; f < factor; ++f) {
      int64_t linear = 0;
      for (size_t d = 0; d < shape.size(); ++d) {
        int64_t i =
            static_cast<int64_t>(d) == axis ? index[d] * factor + f : index[d];
        linear += i * strides[d];
      }
      APInt field = (dense.isSplat() ? toBits(0) : toBits(linear))
                        .zextOrTrunc(bits)
                        .zext(storageBits);
      word |= field.shl(f * bits);
    }
    words.push_back(word);
    // Next storage index, row-major.
    for (int64_t d = static_cast<int64_t>(index.size()) - 1; d >= 0; --d) {
      if (++index[d] < storageShape[d])
        break;
      index[d] = 0;
    }
  }
  return cast<TypedAttr>(DenseElementsAttr::get(converted, words));
}

struct ConvertConstant : OpConversionPattern<arith::ConstantOp> {
  using OpConversionPattern::OpConversionPattern;

  LogicalResult
  matchAndRewrite(arith::ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op.getType());
    if (!type)
      return failure();
    auto converted = getTypeConverter()->convertType<RankedTensorType>(type);
    if (!converted || converted == type)
      return failure();
    FailureOr<TypedAttr> value =
        convertConstantValue(op.getValue(), type, converted);
    if (failed(value))
      return rewriter.notifyMatchFailure(op, "unsupported constant value");
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, *value);
    return success();
  }
};

/// Retypes a tensor-dialect op without regions (reshapes, slices, casts,
/// concatenations) whose only change is the signedness of its integers.
struct RetypeTensorOp : ConversionPattern {
  RetypeTensorOp(const TypeConverter &typeConverter, MLIRContext *ctx)
      : ConversionPattern(typeConverter, MatchAnyOpTypeTag(), /*benefit=*/1,
                          ctx) {}

  LogicalResult
  matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                  ConversionPatternRewriter &rewriter) const override {
    if (!isa<tensor::TensorDialect>(op->getDialect()) ||
        op->getNumRegions() != 0 || getTypeConverter()->isLegal(op))
      return failure();
    FailureOr<Operation *> converted =
        convertOpResultTypes(op, operands, *getTypeConverter(), rewriter);
    if (failed(converted))
      return failure();
    rewriter.replaceOp(op, (*converted)->getResults());
    return success();
  }
};

} // namespace

void mlir::sits::populateSitsToLinalgConversionPatterns(
    TypeConverter &typeConverter, RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  // One populate function per file of lowerings (Patterns.h).
  detail::populateContractionPatterns(typeConverter, patterns);
  detail::populateAttentionPatterns(typeConverter, patterns);
  detail::populateNormalizationPatterns(typeConverter, patterns);
  detail::populateElementwisePatterns(typeConverter, patterns);
  detail::populateQuantizationPatterns(typeConverter, patterns);
  patterns.add<ConvertConstant, RetypeTensorOp>(typeConverter, ctx);
  populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns,
                                                                 typeConverter);
  populateCallOpTypeConversionPattern(patterns, typeConverter);
  populateReturnOpTypeConversionPattern(patterns, typeConverter);
}

void mlir::sits::configureSitsToLinalgConversionTarget(
    ConversionTarget &target, const TypeConverter &typeConverter) {
  target.addIllegalDialect<SitsDialect>();
  target.addLegalOp<UkernelPagedAttentionOp, UkernelKiviWriteOp>();
  target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
    return typeConverter.isSignatureLegal(op.getFunctionType()) &&
           typeConverter.isLegal(&op.getBody());
  });
  target.addDynamicallyLegalOp<func::CallOp, func::ReturnOp>(
      [&](Operation *op) { return typeConverter.isLegal(op); });
  target.addDynamicallyLegalOp<arith::ConstantOp>([&](arith::ConstantOp op) {
    return typeConverter.isLegal(op.getType());
  });
  target.addDynamicallyLegalDialect<tensor::TensorDialect>(
      [&](Operation *op) { return typeConverter.isLegal(op); });
  target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
}

//===----------------------------------------------------------------------===//
// Pass
//===----------------------------------------------------------------------===//

namespace {

struct SitsConvertToLinalgPass
    : sits::impl::SitsConvertToLinalgBase<SitsConvertToLinalgPass> {
  using Base::Base;

  void runOnOperation() override {
    Operation *root = getOperation();
    // Every case the patterns cannot handle becomes a located error here,
    // before anything is rewritten.
    if (failed(checkSitsToLinalgPreconditions(root)))
      return signalPassFailure();
    SitsToLinalgTypeConverter typeConverter;
    ConversionTarget target(getContext());
    configureSitsToLinalgConversionTarget(target, typeConverter);
    RewritePatternSet patterns(&getContext());
    populateSitsToLinalgConversionPatterns(typeConverter, patterns);
    if (integerDot)
      populateIntegerDotPatterns(typeConverter, patterns);
    if (pagedAttentionKernel)
      populatePagedAttentionKernelPatterns(typeConverter, patterns);
    if (failed(applyPartialConversion(root, target, std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
