//===- Passes.td - SITS CPU code generation passes ---------*- tablegen -*-===//

#ifndef SITS_PASSES_CODEGEN_CPU_PASSES_TD
#define SITS_PASSES_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def SitsCpuConvToGemm : Pass<"sits-cpu-conv-to-gemm", "::mlir::ModuleOp"> {
  let summary = "2-D convolutions with constant filters as im2col and a panel GEMM";
  let description = [{
    Rewrites `linalg.conv_2d_nchw_fchw` whose filter is a constant into
    a gather of input patches, k-major `I[n, k, oh, ow]`
    (`k = (c * KH + kh) * KW + kw`), a contraction with the filter stored
    at compile time as panels `F[f / nr, k, nr]` accumulating
    `C[n, f / nr, oh, ow, f % nr]` (a register block is 8 pixels of an
    output row by `nr` channels; per k it reads 8 consecutive patches and
    one panel row), and a transpose back to NCHW. A filled initial value
    seeds the accumulator; any other is added in the transpose.

    Output rows narrower than a register block (when that saves at least a
    quarter of the blocks: the 4 x 4 pixels of a CNN's last stage) take the
    pixels as one loop `p = oh * OW + ow`: `C[n, f / nr, p, f % nr]` over
    the patches viewed as `[n, k, OH * OW]`, and the transpose reads `C` at
    `oh * OW + ow`.

    The gather is an ordinary all-parallel `linalg.generic` (indices from
    `linalg.index`, values from `tensor.extract`), so tiling and fusion
    treat it like any elementwise op: each tile gathers only its own
    patches, a row of output pixels at a time (one vector read per k).
    With a column stride, the input is first split by column phase
    (`X'[n, c, h, q, w'] = X[n, c, h, w' * sw + q]`), so that a row of
    patches stays one contiguous read rather than a vector gather.
    Filters whose output channels are not a multiple of `nr` keep
    the convolution.

    A filter that is an argument of a private function (a model's repeated
    layer, outlined once) is rewritten when every use of the function is a
    call passing a constant: each call passes its own filter in panels as
    a new argument, which replaces the old one. As this changes the
    callers, the pass runs on the module.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numRewritten", "num-rewritten", "Convolutions computed as a panel GEMM">,
  ];
}

def SitsCpuOutlineDispatches
    : Pass<"sits-cpu-outline-dispatches", "::mlir::ModuleOp"> {
  let summary = "Outline fusion groups on tensors, one function per distinct group";
  let description = [{
    Before tiling, every fusion group of a public function (a linalg root
    with the producers only it uses, the group `sits-cpu-tile-and-fuse`
    fuses into one loop nest) moves into a private function
    `<func>_dispatch_N` and is replaced by a call. Tensors the group reads
    are arguments, weights included; scalar and splat constants, views
    (slices, reshapes, casts) and fills of empty tensors are cloned in, so
    that every tensor argument is a whole buffer. A destination is passed
    in: the call gets an empty tensor of its own, and the result is marked
    `sits.updates` (the argument once written), which
    `sits-cpu-drop-updated-results` turns into the caller's buffer after
    bufferization. Groups with equal bodies are one function.

    Tiling, vectorization, bufferization and LLVM then see each distinct
    group once: a decoder's compile time follows its distinct layers, not
    its depth.

    ```mlir
    // Before: two layers, the same matmul on different weights.
    %0 = linalg.matmul ins(%x, %w0 : ...) outs(%fill : tensor<8x64xf32>)
    %1 = linalg.matmul ins(%0, %w1 : ...) outs(%fill : tensor<8x64xf32>)
    // After
    %e0 = tensor.empty() : tensor<8x64xf32>
    %0 = call @main_dispatch_1(%x, %w0, %e0)
    %e1 = tensor.empty() : tensor<8x64xf32>
    %1 = call @main_dispatch_1(%0, %w1, %e1)
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numDispatches", "num-dispatches", "Fusion groups outlined">,
    Statistic<"numFunctions", "num-functions",
              "Distinct dispatch functions created">,
  ];
}

def SitsCpuDistinctResults : Pass<"sits-cpu-distinct-results", "func::FuncOp"> {
  let summary = "Return a distinct buffer for every result";
  let description = [{
    Replaces each repeated memref operand of `func.return` (one value
    returned as several results) with a copy in a fresh buffer, so that
    every result can become its own out-param. Runs after bufferization,
    before `buffer-results-to-out-params`.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def SitsCpuDropUpdatedResults
    : Pass<"sits-cpu-drop-updated-results", "::mlir::ModuleOp"> {
  let summary = "Drop results that update an argument in place";
  let description = [{
    A function result marked `sits.updates = i` (the pool of
    `sits-page-kv-cache`, the destination of a dispatch of
    `sits-cpu-outline-dispatches`) is argument `i` after an in-place
    update: the caller's buffer already holds it. After bufferization the
    result is dropped from the return and the signature, and calls of the
    function use the buffer they pass instead. When bufferization did not
    write the argument in place, the result is copied into it first (with a
    remark for a public function), so the caller's buffer holds the update
    either way. Runs before `buffer-results-to-out-params`.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def SitsCpuResultsToOutParams
    : Pass<"sits-cpu-results-to-out-params", "::mlir::ModuleOp"> {
  let summary = "Results as caller-provided out-params, but those of layers";
  let description = [{
    Upstream's `buffer-results-to-out-params{hoist-static-allocs
    modify-public-functions}` for every function but the layers of
    `sits-outline-layers` (marked `sits.layer`): the runtime owns an entry
    point's outputs and the code writes them in place, while a layer's
    results (the next layer's hidden state) have extents computed inside
    the layer, which its caller cannot allocate for; a layer returns the
    buffers it allocated, which its caller then owns.

    A layer's result that every call only copies into its caller's
    out-param (the present K/V of a decoder exported with a contiguous
    cache) is the exception: the layer takes that out-param and writes it
    where it allocated the buffer, so the copy of the whole cache after
    each call goes away.
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
}

def SitsCpuExpandSmallFloats
    : Pass<"sits-cpu-expand-small-floats", "func::FuncOp"> {
  let summary = "fp8, fp4 and (where not native) bf16 conversions in integers";
  let description = [{
    LLVM has no 8- or 4-bit float types, so `arith.extf` and `arith.truncf`
    to or from them (f8E4M3FN, f8E5M2, their FNUZ variants, f8E8M0FNU,
    f4E2M1FN) have no LLVM lowering. This pass rewrites them into integer
    and f32 arithmetic with APFloat's semantics: round to nearest even,
    overflow to infinity where the format has one, to NaN otherwise, and to
    the largest value in E2M1FN, which has neither.
    Scalars and vectors alike.

    `arith.truncf` to bf16 is expanded as well (round to nearest even) on
    targets without a native conversion (x86 without AVX-512 BF16 or
    AVX-NE-CONVERT, Arm without FEAT_BF16), where LLVM would call
    `__truncsfbf2`, which most C runtimes lack.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect"];
}

def SitsCpuApproximateMath : Pass<"sits-cpu-approximate-math", "func::FuncOp"> {
  let summary = "Transcendental math functions as vector polynomials";
  let description = [{
    Rewrites `math.exp`, `math.erf`, `math.tanh`, `math.log` and the other
    functions with an accurate upstream polynomial approximation (errors of
    a few ulp in f32) into arithmetic, so that vector code computes them in
    its vectors instead of one libm call per lane. Narrower float types are
    computed in f32. Functions without such an approximation keep their
    libm calls.
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect",
                           "::mlir::vector::VectorDialect"];
}

def SitsCpuPackWeights : Pass<"sits-cpu-pack-weights", "::mlir::ModuleOp"> {
  let summary = "Store constant matmul weights in register-block panels";
  let description = [{
    A contraction `C[m, n] += A[m, k] * B[k, n]` whose `B` is a constant
    gets `B` re-laid out at compile time as panels `P[n / nr, k, nr]` of
    `nr` columns (the width of the register block), and becomes a
    contraction over `(m, nb, j, k)` writing `C` viewed as `[m, n / nr, nr]`.
    Each register block then streams one contiguous panel instead of
    strided rows a page apart: weight-bound layers (batch-8 MLPs, decode
    steps) become bandwidth-bound instead of latency-bound.

    When `nr` does not divide `n`, the last panel is padded with zero
    columns, the contraction writes `C` padded to whole panels (a
    `tensor.pad` of its initial value) and its first `n` columns are the
    result (a `tensor.extract_slice`). A weight
    that is an argument of a private function (a model's repeated layer,
    outlined once) is packed when every use of the function is a call
    passing a constant: each call passes its own weight in panels as a new
    argument, which replaces the old one once unused. As this changes the
    callers, the pass runs on the module.

    A weight that is a `tensor.concat` of constants along `n` (siblings
    joined by `sits-fuse-sibling-matmuls{defer-join}`) is packed from its
    parts where they lie, so no joined copy is written. Such a join that
    no contraction packs is joined into one constant at the end.

    ```mlir
    // Before
    %w = arith.constant dense_resource<fc1> : tensor<1024x4096xf32>
    %c = linalg.matmul ins(%x, %w : tensor<8x1024xf32>, tensor<1024x4096xf32>) outs(%f : tensor<8x4096xf32>)
    // After
    %p = arith.constant dense_resource<fc1.packed> : tensor<128x1024x32xf32>
    %fe = tensor.expand_shape %f [[0], [1, 2]] output_shape [8, 128, 32]
    %r = linalg.generic {(m, nb, j, k): A (m, k), P (nb, k, j), C (m, nb, j)} ins(%x, %p) outs(%fe)
    %c = tensor.collapse_shape %r [[0], [1, 2]] : tensor<8x128x32xf32> into tensor<8x4096xf32>
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numPacked", "num-packed", "Constant weights stored in panels">,
    Statistic<"numJoined", "num-joined",
              "Joins of constants not packed, joined at compile time">,
  ];
}

def SitsCpuFuseElementwise : Pass<"sits-cpu-fuse-elementwise", "func::FuncOp"> {
  let summary = "Fuse elementwise producers into consumers that read each value once";
  let description = [{
    Merges an elementwise `linalg.generic` into its consumer when the
    consumer reads every produced element exactly once: the operand's
    indexing map must use every loop of the consumer. Elementwise chains and
    reductions over an elementwise input (the exponentials of a softmax) fuse;
    the lhs of a matmul does not, since each of its elements is read once per
    output column and fusing would recompute it that many times (and hide
    the contraction from the code generator).

    Unlike upstream `linalg-fuse-elementwise-ops`, which fuses any
    single-use elementwise producer. A fused body stays within 256
    operations: each fusion clones the consumer's body, and LLVM's time on
    one loop body grows faster than its size, so a long chain is cut into
    loops of that size and compiles in time linear in its length.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::affine::AffineDialect",
                           "::mlir::tensor::TensorDialect"];
}

def SitsCpuTileAndFuse : Pass<"sits-cpu-tile-and-fuse", "func::FuncOp"> {
  let summary = "Distribute linalg fusion groups over threads and tile them for caches and registers";
  let description = [{
    Groups every linalg op with the elementwise and reduction producers it
    consumes, tiles the group's last op along its parallel dimensions with
    `scf.forall` (one iteration per task a thread runs) and fuses the
    producers into each tile, so intermediate values stay in cache and a
    contraction's epilogue (bias, activation) runs on its output tile.

    Inside a tile, contractions are tiled again with `scf.for` for the
    cache (the reduction dimension) and for registers (an `mr x nr` block of
    the output held in vector registers across the reduction), and
    elementwise ops are tiled to the vector width (a transpose in square
    blocks of one vector each way), ready for `sits-cpu-vectorize`. 2-D
    convolutions are first rewritten as im2col followed by a contraction so
    they take the same path. A contraction whose operands both have K
    innermost (attention's scores) takes K steps of whole vectors.

    A contraction tile of at most two register blocks of rows (a decode
    step) reads each weight once: its reduction is not cut for the cache,
    so each panel is one sequential stream, and the register tile's K loop
    is marked `sits.streamed` for `sits-cpu-lower-vectors` to prefetch.
    With a run-time row count, the loops over row blocks are marked
    `sits.first_streams`: only their first iteration streams.

    Tile sizes come from the target's facts (`sits.target`, default the
    host): its SIMD width, core count and cache sizes.

    ```mlir
    // Before: matmul + bias/GELU epilogue over 8x4096.
    %m = linalg.matmul ins(%x, %w : ...) outs(%fill : tensor<8x4096xf32>)
    %e = linalg.generic {...} ins(%m, %b : ...) outs(%init : tensor<8x4096xf32>)
    // After: scf.forall over 8x128 tiles of %e, each computing its slice of
    // %m (fill + matmul tiled 8x32x1 in registers) and then the epilogue.
    ```
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect"
  ];
  let options = [
    Option<"numThreads", "num-threads", "int64_t", /*default=*/"0",
           "Threads to distribute over (0: the target's core count)">,
    Option<"distribute", "distribute", "bool", /*default=*/"true",
           "Tile fusion groups with scf.forall for multi-threading">,
    Option<"im2col", "im2col", "bool", /*default=*/"true",
           "Rewrite 2-D convolutions as im2col + contraction">,
  ];
  let statistics = [
    Statistic<"numGroups", "num-groups", "Fusion groups tiled">,
    Statistic<"numFused", "num-fused", "Producers fused into a group">,
  ];
}

def SitsCpuVectorize : Pass<"sits-cpu-vectorize", "func::FuncOp"> {
  let summary = "Vectorize statically shaped linalg ops and keep accumulators in registers";
  let description = [{
    Vectorizes every linalg op whose iteration space is static (after
    `sits-cpu-tile-and-fuse` these are register-sized tiles), rewrites the
    resulting reductions as `vector.contract`, and hoists the accumulator
    reads and writes out of reduction loops so it lives in registers across
    them. Ops with dynamic shapes stay as they are and lower to loops.
  }];
  let dependentDialects = [
    "::mlir::vector::VectorDialect", "::mlir::tensor::TensorDialect",
    "::mlir::scf::SCFDialect"
  ];
  let statistics = [
    Statistic<"numVectorized", "num-vectorized", "Linalg ops vectorized">,
  ];
}

def SitsCpuChunkParallelLoops
    : Pass<"sits-cpu-chunk-parallel-loops", "func::FuncOp"> {
  let summary = "Run an outermost scf.parallel as at most N chunks of iterations";
  let description = [{
    Rewrites every outermost `scf.parallel` without results into a parallel
    loop over at most `num-threads` x `chunks-per-thread` chunks, each running a contiguous range
    of the original (linearized) iterations in an `scf.for`.
    `sits-cpu-parallel-to-runtime` then runs each chunk as one iteration of
    a fork-join on the worker pool.

    A tile of distributed code is one iteration, and the iteration counts
    are run-time values (batch, tokens): without chunks, a decode step's
    many small loops (a norm over 8 rows, attention over 16 heads) become a
    task per iteration, up to 16 per loop for 2 threads, and the tasks'
    bookkeeping costs more than their work. A few chunks per thread keep
    the load balanced (chunks are taken as threads free up), and the
    contiguous ranges keep neighbouring tiles on one core. Loops with a
    static iteration count of at most that many, and all loops of code for
    one thread, are left as they are.

    Handing a chunk to another thread costs about as much as a few thousand
    operations. A loop whose work is estimated statically (its body's ops,
    times the constant trip counts of the loops inside; none when some
    extent inside is a run-time value) runs as one chunk when its
    iterations add up to fewer than `serial-work` operations: statically
    when its iteration count is constant, else by a run-time select of the
    chunk count (the runtime runs a single chunk on the calling thread).
  }];
  let options = [
    Option<"numThreads", "num-threads", "int64_t", /*default=*/"0",
           "Threads the code runs on (0: the target's core count)">,
    Option<"chunksPerThread", "chunks-per-thread", "int64_t",
           /*default=*/"2", "Most chunks per loop and thread">,
    Option<"serialWork", "serial-work", "int64_t", /*default=*/"4096",
           "Loops estimated to run fewer operations than this in all run on "
           "one thread">,
  ];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"
  ];
  let statistics = [
    Statistic<"numChunked", "num-chunked", "Parallel loops chunked">,
    Statistic<"numSerial", "num-serial",
              "Parallel loops too small to split, run as one chunk">,
  ];
}

def SitsCpuLowerVectors : Pass<"sits-cpu-lower-vectors", "func::FuncOp"> {
  let summary = "Lower vector contractions and transfers to FMAs, loads and stores";
  let description = [{
    After bufferization: contractions become outer products and then FMAs,
    multi-reductions and transposes lower to the flat vector ops LLVM's
    backend selects well, and transfers become plain (unrolled) loads and
    stores. Copies between strided buffers become loops (contiguous ones
    stay copies, i.e. memcpy), so compiled code needs no runtime library.

    A K loop marked `sits.streamed` first gets `memref.prefetch`es of its
    right-hand side's rows a target-set distance ahead (clamped to the
    last row), one per cache line it consumes: streamed from memory,
    weights otherwise wait on the memory's latency at every page, where
    the hardware prefetcher stops. Inside a loop marked
    `sits.first_streams`, the prefetching copy of the K loop is taken on
    that loop's first iteration only. The rows are requested into L1,
    or into L2 on cores where a prefetch into L1 holds back the loop's own
    loads (AMD Zen); `prefetch-cache-level` overrides the target's choice.
  }];
  let options = [
    Option<"prefetchCacheLevel", "prefetch-cache-level", "unsigned",
           /*default=*/"0",
           "cache level streamed rows are prefetched into: 1 or 2 (0: the "
           "target's)">
  ];
  let dependentDialects = [
    "::mlir::vector::VectorDialect", "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect",
    "::mlir::linalg::LinalgDialect"
  ];
}

def SitsCpuParallelToRuntime
    : Pass<"sits-cpu-parallel-to-runtime", "ModuleOp"> {
  let summary = "Run outermost scf.parallel loops through the runtime's fork-join";
  let description = [{
    Outlines the body of every outermost `scf.parallel` without results into
    a private function `(context: !llvm.ptr, i: i64) -> ()` and replaces the
    loop with a call of the runtime's `sitsRuntimeParallelFor(body, context,
    n)`, which runs the body for each of the loop's `n` (linearized)
    iterations on the worker pool, the calling thread included, and returns
    when all have run. Values the body uses from outside the loop are
    stored, in their LLVM form (a memref as its descriptor), into a struct
    allocated in the caller's entry block, and loaded back in the body;
    `builtin.unrealized_conversion_cast`s between the two forms resolve in
    the LLVM conversions. Constants are cloned into the body instead.

    This replaces upstream's `async-parallel-for` and the async runtime:
    a fork-join costs one queue push per helper thread and one counter,
    where the async lowering allocates coroutine frames, tokens and a group
    per loop. A loop whose body uses a value without an LLVM form is left
    as it is and runs sequentially.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect", "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect"
  ];
  let statistics = [
    Statistic<"numOutlined", "num-outlined", "Parallel loops run on the pool">,
    Statistic<"numSequential", "num-sequential",
              "Parallel loops left to run sequentially">,
  ];
}

def SitsCpuLowerUkernels : Pass<"sits-cpu-lower-ukernels", "ModuleOp"> {
  let summary = "Replace ops a runtime kernel computes by calls of it";
  let description = [{
    On buffers, replaces every `sits.ukernel.*` op, and every
    `linalg.generic` carrying `sits.ukernel` (set by sits-convert-to-linalg's
    `integer-dot`) whose operands have the form its kernel takes, by a call
    of that kernel, declared in the module:

    * `sits.ukernel.paged_attention`: `sitsRuntimePagedAttention(batch,
      queries, q_heads, kv_heads, head_dim, q, q strides (batch, head,
      token), pool, num_blocks, block_stride, key_offset, value_offset,
      kv_head_stride, block_size, position_stride, tables, table_width,
      table_stride, context_lens, scale, out, out strides (batch, head,
      token))` (runtime/src/core/paged_attention.cpp). The pool's head dim
      must be contiguous (an error otherwise); a query, table, length or
      output buffer whose innermost dimension is not is copied through a
      contiguous one.

    * `"qdot_i4"`, `"qdot_i8"`: INT8 activation codes `[M, G, ...]`, the
      weight codes in the kernel's layout, per-(row, group) activation
      scales `[M, G]` and the weight scales (per group `[G, N/16, 16]` or per
      column `[N/16, 16]`) into `[M, N/16, 16]`, computed by
      `sitsRuntimeQDot(bits, m, n, k, group, xq, xq_stride, sx, sx_stride,
      w, ws, ws_stride, y, y_stride)` (runtime/src/core/qdot.cpp): pointers
      as `!llvm.ptr` (aligned base plus offset), sizes and row strides in
      elements as `i64`.

    The kernels need rows that are contiguous past the row stride; an op
    whose buffers are not (a static layout says so) keeps its loops and
    still computes the same result, slowly.
  }];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect", "::mlir::arith::ArithDialect",
    "::mlir::func::FuncDialect", "::mlir::memref::MemRefDialect"
  ];
  let statistics = [
    Statistic<"numCalls", "num-calls", "Ops replaced by a kernel call">,
    Statistic<"numLeft", "num-left", "Marked ops left as loops">,
  ];
}

def SitsCpuBoolMemory : Pass<"sits-cpu-bool-memory", "ModuleOp"> {
  let summary = "Scalar loads and stores of i1 (and other sub-byte) buffers as byte accesses";
  let description = [{
    A buffer of `i1` holds one byte per element (NumPy's `bool` layout), and
    so do buffers of `i2`, `i4` and `f4E2M1FN` (ml_dtypes' layout), which
    upstream's memref-to-LLVM lowering does not accept for element types
    narrower than a byte. Rewrites every scalar `memref.load` and
    `memref.store` of them into an `llvm.load`/`llvm.store` of `i8` at the
    aligned pointer plus the linearized offset (an i1 load compares the byte
    with 0, other loads truncate; a store zero-extends). Runs just before
    the memref conversion.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::memref::MemRefDialect"];
}

def SitsCpuMarkEntryPoints : Pass<"sits-cpu-mark-entry-points", "ModuleOp"> {
  let summary = "Give every public function a C interface for the runtime";
  let description = [{
    Marks each public `func.func` with `llvm.emit_c_interface`, so that
    `convert-func-to-llvm` emits `_mlir_ciface_<name>` taking one pointer to
    a memref descriptor per argument: the form the runtime calls.
  }];
}

def SitsCpuPackEntryPoints : Pass<"sits-cpu-pack-entry-points", "ModuleOp"> {
  let summary = "Add a packed-argument entry point for every C interface";
  let description = [{
    For every `llvm.func @_mlir_ciface_<name>(ptr, ..., ptr)` adds
    `llvm.func @sits_entry_<name>(%args: !llvm.ptr)` that loads the i-th
    descriptor pointer from `args[i]` and calls the interface, so the
    runtime calls any entry point through one signature,
    `void sits_entry_<name>(void **args)`.
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

def SitsCpuNumberStrings : Pass<"sits-cpu-number-strings", "ModuleOp"> {
  let summary = "Name private string constants by their position";
  let description = [{
    Upstream's lowerings name the string constants they create (assertion
    messages, printed text) `<base>_<n>` with a counter that lives as long
    as the process, so the same module compiled twice in one process got
    different symbol names, and different code bytes, the second time.
    This pass renames every private constant `!llvm.array<N x i8>` global
    of the module to `<base>_<k>`, k counting from 0 per base in module
    order, and updates its uses: the code depends on the input only.

    ```mlir
    llvm.mlir.global private constant @assert_msg_7(...)  // 8th in the process
    // becomes
    llvm.mlir.global private constant @assert_msg_0(...)  // 1st in the module
    ```
  }];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect"];
}

#endif // SITS_PASSES_CODEGEN_CPU_PASSES_TD
