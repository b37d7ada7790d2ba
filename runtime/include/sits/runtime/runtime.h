//===- runtime.h - The SITS runtime core, everything in one include
//--------===//
//
//   #include "sits/runtime/runtime.h"
//
// pulls in the artifact format (artifact.h), loading and running compiled
// models (module.h), buffers (buffer.h), devices (device.h), the host CPU
// (host.h) and the thread pool (thread_pool.h). Link `SitsRuntime`.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_RUNTIME_H
#define SITS_RUNTIME_RUNTIME_H

#include "sits/runtime/artifact.h"
#include "sits/runtime/buffer.h"
#include "sits/runtime/device.h"
#include "sits/runtime/dtype.h"
#include "sits/runtime/host.h"
#include "sits/runtime/module.h"
#include "sits/runtime/status.h"
#include "sits/runtime/thread_pool.h"

namespace sits::runtime {

/// The SITS version this runtime belongs to ("0.1.0").
SITS_RUNTIME_API const char *sitsVersion();
/// The LLVM version SITS compiles with ("22.1.8"); the writer's default for
/// a manifest's `llvm_version`.
SITS_RUNTIME_API const char *llvmVersion();

} // namespace sits::runtime

#endif // SITS_RUNTIME_RUNTIME_H
