/*===- Sits.h - C API of the SITS dialect and targets ------------*- C -*-===*\
|*                                                                            *|
|* The Python bindings (built with RTTI) reach the SITS C++ code (built       *|
|* without) only through these functions.                                     *|
\*===----------------------------------------------------------------------===*/

#ifndef SITS_DIALECTS_CAPI_SITS_H
#define SITS_DIALECTS_CAPI_SITS_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

MLIR_DECLARE_CAPI_DIALECT_REGISTRATION(Sits, sits);

/// Version strings of SITS and of the LLVM it was built against.
MLIR_CAPI_EXPORTED MlirStringRef sitsGetVersion(void);
MLIR_CAPI_EXPORTED MlirStringRef sitsGetLLVMVersion(void);

//===----------------------------------------------------------------------===//
// Known-target table
//===----------------------------------------------------------------------===//

/// A table entry (fields: dialects/Target/TargetFields.def). The vendor is
/// its name ("nvidia", "amd", "cpu"); aliases are read one at a time with
/// sitsGetKnownTargetAlias.
typedef struct SitsTargetInfo {
#define SITS_TARGET_STRING(NAME, PY) MlirStringRef NAME;
#define SITS_TARGET_INT(NAME, PY) int64_t NAME;
#define SITS_TARGET_REAL(NAME, PY) double NAME;
#define SITS_TARGET_PEAK(NAME, DTYPE) double NAME;
#define SITS_TARGET_ALIASES(NAME, PY) intptr_t numAliases;
#define SITS_TARGET_VENDOR(NAME, PY) MlirStringRef NAME;
#define SITS_TARGET_FP8(NAME, PY) bool fp8E4M3, fp8E5M2;
#include "dialects/Target/TargetFields.def"
} SitsTargetInfo;

MLIR_CAPI_EXPORTED intptr_t sitsGetNumKnownTargets(void);
/// The `pos`-th entry of the table, 0 <= pos < sitsGetNumKnownTargets().
MLIR_CAPI_EXPORTED SitsTargetInfo sitsGetKnownTarget(intptr_t pos);
MLIR_CAPI_EXPORTED MlirStringRef sitsGetKnownTargetAlias(intptr_t pos,
                                                         intptr_t alias);
/// Index of the target named `name` (or an alias of it), or -1.
MLIR_CAPI_EXPORTED intptr_t sitsLookupTarget(MlirStringRef name);

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

MLIR_CAPI_EXPORTED bool sitsAttributeIsATarget(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirTypeID sitsTargetAttrGetTypeID(void);
/// Returns a null attribute when `name` is not a known target.
MLIR_CAPI_EXPORTED MlirAttribute sitsTargetAttrGet(MlirContext ctx,
                                                   MlirStringRef name);
MLIR_CAPI_EXPORTED MlirStringRef sitsTargetAttrGetName(MlirAttribute attr);

MLIR_CAPI_EXPORTED bool sitsAttributeIsAPackedEncoding(MlirAttribute attr);
MLIR_CAPI_EXPORTED MlirTypeID sitsPackedEncodingAttrGetTypeID(void);
/// Returns a null attribute when `storage` is not i8, i16 or i32 or `axis`
/// is negative.
MLIR_CAPI_EXPORTED MlirAttribute sitsPackedEncodingAttrGet(MlirContext ctx,
                                                           MlirType storage,
                                                           int64_t axis);
MLIR_CAPI_EXPORTED MlirType
sitsPackedEncodingAttrGetStorage(MlirAttribute attr);
MLIR_CAPI_EXPORTED int64_t sitsPackedEncodingAttrGetAxis(MlirAttribute attr);

#ifdef __cplusplus
}
#endif

#endif // SITS_DIALECTS_CAPI_SITS_H
