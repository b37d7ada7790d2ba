/*===- Sits.h - C API of the SITS dialect, passes and targets -----*- C -*-===*\
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

/// Registers every SITS pass (and pipeline) with the global pass registry so
/// that textual pipelines can name them. Idempotent.
MLIR_CAPI_EXPORTED void sitsRegisterPasses(void);

/// Version strings of SITS and of the LLVM it was built against.
MLIR_CAPI_EXPORTED MlirStringRef sitsGetVersion(void);
MLIR_CAPI_EXPORTED MlirStringRef sitsGetLLVMVersion(void);

//===----------------------------------------------------------------------===//
// Known-target table
//===----------------------------------------------------------------------===//

typedef struct SitsTargetInfo {
  MlirStringRef name;
  MlirStringRef vendor;
  MlirStringRef architecture;
  MlirStringRef triple;
  MlirStringRef chip;
  MlirStringRef features;
  intptr_t numAliases;
  int64_t computeUnits;
  int64_t simdWidth;
  int64_t vectorRegisters;
  MlirStringRef isaLevel;
  double memoryGB;
  double memoryBandwidthGBs;
  double lastLevelCacheMB;
  double sharedMemoryPerUnitKB;
  double peakFp32Tflops;
  double peakFp16Tflops;
  double peakBf16Tflops;
  double peakFp8Tflops;
  double peakInt8Tops;
  bool fp8E4M3;
  bool fp8E5M2;
  double interconnectGBs;
  int64_t minPtxVersion;
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
MLIR_CAPI_EXPORTED MlirType sitsPackedEncodingAttrGetStorage(MlirAttribute attr);
MLIR_CAPI_EXPORTED int64_t sitsPackedEncodingAttrGetAxis(MlirAttribute attr);

#ifdef __cplusplus
}
#endif

#endif // SITS_DIALECTS_CAPI_SITS_H
