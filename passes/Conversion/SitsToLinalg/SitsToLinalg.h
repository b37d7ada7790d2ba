//===- SitsToLinalg.h - SITS ops to linalg on tensors ----------*- C++ -*-===//
//
// The reusable pieces of `sits-convert-to-linalg`: a type converter for the
// low-bit tensor types SITS carries (`#sits.packed` weights, unsigned
// integers), one lowering function per SITS op, the conversion patterns that
// apply them, and the precondition check that turns every case the patterns
// cannot handle into a located diagnostic.
//
// Each `lower...` function builds, at the builder's insertion point, the
// linalg/tensor/arith/math computation of one op from already-converted
// operands (`operands` is the conversion adaptor; pass
// `XOp::Adaptor(op->getOperands(), op)` to lower an op outside a dialect
// conversion) and returns the value that replaces the op's result. They fail
// only where checkSitsOpLowerable does.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CONVERSION_SITSTOLINALG_SITSTOLINALG_H
#define SITS_PASSES_CONVERSION_SITSTOLINALG_SITSTOLINALG_H

#include "dialects/Sits/IR/SitsOps.h"
#include "passes/Codegen/Common/Ukernels.h"

#include "mlir/Transforms/DialectConversion.h"

namespace mlir::sits {

/// Maps the tensor types only SITS ops understand to the types the lowered
/// code works on:
///
/// * `tensor<... x iN, #sits.packed<storage = iS, axis = a>>` becomes its
///   storage, `tensor<... x iS>` with the extent along `a` divided by the
///   packing factor (the extent stays dynamic when it is);
/// * tensors of signed/unsigned integers (`ui8`, `ui4`) become tensors of
///   signless integers of the same width (arith only takes signless
///   integers; the lowering remembers the signedness from the SITS op).
///
/// Every other type is left as is.
class SitsToLinalgTypeConverter : public TypeConverter {
public:
  SitsToLinalgTypeConverter();

  /// The conversion above as a plain function (identity for other types).
  static RankedTensorType convertTensorType(RankedTensorType type);
};

/// Returns the packed encoding of `type`, or null.
PackedEncodingAttr getPackedEncoding(Type type);

/// Succeeds when the patterns of populateSitsToLinalgConversionPatterns can
/// lower `op`, a SITS op. Otherwise reports why through `emitError` (use a
/// callback returning an empty `InFlightDiagnostic` to stay silent) and fails.
LogicalResult
checkSitsOpLowerable(Operation *op,
                     function_ref<InFlightDiagnostic()> emitError);

/// Checks everything under `root` (included) before a conversion: every SITS
/// op is lowerable, and every other op that touches a packed or signed/
/// unsigned-integer tensor is one the conversion knows how to retype
/// (functions, calls, returns, constants, and tensor-dialect ops for unsigned
/// types). Emits one located error per offending op.
LogicalResult checkSitsToLinalgPreconditions(Operation *root);

//===----------------------------------------------------------------------===//
// Per-op lowerings
//===----------------------------------------------------------------------===//

/// `linalg.matmul` (no batch dims after dropping unit ones; batch dims of
/// the lhs fold into M when the rhs has none), `linalg.batch_matmul` (batch
/// dims collapsed to one, broadcasts and transposes in `indexing_maps`) or a
/// contraction `linalg.generic` (partial batch broadcasts); zero-filled
/// accumulator (f32 for f16/bf16 operands) and one elementwise epilogue for
/// bias, activation and the cast to the result type.
FailureOr<Value> lowerMatmulOp(OpBuilder &b, MatmulOp op,
                               MatmulOp::Adaptor operands);
/// `tensor.pad` + `linalg.conv_{1d_ncw_fcw,2d_nchw_fchw,3d_ncdhw_fcdhw}`, or
/// for groups > 1 `linalg.conv_2d_ngchw_gfchw` (2-D) / a grouped-convolution
/// `linalg.generic` (1-D, 3-D) on `[N, G, C/G, ...]` views; epilogue as for
/// matmul.
FailureOr<Value> lowerConvOp(OpBuilder &b, ConvOp op, ConvOp::Adaptor operands);
/// As sits.conv, the convolution reading the INT8 filter codes (widened in
/// its body) and its accumulator multiplied by the per-output-channel scale
/// before the epilogue.
FailureOr<Value> lowerQConvOp(OpBuilder &b, QConvOp op,
                              QConvOp::Adaptor operands);
/// A dequantizing `linalg.generic` producing the weight in the input's
/// element type (unpacking sub-word elements), feeding a matmul as above.
FailureOr<Value> lowerQMatmulOp(OpBuilder &b, QMatmulOp op,
                                QMatmulOp::Adaptor operands);
/// The integer dot-product form of `op` (sits-convert-to-linalg's
/// `integer-dot`): the input quantized to INT8 per row and group of K at run
/// time, the weight codes re-laid out for dot-product instructions, and one
/// contraction over both marked for a runtime kernel (kUkernelAttr), which
/// sits-cpu-lower-ukernels calls. Fails, building nothing, for `float_input`
/// and unless the weight
/// is signed INT4 (packed along K, grouped) or INT8 (grouped, or per output
/// channel) without zero points, N is a multiple of 16 and the groups of K
/// a multiple of 8 (INT4) or 4 (INT8).
FailureOr<Value> lowerQMatmulToIntegerDot(OpBuilder &b, QMatmulOp op,
                                          QMatmulOp::Adaptor operands);
/// Q·Kᵀ, scale + masks, max-subtracted exp, row sums, ·V, normalization.
FailureOr<Value> lowerAttentionOp(OpBuilder &b, AttentionOp op,
                                  AttentionOp::Adaptor operands);
/// Writes the new tokens' K/V into the pool through the slot mapping
/// (`scf.for` of `tensor.insert_slice`), gathers each sequence's context
/// through its block table and attends causally per sequence; returns the
/// attention output and the updated pool.
FailureOr<SmallVector<Value>>
lowerPagedAttentionOp(OpBuilder &b, PagedAttentionOp op,
                      PagedAttentionOp::Adaptor operands);
/// As lowerPagedAttentionOp, the K/V writes, then the attention as one
/// sits.ukernel.paged_attention reading K and V where they lie in the pool
/// (sits-convert-to-linalg's `paged-attention-kernel`). Fails, building
/// nothing, unless the query, K/V, pool and result are f32 and the scale is
/// known (given, or a static head dim).
FailureOr<SmallVector<Value>>
lowerPagedAttentionToKernel(OpBuilder &b, PagedAttentionOp op,
                            PagedAttentionOp::Adaptor operands);
/// Two-pass mean/variance reductions and one normalizing generic.
FailureOr<Value> lowerLayerNormOp(OpBuilder &b, LayerNormOp op,
                                  LayerNormOp::Adaptor operands);
/// Mean-of-squares reduction and one normalizing generic.
FailureOr<Value> lowerRMSNormOp(OpBuilder &b, RMSNormOp op,
                                RMSNormOp::Adaptor operands);
/// Max reduction, exp(x - max), sum reduction, division.
FailureOr<Value> lowerSoftmaxOp(OpBuilder &b, SoftmaxOp op,
                                SoftmaxOp::Adaptor operands);
/// One elementwise generic.
FailureOr<Value> lowerActivationOp(OpBuilder &b, ActivationOp op,
                                   ActivationOp::Adaptor operands);
/// One elementwise generic (a reduction over the packing factor when the
/// result is packed).
FailureOr<Value> lowerQuantizeOp(OpBuilder &b, QuantizeOp op,
                                 QuantizeOp::Adaptor operands);
/// One elementwise generic reading (and unpacking) the quantized input.
FailureOr<Value> lowerDequantizeOp(OpBuilder &b, DequantizeOp op,
                                   DequantizeOp::Adaptor operands);

/// Applies `kind` to the scalar `x` (a float of any width; the caller
/// chooses the precision).
Value buildActivation(OpBuilder &b, Location loc, ActivationKind kind, Value x);

//===----------------------------------------------------------------------===//
// Patterns and target
//===----------------------------------------------------------------------===//

/// Patterns lowering every SITS op with the functions above, plus the
/// patterns that retype function signatures, calls, returns, constants and
/// tensor-dialect ops according to `typeConverter` (normally a
/// SitsToLinalgTypeConverter).
void populateSitsToLinalgConversionPatterns(TypeConverter &typeConverter,
                                            RewritePatternSet &patterns);

/// A pattern lowering sits.qmatmul with lowerQMatmulToIntegerDot, ahead of
/// the default lowering where it applies.
void populateIntegerDotPatterns(TypeConverter &typeConverter,
                                RewritePatternSet &patterns);

/// A pattern lowering sits.paged_attention with lowerPagedAttentionToKernel,
/// ahead of the default lowering where it applies.
void populatePagedAttentionKernelPatterns(TypeConverter &typeConverter,
                                          RewritePatternSet &patterns);

/// SITS ops illegal (but the runtime-kernel ops they lower to); functions,
/// calls, returns, constants and tensor ops legal once their types are;
/// everything else legal.
void configureSitsToLinalgConversionTarget(ConversionTarget &target,
                                           const TypeConverter &typeConverter);

} // namespace mlir::sits

#endif // SITS_PASSES_CONVERSION_SITSTOLINALG_SITSTOLINALG_H
