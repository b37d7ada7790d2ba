//===- Sits.cpp - C API of the SITS dialect and targets -------------------===//

#include "dialects/CAPI/Sits.h"

#include "dialects/Sits/IR/SitsOps.h"
#include "dialects/Target/KnownTargets.h"

#include "mlir/CAPI/IR.h"
#include "mlir/CAPI/Registration.h"
#include "mlir/CAPI/Support.h"
#include "llvm/Config/llvm-config.h"

using namespace mlir;
using namespace mlir::sits;

MLIR_DEFINE_CAPI_DIALECT_REGISTRATION(Sits, sits, mlir::sits::SitsDialect)

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
#define SITS_TARGET_STRING(NAME, PY) info.NAME = wrapRef(t.NAME);
#define SITS_TARGET_INT(NAME, PY) info.NAME = t.NAME;
#define SITS_TARGET_REAL(NAME, PY) info.NAME = t.NAME;
#define SITS_TARGET_PEAK(NAME, DTYPE) info.NAME = t.NAME;
#define SITS_TARGET_ALIASES(NAME, PY) info.numAliases = t.NAME.size();
#define SITS_TARGET_VENDOR(NAME, PY)                                           \
  info.NAME = wrapRef(target::stringifyVendor(t.NAME));
#define SITS_TARGET_FP8(NAME, PY)                                              \
  info.fp8E4M3 = t.NAME & target::kFp8E4M3;                                    \
  info.fp8E5M2 = t.NAME & target::kFp8E5M2;
#include "dialects/Target/TargetFields.def"
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
