//===- Passes.td - SITS GPU code generation passes ---------*- tablegen -*-===//
//
// linalg on tensors -> blocks and threads -> gpu.launch. The passes run in
// this order in sits-gpu-codegen (passes/Pipelines); README.md next to this
// file describes the kernels they produce and the artifact contract.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CODEGEN_GPU_PASSES_TD
#define SITS_PASSES_CODEGEN_GPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def SitsGpuConvToGemm : Pass<"sits-gpu-conv-to-gemm", "func::FuncOp"> {
  let summary = "2-D NCHW convolutions as a patch gather and a GEMM";
  let description = [{
    Rewrites `linalg.conv_2d_nchw_fchw` into an all-parallel gather of input
    patches `I[n, k, oh, ow] = X[n, c, oh * sh + kh * dh - ph, ow * sw +
    kw * dw - pw]` (`k = (c * KH + kh) * KW + kw`) and a contraction
    `Y[n, f, oh, ow] += F[f, k] * I[n, k, oh, ow]` with the filter viewed as
    a `[F, C * KH * KW]` matrix (a reshape, no copy). The GEMM's output is
    NCHW already, so epilogues (folded batch norm, ReLU, residual adds)
    fuse into its tiles like any matmul epilogue, and its operand tiles are
    promoted to shared memory like a matmul's.

    A zero `tensor.pad` of the input is folded into the gather, which then
    reads zeros outside the image instead of a padded copy.

    ```mlir
    // Before
    %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] { tensor.yield %zero }
    %y = linalg.conv_2d_nchw_fchw ins(%p, %w : tensor<1x64x56x56xf32>, tensor<64x64x3x3xf32>) outs(%init)
    // After
    %i = linalg.generic {iterator_types = 4 x parallel} outs(%e : tensor<1x576x56x56xf32>) {
      ... tensor.extract %x[...] (zero outside the image) ...
    }
    %f = tensor.collapse_shape %w [[0], [1, 2, 3]] : tensor<64x64x3x3xf32> into tensor<64x576xf32>
    %y = linalg.generic {(n, f, oh, ow, k): F (f, k), I (n, k, oh, ow), Y (n, f, oh, ow)} ins(%f, %i) outs(%init)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numRewritten", "num-rewritten", "Convolutions computed as a GEMM">,
  ];
}

def SitsGpuMaterializeCopies : Pass<"sits-gpu-materialize-copies", "func::FuncOp"> {
  let summary = "Make every data movement a linalg op, so that it runs in a kernel";
  let description = [{
    On a GPU every byte the model moves must be moved by a kernel: the host
    code only launches kernels and never touches device memory. Ops that
    bufferize to host-side copies become linalg ops that tile like any
    elementwise op:

    * `tensor.pad` becomes an all-parallel `linalg.generic` that reads the
      source inside its bounds and yields the padding value outside;
    * `tensor.concat` becomes an all-parallel `linalg.generic` reading each
      position from the input that covers it (with dynamic shapes, through
      `scf.if` branches: an input may be empty, and only the branch taken
      reads);
    * the source of a `tensor.insert_slice` that no linalg op computes (a
      function argument, a constant) is copied by a `linalg.copy`, which
      bufferization then writes straight into the destination.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
}

def SitsGpuTileAndFuse : Pass<"sits-gpu-tile-and-fuse", "func::FuncOp"> {
  let summary = "Distribute linalg fusion groups over thread blocks and threads";
  let description = [{
    Forms fusion groups as the CPU tiler does (an op with the elementwise
    and reduction producers only it consumes) and tiles each group twice:

    1. its root with `scf.forall` over thread blocks
       (`#gpu.block<linear_dim_*>`), fusing the group into every block;
    2. inside a block, every op left there with `scf.forall` over threads
       (`#gpu.thread<linear_dim_*>`), fusing producers each thread needs a
       part of its own. Ops that several threads read (a row's mean in a
       layer norm) get a thread loop of their own: their result stays in
       the block (shared memory after bufferization), and barriers separate
       the thread loops.

    A contraction's block is `BM x BN` outputs and each thread holds a
    `TM x TN` register tile, stepping the reduction `BK` at a time in an
    `scf.for` (the loop `sits-gpu-promote-operands` stages in shared
    memory). Elementwise ops give each thread a few contiguous elements
    (one vector). A row reduction of at least two warps' worth of elements
    is split across a warp (lane `l` reduces elements `l`, `l + 32`, ...,
    coalesced, into a block-shared partial result that one thread per row
    then reduces; its elementwise producers are fused into the lanes' part);
    other reductions give each thread a row, reduced a vector at a time.
    Tile sizes divide the iteration space exactly (every tile is
    static) and come from the target (`sits.target`): its warp size and how
    many SMs need work.

    On targets with tensor cores (NVIDIA sm_80+; `tensor-cores=false`
    turns this off) a contraction of f16 operands accumulating in f32
    whose block tile is whole m16n8k16 tiles is not fused into its
    consumer's threads: it gets a thread loop of its own over warps, one
    m16n8 output tile each, whose innermost dimension runs over the warp's
    lanes (`linear_dim_0`, unread; see `sits-gpu-mma-sync`). Its result
    stays in the block (shared memory) for the epilogue's threads.

    ```mlir
    // Before: matmul + bias/GELU epilogue, 128x2304.
    // After:
    scf.forall (%bm, %bn) in (2, 36) {          // #gpu.block<linear_dim_1/0>
      scf.forall (%tm, %tn) in (16, 16) {       // #gpu.thread<linear_dim_1/0>
        linalg.fill -> tensor<4x4xf32>
        scf.for %k = 0 to 768 step 16 { linalg.matmul 4x16 * 16x4 }
        linalg.generic (epilogue) -> tensor<4x4xf32>
      }
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect", "::mlir::gpu::GPUDialect"
  ];
  let options = [
    Option<"maxThreads", "max-threads", "int64_t", /*default=*/"256",
           "Most threads per block">,
    Option<"tensorCores", "tensor-cores", "bool", /*default=*/"true",
           "Tile f16 contractions over warps for mma.sync when the target "
           "has it (NVIDIA sm_80+)">,
    Option<"tf32", "tf32", "bool", /*default=*/"false",
           "Tile f32 contractions over warps too, for TF32 mma.sync "
           "(m16n8k8, k stepped by 8; changes results)">,
  ];
  let statistics = [
    Statistic<"numGroups", "num-groups", "Fusion groups distributed over blocks">,
    Statistic<"numFused", "num-fused", "Producers fused into a block">,
    Statistic<"numThreadLoops", "num-thread-loops", "Thread loops created">,
    Statistic<"numSplit", "num-split", "Row reductions split across a warp">,
  ];
}

def SitsGpuPromoteOperands : Pass<"sits-gpu-promote-operands", "func::FuncOp"> {
  let summary = "Stage contraction operand tiles in shared memory";
  let description = [{
    For a contraction inside a reduction loop inside a block's largest
    thread loop (the structure `sits-gpu-tile-and-fuse` builds; a smaller
    thread loop runs on some threads only, and the staging needs all of
    them at its barriers), every operand that the block's threads read
    parts of is staged: once per reduction step, the
    block's whole operand tile is copied into a
    `bufferization.alloc_tensor` in workgroup memory by a `linalg.copy`
    marked `sits_cooperative`, and each thread reads its slice from there.

    As sequential code this is still exact (every thread copies the whole
    tile for itself); `sits-gpu-distribute-copies` later makes the threads
    of a block share the copy and adds the barriers. Tiles larger than
    `max-bytes` stay in global memory. With `workgroup-memory=false` the
    buffers get no memory space, so the tiled code can be lowered for a CPU
    and checked against a reference there (the tests do).

    ```mlir
    scf.for %k = 0 to 768 step 16 iter_args(%c = %acc) {
      %blk = tensor.extract_slice %a_block[0, %k] [64, 16] [1, 1]
      %buf = bufferization.alloc_tensor() {memory_space = #gpu.address_space<workgroup>} : tensor<64x16xf32>
      %sh = linalg.copy {sits_cooperative} ins(%blk) outs(%buf)
      %a = tensor.extract_slice %sh[%tm4, 0] [4, 16] [1, 1]
      ... linalg.matmul ins(%a, %b) outs(%c) ...
    }
    ```
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect",
                           "::mlir::gpu::GPUDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"maxBytes", "max-bytes", "int64_t", /*default=*/"16384",
           "Largest operand tile staged in shared memory">,
    Option<"workgroupMemory", "workgroup-memory", "bool", /*default=*/"true",
           "Put staged tiles in workgroup memory (false: in the default "
           "memory space, to run the tiled code on a CPU)">,
  ];
  let statistics = [
    Statistic<"numPromoted", "num-promoted", "Operand tiles staged in shared memory">,
  ];
}

def SitsGpuVectorize : Pass<"sits-gpu-vectorize", "func::FuncOp"> {
  let summary = "Vectorize per-thread linalg tiles and keep accumulators in registers";
  let description = [{
    Vectorizes the statically shaped linalg ops of each thread (a register
    tile of a contraction, a few elements of an elementwise op, a vector of
    a reduction), so that memory is read and written in vectors and a
    contraction's accumulator lives in registers across its reduction loop.
    Cooperative copies (`sits_cooperative`) are left for
    `sits-gpu-distribute-copies`, and ops with more than `max-elements`
    elements per operand stay scalar loops.
  }];
  let dependentDialects = [
    "::mlir::vector::VectorDialect", "::mlir::tensor::TensorDialect",
    "::mlir::scf::SCFDialect"
  ];
  let options = [
    Option<"maxElements", "max-elements", "int64_t", /*default=*/"256",
           "Largest operand vectorized">,
  ];
  let statistics = [
    Statistic<"numVectorized", "num-vectorized", "Linalg ops vectorized">,
  ];
}

def SitsGpuMmaSync : Pass<"sits-gpu-mma-sync", "func::FuncOp"> {
  let summary = "Run warp-level f16 contractions on tensor cores (mma.sync)";
  let description = [{
    After bufferization, on NVIDIA sm_80 and newer: a thread loop whose
    innermost dimension (`linear_dim_0`) runs over a warp's lanes and whose
    body does not read that lane index is warp-level code, as
    `sits-gpu-tile-and-fuse` builds it for an f16 contraction accumulating
    in f32: each warp computes an m16n8 output tile, stepping k 16 at a
    time. Its vector code (transfer reads of the operand tiles, a
    `vector.contract` with the accumulator carried by the reduction loop,
    the write of the result) is converted with upstream's vector-to-GPU
    conversion for nvgpu: `nvgpu.ldmatrix` loads from workgroup memory
    (plain loads elsewhere) in the fragment layout of `nvgpu.mma.sync`
    (m16n8k16), per-lane stores of the accumulator fragment, and the lane
    loop then runs one iteration per lane, as any thread loop. A warp-level
    loop the conversion cannot take (bf16 operands: upstream has no bf16
    fragment layout) is an error. With `tf32`, warp-level f32 contractions
    (m16n8k8 tiles) are converted too and their `mma.sync` operations
    compute in TF32 (upstream's `populateMmaSyncF32ToTF32Patterns`).

    ```mlir
    scf.forall (%wm, %wn, %lane) in (2, 4, 32) {  // #gpu.thread<linear_dim_2/1/0>
      %r = scf.for %k = 0 to 256 step 16 iter_args(%c = %zero) -> vector<16x8xf32> {
        %a = vector.transfer_read %A_shared[%wm16, 0] : memref<32x16xf16, 3>, vector<16x16xf16>
        %b = vector.transfer_read %B_shared[0, %wn8] : memref<16x32xf16, 3>, vector<16x8xf16>
        %d = vector.contract ... %a, %b, %c : vector<16x16xf16>, vector<16x8xf16> into vector<16x8xf32>
      }
      vector.transfer_write %r, %C[%wm16, %wn8]
    }
    // becomes: nvgpu.ldmatrix (x4 for A, x2 transposed for B),
    // nvgpu.mma.sync {mmaShape = [16, 8, 16]}, stores of each lane's
    // fragment at offsets computed from gpu.lane_id.
    ```
  }];
  let dependentDialects = [
    "::mlir::nvgpu::NVGPUDialect", "::mlir::gpu::GPUDialect",
    "::mlir::vector::VectorDialect", "::mlir::memref::MemRefDialect",
    "::mlir::affine::AffineDialect", "::mlir::arith::ArithDialect"
  ];
  let options = [
    Option<"tf32", "tf32", "bool", /*default=*/"false",
           "Convert warp-level f32 contractions too, computing in TF32">,
  ];
  let statistics = [
    Statistic<"numWarpLoops", "num-warp-loops", "Warp-level thread loops on tensor cores">,
    Statistic<"numMma", "num-mma", "nvgpu.mma.sync operations created">,
  ];
}

def SitsGpuMapToLaunch : Pass<"sits-gpu-map-to-launch", "func::FuncOp"> {
  let summary = "Turn block and thread loops into gpu.launch";
  let description = [{
    After bufferization: each `scf.forall` mapped to `#gpu.block` becomes a
    `gpu.launch` with a one-dimensional grid (the block loop's iterations,
    delinearized from `gpu.block_id x`), and the thread loops inside it
    become SPMD code over `gpu.thread_id x` (upstream's mapping to threads,
    with a barrier after each loop). The block size is the largest thread
    loop; smaller ones are predicated.

    Buffers allocated inside a block but outside any thread loop are
    shared by the block's threads: they become workgroup attributions of
    the launch. Buffers allocated inside a thread loop are private to a
    thread: `memref.alloca`. Linalg ops left outside any block loop (ops
    that cannot be tiled) run in a kernel of one thread, with a remark.

    Two more shapes of host code come from gathers and scatters through
    run-time indices (a paged KV pool): a host loop or branch whose body
    reads or writes buffers (the slot writes, whose index loads steer its
    control flow) runs whole in a kernel of one thread, with a remark; an
    unmapped `scf.forall` (the gather of each sequence's blocks) becomes
    a block loop, one block per iteration, its first dimension slowest,
    whose statically shaped copies four warps share (cooperative copies,
    see sits-gpu-distribute-copies).
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect"];
  let statistics = [
    Statistic<"numLaunches", "num-launches", "Kernels launched">,
  ];
}

def SitsGpuDistributeCopies : Pass<"sits-gpu-distribute-copies", "func::FuncOp"> {
  let summary = "Share cooperative copies among the threads of a block";
  let description = [{
    Inside `gpu.launch`, a `linalg.copy` marked `sits_cooperative` (written
    by `sits-gpu-promote-operands`: every thread copies the block's tile)
    becomes a loop in which thread `t` of `T` copies vectors
    `t, t + T, t + 2T, ...` of the tile, between two barriers: the first
    waits until no thread still reads the previous contents, the second
    until the whole tile is there. Rows whose length is a multiple of four
    elements are copied four elements (16 bytes) at a time.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::scf::SCFDialect",
                           "::mlir::vector::VectorDialect"];
  let statistics = [
    Statistic<"numDistributed", "num-distributed", "Copies shared among threads">,
  ];
}

def SitsGpuDeviceBuffers : Pass<"sits-gpu-device-buffers", "func::FuncOp"> {
  let summary = "Allocate intermediate buffers in device memory; check the host code";
  let description = [{
    The host function only launches kernels. Its `memref.alloc`s
    (intermediate tensors between kernels) become `gpu.alloc`s, each freed
    by a `gpu.dealloc` after its last use, and the launches, allocations
    and frees are ordered on one stream by `gpu-async-region` afterwards.

    Anything else in the host function that would read or write device
    memory from the CPU (a load, a store, a copy, a linalg op left outside
    a kernel) is an error with its location, not a crash at run time.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def SitsGpuLowerVectors : Pass<"sits-gpu-lower-vectors"> {
  let summary = "Lower vector ops to the 1-D forms the NVVM lowering handles";
  let description = [{
    Contractions become outer products and FMAs, reductions, transposes,
    broadcasts and shape casts become 1-D vector ops, and transfers of
    rank at most one become loads and stores (higher ranks are unrolled by
    `convert-vector-to-scf{full-unroll}`). Unlike `convert-vector-to-llvm`,
    `convert-gpu-to-nvvm` has no such pre-lowering of its own, so the
    pipeline runs this pass inside the GPU module right before it (after
    the last canonicalization, which folds some 1-D ops back into n-D
    ones). Copies between strided buffers become loops: a kernel cannot
    call MLIR's runner library.
  }];
  let dependentDialects = [
    "::mlir::vector::VectorDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect"
  ];
}

def SitsGpuBoolMemory : Pass<"sits-gpu-bool-memory"> {
  let summary = "Scalar loads and stores of i1 (and other sub-byte) buffers as byte accesses, in any address space";
  let description = [{
    A buffer of `i1` holds one byte per element (NumPy's `bool` layout, and
    the runtime's), and so do buffers of `i2`, `i4` and `f4E2M1FN`
    (ml_dtypes' layout), which the memref-to-LLVM lowering (part of
    `convert-gpu-to-nvvm`) does not accept for element types narrower than
    a byte. Rewrites every scalar `memref.load` and `memref.store` of them
    into an `llvm.load`/`llvm.store` of `i8` at the aligned pointer plus the
    linearized offset, as `sits-cpu-bool-memory` does, with the pointer in
    the buffer's address space: workgroup buffers (a mask the threads of a
    block share) are addressed in shared memory, not through the generic
    space. Runs inside the GPU module right before its conversion to NVVM.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def SitsGpuMergeKernelModules : Pass<"sits-gpu-merge-kernel-modules", "ModuleOp"> {
  let summary = "Put every outlined kernel into one gpu.module, with aligned workgroup buffers";
  let description = [{
    `gpu-kernel-outlining` puts each kernel into a `gpu.module` of its own.
    This pass moves them all into the first one, each kernel named after
    the module it came from (names that stay unique) and constants the
    kernels share kept once. The model then compiles to one PTX module:
    one run of the NVPTX back end and of `ptxas`, one device image in the
    artifact, and one module for the runtime to load.

    It also gives every workgroup buffer of the kernels 16-byte alignment
    (`llvm.align`): copies staged into shared memory store 16 bytes at a
    time, and the NVVM lowering aligns a buffer to its element otherwise.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect"];
  let statistics = [
    Statistic<"numKernels", "num-kernels", "Kernels in the merged module">,
  ];
}

def SitsGpuAllocaAddressSpace : Pass<"sits-gpu-alloca-address-space"> {
  let summary = "Move allocas into the data layout's alloca address space";
  let description = [{
    A thread's private buffers (`memref.alloca`) lower to `llvm.alloca` in
    the buffer's memory space, the default (generic) one. AMDGPU allocates
    private memory only in its alloca address space (5, `A5` in the data
    layout `convert-gpu-to-rocdl` attaches to the GPU module) and rejects
    other allocas. This pass moves every alloca whose address space differs
    from the one the nearest `llvm.data_layout` names into it and gives its
    users an `llvm.addrspacecast` to the type they had, as clang does for
    AMDGPU; LLVM's address space inference turns the accesses back into
    private ones. Nothing changes without a data layout, or where the
    alloca address space is the generic one (NVPTX).

    ```mlir
    // Before (data layout "...-A5-...")
    %a = llvm.alloca %c4 x f32 : (i64) -> !llvm.ptr
    // After
    %p = llvm.alloca %c4 x f32 : (i64) -> !llvm.ptr<5>
    %a = llvm.addrspacecast %p : !llvm.ptr<5> to !llvm.ptr
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
  let statistics = [
    Statistic<"numMoved", "num-moved", "Allocas moved to the alloca address space">,
  ];
}

def SitsGpuSerializeToLLVMIR : Pass<"sits-gpu-serialize-to-llvm-ir", "ModuleOp"> {
  let summary = "Serialize ROCDL GPU modules to LLVM IR for an external AMDGPU back end";
  let description = [{
    Replaces every `gpu.module` targeting `#rocdl.target` with a `gpu.binary`
    holding the module's LLVM IR (`#gpu.object<..., offload = "...">`), one
    object per target. Upstream's `gpu-module-to-binary` needs LLVM's AMDGPU
    back end even for its `llvm` format (it builds a target machine for the
    data layout); this pass needs only the translation to LLVM IR, so
    kernels for AMD GPUs can be generated by an MLIR built without that back
    end and finished by an AMDGPU-enabled `llc` and `ld.lld` (the SITS
    driver does that; see README.md).

    What the serialized module carries for the back end: the target triple,
    the data layout `convert-gpu-to-rocdl` attached, and the
    `amdhsa_code_object_version` module flag from the target's ABI version.
    When the kernels call the ROCm device libraries (`__ocml_*` for math,
    `__ockl_*`), the `__oclc_*` control constants those libraries read are
    defined from the target (ISA version from the chip, wave64, denormal and
    math flags, ABI version), and the object's properties list the
    libraries to link (`device_libraries = ["ocml", "ockl"]`).

    ```mlir
    // Before
    gpu.module @kernels [#rocdl.target<chip = "gfx942">] { llvm.func @k(...) attributes {rocdl.kernel} }
    // After
    gpu.binary @kernels [#gpu.object<#rocdl.target<chip = "gfx942">, offload = "BC\C0\DE...">]
    ```
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect",
                           "::mlir::LLVM::LLVMDialect",
                           "::mlir::ROCDL::ROCDLDialect"];
  let options = [
    Option<"textual", "textual", "bool", /*default=*/"false",
           "Serialize textual LLVM IR instead of bitcode (to read it)">,
  ];
}

#endif // SITS_PASSES_CODEGEN_GPU_PASSES_TD
