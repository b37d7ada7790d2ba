//===- InitAllPasses.h - Registration of every SITS pass --------*- C++ -*-===//
//
// One list of the SITS pass families and named pipelines, for sits-opt and
// the C API alike (the analogue of upstream's mlir/InitAllPasses.h).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_INITALLPASSES_H
#define SITS_PASSES_INITALLPASSES_H

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/GPU/Passes.h"
#include "passes/Conversion/Passes.h"
#include "passes/Pipelines/Pipelines.h"
#include "passes/Transforms/Passes.h"

namespace mlir::sits {

/// Registers every SITS pass and named pipeline with the global registry.
inline void registerAllSitsPasses() {
  registerSitsPasses();
  registerSitsConversionPasses();
  cpu::registerSitsCpuPasses();
  gpu::registerSitsGpuPasses();
  registerSitsPipelines();
}

} // namespace mlir::sits

#endif // SITS_PASSES_INITALLPASSES_H
