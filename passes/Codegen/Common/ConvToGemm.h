//===- ConvToGemm.h - Convolutions as a patch gather and a GEMM -*- C++ -*-===//
//
// What the CPU and GPU conv-to-GEMM rewrites share. A 2-D NCHW convolution
// is a GEMM over the patches of its input (im2col):
//
//   I[n, k, oh, ow] = X[n, c, oh * sh + kh * dh - ph, ow * sw + kw * dw - pw]
//                     (k = (c * KH + kh) * KW + kw; zero outside X)
//   Y[n, f, oh, ow] = Y0[n, f, oh, ow] + sum_k F[f, k] * I[n, k, oh, ow]
//
// with K = C * KH * KW the GEMM's reduction. Each backend decides which
// convolutions to rewrite, the layout of the filter and of the accumulator
// (the GEMM's indexing maps), and whether the gather reads through a padding.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CODEGEN_COMMON_CONVTOGEMM_H
#define SITS_PASSES_CODEGEN_COMMON_CONVTOGEMM_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <array>

namespace mlir::sits::codegen {

/// A `linalg.conv_2d_nchw_fchw` seen as a GEMM: its operands and extents.
struct ConvGemm {
  Value input, filter, init;
  RankedTensorType filterType, initType;
  /// Batch, output channels, input channels, window and output extents.
  int64_t n, f, c, kh, kw, oh, ow;
  /// The GEMM's reduction: C * KH * KW.
  int64_t k;
  std::array<int64_t, 2> strides, dilations;
};

/// `conv` as a GEMM when it is on tensors with static shapes and its filter
/// has no encoding; failure otherwise.
FailureOr<ConvGemm> matchConvAsGemm(linalg::Conv2DNchwFchwOp conv);

/// Builds at `b`'s insertion point the gather of the patches of `input`
/// ([N, C, H, W], statically shaped), I[n, k, oh, ow] above: a
/// linalg.generic over I, k-major, so that for one k the patches along a row
/// of output pixels are a row of the input (strided by the convolution's
/// stride), the innermost loop vectorizes as one read and the index
/// arithmetic on k is hoisted out of it. `padding` (top, left) is read as
/// zeros: positions outside `input` read element 0 and yield zero.
Value buildPatchGather(OpBuilder &b, Location loc, Value input,
                       const ConvGemm &gemm,
                       std::array<int64_t, 2> padding = {0, 0});

/// For a convolution with a column stride sw > 1 and no padding: `input`
/// ([N, C, H, W]) with its columns split by phase, X'[n, c, h, q, w'] =
/// X[n, c, h, w' * sw + q] ([N, C, H, sw, ceil(W / sw)], zero past W), and
/// the gather of its patches, reading X'[n, c, ih, (kw * dw) % sw,
/// ow + (kw * dw) / sw]: along a row of output pixels one contiguous run
/// instead of every sw-th element. The split reads each input element once;
/// the patches read it up to KH * KW times. Failure for other convolutions.
FailureOr<Value> buildPhaseSplitPatchGather(OpBuilder &b, Location loc,
                                            Value input, const ConvGemm &gemm);

/// Builds at `b`'s insertion point the GEMM of `conv`: a linalg.generic
/// over `inputs` (the patches, then the filter in the backend's layout)
/// accumulating into `init`, with the backend's indexing maps and iterators,
/// whose body is the convolution's own (multiply, accumulate).
linalg::GenericOp buildConvGemm(OpBuilder &b, linalg::Conv2DNchwFchwOp conv,
                                Type resultType, ValueRange inputs, Value init,
                                ArrayRef<AffineMap> maps,
                                ArrayRef<utils::IteratorType> iterators);

} // namespace mlir::sits::codegen

#endif // SITS_PASSES_CODEGEN_COMMON_CONVTOGEMM_H
