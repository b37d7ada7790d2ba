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
