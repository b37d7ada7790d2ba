//===- Sits.cpp - C API of the SITS dialect, passes and targets -----------===//

#include "dialects/CAPI/Sits.h"

#include "dialects/Sits/IR/SitsOps.h"
#include "dialects/Target/KnownTargets.h"
#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/GPU/Passes.h"
#include "passes/Pipelines/Pipelines.h"
#include "passes/Conversion/Passes.h"
#include "passes/Transforms/Passes.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "llvm/Config/llvm-config.h"

using namespace mlir;
using namespace mlir::sits;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Sits, sits, mlir::sits::SitsDialect)

void sitsRegisterPasses(void) {
  static bool once = [] {
    mlir::sits::registerSitsPasses();
    mlir::sits::registerSitsConversionPasses();
    mlir::sits::cpu::registerSitsCpuPasses();
    mlir::sits::gpu::registerSitsGpuPasses();
    mlir::sits::registerSitsPipelines();
    return true;
  }();
  (void)once;
}

MlirStringRef sitsGetVersion(void) {
  return mlirStringRefCreateFromCString(SITS_VERSION_STRING);
}

MlirStringRef sitsGetLLVMVersion(void) {
  return mlirStringRefCreateFromCString(LLVM_VERSION_STRING);
}

static MlirStringRef wrapRef(llvm::StringRef s) { return wrap(s); }

intptr_t sitsGetNumKnownTargets(void) {
  return target::getKnownTargets().size();
}

SitsTargetInfo sitsGetKnownTarget(intptr_t pos) {
  const target::TargetInfo &t = target::getKnownTargets()[pos];
  SitsTargetInfo info;
  info.name = wrapRef(t.name);
  info.vendor = wrapRef(target::stringifyVendor(t.vendor));
  info.architecture = wrapRef(t.architecture);
  info.triple = wrapRef(t.triple);
  info.chip = wrapRef(t.chip);
  info.features = wrapRef(t.features);
  info.numAliases = t.aliases.size();
  info.computeUnits = t.computeUnits;
  info.simdWidth = t.simdWidth;
  info.vectorRegisters = t.vectorRegisters;
  info.isaLevel = wrapRef(t.isaLevel);
  info.memoryGB = t.memoryGB;
  info.memoryBandwidthGBs = t.memoryBandwidthGBs;
  info.lastLevelCacheMB = t.lastLevelCacheMB;
  info.sharedMemoryPerUnitKB = t.sharedMemoryPerUnitKB;
  info.peakFp32Tflops = t.peakFp32Tflops;
  info.peakFp16Tflops = t.peakFp16Tflops;
  info.peakBf16Tflops = t.peakBf16Tflops;
  info.peakFp8Tflops = t.peakFp8Tflops;
  info.peakInt8Tops = t.peakInt8Tops;
  info.fp8E4M3 = t.fp8Formats & target::kFp8E4M3;
  info.fp8E5M2 = t.fp8Formats & target::kFp8E5M2;
  info.interconnectGBs = t.interconnectGBs;
  info.minPtxVersion = t.minPtxVersion;
  return info;
}

MlirStringRef sitsGetKnownTargetAlias(intptr_t pos, intptr_t alias) {
  return wrapRef(target::getKnownTargets()[pos].aliases[alias]);
}

intptr_t sitsLookupTarget(MlirStringRef name) {
  const target::TargetInfo *info = target::lookupTarget(unwrap(name));
  if (!info)
    return -1;
  return info - target::getKnownTargets().data();
}

bool sitsAttributeIsATarget(MlirAttribute attr) {
  return isa<TargetAttr>(unwrap(attr));
}

MlirTypeID sitsTargetAttrGetTypeID(void) {
  return wrap(TypeID::get<TargetAttr>());
}

MlirAttribute sitsTargetAttrGet(MlirContext ctx, MlirStringRef name) {
  if (!target::lookupTarget(unwrap(name)))
    return MlirAttribute{nullptr};
  return wrap(TargetAttr::get(unwrap(ctx), unwrap(name)));
}

MlirStringRef sitsTargetAttrGetName(MlirAttribute attr) {
  return wrap(cast<TargetAttr>(unwrap(attr)).getName());
}

bool sitsAttributeIsAPackedEncoding(MlirAttribute attr) {
  return isa<PackedEncodingAttr>(unwrap(attr));
}

MlirTypeID sitsPackedEncodingAttrGetTypeID(void) {
  return wrap(TypeID::get<PackedEncodingAttr>());
}

MlirAttribute sitsPackedEncodingAttrGet(MlirContext ctx, MlirType storage,
                                        int64_t axis) {
  auto intType = dyn_cast<IntegerType>(unwrap(storage));
  // Check with the attribute's own verifier, discarding its diagnostic: the
  // caller turns the null result into its own error.
  auto silent = [] { return InFlightDiagnostic(); };
  if (!intType || failed(PackedEncodingAttr::verify(silent, intType, axis)))
    return MlirAttribute{nullptr};
  return wrap(PackedEncodingAttr::get(unwrap(ctx), intType, axis));
}

MlirType sitsPackedEncodingAttrGetStorage(MlirAttribute attr) {
  return wrap(cast<PackedEncodingAttr>(unwrap(attr)).getStorage());
}

int64_t sitsPackedEncodingAttrGetAxis(MlirAttribute attr) {
  return cast<PackedEncodingAttr>(unwrap(attr)).getAxis();
}
