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
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Known CPU target to compile for (x86-64-v3, x86-64-v4, "
                     "aarch64, cpu, ...), set as the module's sits.target "
                     "(default: the module's sits.target, else the host)"),
      llvm::cl::init("")};
  Option<int64_t> numThreads{
      *this, "num-threads",
      llvm::cl::desc("Threads to tile for (0: the target's core count; 1: "
                     "single-threaded code without parallel loops)"),
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
  Option<bool> outlineDispatches{
      *this, "outline-dispatches",
      llvm::cl::desc("Outline fusion groups into functions before tiling, "
                     "one per distinct group"),
      llvm::cl::init(true)};
  Option<bool> outlineLayers{
      *this, "outline-layers",
      llvm::cl::desc("Outline a model's repeated layers into one function "
                     "after pruning (sits-cpu-pipeline; see "
                     "sits-outline-layers)"),
      llvm::cl::init(true)};
  Option<bool> integerDot{
      *this, "integer-dot",
      llvm::cl::desc(
          "Multiply INT8/INT4 weights by INT8 activations, "
          "quantized per row and group at run time, in integer "
          "dot products (sits-cpu-pipeline; sits-convert-to-linalg's "
          "integer-dot)"),
      llvm::cl::init(true)};
  Option<bool> fuseSiblingMatmuls{
      *this, "fuse-sibling-matmuls",
      llvm::cl::desc("Join matmuls of one input by constant weights (Q/K/V, "
                     "gate/up) into one, except with profile=memory "
                     "(sits-cpu-pipeline; see sits-fuse-sibling-matmuls)"),
      llvm::cl::init(true)};
  Option<bool> pagedAttentionKernel{
      *this, "paged-attention-kernel",
      llvm::cl::desc("Compute f32 paged attention with the runtime's kernel, "
                     "reading K/V in place in the pool (sits-cpu-pipeline; "
                     "sits-convert-to-linalg's paged-attention-kernel)"),
      llvm::cl::init(true)};
};

/// Options of the graph-level passes. The hardware facts they need come from
/// the module's `sits.target` (the whole-model pipelines set it from their
/// `target`), so there is no `target` option here to clash with codegen's.
struct SitsGraphPipelineOptions
    : public PassPipelineOptions<SitsGraphPipelineOptions> {
  Option<bool> prune{
      *this, "prune",
      llvm::cl::desc("Run sits-prune: fold weight-only subgraphs, remove "
                     "identities and dead code, prune channels and heads "
                     "that contribute nothing (outputs unchanged)"),
      llvm::cl::init(true)};
  Option<double> pruneThreshold{
      *this, "prune-threshold",
      llvm::cl::desc("Also prune channels and heads whose weights are all at "
                     "most this in magnitude (0: exact pruning only; changes "
                     "outputs when positive)"),
      llvm::cl::init(0.0)};
  Option<std::string> precision{
      *this, "precision",
      llvm::cl::desc("Weight precision of constant-weight matmuls: fp32 "
                     "(unchanged), int8, int4, fp8 or auto (per block, "
                     "within error-budget); see sits-mixed-precision"),
      llvm::cl::init("fp32")};
  Option<double> errorBudget{
      *this, "error-budget",
      llvm::cl::desc("precision=auto: estimated relative RMS output error "
                     "allowed per weight"),
      llvm::cl::init(0.01)};
  Option<int64_t> groupSize{
      *this, "group-size",
      llvm::cl::desc("INT4 quantization group along K (32, 64 or 128)"),
      llvm::cl::init(64)};
  Option<std::string> profile{
      *this, "profile",
      llvm::cl::desc("Scheduling goal of sits-reorder: 'latency' (overlap "
                     "memory- and compute-bound groups within the original "
                     "peak memory) or 'memory' (lowest peak live memory)"),
      llvm::cl::init("latency")};
  Option<std::string> scheduleFile{
      *this, "schedule-file",
      llvm::cl::desc("Write the schedule sits-reorder chose to this file "
                     "(see passes/Analysis/ScheduleFormat.md)"),
      llvm::cl::init("")};
  Option<double> peakGflops{
      *this, "peak-gflops",
      llvm::cl::desc("sits-reorder: the target's fp32 peak in GFLOP/s, "
                     "overriding the table (0: the table's; the host CPU's "
                     "is measured by sits_mlir.targets.measure_host)"),
      llvm::cl::init(0.0)};
  Option<double> bandwidthGBs{
      *this, "bandwidth-gbs",
      llvm::cl::desc("sits-reorder: the target's memory bandwidth in GB/s, "
                     "overriding the table (0: the table's)"),
      llvm::cl::init(0.0)};
};

/// linalg on tensors -> LLVM dialect for the CPU `options.target`, else the
/// one the module's `sits.target` names (the host by default). Public
/// functions become entry points `void sits_entry_<name>(void **args)`
/// taking memref descriptors of the inputs followed by the outputs, which
/// are written in place.
void buildCpuCodegenPassPipeline(OpPassManager &pm,
                                 const CpuCodegenPipelineOptions &options);

/// Graph-level SITS passes, independent of the target's instruction set.
void buildSitsGraphPassPipeline(OpPassManager &pm,
                                const SitsGraphPipelineOptions &options);

/// Options of a whole CPU compile: the graph passes' and codegen's.
struct CpuPipelineOptions : public CpuCodegenPipelineOptions,
                            public SitsGraphPipelineOptions {};

/// A model in SITS + upstream dialects on tensors -> LLVM dialect for a CPU:
/// the graph pipeline, SITS to linalg, then buildCpuCodegenPassPipeline.
void buildCpuPassPipeline(OpPassManager &pm, const CpuPipelineOptions &options);

struct GpuCodegenPipelineOptions
    : public PassPipelineOptions<GpuCodegenPipelineOptions> {
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("Known GPU target to compile for (h100, h200, a100, "
                     "v100, mi300x): its vendor, chip and features"),
      llvm::cl::init("h100")};
  Option<std::string> format{
      *this, "format",
      llvm::cl::desc("Device code format (default: 'isa' for NVIDIA, 'llvm' "
                     "for AMD): 'llvm' (LLVM IR; for AMD targets without "
                     "needing the AMDGPU back end), 'isa' (PTX / AMDGPU "
                     "assembly), 'bin' (cubin / HSA code object) or 'fatbin' "
                     "(NVIDIA: cubin and PTX; 'bin' and 'fatbin' run ptxas, "
                     "and fatbinary, from PATH)"),
      llvm::cl::init("")};
  Option<int64_t> optLevel{*this, "opt-level",
                           llvm::cl::desc("Device code optimization level"),
                           llvm::cl::init(3)};
  Option<int64_t> maxThreads{*this, "max-threads",
                             llvm::cl::desc("Most threads per block"),
                             llvm::cl::init(256)};
  Option<bool> tf32{
      *this, "tf32",
      llvm::cl::desc("Run f32 matmuls on tensor cores in TF32 (NVIDIA sm_80+): "
                     "faster, but operands keep 10 of their 23 mantissa bits"),
      llvm::cl::init(false)};
};

/// linalg on tensors -> kernels for the GPU `options.target` (NVIDIA through
/// NVVM, AMD through ROCDL), in a module the host can call: public functions
/// become entry points `void sits_entry_<name>(void **args)` (memref
/// descriptors of device buffers), the kernels a gpu.binary, launched
/// through MLIR's GPU runtime ABI (mgpu*). See passes/Codegen/GPU/README.md.
void buildGpuCodegenPassPipeline(OpPassManager &pm,
                                 const GpuCodegenPipelineOptions &options);

/// Options of a whole GPU compile: the graph passes' and codegen's.
struct GpuPipelineOptions : public GpuCodegenPipelineOptions,
                            public SitsGraphPipelineOptions {};

/// A model in SITS + upstream dialects on tensors -> the same, through the
/// graph pipeline and SITS to linalg.
void buildGpuPassPipeline(OpPassManager &pm, const GpuPipelineOptions &options);

/// Registers the named pipelines with the global registry.
void registerSitsPipelines();

} // namespace mlir::sits

#endif // SITS_PASSES_PIPELINES_PIPELINES_H
