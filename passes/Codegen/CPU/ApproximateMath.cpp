//===- ApproximateMath.cpp - Vectorizable math functions ------------------===//
//
// LLVM lowers a vector math.exp or math.erf to one libm call per lane; a
// softmax or a GELU then spends its time in scalar calls. The polynomial
// approximations upstream provides are plain vector arithmetic (f32, error
// of a few ulp), so they run at FMA speed in the vectors the ops already
// have. Other float types compute in f32.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/StringSwitch.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUAPPROXIMATEMATH
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;

namespace {

/// The functions approximated (by operation name): those whose upstream
/// approximation is accurate to a few ulp over the whole f32 range.
bool isApproximated(StringRef name) {
  if (!name.consume_front("math."))
    return false;
  return llvm::StringSwitch<bool>(name)
      .Cases({"atan", "atan2", "tanh", "log", "log2", "log1p"}, true)
      .Cases({"erf", "erfc", "exp", "expm1", "cbrt", "sin", "cos"}, true)
      .Cases({"asin", "acos"}, true)
      .Default(false);
}

struct SitsCpuApproximateMathPass
    : sits::cpu::impl::SitsCpuApproximateMathBase<SitsCpuApproximateMathPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    populateMathF32ExpansionPatterns(patterns, isApproximated);
    populateMathPolynomialApproximationPatterns(patterns, isApproximated);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
