//===- Pipelines.h - Named SITS pass pipelines -----------------*- C++ -*-===//
//
// Every pipeline the Python compiler runs is a named pipeline here, so that
// `sits-opt --pass-pipeline='builtin.module(sits-cpu-codegen)'` reproduces
// exactly what `sits_mlir.compile` did.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_PIPELINES_PIPELINES_H
#define SITS_PASSES_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

namespace mlir::sits {

struct CpuCodegenPipelineOptions
    : public PassPipelineOptions<CpuCodegenPipelineOptions> {
  Option<int64_t> numThreads{
      *this, "num-threads",
      llvm::cl::desc("Threads to tile for (0: the target's core count; 1: "
                     "single-threaded code without the async runtime)"),
      llvm::cl::init(0)};
  Option<bool> distribute{
      *this, "distribute",
      llvm::cl::desc("Tile fusion groups for multi-threaded execution"),
      llvm::cl::init(true)};
  Option<bool> vectorize{*this, "vectorize",
                         llvm::cl::desc("Vectorize tiled linalg ops"),
                         llvm::cl::init(true)};
  Option<bool> im2col{
      *this, "im2col",
      llvm::cl::desc("Compute 2-D convolutions as im2col + contraction"),
      llvm::cl::init(true)};
};

/// linalg on tensors -> LLVM dialect for the CPU named by the module's
/// `sits.target` (the host by default). Public functions become entry points
/// `void sits_entry_<name>(void **args)` taking memref descriptors of the
/// inputs followed by the outputs, which are written in place.
void buildCpuCodegenPassPipeline(OpPassManager &pm,
                                 const CpuCodegenPipelineOptions &options);

/// Graph-level SITS passes, independent of the target's instruction set.
void buildSitsGraphPassPipeline(OpPassManager &pm);

/// A model in SITS + upstream dialects on tensors -> LLVM dialect for a CPU:
/// the graph pipeline, SITS to linalg, then buildCpuCodegenPassPipeline.
void buildCpuPassPipeline(OpPassManager &pm,
                          const CpuCodegenPipelineOptions &options);

struct GpuCodegenPipelineOptions
    : public PassPipelineOptions<GpuCodegenPipelineOptions> {
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Known target to compile for (h100, h200, a100, v100): "
                     "its chip and PTX features"),
      llvm::cl::init("h100")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Device code format: 'isa' (PTX), 'bin' (cubin) or "
                     "'fatbin' (cubin and PTX; 'bin' and 'fatbin' run "
                     "ptxas, and fatbinary, from PATH)"),
      llvm::cl::init("isa")};
  Option<int64_t> optLevel{*this, "opt-level",
                           llvm::cl::desc("Device code optimization level"),
                           llvm::cl::init(3)};
  Option<int64_t> maxThreads{*this, "max-threads",
                             llvm::cl::desc("Most threads per block"),
                             llvm::cl::init(256)};
};

/// linalg on tensors -> kernels for the NVIDIA GPU `options.target`, in a
/// module the host can call: public functions become entry points
/// `void sits_entry_<name>(void **args)` (memref descriptors of device
/// buffers), the kernels a gpu.binary, launched through MLIR's GPU runtime
/// ABI (mgpu*). See passes/Codegen/GPU/README.md.
void buildGpuCodegenPassPipeline(OpPassManager &pm,
                                 const GpuCodegenPipelineOptions &options);

/// A model in SITS + upstream dialects on tensors -> the same, through the
/// graph pipeline and SITS to linalg.
void buildGpuPassPipeline(OpPassManager &pm,
                          const GpuCodegenPipelineOptions &options);

/// Registers the named pipelines with the global registry.
void registerSitsPipelines();

} // namespace mlir::sits

#endif // SITS_PASSES_PIPELINES_PIPELINES_H
