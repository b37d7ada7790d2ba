//===- SitsOps.td - SITS graph-level operations ------------*- tablegen -*-===//

#ifndef SITS_DIALECT_SITSOPS_TD
#define SITS_DIALECT_SITSOPS_TD

include "dialects/Sits/IR/SitsBase.td"
include "dialects/Sits/IR/SitsAttrs.td"
include "dialects/Sits/IR/SitsInterfaces.td"
include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.td"
include "mlir/Interfaces/DestinationStyleOpInterface.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// Activations and weights of floating-point models.
def Sits_FloatTensor : RankedTensorOf<[F16, BF16, F32, F64]>;
// A paged KV pool: float K/V, or quantized rows of `D` INT8 or FP8 (E4M3)
// codes followed by the 4 bytes of their f32 scale, `[..., D + 4]`
// (per-token-head quantization).
def Sits_KVPoolTensor : AnyTypeOf<[Sits_FloatTensor,
                                   RankedTensorOf<[I8, F8E4M3FN]>]>;

// Element types a quantized tensor may hold: signed/unsigned integers of 2 to
// 16 bits, and the two OCP FP8 formats.
def Sits_QuantizedElement : AnyTypeOf<[
    I<2>, I<4>, I8, I16, UI<2>, UI<4>, UI8, UI16, F8E4M3FN, F8E5M2],
    "2-16 bit integer or fp8 (E4M3FN, E5M2)">;
def Sits_QuantizedTensor : RankedTensorOf<[Sits_QuantizedElement]>;

// Masks are additive (same float type as the scores) or boolean (true keeps).
def Sits_MaskTensor : RankedTensorOf<[I1, F16, BF16, F32, F64]>;

//===----------------------------------------------------------------------===//
// Op families
//===----------------------------------------------------------------------===//

// Ops whose result shape follows from operand shapes and attributes. The
// inferred type may be less static than the declared one; they only need to
// be compatible (same element type, no conflicting static extent).
class Sits_ShapedOp<string mnemonic, list<Trait> traits = []>
    : Sits_Op<mnemonic, !listconcat(traits, [Pure,
        InferTypeOpAdaptorWithIsCompatible])>;

// Contractions that carry a fused bias + activation epilogue.
class Sits_ContractionOp<string mnemonic, list<Trait> traits = []>
    : Sits_ShapedOp<mnemonic, !listconcat(traits, [
        Sits_FusedEpilogueOpInterface])>;

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

def Sits_MatmulOp : Sits_ContractionOp<"matmul"> {
  let summary = "Batched matrix multiplication with a fused epilogue";
  let description = [{
    Computes `act(op(lhs) x op(rhs) + bias)` where `op` transposes the two
    innermost dimensions when `transpose_lhs` / `transpose_rhs` is set.

    `lhs` is `[..., M, K]` and `rhs` is `[..., K, N]` (before the optional
    transposes). Leading batch dimensions broadcast as in NumPy, so a rank-2
    weight multiplies every batch of a rank-3 activation. The optional `bias`
    is a 1-D tensor of `N` elements added to every row; `activation` (default
    `none`) is applied last.

    `rhs` has the element type of `lhs` and the result, or a narrower float
    type that converts to it exactly (f16 or bf16 weights of an f32 model):
    the weights stay narrow in memory and are widened in registers.

    ```mlir
    // The attention score product of a GPT-2 block: q @ k^T.
    %s = sits.matmul %q, %k {transpose_rhs}
        : (tensor<1x12x128x64xf32>, tensor<1x12x128x64xf32>) -> tensor<1x12x128x128xf32>
    // A linear layer with a fused bias and GELU.
    %h = sits.matmul %x, %w bias(%b) {activation = #sits.activation<gelu>}
        : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    // fp16 weights, f32 activations and accumulation.
    %y = sits.matmul %x, %w16 : (tensor<8x1024xf32>, tensor<1024x4096xf16>) -> tensor<8x4096xf32>
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$lhs,
    Sits_FloatTensor:$rhs,
    Optional<Sits_FloatTensor>:$bias,
    UnitAttr:$transpose_lhs,
    UnitAttr:$transpose_rhs,
    DefaultValuedAttr<Sits_ActivationAttr, "::mlir::sits::ActivationKind::None">:$activation
  );
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`bias` `(` $bias^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
}

def Sits_ConvOp : Sits_ContractionOp<"conv"> {
  let summary = "N-d convolution (channels first) with a fused epilogue";
  let description = [{
    A grouped, strided, dilated, padded convolution over `input`
    `[N, C, D1, ..., Dk]` with `filter` `[O, C / groups, K1, ..., Kk]`,
    giving `[N, O, E1, ..., Ek]` with
    `Ei = floor((Di + pad_begin_i + pad_end_i - dilation_i * (Ki - 1) - 1) / stride_i) + 1`.
    `k` is 1, 2 or 3. `strides` and `dilations` have `k` entries (default
    1), `padding` has `2k` entries, all begins then all ends (default 0),
    as in ONNX. The optional `bias` has `O` elements; `activation` is
    applied last.

    ```mlir
    // The 7x7 stride-2 stem of ResNet-18 with batch norm folded into it.
    %y = sits.conv %x, %w bias(%b) {strides = array<i64: 2, 2>,
                                    padding = array<i64: 3, 3, 3, 3>,
                                    activation = #sits.activation<relu>}
        : (tensor<1x3x112x112xf32>, tensor<64x3x7x7xf32>, tensor<64xf32>)
        -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$input,
    Sits_FloatTensor:$filter,
    Optional<Sits_FloatTensor>:$bias,
    OptionalAttr<DenseI64ArrayAttr>:$strides,
    OptionalAttr<DenseI64ArrayAttr>:$padding,
    OptionalAttr<DenseI64ArrayAttr>:$dilations,
    DefaultValuedAttr<I64Attr, "1">:$groups,
    DefaultValuedAttr<Sits_ActivationAttr, "::mlir::sits::ActivationKind::None">:$activation
  );
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter (`bias` `(` $bias^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Number of spatial dimensions.
    int64_t getNumSpatialDims();
    /// Attribute values with their defaults filled in.
    ::llvm::SmallVector<int64_t> getStridesOrDefault();
    ::llvm::SmallVector<int64_t> getPaddingOrDefault();
    ::llvm::SmallVector<int64_t> getDilationsOrDefault();
  }];
}

def Sits_QConvOp : Sits_ContractionOp<"qconv"> {
  let summary = "Convolution by INT8 filters with one scale per output channel";
  let description = [{
    `act(conv(input, filter * scale[o]) + bias)`, with `sits.conv`'s layout,
    attributes and output shape, and the dequantization fused into the
    convolution: a per-output-channel scale is constant over the reduction
    (input channels and kernel window), so the convolution reads the INT8
    codes, widened in registers, and scales its accumulator.

    `filter` holds symmetric INT8 codes `[O, C / groups, K1, ..., Kk]`;
    `scale` has `O` elements of the input's element type.

    ```mlir
    %y = sits.qconv %x, %q, %s bias(%b) {padding = array<i64: 1, 1, 1, 1>,
                                          activation = #sits.activation<relu>}
        : (tensor<1x64x56x56xf32>, tensor<64x64x3x3xi8>, tensor<64xf32>,
           tensor<64xf32>) -> tensor<1x64x56x56xf32>
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$input,
    RankedTensorOf<[I8]>:$filter,
    Sits_FloatTensor:$scale,
    Optional<Sits_FloatTensor>:$bias,
    OptionalAttr<DenseI64ArrayAttr>:$strides,
    OptionalAttr<DenseI64ArrayAttr>:$padding,
    OptionalAttr<DenseI64ArrayAttr>:$dilations,
    DefaultValuedAttr<I64Attr, "1">:$groups,
    DefaultValuedAttr<Sits_ActivationAttr, "::mlir::sits::ActivationKind::None">:$activation
  );
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $filter `,` $scale (`bias` `(` $bias^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Number of spatial dimensions.
    int64_t getNumSpatialDims();
    /// Attribute values with their defaults filled in.
    ::llvm::SmallVector<int64_t> getStridesOrDefault();
    ::llvm::SmallVector<int64_t> getPaddingOrDefault();
    ::llvm::SmallVector<int64_t> getDilationsOrDefault();
  }];
}

def Sits_QMatmulOp : Sits_ContractionOp<"qmatmul", [AttrSizedOperandSegments]> {
  let summary = "Matrix multiplication by quantized (possibly packed) weights";
  let description = [{
    `act(input x dequantize(weight) + bias)` with the dequantization fused
    into the contraction: the weights stay low-bit in memory and are expanded
    in registers.

    `input` is `[..., M, K]`; `weight` is `[K, N]`, or `[N, K]` with
    `transpose_weight` (the layout of ONNX `MatMulNBits`). `scale` and
    `zero_point` describe the weight's quantization exactly as for
    `sits.dequantize` on `weight`: a 0-D scale is per tensor; a 1-D scale with
    `axis` is per channel; a scale of the weight's rank with `axis` and
    `block_size` is per group of `block_size` elements along `axis`. The
    scale's element type is the input's; the zero point's is the weight's.

    `weight` may carry a `#sits.packed` encoding, e.g. INT4 packed two per
    byte.

    Lowerings may round the input to INT8 per row and group of K to multiply
    in integers (sits-convert-to-linalg's `integer-dot`) unless
    `float_input` is set: the model asks for the input to stay in floating
    point (ONNX `MatMulNBits` with an `accuracy_level` below 4).

    ```mlir
    // INT4 weights, one scale per 128 consecutive K elements of each column.
    %y = sits.qmatmul %x, %w, %s {axis = 0 : i64, block_size = 128 : i64}
        : (tensor<8x4096xf16>, tensor<4096x4096xi4, #sits.packed<storage = i8, axis = 0>>,
           tensor<32x4096xf16>) -> tensor<8x4096xf16>
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$input,
    Sits_QuantizedTensor:$weight,
    Sits_FloatTensor:$scale,
    Optional<Sits_QuantizedTensor>:$zero_point,
    Optional<Sits_FloatTensor>:$bias,
    OptionalAttr<I64Attr>:$axis,
    OptionalAttr<I64Attr>:$block_size,
    UnitAttr:$transpose_weight,
    DefaultValuedAttr<Sits_ActivationAttr, "::mlir::sits::ActivationKind::None">:$activation,
    UnitAttr:$float_input
  );
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $scale (`zero_point` `(` $zero_point^ `)`)?
    (`bias` `(` $bias^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def Sits_AttentionOp : Sits_ShapedOp<"attention"> {
  let summary = "Scaled dot-product attention (MHA, GQA, MQA), causal or masked";
  let description = [{
    `softmax(scale * Q K^T + mask) V` per batch and head.

    `query` is `[B, Hq, Tq, D]`, `key` is `[B, Hkv, Tk, D]` and `value` is
    `[B, Hkv, Tk, Dv]`; the result is `[B, Hq, Tq, Dv]`. `Hq` must be a
    multiple of `Hkv`: query head `h` reads key/value head
    `h / (Hq / Hkv)` (grouped-query attention; `Hkv = 1` is multi-query).
    `scale` defaults to `1 / sqrt(D)`.

    Keys and values may come from a KV cache, i.e. `Tk >= Tq`, with the
    `Tk - Tq` cached positions first (past and new K/V joined by
    `tensor.concat` along dimension 2). Query `i` then sits at absolute
    position `Tk - Tq + i`, and `causal` lets it see keys `j <= Tk - Tq + i`
    (bottom-right aligned), which covers prefill (`Tk = Tq`) and one-token
    decode (`Tq = 1`) alike.

    The optional `mask` broadcasts to `[B, Hq, Tq, Tk]`. A boolean mask keeps
    positions that are `true`; a float mask (of the query's element type) is
    added to the scaled scores. `causal` and `mask` combine.

    ```mlir
    // One decode step of a GPT-2 head group against a 512-token cache.
    %k = tensor.concat dim(2) %past_k, %k_new
        : (tensor<1x12x512x64xf32>, tensor<1x12x1x64xf32>) -> tensor<1x12x513x64xf32>
    %v = tensor.concat dim(2) %past_v, %v_new
        : (tensor<1x12x512x64xf32>, tensor<1x12x1x64xf32>) -> tensor<1x12x513x64xf32>
    %o = sits.attention %q, %k, %v {causal}
        : (tensor<1x12x1x64xf32>, tensor<1x12x513x64xf32>, tensor<1x12x513x64xf32>)
        -> tensor<1x12x1x64xf32>
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$query,
    Sits_FloatTensor:$key,
    Sits_FloatTensor:$value,
    Optional<Sits_MaskTensor>:$mask,
    UnitAttr:$causal,
    OptionalAttr<F64Attr>:$scale
  );
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`mask` `(` $mask^ `)`)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The softmax scale, defaulted to 1/sqrt(head dim) when not set. Returns
    /// std::nullopt when it is defaulted and the head dim is dynamic.
    std::optional<double> getScaleOrDefault();
  }];
}

def Sits_PagedAttentionOp : Sits_ShapedOp<"paged_attention"> {
  let summary = "Causal attention over a paged KV cache, writing the new K/V";
  let description = [{
    One decoder layer's attention for a batch of sequences whose keys and
    values live in a paged KV pool (the layout of the runtime's KV
    allocator): `pool` is `[num_blocks, layers, 2, Hkv, block_size, D]`, where
    block `n`, layer `l`, kind 0 (K) or 1 (V) holds `block_size`
    consecutive token positions of one sequence. The op reads and writes one
    layer, given either by the `layer` attribute or, in a function shared by
    all layers, by an `index` operand, `layer(%l)`; a constant operand folds
    into the attribute.

    `query` is `[B, Hq, S, D]` and `key`/`value` are the `S` new tokens'
    `[B, Hkv, S, D]`. The op first writes token `s` of sequence `b` into slot
    `slot_mapping[b, s]` (block `slot / block_size`, offset
    `slot % block_size`) of both kinds; a negative slot marks a padding token
    and writes nothing. It then attends: sequence `b` has `context_lens[b]`
    tokens including the new ones, its position `p` is read from block
    `block_tables[b, p / block_size]`, and query `s` sits at position
    `context_lens[b] - S + s` and sees every position up to its own (causal,
    bottom-right aligned per sequence, so shorter sequences are left-padded).
    A query with no visible key (a left-padding token) gets zeros.

    An `i8` or `f8E4M3FN` pool holds K/V quantized per token and head: the
    innermost extent is `D + 4`, `D` INT8 or FP8 E4M3 codes followed by the
    4 bytes of their f32 scale (the value is code × scale). A written row
    is quantized symmetrically to the codes' largest value m (127 or 448):
    scale = max|x| / m, code = x · (m / max|x|) rounded to nearest even.

    With a `kivi = [bits, layers, Hkv, block_size]` attribute the pool is
    KIVI blocks of 4- or 2-bit codes, `[num_blocks, block_stride]` bytes laid
    out as the runtime's `sits/runtime/kivi_layout.h` says: keys quantized
    per channel over a block, values per token and channel group, and the
    rows of a block not yet full kept in f32 in the block's tail until its
    last position is written. Only the CPU runtime kernels read and write
    such pools.

    Query head `h` reads K/V head `h / (Hq / Hkv)` (GQA/MQA). `scale`
    defaults to `1 / sqrt(D)`. Results are the attention output
    `[B, Hq, S, D]` and the updated pool; a function that returns the pool in
    place of its argument has it updated in place (see
    `sits-page-kv-cache`). Slots, block numbers and context lengths out of
    the pool's range are not followed: such a write is dropped, such a read
    is of block 0.

    ```mlir
    // Decode step of layer 0: one new token per sequence.
    %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens {layer = 0}
        : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>,
           tensor<?x2x2x2x16x16xf32>, tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>)
        -> (tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x16xf32>)
    // The same, in a function called once per layer.
    %o, %pool1 = sits.paged_attention %q, %k, %v, %pool, %tables, %slots, %lens layer(%l)
        : (tensor<?x4x1x16xf32>, tensor<?x2x1x16xf32>, tensor<?x2x1x16xf32>,
           tensor<?x2x2x2x16x16xf32>, tensor<?x?xi32>, tensor<?x1xi64>, tensor<?xi32>)
        -> (tensor<?x4x1x16xf32>, tensor<?x2x2x2x16x16xf32>)
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$query,
    Sits_FloatTensor:$key,
    Sits_FloatTensor:$value,
    Sits_KVPoolTensor:$pool,
    RankedTensorOf<[I32]>:$block_tables,
    RankedTensorOf<[I64]>:$slot_mapping,
    RankedTensorOf<[I32]>:$context_lens,
    Optional<Index>:$layer_index,
    OptionalAttr<ConfinedAttr<I64Attr, [IntNonNegative]>>:$layer,
    OptionalAttr<F64Attr>:$scale,
    OptionalAttr<DenseI64ArrayAttr>:$kivi
  );
  let results = (outs Sits_FloatTensor:$result, Sits_KVPoolTensor:$updated_pool);
  // The layer operand's type is always `index`: it stays out of the types.
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $pool `,` $block_tables `,` $slot_mapping `,`
    $context_lens (`layer` `(` $layer_index^ `)`)? attr-dict `:`
    `(` type($query) `,` type($key) `,` type($value) `,` type($pool) `,`
    type($block_tables) `,` type($slot_mapping) `,` type($context_lens) `)`
    `->` `(` type($result) `,` type($updated_pool) `)`
  }];
  let hasVerifier = 1;
  let hasFolder = 1;
  let extraClassDeclaration = [{
    /// The layer when it is known: the attribute or a constant operand.
    std::optional<int64_t> getConstantLayer();
    /// The softmax scale, defaulted to 1/sqrt(head dim) when not set.
    std::optional<double> getScaleOrDefault();
    /// Positions per block: the pool's dimension 4, or a KIVI pool's.
    int64_t getPoolBlockSize();
  }];
}

//===----------------------------------------------------------------------===//
// Normalization
//===----------------------------------------------------------------------===//

def Sits_LayerNormOp : Sits_ShapedOp<"layer_norm"> {
  let summary = "Layer normalization over the trailing dimensions";
  let description = [{
    Normalizes `input` over dimensions `[axis, rank)` to zero mean and unit
    variance, then scales by `scale` and adds the optional `bias`, both of
    the normalized shape: `(x - mean) / sqrt(var + epsilon) * scale + bias`
    (ONNX `LayerNormalization`). `axis` may be negative (default -1).

    ```mlir
    %y = sits.layer_norm %x, %gamma, %beta {epsilon = 1.0e-05 : f64}
        : (tensor<1x128x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<1x128x768xf32>
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$input,
    Sits_FloatTensor:$scale,
    Optional<Sits_FloatTensor>:$bias,
    DefaultValuedAttr<I64Attr, "-1">:$axis,
    DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon
  );
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale (`,` $bias^)? attr-dict `:` functional-type(operands, results)
  }];
}

def Sits_RMSNormOp : Sits_ShapedOp<"rms_norm"> {
  let summary = "Root-mean-square normalization over the trailing dimensions";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * scale`, the mean taken over dimensions
    `[axis, rank)` (ONNX `RMSNormalization`, Llama's RMSNorm). `scale` has
    the normalized shape.

    ```mlir
    %y = sits.rms_norm %x, %g {epsilon = 1.0e-06 : f64}
        : (tensor<1x16x4096xf16>, tensor<4096xf16>) -> tensor<1x16x4096xf16>
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$input,
    Sits_FloatTensor:$scale,
    DefaultValuedAttr<I64Attr, "-1">:$axis,
    DefaultValuedAttr<F64Attr, "1.0e-5">:$epsilon
  );
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $scale attr-dict `:` functional-type(operands, results)
  }];
}

//===----------------------------------------------------------------------===//
// Softmax and activations
//===----------------------------------------------------------------------===//

def Sits_SoftmaxOp : Sits_Op<"softmax", [Pure, SameOperandsAndResultType]> {
  let summary = "Softmax along one dimension";
  let description = [{
    `exp(x - max(x)) / sum(exp(x - max(x)))` along `axis` (default -1,
    negative values count from the end).

    ```mlir
    %p = sits.softmax %s {axis = -1 : i64} : tensor<1x12x128x128xf32>
    ```
  }];
  let arguments = (ins Sits_FloatTensor:$input,
                       DefaultValuedAttr<I64Attr, "-1">:$axis);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Sits_ActivationOp : Sits_Op<"activation",
    [Pure, SameOperandsAndResultType]> {
  let summary = "Elementwise activation function";
  let description = [{
    Applies `kind` to every element. Graph passes fold it into the epilogue
    of the contraction that produces its input (`sits-fuse-epilogue`).
    `none` is the identity and folds away.

    ```mlir
    %y = sits.activation <gelu> %x : tensor<8x4096xf32>
    ```
  }];
  let arguments = (ins Sits_ActivationAttr:$kind, Sits_FloatTensor:$input);
  let results = (outs Sits_FloatTensor:$result);
  let assemblyFormat = "$kind $input attr-dict `:` type($input)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Quantization
//===----------------------------------------------------------------------===//

// Shared by quantize/dequantize: the scale layout selects the granularity.
class Sits_QuantOpBase<string mnemonic, list<Trait> traits = []>
    : Sits_Op<mnemonic, !listconcat(traits, [Pure])> {
  let assemblyFormat = [{
    $input `,` $scale (`,` $zero_point^)? attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Sits_QuantizeOp : Sits_QuantOpBase<"quantize"> {
  let summary = "Affine quantization to a low-bit integer or fp8 type";
  let description = [{
    `saturate(round_half_to_even(input / scale) + zero_point)` in the
    result's element type (ONNX `QuantizeLinear`; for fp8 results the
    division rounds to nearest and saturates, and there is no zero point).

    The scale's shape selects the granularity:

    * per tensor: a 0-D `scale`;
    * per channel: a 1-D `scale` with one entry per index of dimension
      `axis`;
    * per group (blocked): `scale` has the input's rank and extent
      `ceil(D_axis / block_size)` along `axis`, the input's extent elsewhere;
      each scale covers `block_size` consecutive elements along `axis`.

    `zero_point`, when present, has the scale's shape and the result's
    element type.

    ```mlir
    %q = sits.quantize %w, %s {axis = 1 : i64, block_size = 32 : i64}
        : (tensor<4096x1024xf32>, tensor<4096x32xf32>) -> tensor<4096x1024xi4>
    ```
  }];
  let arguments = (ins
    Sits_FloatTensor:$input,
    Sits_FloatTensor:$scale,
    Optional<Sits_QuantizedTensor>:$zero_point,
    OptionalAttr<I64Attr>:$axis,
    OptionalAttr<I64Attr>:$block_size
  );
  let results = (outs Sits_QuantizedTensor:$result);
  let hasFolder = 1;
}

def Sits_DequantizeOp : Sits_QuantOpBase<"dequantize"> {
  let summary = "Affine dequantization from a low-bit integer or fp8 type";
  let description = [{
    `(input - zero_point) * scale` in the scale's element type (ONNX
    `DequantizeLinear`), with the same granularity rules as `sits.quantize`.
    `input` may carry a `#sits.packed` encoding.

    ```mlir
    %w = sits.dequantize %q, %s, %zp {axis = 0 : i64}
        : (tensor<768x3072xi8>, tensor<768xf32>, tensor<768xi8>) -> tensor<768x3072xf32>
    ```
  }];
  let arguments = (ins
    Sits_QuantizedTensor:$input,
    Sits_FloatTensor:$scale,
    Optional<Sits_QuantizedTensor>:$zero_point,
    OptionalAttr<I64Attr>:$axis,
    OptionalAttr<I64Attr>:$block_size
  );
  let results = (outs Sits_FloatTensor:$result);
}

//===----------------------------------------------------------------------===//
// Runtime kernels
//===----------------------------------------------------------------------===//

// Codegen-level ops that the runtime's hand-written kernels compute. They are
// created by sits-convert-to-linalg, bufferize in destination style, and
// become calls in sits-cpu-lower-ukernels.

def Sits_F32TensorOrMemRef : AnyTypeOf<[RankedTensorOf<[F32]>, MemRefOf<[F32]>]>;
def Sits_I32TensorOrMemRef : AnyTypeOf<[RankedTensorOf<[I32]>, MemRefOf<[I32]>]>;
def Sits_KVPoolTensorOrMemRef : AnyTypeOf<[RankedTensorOf<[F32, I8, F8E4M3FN]>,
                                           MemRefOf<[F32, I8, F8E4M3FN]>]>;

def Sits_UkernelPagedAttentionOp : Sits_Op<"ukernel.paged_attention", [
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<BufferizableOpInterface, [
        "bufferizesToMemoryRead", "bufferizesToMemoryWrite",
        "getAliasingValues", "bufferize"]>]> {
  let summary = "The attention part of sits.paged_attention, as a runtime kernel";
  let description = [{
    Causal attention of `query` (`[B, Hq, S, D]`) over one layer of a paged
    KV pool (`[num_blocks, layers, 2, Hkv, block_size, D]`), read in place
    through `block_tables` (`[B, W]`): the attention half of
    `sits.paged_attention` once its new K/V are in the pool. Query `s` of
    sequence `b` sits at position `context_lens[b] - S + s` and sees every
    position up to its own; a query that sees none (left padding) gets
    zeros. Query head `h` reads K/V head `h / (Hq / Hkv)`. Block numbers out
    of the pool's range read block 0; positions past `W * block_size` are
    not read.
    An `i8` or `f8E4M3FN` pool is quantized per token and head
    (`sits.paged_attention`): its rows are `D` codes and their f32 scale,
    `[..., D + 4]`. With `kivi = [bits, layers, Hkv, block_size]` it is
    `[num_blocks, block_stride]` bytes of KIVI blocks
    (`sitsRuntimePagedAttentionKivi`).

    The op is in destination style: the result (`[B, Hq, S, D]`) is written
    into `init`, on tensors or, after bufferization, on buffers (then it has
    no result). sits-cpu-lower-ukernels turns the buffer form into a call of
    the runtime's `sitsRuntimePagedAttention`, which reads K and V where
    they lie instead of gathering each sequence's context first.

    ```mlir
    %o = sits.ukernel.paged_attention
        ins(%q, %pool, %tables, %lens : tensor<?x8x1x64xf32>,
            tensor<?x8x2x2x16x64xf32>, tensor<?x?xi32>, tensor<?xi32>)
        layer(%l) outs(%init : tensor<?x8x1x64xf32>) {scale = 0.125 : f32}
        -> tensor<?x8x1x64xf32>
    ```
  }];
  let arguments = (ins
    Sits_F32TensorOrMemRef:$query,
    Sits_KVPoolTensorOrMemRef:$pool,
    Sits_I32TensorOrMemRef:$block_tables,
    Sits_I32TensorOrMemRef:$context_lens,
    Index:$layer,
    F32Attr:$scale,
    OptionalAttr<DenseI64ArrayAttr>:$kivi,
    Sits_F32TensorOrMemRef:$init
  );
  let results = (outs Variadic<RankedTensorOf<[F32]>>:$result);
  let assemblyFormat = [{
    `ins` `(` $query `,` $pool `,` $block_tables `,` $context_lens `:`
    type($query) `,` type($pool) `,` type($block_tables) `,`
    type($context_lens) `)` `layer` `(` $layer `)`
    `outs` `(` $init `:` type($init) `)` attr-dict (`->` type($result)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getInitMutable();
    }
  }];
}

def Sits_I64TensorOrMemRef : AnyTypeOf<[RankedTensorOf<[I64]>, MemRefOf<[I64]>]>;

def Sits_UkernelKiviWriteOp : Sits_Op<"ukernel.kivi_write", [
    DestinationStyleOpInterface,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    DeclareOpInterfaceMethods<BufferizableOpInterface, [
        "bufferizesToMemoryRead", "bufferizesToMemoryWrite",
        "getAliasingValues", "bufferize"]>]> {
  let summary = "The slot writes of sits.paged_attention into a KIVI pool, as a runtime kernel";
  let description = [{
    Writes token `s` of sequence `b` of `key` and `value` (`[B, Hkv, S, D]`
    f32) into slot `slot_mapping[b, s]` of layer `layer` of a pool of KIVI
    blocks (`[num_blocks, block_stride]` i8, `kivi = [bits, layers, Hkv,
    block_size]`, as `sits.paged_attention` describes): into the block's f32
    tail, quantizing the block when its last position is written. Negative
    slots, block 0 and blocks past the pool are not written.

    The op is in destination style over the pool, which it reads (the
    tails) and updates in place. sits-cpu-lower-ukernels turns the buffer
    form into a call of the runtime's `sitsRuntimeKiviWrite`.

    ```mlir
    %p = sits.ukernel.kivi_write
        ins(%k, %v, %slots : tensor<?x2x1x64xf32>, tensor<?x2x1x64xf32>,
            tensor<?x1xi64>) layer(%l)
        outs(%pool : tensor<?x114688xi8>) {kivi = array<i64: 4, 2, 2, 32>}
        -> tensor<?x114688xi8>
    ```
  }];
  let arguments = (ins
    Sits_F32TensorOrMemRef:$key,
    Sits_F32TensorOrMemRef:$value,
    Sits_I64TensorOrMemRef:$slot_mapping,
    Index:$layer,
    DenseI64ArrayAttr:$kivi,
    Sits_KVPoolTensorOrMemRef:$pool
  );
  let results = (outs Variadic<RankedTensorOf<[I8]>>:$result);
  let assemblyFormat = [{
    `ins` `(` $key `,` $value `,` $slot_mapping `:` type($key) `,`
    type($value) `,` type($slot_mapping) `)` `layer` `(` $layer `)`
    `outs` `(` $pool `:` type($pool) `)` attr-dict (`->` type($result)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    ::mlir::MutableOperandRange getDpsInitsMutable() {
      return getPoolMutable();
    }
  }];
}

#endif // SITS_DIALECT_SITSOPS_TD
