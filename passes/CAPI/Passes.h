/*===- Passes.h - C API of the SITS passes ------------------------*- C -*-===*\
|*                                                                            *|
|* Registration of the SITS passes and named pipelines, for the Python        *|
|* bindings (the dialect's own C API is dialects/CAPI/Sits.h).                *|
\*===----------------------------------------------------------------------===*/

#ifndef SITS_PASSES_CAPI_PASSES_H
#define SITS_PASSES_CAPI_PASSES_H

#include "mlir-c/Support.h"

#ifdef __cplusplus
extern "C" {
#endif

/// Registers every SITS pass (and pipeline) with the global pass registry so
/// that textual pipelines can name them. Idempotent.
MLIR_CAPI_EXPORTED void sitsRegisterPasses(void);

#ifdef __cplusplus
}
#endif

#endif // SITS_PASSES_CAPI_PASSES_H
