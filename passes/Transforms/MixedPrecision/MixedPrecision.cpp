//===- MixedPrecision.cpp - Weight-only quantization of contractions ------===//
//
// Constant matmul weights become INT8 / INT4 / FP8 sits.qmatmul weights, one
// format for the whole weight or one per block, chosen from the exact
// quantization residual weighted by the input's statistics. Constant conv
// filters become INT8 sits.qconv filters, one scale per output channel. See
// the pass description in Passes.td for the model of the error.
//
// This file is the pass: its options, the walk over the contractions and
// the `sits.report.precision` entries; MixedPrecision.h lists the rest.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/ConstantData.h"

#include "dialects/Target/KnownTargets.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "llvm/Support/raw_ostream.h"

#include <cmath>

namespace mlir::sits {
#define GEN_PASS_DEF_SITSMIXEDPRECISION
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

struct SitsMixedPrecisionPass
    : sits::impl::SitsMixedPrecisionBase<SitsMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    PrecisionConfig config;
    if (failed(parseConfig(module, config)))
      return signalPassFailure();
    if (precision == "fp32")
      return;

    // Contractions by constant weights (through calls too), in IR order.
    CallSites calls(module);
    auto weightOf = [](Operation *op) -> Value {
      if (auto matmul = dyn_cast<MatmulOp>(op))
        return matmul.getRhs();
      if (auto conv = dyn_cast<ConvOp>(op))
        return conv.getFilter();
      return nullptr;
    };
    SmallVector<Operation *> weighted;
    module.walk([&](Operation *op) {
      if (Value weight = weightOf(op);
          weight && !getConstantSources(weight, calls).empty())
        weighted.push_back(op);
    });
    SmallVector<Attribute> report;
    if (auto existing =
            module->getAttrOfType<ArrayAttr>("sits.report.precision"))
      report.append(existing.begin(), existing.end());
    IRRewriter rewriter(ctx);
    Builder b(ctx);
    for (Operation *op : weighted) {
      std::string name = getReportName(op->getLoc());
      // Read before the rewrite, which erases `op`: the weight as [K, N]
      // for a matmul, the filter's own shape for a convolution, and the
      // calls passing it when it is an argument.
      auto matmul = dyn_cast<MatmulOp>(op);
      Value weight = weightOf(op);
      auto weightType = cast<RankedTensorType>(weight.getType());
      SmallVector<ConstantSource> sources = getConstantSources(weight, calls);
      SmallVector<int64_t> shape(weightType.getShape());
      if (matmul && matmul.getTransposeRhs() && shape.size() == 2)
        std::swap(shape[0], shape[1]);
      // The diagnostic of a failed match is the reason it was skipped.
      std::string reason;
      rewriter.setListener(nullptr);
      FailureOr<SmallVector<PrecisionPlan>> plans = [&] {
        struct Reasons : RewriterBase::Listener {
          std::string &reason;
          explicit Reasons(std::string &r) : reason(r) {}
          void
          notifyMatchFailure(Location loc,
                             function_ref<void(Diagnostic &)> fn) override {
            Diagnostic diag(loc, DiagnosticSeverity::Remark);
            fn(diag);
            reason = diag.str();
          }
        } listener(reason);
        rewriter.setListener(&listener);
        FailureOr<SmallVector<PrecisionPlan>> result =
            matmul
                ? quantizeMatmulWeight(rewriter, matmul, config, calls)
                : quantizeConvWeight(rewriter, cast<ConvOp>(op), config, calls);
        rewriter.setListener(nullptr);
        return result;
      }();
      if (failed(plans)) {
        report.push_back(b.getDictionaryAttr({
            b.getNamedAttr("op", b.getStringAttr(name)),
            b.getNamedAttr("kind", b.getStringAttr("skipped")),
            b.getNamedAttr("reason", b.getStringAttr(reason)),
        }));
        continue;
      }
      int64_t fp32Bytes = weightType.getNumElements() * 4;
      for (auto [plan, source] : llvm::zip_equal(*plans, sources)) {
        SmallVector<Attribute> formats, blockErrors;
        for (size_t i = 0; i < plan.blockCandidate.size(); ++i) {
          formats.push_back(b.getStringAttr(
              stringifyWeightFormat(plan.candidates[plan.blockCandidate[i]])));
          blockErrors.push_back(
              b.getF64FloatAttr(plan.relativeError(plan.blockNoise[i])));
        }
        double correction = 0.0;
        for (double d : plan.biasDelta)
          correction += d * d;
        SmallVector<NamedAttribute> entry = {
            b.getNamedAttr("op", b.getStringAttr(name)),
            b.getNamedAttr("kind", b.getStringAttr("quantized")),
            b.getNamedAttr("precision", b.getStringAttr(precision)),
            b.getNamedAttr("shape", b.getI64ArrayAttr(shape)),
            b.getNamedAttr("block_shape",
                           b.getI64ArrayAttr({plan.blockK, plan.blockN})),
            b.getNamedAttr("format", b.getArrayAttr(formats)),
            b.getNamedAttr("block_error", b.getArrayAttr(blockErrors)),
            b.getNamedAttr("est_error",
                           b.getF64FloatAttr(plan.relativeError(plan.noise))),
            b.getNamedAttr("bytes", b.getI64IntegerAttr(plan.bytes)),
            b.getNamedAttr("fp32_bytes", b.getI64IntegerAttr(fp32Bytes)),
            b.getNamedAttr("bias_correction",
                           b.getF64FloatAttr(std::sqrt(correction))),
            b.getNamedAttr("input_stats", b.getStringAttr(plan.statsSource)),
        };
        // A weight passed by calls: one entry per call, named after it.
        if (source.call)
          entry.push_back(b.getNamedAttr(
              "call", b.getStringAttr(getReportName(source.call.getLoc()))));
        report.push_back(b.getDictionaryAttr(entry));
        ++numQuantized;
        numFp32Bytes += fp32Bytes;
        numBytes += plan.bytes;
      }
    }
    if (!report.empty())
      module->setAttr("sits.report.precision", b.getArrayAttr(report));
  }

  LogicalResult parseConfig(ModuleOp module, PrecisionConfig &config) {
    const target::TargetInfo &info = getModuleTargetOrHost(module);
    config.allowFp8 = info.fp8Formats & target::kFp8E4M3;
    config.errorBudget = errorBudget;
    config.groupSize = groupSize;
    config.blockK = blockK;
    config.blockN = blockN;
    config.biasCorrection = biasCorrection;
    if (precision == "int8") {
      config.format = WeightFormat::Int8;
    } else if (precision == "int4") {
      config.format = WeightFormat::Int4;
    } else if (precision == "fp8") {
      config.format = WeightFormat::Fp8;
      if (!config.allowFp8)
        return module.emitError()
               << "precision 'fp8' needs a target with FP8 E4M3 support; '"
               << info.name << "' has none (FP8 targets: h100, h200, mi300x)";
    } else if (precision == "auto") {
      config.autoSelect = true;
    } else if (precision != "fp32") {
      return module.emitError() << "unknown precision '" << precision
                                << "'; expected fp32, int8, int4, fp8 or auto";
    }
    if (groupSize != 32 && groupSize != 64 && groupSize != 128)
      return module.emitError()
             << "group-size must be 32, 64 or 128, got " << int64_t(groupSize);
    if (blockK < 0 || blockN <= 0)
      return module.emitError()
             << "block-k must be non-negative (0: all of K) and block-n "
                "positive, got "
             << int64_t(blockK) << " and " << int64_t(blockN);
    if (config.autoSelect && blockK % groupSize != 0)
      return module.emitError()
             << "block-k (" << int64_t(blockK)
             << ") must be a multiple of group-size (" << int64_t(groupSize)
             << ") so that INT4 blocks hold whole groups";
    if (!(errorBudget >= 0.0))
      return module.emitError() << "error-budget must be non-negative, got "
                                << double(errorBudget);
    return success();
  }
};

} // namespace
