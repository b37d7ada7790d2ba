//===- Pipelines.cpp - Named SITS pass pipelines --------------------------===//

#include "passes/Pipelines/Pipelines.h"

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/GPU/Passes.h"
#include "passes/Conversion/Passes.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;
using namespace mlir::sits;

/// Tasks per thread for one distributed loop (sits-cpu-chunk-parallel-loops):
/// enough that a thread that finishes early takes another chunk, few enough
/// that a decode step's small loops are not mostly task bookkeeping.
static constexpr int64_t kChunksPerThread = 2;

static void addCleanup(OpPassManager &pm) {
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

/// Names the module's target when the pipeline was given one: the passes
/// read it from `sits.target`, so the pipeline string alone says what the
/// code is for.
static void addSetTarget(OpPassManager &pm, StringRef target) {
  if (target.empty())
    return;
  SitsSetTargetOptions set;
  set.target = target.str();
  pm.addPass(createSitsSetTarget(set));
}

/// Upstream's buffer-deallocation-pipeline, plus what keeps it linear in
/// the depth of the model and frees each buffer after its last use:
/// ownership-based deallocation frees every activation of @main in one op
/// at its end.
static void addDeallocation(OpPassManager &pm) {
  memref::ExpandReallocPassOptions expandRealloc;
  expandRealloc.emitDeallocs = false;
  pm.addPass(memref::createExpandReallocPass(expandRealloc));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(bufferization::createOwnershipBasedBufferDeallocationPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSitsSplitFreshDeallocs());
  pm.addPass(bufferization::createBufferDeallocationSimplificationPass());
  pm.addPass(bufferization::createLowerDeallocationsPass());
  // A function returning a view of its argument (a kernel's run-time
  // reshape) gets a clone: a fresh buffer and a copy.
  pm.addPass(createConvertBufferizationToMemRefPass());
  addCleanup(pm);
  pm.addPass(createSitsDeallocAfterLastUse());
}

static void addCpuCodegenPasses(OpPassManager &pm,
                                const CpuCodegenPipelineOptions &options);

void mlir::sits::buildCpuCodegenPassPipeline(
    OpPassManager &pm, const CpuCodegenPipelineOptions &options) {
  addSetTarget(pm, options.target);
  addCpuCodegenPasses(pm, options);
}

static void addCpuCodegenPasses(OpPassManager &pm,
                                const CpuCodegenPipelineOptions &options) {
  // Elementwise arith/math on tensors become linalg.generic, and chains of
  // them fuse into one generic each, before tiling decides fusion groups:
  // tiling fuses producers into consumers but not siblings into one loop.
  // Nothing fuses into a contraction's operand: that would recompute it
  // once per output column.
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createSitsFoldEmptyTensors());
  // Every extent as arithmetic on the arguments' extents, now that each op
  // can say how its result's extents follow from its operands': a shape
  // function folds to that arithmetic and DCE drops the model from it.
  memref::ResolveRankedShapeTypeResultDimsPassOptions resolve;
  resolve.errorOnPatternIterationLimit = false;
  pm.addPass(memref::createResolveRankedShapeTypeResultDimsPass(resolve));
  addCleanup(pm);
  // Constant weights are laid out in register-block panels first, so that
  // the reshapes this introduces propagate through the epilogues during
  // elementwise fusion.
  pm.addPass(cpu::createSitsCpuConvToGemm());
  pm.addPass(cpu::createSitsCpuPackWeights());
  pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuFuseElementwise());
  addCleanup(pm);
  // Each fusion group becomes a function of its own, equal ones one
  // function: tiling, vectorization, bufferization and LLVM then see every
  // layer's groups once.
  if (options.outlineDispatches)
    pm.addPass(cpu::createSitsCpuOutlineDispatches());

  // Tiling works on tensors, where fusion is a matter of slicing values;
  // after bufferization it would need alias analysis.
  cpu::SitsCpuTileAndFuseOptions tiling;
  tiling.numThreads = options.numThreads;
  tiling.distribute = options.distribute;
  tiling.im2col = options.im2col;
  pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuTileAndFuse(tiling));
  addCleanup(pm);
  if (options.vectorize) {
    pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuVectorize());
    addCleanup(pm);
  }
  // exp, erf, tanh, ... as polynomials in the vectors they already have,
  // not one libm call per lane.
  pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuApproximateMath());

  // Bufferize with results as caller-provided out-params: the runtime owns
  // every output buffer and the compiled code writes into it in place.
  // Destinations that CSE merged across layers are split again first, or
  // the analysis costs grow with the square of the depth.
  pm.addPass(createSitsSplitEmptyTensors());
  pm.addPass(createSitsReadOnlyInputs());
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  pm.addPass(cpu::createSitsCpuDropUpdatedResults());
  pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuDistinctResults());
  pm.addPass(cpu::createSitsCpuResultsToOutParams());
  addCleanup(pm);
  // Weights leave the code for their own artifact section, passed in as a
  // leading buffer argument: code size and compile time follow the graph.
  pm.addPass(createSitsExternalizeWeights());
  // Each loop nest becomes a function of its own, equal ones one function:
  // what follows, LLVM included, then sees every layer's kernels once.
  pm.addPass(createSitsOutlineKernels());
  addDeallocation(pm);
  // Ops a runtime kernel computes (INT8 dot products, paged attention)
  // become its calls.
  pm.addPass(cpu::createSitsCpuLowerUkernels());

  // Vectors down to what LLVM selects well; remaining linalg ops (dynamic
  // shapes, large reductions) become loops LLVM can still vectorize.
  pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuLowerVectors());
  pm.addNestedPass<func::FuncOp>(createConvertVectorToSCFPass(
      VectorTransferToSCFOptions().enableFullUnroll()));
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  // LLVM has no fp8/fp4: their conversions become integer arithmetic.
  pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuExpandSmallFloats());
  addCleanup(pm);

  // Tiles run on the runtime's thread pool: a loop's iterations are first
  // grouped into a few chunks per thread, then each loop becomes one
  // fork-join call of the runtime, a chunk per iteration.
  if (options.numThreads == 1) {
    pm.addNestedPass<func::FuncOp>(createForallToForLoopPass());
  } else {
    pm.addNestedPass<func::FuncOp>(createForallToParallelLoopPass());
    pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuChunkParallelLoops(
        {options.numThreads, kChunksPerThread}));
    pm.addPass(cpu::createSitsCpuParallelToRuntime());
    addCleanup(pm);
  }

  // To the LLVM dialect. Strided metadata and affine maps are expanded
  // first so memref lowering only sees simple descriptors.
  pm.addPass(cpu::createSitsCpuMarkEntryPoints());
  pm.addPass(createSitsResolveExpandShapes());
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  pm.addPass(cpu::createSitsCpuBoolMemory());
  // Buffers come from the runtime's allocation functions, which keep freed
  // ones for the next call (runtime/src/core/buffer_cache.cpp).
  FinalizeMemRefToLLVMConversionPassOptions memrefToLLVM;
  memrefToLLVM.useGenericFunctions = true;
  pm.addPass(createFinalizeMemRefToLLVMConversionPass(memrefToLLVM));
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  pm.addPass(createUBToLLVMConversionPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(cpu::createSitsCpuPackEntryPoints());
  // Upstream names string constants from a process-wide counter; the code
  // must depend on the model only.
  pm.addPass(cpu::createSitsCpuNumberStrings());
  addCleanup(pm);
}

/// The graph passes, `afterPrune` run once pruning has decided what
/// remains.
static void
addSitsGraphPasses(OpPassManager &pm, const SitsGraphPipelineOptions &options,
                   llvm::function_ref<void(OpPassManager &)> afterPrune) {
  // Pruning first: every later decision (fusion, precision per block,
  // schedule) is then made for the weights and ops that remain.
  if (options.prune) {
    SitsPruneOptions prune;
    prune.threshold = options.pruneThreshold;
    pm.addPass(createSitsPrune(prune));
  }
  afterPrune(pm);
  // Canonicalization first folds identity activations and quantize/
  // dequantize round trips, so that epilogue fusion sees real producers.
  addCleanup(pm);
  pm.addPass(createSitsFuseEpilogue());
  addCleanup(pm);
  // Weights are quantized once the graph is final, so that every weight
  // that survives gets exactly one precision decision.
  SitsMixedPrecisionOptions precision;
  precision.precision = options.precision;
  precision.errorBudget = options.errorBudget;
  precision.groupSize = options.groupSize;
  pm.addPass(createSitsMixedPrecision(precision));
  addCleanup(pm);
  // Scheduling last: it orders the graph that will run, costing each weight
  // at its final precision, and records the precision decisions with it.
  // Nothing after it reorders ops.
  SitsReorderOptions reorder;
  reorder.profile = options.profile;
  reorder.scheduleFile = options.scheduleFile;
  reorder.peakGflops = options.peakGflops;
  reorder.bandwidthGBs = options.bandwidthGBs;
  pm.addPass(createSitsReorder(reorder));
}

void mlir::sits::buildSitsGraphPassPipeline(
    OpPassManager &pm, const SitsGraphPipelineOptions &options) {
  addSitsGraphPasses(pm, options, [](OpPassManager &) {});
}

void mlir::sits::buildCpuPassPipeline(OpPassManager &pm,
                                      const CpuPipelineOptions &options) {
  addSetTarget(pm, options.target);
  // A transformer's layers are one function from here on: the passes
  // below see each distinct layer once. Pruning sees every layer's
  // weights first, as it decides per head and channel from their values.
  addSitsGraphPasses(pm, options, [&](OpPassManager &nested) {
    // Q/K/V and gate/up each become one matmul by joined weights while
    // the weights are still each layer's own constants. Not when the
    // schedule minimizes memory: the joined result keeps every sibling's
    // output alive at once, where the reorderer could have finished one
    // branch before starting the next.
    // Float weights are joined where they are packed, without a copy.
    if (options.fuseSiblingMatmuls && options.profile != "memory") {
      SitsFuseSiblingMatmulsOptions fuse;
      fuse.deferJoin = options.precision == "fp32";
      nested.addPass(createSitsFuseSiblingMatmuls(fuse));
    }
    // Per-block precision is chosen for one weight's data, not for every
    // call's: with it, layers stay inline.
    if (options.outlineLayers && options.precision != "auto")
      nested.addPass(createSitsOutlineLayers());
  });
  // The CPU kernels stream the rhs along its rows; constant weights used
  // transposed are stored transposed once, at compile time.
  pm.addPass(createSitsFoldWeightTransposes());
  SitsConvertToLinalgOptions toLinalg;
  toLinalg.integerDot = options.integerDot;
  toLinalg.pagedAttentionKernel = options.pagedAttentionKernel;
  pm.addPass(createSitsConvertToLinalg(toLinalg));
  addCleanup(pm);
  addCpuCodegenPasses(pm, options);
}

void mlir::sits::buildGpuCodegenPassPipeline(
    OpPassManager &pm, const GpuCodegenPipelineOptions &options) {
  // Unknown names get H100 defaults; the Python driver only passes known
  // GPU targets. The vendor picks the device lowering: NVVM or ROCDL.
  const target::TargetInfo *info = target::lookupTarget(options.target);
  if (!info || info->vendor == target::Vendor::Cpu)
    info = target::lookupTarget("h100");
  bool amd = info->vendor == target::Vendor::Amd;

  // As on the CPU: elementwise arith/math on tensors become linalg ops and
  // chains of them fuse before fusion groups are formed. Convolutions
  // become a gather and a GEMM first so that their epilogues fuse into the
  // GEMM like a matmul's, and every copy the model makes becomes a linalg
  // op, so that it runs in a kernel (the host never touches device memory).
  pm.addNestedPass<func::FuncOp>(createConvertElementwiseToLinalgPass());
  pm.addPass(createSitsFoldEmptyTensors());
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuConvToGemm());
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuMaterializeCopies());
  pm.addNestedPass<func::FuncOp>(cpu::createSitsCpuFuseElementwise());
  addCleanup(pm);

  // Blocks, threads and reduction steps, on tensors where fusion is a matter
  // of slicing values. Staging operands in shared memory comes right after
  // tiling, while each operand is still a slice of its block's tile (no
  // canonicalization has merged the slices yet).
  sits::gpu::SitsGpuTileAndFuseOptions tiling;
  tiling.maxThreads = options.maxThreads;
  tiling.tensorCores = sits::gpu::hasMmaSync(*info);
  tiling.tf32 = options.tf32;
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuTileAndFuse(tiling));
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuPromoteOperands());
  addCleanup(pm);
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuVectorize());
  addCleanup(pm);

  // Bufferize with results as caller-provided out-params (device buffers
  // the runtime owns) and the weights as a leading device buffer, as on the
  // CPU. Workgroup tensors become workgroup buffers.
  pm.addPass(createSitsReadOnlyInputs());
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // A paged KV pool the model writes in place is the caller's device
  // buffer: its result is dropped, not copied into an out-param.
  pm.addPass(cpu::createSitsCpuDropUpdatedResults());
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  addCleanup(pm);
  // Copies of a buffer onto itself (in-place inserts) fold once CSE has
  // merged their equal views.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createSitsExternalizeWeights());

  // Kernels: block loops become launches, thread loops SPMD code, staged
  // copies are shared among a block's threads, and what is left on the
  // host is launches and device buffers. First, f16 contractions tiled
  // over warps go to tensor cores (NVIDIA sm_80+): upstream's vector-to-GPU
  // conversion splits each warp's tile into mma.sync fragments while the
  // warp's loop is still visible.
  if (sits::gpu::hasMmaSync(*info)) {
    sits::gpu::SitsGpuMmaSyncOptions mma;
    mma.tf32 = options.tf32;
    pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuMmaSync(mma));
  }
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuMapToLaunch());
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuDistributeCopies());
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuDeviceBuffers());
  addCleanup(pm);
  // Vectors down to FMAs, loads and stores; what was not vectorized
  // becomes loops.
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuLowerVectors());
  pm.addNestedPass<func::FuncOp>(createConvertVectorToSCFPass(
      VectorTransferToSCFOptions().enableFullUnroll()));
  pm.addNestedPass<func::FuncOp>(sits::gpu::createSitsGpuLowerVectors());
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  addCleanup(pm);

  // Kernels into a gpu.module; host operations on one stream, in order.
  // Constants (hoisted to the host function by canonicalization: a launch
  // is not isolated from above) move back into the kernels first; passed as
  // kernel parameters they would hide loop bounds and vector constants from
  // the NVPTX back end.
  pm.addNestedPass<func::FuncOp>(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(sits::gpu::createSitsGpuMergeKernelModules());
  pm.addNestedPass<func::FuncOp>(createGpuAsyncRegionPass());
  pm.addPass(cpu::createSitsCpuMarkEntryPoints());

  // To the LLVM and NVVM (ROCDL) dialects, as upstream's
  // gpu-lower-to-nvvm-pipeline orders it: common lowerings on host and
  // device code, then the GPU module with the vendor's conventions (address
  // spaces, libdevice or the ROCm device libraries for math), then the
  // host's GPU runtime calls, which are the same for both vendors.
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createSitsResolveExpandShapes());
  pm.addPass(memref::createExpandStridedMetadataPass());
  if (amd) {
    GpuROCDLAttachTargetOptions rocdl;
    rocdl.triple = info->triple.str();
    rocdl.chip = info->chip.str();
    rocdl.features = info->features.str();
    rocdl.optLevel = unsigned(options.optLevel);
    rocdl.wave64Flag = info->simdWidth == 64;
    // Code object v5: what every ROCm release that supports gfx942 loads
    // (upstream's default, v6, needs a recent one).
    rocdl.abiVersion = "500";
    pm.addPass(createGpuROCDLAttachTarget(rocdl));
  } else {
    GpuNVVMAttachTargetOptions nvvm;
    nvvm.chip = info->chip.str();
    nvvm.features = info->features.str();
    nvvm.optLevel = unsigned(options.optLevel);
    pm.addPass(createGpuNVVMAttachTarget(nvvm));
  }
  pm.addPass(createLowerAffinePass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertIndexToLLVMPass());
  addCleanup(pm);
  // Math with a ROCm device library function becomes a call to it first:
  // convert-gpu-to-rocdl also takes the math dialect's generic lowering to
  // LLVM intrinsics, and which one wins depends on the order dialects were
  // loaded in (llvm.tanh has no AMDGPU instruction).
  if (amd) {
    ConvertMathToROCDLOptions math;
    math.chipset = info->chip.str();
    pm.addPass(createConvertMathToROCDL(math));
  }
  // Canonicalization folds some 1-D vector ops back into n-D ones, which
  // the NVVM and ROCDL lowerings do not take: lower them once more right
  // before.
  pm.addNestedPass<mlir::gpu::GPUModuleOp>(
      sits::gpu::createSitsGpuLowerVectors());
  pm.addNestedPass<mlir::gpu::GPUModuleOp>(
      sits::gpu::createSitsGpuBoolMemory());
  if (amd) {
    ConvertGpuOpsToROCDLOpsOptions rocdl;
    rocdl.chipset = info->chip.str();
    rocdl.runtime = mlir::gpu::amd::Runtime::HIP;
    pm.addNestedPass<mlir::gpu::GPUModuleOp>(
        createConvertGpuOpsToROCDLOps(rocdl));
    // Thread-private buffers in AMDGPU's private address space.
    pm.addNestedPass<mlir::gpu::GPUModuleOp>(
        sits::gpu::createSitsGpuAllocaAddressSpace());
  } else {
    pm.addNestedPass<mlir::gpu::GPUModuleOp>(createConvertNVGPUToNVVMPass());
    pm.addNestedPass<mlir::gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps());
  }
  pm.addNestedPass<mlir::gpu::GPUModuleOp>(createCanonicalizerPass());
  pm.addNestedPass<mlir::gpu::GPUModuleOp>(createCSEPass());
  pm.addNestedPass<mlir::gpu::GPUModuleOp>(
      createReconcileUnrealizedCastsPass());
  pm.addPass(createGpuToLLVMConversionPass());
  // AMD kernels stop at LLVM IR unless asked otherwise: upstream's ROCDL
  // serialization needs the AMDGPU back end, which the driver runs outside
  // MLIR (llc, ld.lld) when this build of LLVM lacks it.
  std::string format = options.format;
  if (format.empty())
    format = amd ? "llvm" : "isa";
  if (amd && format == "llvm") {
    // convert-gpu-to-rocdl leaves n-D vector.from_elements to gpu-to-llvm,
    // which converts them behind casts: fold those before translating.
    pm.addPass(createReconcileUnrealizedCastsPass());
    pm.addPass(sits::gpu::createSitsGpuSerializeToLLVMIR());
  } else {
    GpuModuleToBinaryPassOptions binary;
    binary.compilationTarget = format;
    pm.addPass(createGpuModuleToBinaryPass(binary));
  }
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(cpu::createSitsCpuPackEntryPoints());
  // Upstream names string constants from a process-wide counter; the code
  // must depend on the model only.
  pm.addPass(cpu::createSitsCpuNumberStrings());
  addCleanup(pm);
}

void mlir::sits::buildGpuPassPipeline(OpPassManager &pm,
                                      const GpuPipelineOptions &options) {
  // The graph passes cost the model for the GPU the codegen targets.
  addSetTarget(pm, options.target);
  buildSitsGraphPassPipeline(pm, options);
  // Weights used transposed are stored transposed once, as for the CPU: a
  // block's tile of B is then rows of consecutive columns.
  pm.addPass(createSitsFoldWeightTransposes());
  pm.addPass(createSitsConvertToLinalg());
  addCleanup(pm);
  buildGpuCodegenPassPipeline(pm, options);
}

void mlir::sits::registerSitsPipelines() {
  PassPipelineRegistration<SitsGraphPipelineOptions>(
      "sits-graph-pipeline", "Graph-level SITS passes (target independent)",
      buildSitsGraphPassPipeline);
  PassPipelineRegistration<CpuPipelineOptions>(
      "sits-cpu-pipeline",
      "A SITS model to the LLVM dialect for a CPU: what sits_mlir.compile "
      "runs for CPU targets ('cpu', 'x86-64-v3', ...)",
      buildCpuPassPipeline);
  PassPipelineRegistration<CpuCodegenPipelineOptions>(
      "sits-cpu-codegen",
      "linalg on tensors to the LLVM dialect for a CPU: tile, fuse, "
      "vectorize, bufferize with out-params, lower",
      buildCpuCodegenPassPipeline);
  PassPipelineRegistration<GpuPipelineOptions>(
      "sits-gpu-pipeline",
      "A SITS model to host code and GPU kernels: what sits_mlir.compile "
      "runs for GPU targets (NVIDIA kernels through NVVM, AMD kernels "
      "through ROCDL)",
      buildGpuPassPipeline);
  PassPipelineRegistration<GpuCodegenPipelineOptions>(
      "sits-gpu-codegen",
      "linalg on tensors to host code and GPU kernels: tile to blocks and "
      "threads, stage operands in shared memory, vectorize, bufferize, "
      "launch, serialize",
      buildGpuCodegenPassPipeline);
}
