//===- Patterns.h - The SITS-to-linalg pattern families ---------*- C++ -*-===//
//
// Private to passes/Conversion/SitsToLinalg: the pattern that applies one
// lower...Op function, and one populate function per file of lowerings;
// populateSitsToLinalgConversionPatterns (SitsToLinalg.cpp) calls them in
// turn.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CONVERSION_SITSTOLINALG_PATTERNS_H
#define SITS_PASSES_CONVERSION_SITSTOLINALG_PATTERNS_H

#include "passes/Conversion/SitsToLinalg/SitsToLinalg.h"

namespace mlir::sits::detail {

/// Lowers one SITS op with its lower...Op function.
template <typename OpTy, typename Results,
          FailureOr<Results> (*Lower)(OpBuilder &, OpTy,
                                      typename OpTy::Adaptor)>
struct SitsOpLoweringImpl : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  using OpAdaptor = typename OpTy::Adaptor;

  LogicalResult
  matchAndRewrite(OpTy op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (failed(checkSitsOpLowerable(op, [] { return InFlightDiagnostic(); })))
      return rewriter.notifyMatchFailure(
          op, "not lowerable (see checkSitsOpLowerable)");
    FailureOr<Results> result = Lower(rewriter, op, adaptor);
    if (failed(result))
      return rewriter.notifyMatchFailure(op, "lowering failed");
    rewriter.replaceOp(op, *result);
    return success();
  }
};

template <typename OpTy,
          FailureOr<Value> (*Lower)(OpBuilder &, OpTy, typename OpTy::Adaptor)>
using SitsOpLowering = SitsOpLoweringImpl<OpTy, Value, Lower>;

/// MatmulOp, ConvOp, QConvOp and QMatmulOp (Contraction.cpp).
void populateContractionPatterns(TypeConverter &typeConverter,
                                 RewritePatternSet &patterns);
/// AttentionOp and PagedAttentionOp (Attention.cpp).
void populateAttentionPatterns(TypeConverter &typeConverter,
                               RewritePatternSet &patterns);
/// LayerNormOp, RMSNormOp and SoftmaxOp (Normalization.cpp).
void populateNormalizationPatterns(TypeConverter &typeConverter,
                                   RewritePatternSet &patterns);
/// ActivationOp (Elementwise.cpp).
void populateElementwisePatterns(TypeConverter &typeConverter,
                                 RewritePatternSet &patterns);
/// QuantizeOp and DequantizeOp (Quantization.cpp).
void populateQuantizationPatterns(TypeConverter &typeConverter,
                                  RewritePatternSet &patterns);

} // namespace mlir::sits::detail

#endif // SITS_PASSES_CONVERSION_SITSTOLINALG_PATTERNS_H
