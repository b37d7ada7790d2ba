//===- Passes.h - SITS graph-level passes -----------------------*- C++ -*-===//

#ifndef SITS_PASSES_TRANSFORMS_PASSES_H
#define SITS_PASSES_TRANSFORMS_PASSES_H

#include "dialects/Sits/IR/SitsOps.h"

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

/// Patterns applying fuseActivationIntoProducer.
void populateFuseEpiloguePatterns(RewritePatternSet &patterns);

#define GEN_PASS_REGISTRATION
#include "passes/Transforms/Passes.h.inc"

} // namespace mlir::sits

#endif // SITS_PASSES_TRANSFORMS_PASSES_H
