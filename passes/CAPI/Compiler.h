/*===- Compiler.h - C API of SITS code emission -----------------*- C -*-===*\
|*                                                                            *|
|* Translating a module lowered to the LLVM dialect into native code, for     *|
|* the Python compiler driver.                                                *|
\*===----------------------------------------------------------------------===*/

#ifndef SITS_PASSES_CAPI_COMPILER_H
#define SITS_PASSES_CAPI_COMPILER_H

#include "mlir-c/IR.h"
#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct SitsLLVMObjectOptions {
  /// LLVM triple, CPU and feature string; an empty triple means the host.
  MlirStringRef triple;
  MlirStringRef cpu;
  MlirStringRef features;
  /// 0 to 3.
  int optLevel;
  /// Threads for sitsEmitLLVMObjects; 0 means one per core.
  int jobs;
} SitsLLVMObjectOptions;

/// Translates `module` (LLVM dialect) to LLVM IR, optimizes it and emits a
/// relocatable object, passed to `callback` (possibly in several pieces).
/// On failure, diagnostics are emitted on the module's context.
MLIR_CAPI_EXPORTED MlirLogicalResult
sitsEmitLLVMObject(MlirOperation module, SitsLLVMObjectOptions options,
                   MlirStringCallback callback, void *userData);

/// Same, as several relocatable objects emitted on `options.jobs` threads
/// (parts of the module, to be linked together): `callback` is called
/// once per object, with all of it.
MLIR_CAPI_EXPORTED MlirLogicalResult
sitsEmitLLVMObjects(MlirOperation module, SitsLLVMObjectOptions options,
                    MlirStringCallback callback, void *userData);

/// Same, producing optimized textual LLVM IR.
MLIR_CAPI_EXPORTED MlirLogicalResult
sitsEmitOptimizedLLVMIR(MlirOperation module, SitsLLVMObjectOptions options,
                        MlirStringCallback callback, void *userData);

/// Writes the weights buffer laid out by sits-externalize-weights (the
/// module's `sits.weights` attribute) to `callback`; nothing when the module
/// has no such attribute.
MLIR_CAPI_EXPORTED MlirLogicalResult sitsSerializeWeights(
    MlirOperation module, MlirStringCallback callback, void *userData);

/// Sends the final weights (packed panels) that passes produce in `context`
/// to their place in the artifact file open as `fd`, from byte `base` on;
/// sits-externalize-weights then keeps them there (`sits.weights_placed`).
/// `fd` < 0 stops that. The descriptor is duplicated.
MLIR_CAPI_EXPORTED void sitsSetWeightFile(MlirContext context, int fd,
                                          uint64_t base);

#ifdef __cplusplus
}
#endif

#endif // SITS_PASSES_CAPI_COMPILER_H
