//===- Passes.h - SITS graph-level passes -----------------------*- C++ -*-===//

#ifndef SITS_PASSES_TRANSFORMS_PASSES_H
#define SITS_PASSES_TRANSFORMS_PASSES_H

#include "dialects/Sits/IR/SitsOps.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/Pass.h"

namespace mlir::sits {

#define GEN_PASS_DECL
#include "passes/Transforms/Passes.h.inc"

/// Folds `activation` into the epilogue of the contraction producing its
/// input. Fails, without changing the IR, when the producer is not a
/// contraction, already has an activation, or has other users. Returns the
/// contraction, which now replaces `activation`.
FailureOr<FusedEpilogueOpInterface>
fuseActivationIntoProducer(RewriterBase &rewriter, ActivationOp activation);

/// Replaces the constant rhs of a `sits.matmul {transpose_rhs}` by its
/// transpose (computed now) and clears the flag. Fails, changing nothing,
/// unless the rhs is a statically shaped constant with byte-sized elements
/// used only by this matmul.
FailureOr<MatmulOp> foldConstantWeightTranspose(RewriterBase &rewriter,
                                                MatmulOp matmul);

/// What a structured pruning rewrite removed: channel or head indices (of
/// `total`), the constant bytes it saved, and how many constant channels it
/// folded into the consumer's bias instead of computing them.
struct PrunedStructure {
  SmallVector<int64_t> removed;
  int64_t total = 0;
  int64_t bytesRemoved = 0;
  int64_t foldedIntoBias = 0;
};

/// Replaces `op`, a pure op all of whose tensor operands are constants, by
/// the constant it computes (its folder on inline data; resources are read
/// too; linalg.transpose is evaluated here). Fails, changing nothing, when
/// the op does not fold or folding would keep a non-splat constant operand
/// alive next to the result (duplicating weights).
FailureOr<Value> foldConstantSubgraph(RewriterBase &rewriter, Operation *op);

/// Replaces `op` by its input when it is an identity: same-type reshape,
/// cast, full slice or zero pad, identity transpose, `sits.activation
/// <none>`, `x * 1`, `x / 1`, `x + 0`, `x - 0`.
FailureOr<Value> removeIdentityOp(RewriterBase &rewriter, Operation *op);

/// Prunes the channels between `producer` (a sits.matmul or sits.conv with
/// constant weights) and the contraction consuming its result, possibly
/// through one sits.activation: channels whose consumer weights are at most
/// `threshold` in magnitude, or whose producer weights are, the channel's
/// constant value being folded into the consumer's bias (see sits-prune).
/// Fails, changing nothing, when there is no such chain or nothing to prune;
/// emits a remark when every channel is prunable.
FailureOr<PrunedStructure>
pruneContractionChannels(RewriterBase &rewriter, Operation *producer,
                         double threshold);

/// Prunes the heads of `attention` that contribute at most `threshold`
/// (see sits-prune), rewriting its projections, a new attention op over the
/// live heads and the output projection; the old ops are left dead. Fails,
/// changing nothing, when no head is prunable; emits a remark when heads are
/// prunable but the surrounding graph is not in a form it rewrites.
FailureOr<PrunedStructure> pruneAttentionHeads(RewriterBase &rewriter,
                                               AttentionOp attention,
                                               double threshold);

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
