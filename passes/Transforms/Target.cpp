//===- Target.cpp - Passes over the module's target -----------------------===//
//
// `sits-set-target` names the target a module compiles for (the
// `sits.target` attribute every target-dependent pass reads), so that a
// textual pipeline carries its target and sits-opt reproduces what the
// Python driver compiles. `sits-print-target` shows table entries.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "dialects/Sits/IR/SitsDialect.h"
#include "dialects/Target/KnownTargets.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/Format.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSPRINTTARGET
#define GEN_PASS_DEF_SITSSETTARGET
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

namespace {

std::string formatNumber(double x) {
  std::string s;
  llvm::raw_string_ostream(s) << llvm::format("%.6g", x);
  return s;
}

void printTarget(raw_ostream &os, const target::TargetInfo &t) {
  os << "target: " << t.name << "\n"
     << "  aliases: ";
  llvm::interleaveComma(t.aliases, os);
  os << "\n  vendor: " << target::stringifyVendor(t.vendor) << "\n"
     << "  architecture: " << t.architecture << "\n"
     << "  triple: " << t.triple << "\n"
     << "  chip: " << t.chip << "\n";
  // CPU targets: which named instruction-set level the code runs on and the
  // exact features it may use (the host's, for `cpu`).
  if (t.vendor == target::Vendor::Cpu)
    os << "  isa_level: " << (t.isaLevel.empty() ? "none" : t.isaLevel) << "\n"
       << "  features: " << t.features << "\n";
  os << "  compute_units: " << t.computeUnits << "\n"
     << "  simd_width: " << t.simdWidth << "\n";
  if (t.vendor == target::Vendor::Cpu)
    os << "  vector_registers: " << t.vectorRegisters << "\n";
  os << "  memory_gb: " << formatNumber(t.memoryGB) << "\n"
     << "  memory_bandwidth_gbs: " << formatNumber(t.memoryBandwidthGBs) << "\n"
     << "  last_level_cache_mb: " << formatNumber(t.lastLevelCacheMB) << "\n"
     << "  shared_memory_per_unit_kb: " << formatNumber(t.sharedMemoryPerUnitKB)
     << "\n"
     << "  peak_fp32_tflops: " << formatNumber(t.peakFp32Tflops) << "\n"
     << "  peak_fp16_tflops: " << formatNumber(t.peakFp16Tflops) << "\n"
     << "  peak_bf16_tflops: " << formatNumber(t.peakBf16Tflops) << "\n"
     << "  peak_fp8_tflops: " << formatNumber(t.peakFp8Tflops) << "\n"
     << "  peak_int8_tops: " << formatNumber(t.peakInt8Tops) << "\n"
     << "  fp8_e4m3: " << ((t.fp8Formats & target::kFp8E4M3) ? "yes" : "no")
     << "\n"
     << "  fp8_e5m2: " << ((t.fp8Formats & target::kFp8E5M2) ? "yes" : "no")
     << "\n";
}

struct SitsPrintTargetPass
    : public mlir::sits::impl::SitsPrintTargetBase<SitsPrintTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (target == "all") {
      for (const target::TargetInfo &t : target::getKnownTargets())
        printTarget(llvm::outs(), t);
      return markAllAnalysesPreserved();
    }
    FailureOr<const target::TargetInfo *> info = resolveTarget(module, target);
    if (failed(info))
      return signalPassFailure();
    printTarget(llvm::outs(), **info);
    markAllAnalysesPreserved();
  }
};

struct SitsSetTargetPass
    : public mlir::sits::impl::SitsSetTargetBase<SitsSetTargetPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    const target::TargetInfo *info = target::lookupTarget(target);
    if (!info) {
      module.emitError() << "unknown target '" << target << "'; known targets: "
                         << target::getKnownTargetNames();
      return signalPassFailure();
    }
    // The canonical name, so that aliases ("avx2") print as what they mean.
    module->setAttr(SitsDialect::getTargetAttrName(),
                    TargetAttr::get(&getContext(), info->name));
    markAllAnalysesPreserved();
  }
};

} // namespace
