//===- Passes.h - SITS graph-level passes -----------------------*- C++ -*-===//

#ifndef SITS_PASSES_TRANSFORMS_PASSES_H
#define SITS_PASSES_TRANSFORMS_PASSES_H

#include "dialects/Sits/IR/SitsOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

#include <string>
#include <vector>

namespace mlir::sits {

#define GEN_PASS_DECL
#include "passes/Transforms/Passes.h.inc"

/// A function result attribute `sits.updates = i`: the result is argument
/// `i` after the function wrote it (`sits-page-kv-cache`'s pool, an outlined
/// dispatch's destination). Once buffers, it is the caller's buffer.
inline constexpr llvm::StringLiteral kUpdatesAttr = "sits.updates";

/// A unit attribute on a private function `sits-outline-layers` made of a
/// model's repeated layer: outlining passes treat it as an entry point's
/// body, and it returns the buffers it computes (their extents are known
/// only inside it) instead of taking them as out-params.
inline constexpr llvm::StringLiteral kLayerAttr = "sits.layer";

/// Folds `activation` into the epilogue of the contraction producing its
/// input. Fails, without changing the IR, when the producer is not a
/// contraction, already has an activation, or has other users. Returns the
/// contraction, which now replaces `activation`.
FailureOr<FusedEpilogueOpInterface>
fuseActivationIntoProducer(RewriterBase &rewriter, ActivationOp activation);

class CallSites;

/// Replaces `siblings` (`sits.matmul`s of one input, in IR order, by
/// constant weights and biases used only by them, alike in everything but
/// their column counts) by one matmul by their weights side by side,
/// created where the first was; each one's result becomes its column range
/// of the new result (`tensor.extract_slice`). With `deferJoin`, weights
/// [K, N] are joined by a `tensor.concat` of their constants, for the
/// weight layout passes to read side by side, instead of a joined copy.
/// Fails, changing nothing, unless they are such siblings.
FailureOr<MatmulOp> fuseSiblingMatmuls(RewriterBase &rewriter,
                                       ArrayRef<MatmulOp> siblings,
                                       bool deferJoin = false);
/// Replaces the constant rhs of a `sits.matmul {transpose_rhs}` by its
/// transpose (computed now) and clears the flag. Fails, changing nothing,
/// unless the rhs is used only by this matmul and is a statically shaped
/// constant with byte-sized elements, or an argument of a private function
/// for which each of `calls` passes one: each call then passes its
/// constant's transpose as a new argument instead.
FailureOr<MatmulOp> foldConstantWeightTranspose(RewriterBase &rewriter,
                                                MatmulOp matmul,
                                                const CallSites &calls);
/// The same for a `sits.qmatmul {transpose_weight}` (onnxruntime's
/// MatMulNBits stores [N, K]): the codes and, for groups along K, the scales
/// and zero points [N, K/G] are transposed together and `axis` follows.
/// Packed codes are left (their words run along K).
FailureOr<QMatmulOp> foldConstantWeightTranspose(RewriterBase &rewriter,
                                                 QMatmulOp qmatmul,
                                                 const CallSites &calls);

/// One decoder layer reading its past K/V from function arguments: a causal
/// `sits.attention` over `tensor.concat` (dim 2) of the past K/V and the new
/// tokens' (exported decoders), or a `sits.paged_attention` over a pool of
/// one block per sequence built from them (onnxruntime's
/// GroupQueryAttention), whose updated pool only feeds the present outputs.
struct CachedAttention {
  Operation *op;
  BlockArgument pastKey, pastValue;
  /// What the present K/V outputs are computed from (returned values).
  SmallVector<Value, 2> presents;
};

/// Matches `op` as a CachedAttention. Fails, with the reason as a match
/// failure, for any other form (masked, not causal, not over past arguments).
FailureOr<CachedAttention> matchCachedAttention(RewriterBase &rewriter,
                                                Operation *op);

/// Makes `cached` layer `layer` of a `sits.paged_attention` reading and
/// updating `pool` through the given tables; returns the updated pool. A
/// local pool's sequence lengths are replaced by `contextLens` everywhere
/// (RoPE positions computed from them included). What computed the presents
/// stays until the caller drops it.
FailureOr<Value> rewriteToPagedAttention(RewriterBase &rewriter,
                                         const CachedAttention &cached,
                                         Value pool, Value blockTables,
                                         Value slotMapping, Value contextLens,
                                         int64_t layer);

/// Storage formats a constant weight can take.
enum class WeightFormat { Int4, Int8, Fp8, Fp32 };
StringRef stringifyWeightFormat(WeightFormat format);

/// A [K, N] weight quantized symmetrically with one scale per `group`
/// consecutive rows of each column (`group >= K`: per channel).
struct QuantizedWeight {
  WeightFormat format;
  int64_t group;
  /// [K, N] codes: signed integers, or FP8 E4M3FN bit patterns.
  std::vector<int8_t> codes;
  /// [ceil(K / group), N] scales.
  std::vector<float> scales;

  /// weight[r, c] (of `n` columns) less the value its code stands for
  /// (scale * code; 0 for f32, which keeps the weight). Computed where it is
  /// needed rather than stored: a [K, N] float copy per candidate was most
  /// of the pass's memory traffic.
  double residual(ArrayRef<float> weight, int64_t r, int64_t c,
                  int64_t n) const;
  /// The sum of squared residuals of row r over columns [n0, n1).
  double rowSquaredError(ArrayRef<float> weight, int64_t r, int64_t n0,
                         int64_t n1, int64_t n) const;
};
QuantizedWeight quantizeWeight(ArrayRef<float> weight, int64_t k, int64_t n,
                               WeightFormat format, int64_t group);

/// Per-input-channel statistics of a contraction's input: E[x_k], E[x_k^2].
struct InputStats {
  std::vector<double> mean, meanSquare;
  /// "calibration", "layer_norm" or "default" (zero mean, unit variance).
  std::string source;
};
/// The statistics of `matmul`'s lhs (K channels): a `sits.input_stats`
/// attribute, else derived from a layer norm producer, else the default.
/// The layer norm's parameters are read through `call` (see
/// getPassedValue) when they are arguments of the function it calls.
InputStats estimateInputStats(MatmulOp matmul, int64_t k,
                              func::CallOp call = nullptr);

struct PrecisionConfig {
  WeightFormat format = WeightFormat::Fp32;
  /// Choose per block within errorBudget instead of applying `format`.
  bool autoSelect = false;
  bool allowFp8 = false;
  double errorBudget = 0.01;
  int64_t groupSize = 64;
  int64_t blockK = 64, blockN = 64;
  bool biasCorrection = true;
};

/// The formats chosen for the blocks of one weight, with their estimates.
struct PrecisionPlan {
  int64_t blockK, blockN, blocksK, blocksN;
  SmallVector<WeightFormat> candidates;
  /// One quantization per candidate, over the whole weight.
  std::vector<QuantizedWeight> quantized;
  /// Per block (row-major), the index of its candidate and its estimated
  /// squared output error.
  std::vector<size_t> blockCandidate;
  std::vector<double> blockNoise;
  /// Estimated squared output error and output signal, summed over outputs.
  double noise = 0.0, signal = 0.0;
  int64_t bytes = 0;
  std::vector<double> biasDelta;
  std::string statsSource;
  /// sqrt(squared / signal).
  double relativeError(double squared) const;
};
PrecisionPlan planWeightPrecision(ArrayRef<float> weight, int64_t k, int64_t n,
                                  const InputStats &stats,
                                  const PrecisionConfig &config);

/// Replaces a matmul by a constant f32 [K, N] (or transposed) weight with
/// quantized pieces per the plan for `config`, its bias corrected. A weight
/// that is an argument of a private function, for which each of `calls`
/// passes a constant, is quantized per call in a fixed format: the
/// function gets one argument per constant of the pieces (codes, scales,
/// corrected bias), each call passing those of its own weight. Returns one
/// plan per constant of the weight (getConstantSources order). Fails,
/// changing nothing, for other matmuls, and for such an argument with
/// `config.autoSelect` (a plan per call would differ in its pieces) or
/// when the calls differ in how the bias is corrected.
FailureOr<SmallVector<PrecisionPlan>>
quantizeMatmulWeight(RewriterBase &rewriter, MatmulOp matmul,
                     const PrecisionConfig &config, const CallSites &calls);

/// The statistics of `conv`'s input (C channels, over batch and pixels): a
/// `sits.input_stats` attribute, else the default.
InputStats estimateInputStats(ConvOp conv, int64_t channels);

/// Replaces a convolution by a constant f32 filter with a `sits.qconv` of
/// its INT8 codes, one scale per output channel, its bias corrected. With
/// `config.autoSelect`, only when the estimated relative error is within
/// `config.errorBudget`. A filter that is an argument of a private
/// function, for which each of `calls` passes a constant, is quantized per
/// call as quantizeMatmulWeight does (with `config.autoSelect`, when every
/// call's error is within the budget). Returns one plan per constant of
/// the filter. Fails, changing nothing, for other convolutions and for
/// other formats (convolutions are quantized to INT8 only).
FailureOr<SmallVector<PrecisionPlan>>
quantizeConvWeight(RewriterBase &rewriter, ConvOp conv,
                   const PrecisionConfig &config, const CallSites &calls);

/// What a structured pruning rewrite removed: channel or head indices (of
/// `total`), the constant bytes it saved, and how many constant channels it
/// folded into the consumer's bias instead of computing them. For attention
/// also the key/value heads removed (of `kvTotal`) and the prunable query
/// heads kept so that every key/value head keeps as many query heads.
struct PrunedStructure {
  SmallVector<int64_t> removed;
  int64_t total = 0;
  int64_t bytesRemoved = 0;
  int64_t foldedIntoBias = 0;
  SmallVector<int64_t> kvRemoved;
  int64_t kvTotal = 0;
  int64_t keptForGroups = 0;
};

/// Replaces `op`, a pure op all of whose tensor operands are constants, by
/// the constant it computes (its folder on inline data; resources are read
/// too; linalg.transpose is evaluated here). Fails, changing nothing, when
/// the op does not fold or folding would keep a non-splat constant operand
/// alive next to the result (duplicating weights).
FailureOr<Value> foldConstantSubgraph(RewriterBase &rewriter, Operation *op);

/// Replaces `op` by its input when it is an identity: same-type reshape,
/// cast, full slice or zero pad, identity transpose, `x * 1`, `x / 1`,
/// `x + 0`, `x - 0`, and a SITS op whose folder returns an operand
/// (`sits.activation <none>`, `relu(relu(x))`, ...).
FailureOr<Value> removeIdentityOp(RewriterBase &rewriter, Operation *op);

/// Prunes the channels between `producer` (a sits.matmul or sits.conv with
/// constant weights) and the contraction consuming its result, possibly
/// through one sits.activation: channels whose consumer weights are at most
/// `threshold` in magnitude, or whose producer weights are, the channel's
/// constant value being folded into the consumer's bias (see sits-prune).
/// The number of channels kept is rounded up to a multiple of `multiple`,
/// putting back the prunable channels with the largest consumer weights.
/// Fails, changing nothing, when there is no such chain or nothing to prune;
/// emits a remark when every channel is prunable.
FailureOr<PrunedStructure> pruneContractionChannels(RewriterBase &rewriter,
                                                    Operation *producer,
                                                    double threshold,
                                                    int64_t multiple = 1);

/// Prunes the heads of `attention` that contribute at most `threshold`
/// (see sits-prune), rewriting its projections, a new attention op over the
/// live heads and the output projection; the old ops are left dead. With
/// grouped-query attention every key/value head keeps the same number of
/// query heads (prunable ones are put back to even them out) and key/value
/// heads left without query heads go. Fails, changing nothing, when no head
/// is prunable; emits a remark when heads are prunable but the surrounding
/// graph is not in a form it rewrites or the groups cannot stay equal.
FailureOr<PrunedStructure> pruneAttentionHeads(RewriterBase &rewriter,
                                               AttentionOp attention,
                                               double threshold);

/// Patterns that fold ops reading or producing tensors with no elements
/// (sits-fold-empty-tensors): linalg ops with an empty iteration space
/// become their inits, pure ops with empty static results `tensor.empty`,
/// inserts of empty tensors their destination, concats lose empty operands.
void populateFoldEmptyTensorPatterns(RewritePatternSet &patterns);

/// Erases the trivially dead ops of `region`'s blocks; returns how many.
int64_t eraseDeadOps(RewriterBase &rewriter, Region &region);

/// `kind` applied to `x` (the definitions the code generators use).
double evaluateActivation(ActivationKind kind, double x);

/// The name reports use for an op at `loc`: the (first) NameLoc's name,
/// e.g. the ONNX node name, else the printed location.
std::string getReportName(Location loc);

/// Patterns applying fuseActivationIntoProducer.
void populateFuseEpiloguePatterns(RewritePatternSet &patterns);

/// Alignment of every weight in the weights buffer, in bytes.
int64_t getWeightsAlignment();

/// Bytes of a constant's data when it can be stored as plain bytes (static
/// shape, byte-sized elements, not a splat), else nullopt.
std::optional<int64_t> getConstantByteSize(ElementsAttr value);

/// Writes the weights buffer described by the module's `sits.weights`
/// attribute to `write`, in order with zero padding between entries.
LogicalResult serializeWeights(ModuleOp module,
                               llvm::function_ref<void(StringRef)> write);

#define GEN_PASS_REGISTRATION
#include "passes/Transforms/Passes.h.inc"

} // namespace mlir::sits

#endif // SITS_PASSES_TRANSFORMS_PASSES_H
