//===- Passes.td - SITS conversion passes ------------------*- tablegen -*-===//

#ifndef SITS_PASSES_CONVERSION_PASSES_TD
#define SITS_PASSES_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

// Op-agnostic: every rewrite is local to one SITS op. Schedule it on the
// module when function signatures carry #sits.packed or unsigned-integer
// tensors, so that callers and callees are retyped together.
def SitsConvertToLinalg : Pass<"sits-convert-to-linalg"> {
  let summary = "Lower SITS ops to linalg, tensor, arith and math on tensors";
  let description = [{
    Replaces every SITS op with upstream ops on tensors, the first step of
    lowering to the CPU and GPUs. Contractions become `linalg.matmul`,
    `linalg.batch_matmul` or `linalg.conv_*` (transposes and batch broadcasts
    in `indexing_maps`, padding as `tensor.pad`) accumulating into a
    zero-filled `linalg.fill` (f32 for f16/bf16 operands), followed by one
    elementwise `linalg.generic` for the bias, the activation and the cast to
    the result type, so that elementwise fusion later puts the epilogue into
    the contraction. Attention, normalizations and softmax decompose into
    contraction, reduction and elementwise `linalg.generic`s computed in at
    least f32; quantization becomes elementwise generics
    (`math.roundeven`, saturation, `arith.truncf` for fp8), and
    `sits.qmatmul` dequantizes its weight in a generic feeding the matmul.
    Exact GELU is computed as `0.5 x erfc(-x / sqrt 2)` (`math.erfc`), equal
    to `0.5 x (1 + erf(x / sqrt 2))` without its cancellation for negative
    `x`, and the tanh GELU as `x sigmoid(2 u)`, equal to
    `0.5 x (1 + tanh(u))`, for the same reason.

    `#sits.packed` tensors become their storage tensors (function
    signatures, calls, returns and constants included) and the dequantizing
    generics extract the sub-word elements with shifts; unsigned-integer
    tensors become signless ones.

    Dynamic extents are handled with `tensor.dim`. A dynamic extent that
    NumPy-broadcasts (matmul batch dimensions, attention masks) is assumed to
    equal the extent it is broadcast against: only static size-1 extents
    broadcast. Attention masks follow onnxruntime's CPU kernel: a `false`
    boolean entry and a causally hidden key set the score to the lowest
    finite value, so a fully masked row gives the mean of V instead of NaN
    (a float mask is added as given; a row of `-inf` gives NaN).

    Ops the patterns cannot lower, and other ops using packed or unsigned
    tensors the conversion cannot retype, are reported as errors at their
    location and fail the pass.

    Before:
    ```mlir
    %y = sits.matmul %x, %w bias(%b) {activation = #sits.activation<relu>}
        : (tensor<8x64xf32>, tensor<64x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
    ```

    After:
    ```mlir
    %zero = arith.constant 0.000000e+00 : f32
    %0 = tensor.empty() : tensor<8x32xf32>
    %1 = linalg.fill ins(%zero : f32) outs(%0 : tensor<8x32xf32>) -> tensor<8x32xf32>
    %2 = linalg.matmul ins(%x, %w : tensor<8x64xf32>, tensor<64x32xf32>)
                       outs(%1 : tensor<8x32xf32>) -> tensor<8x32xf32>
    %3 = tensor.empty() : tensor<8x32xf32>
    %y = linalg.generic {
        indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>,
                         affine_map<(d0, d1) -> (d0, d1)>],
        iterator_types = ["parallel", "parallel"]}
        ins(%2, %b : tensor<8x32xf32>, tensor<32xf32>) outs(%3 : tensor<8x32xf32>) {
    ^bb0(%acc: f32, %bias: f32, %out: f32):
      %4 = arith.addf %acc, %bias : f32
      %c0 = arith.constant 0.000000e+00 : f32
      %5 = arith.maximumf %4, %c0 : f32
      linalg.yield %5 : f32
    } -> tensor<8x32xf32>
    ```
  }];
  let options = [
    Option<"integerDot", "integer-dot", "bool", /*default=*/"false",
           "Lower sits.qmatmul with INT8 or INT4 weights to INT8 dot products "
           "where it can: the input quantized per row and group of K at run "
           "time, the codes re-laid out for dot-product instructions, and a "
           "contraction computed by the runtime's sitsRuntimeQDot (CPU "
           "targets; see lowerQMatmulToIntegerDot)">,
    Option<"pagedAttentionKernel", "paged-attention-kernel", "bool",
           /*default=*/"false",
           "Lower the attention of an f32 sits.paged_attention to "
           "sits.ukernel.paged_attention, computed by the runtime's "
           "sitsRuntimePagedAttention on the pool in place, instead of "
           "gathering each sequence's context (CPU targets)">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect",
  ];
}

#endif // SITS_PASSES_CONVERSION_PASSES_TD
