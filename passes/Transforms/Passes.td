//===- Passes.td - SITS graph-level passes -----------------*- tablegen -*-===//

#ifndef SITS_PASSES_TRANSFORMS_PASSES_TD
#define SITS_PASSES_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

// Op-agnostic: the rewrite is local to one producer/consumer pair, so the pass
// runs on whatever op it is scheduled on (a module or a single function).
def SitsFuseEpilogue : Pass<"sits-fuse-epilogue"> {
  let summary = "Fold activations into the epilogue of their producing contraction";
  let description = [{
    Rewrites `sits.activation` applied to the only use of a `sits.matmul`,
    `sits.conv` or `sits.qmatmul` result into that op's `activation`
    epilogue, so the activation is computed while the contraction's output
    is still in registers instead of in a second pass over memory.

    A contraction that already has an activation, or whose result has other
    users, is left alone: fusing would change what the other users see.

    Before:
    ```mlir
    %0 = sits.matmul %x, %w bias(%b) : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    %1 = sits.activation <gelu> %0 : tensor<8x4096xf32>
    ```

    After:
    ```mlir
    %1 = sits.matmul %x, %w bias(%b) {activation = #sits.activation<gelu>} : (tensor<8x1024xf32>, tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<8x4096xf32>
    ```
  }];
  let dependentDialects = ["::mlir::sits::SitsDialect"];
  let statistics = [
    Statistic<"numFused", "num-fused",
              "Number of activations fused into a contraction">,
  ];
}

def SitsFuseSiblingMatmuls : Pass<"sits-fuse-sibling-matmuls"> {
  let summary = "Multiply one input by sibling constant weights in one matmul";
  let description = [{
    `sits.matmul`s of one input by constant weights used nowhere else (a
    decoder layer's Q, K and V projections; the gate and up projections of
    a gated MLP) become one matmul by the weights side by side, joined at
    compile time. Each original result is its column range of the new one
    (`tensor.extract_slice`). One kernel then streams one longer weight
    instead of several short ones, with one fork and join of its threads:
    at decode sizes each of the small ones is too short to reach the memory
    bandwidth. Biases are joined the same way.

    The siblings must agree in everything but their column counts
    (transposes, element types, K, bias presence, epilogue, attributes); a
    weight that is not plain constant data, or is used by anything else,
    keeps its matmul. Run before epilogue fusion (an activation fused into
    one sibling would make it differ from the others) and before weights
    are quantized (the joined weight is then quantized as one). The joined
    result keeps every sibling's output alive at once: a schedule that
    minimizes memory (the CPU pipeline's `profile=memory`) goes without.

    ```mlir
    // Before
    %q = sits.matmul %x, %wq : (tensor<1x512xf32>, tensor<512x512xf32>) -> tensor<1x512xf32>
    %k = sits.matmul %x, %wk : (tensor<1x512xf32>, tensor<512x128xf32>) -> tensor<1x128xf32>
    // After
    %w = arith.constant dense_resource<wq.siblings> : tensor<512x640xf32>
    %qk = sits.matmul %x, %w : (tensor<1x512xf32>, tensor<512x640xf32>) -> tensor<1x640xf32>
    %q = tensor.extract_slice %qk[0, 0] [1, 512] [1, 1] : tensor<1x640xf32> to tensor<1x512xf32>
    %k = tensor.extract_slice %qk[0, 512] [1, 128] [1, 1] : tensor<1x640xf32> to tensor<1x128xf32>
    ```

    With `defer-join`, weights that are neither transposed nor splats are
    joined by a `tensor.concat` of their constants instead (`%w =
    tensor.concat dim(1) %wq, %wk`), and no joined copy is written: the CPU
    pipeline's weight packing reads them side by side as it writes their
    packed layout, once, into the artifact (and joins any it does not
    pack). For a decoder that saves a copy of every Q/K/V and gate/up
    weight at compile time. The CPU pipeline defers when the weights stay
    floats (quantization reads one joined constant).
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::tensor::TensorDialect"
  ];
  let options = [
    Option<"deferJoin", "defer-join", "bool", /*default=*/"false",
           "Join [K, N] weights with a tensor.concat of their constants">,
  ];
  let statistics = [
    Statistic<"numFused", "num-fused", "Matmuls joined with their siblings">,
  ];
}

def SitsFoldWeightTransposes
    : Pass<"sits-fold-weight-transposes", "::mlir::ModuleOp"> {
  let summary = "Store transposed constant weights already transposed";
  let description = [{
    ONNX models multiply by `W^T` with W constant (`Gemm transB=1`, a
    `MatMul` after a `Transpose`, every PyTorch `Linear`). A
    `sits.matmul {transpose_rhs}` whose rhs is a constant used nowhere else
    gets a transposed copy of the constant instead, computed once at compile
    time, and loses the flag: the kernel then streams the weight along its
    rows, and the original constant is dropped.
    A `sits.qmatmul {transpose_weight}` (onnxruntime's MatMulNBits) gets
    the same for its unpacked codes together with its per-group scales and
    zero points, and its `axis` follows.

    A weight that is an argument of a private function (a model's repeated
    layer, outlined once) is folded when every use of the function is a
    call passing a constant: each call passes the transpose of its own
    constant as a new argument, which replaces the old one. As this changes
    the callers, the pass runs on the module.

    ```mlir
    // Before
    %w = arith.constant dense_resource<fc1.weight> : tensor<4096x1024xf32>
    %y = sits.matmul %x, %w {transpose_rhs} : (tensor<8x1024xf32>, tensor<4096x1024xf32>) -> tensor<8x4096xf32>
    // After
    %w = arith.constant dense_resource<fc1.weight.t> : tensor<1024x4096xf32>
    %y = sits.matmul %x, %w : (tensor<8x1024xf32>, tensor<1024x4096xf32>) -> tensor<8x4096xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numFolded", "num-folded", "Constant weights stored transposed">,
  ];
}

def SitsPrune : Pass<"sits-prune", "::mlir::ModuleOp"> {
  let summary = "Remove dead, constant and zero-contribution parts of the graph";
  let description = [{
    Shrinks a model before anything else looks at it, in four steps:

    1. Constant folding of weight-only subgraphs: an op whose operands are
       all constants (a transpose, reshape, cast or elementwise op applied
       to a weight) is evaluated now with the op's folder and becomes a
       constant; weights held as resources are folded too.
    2. Identity removal: reshapes and casts to the same type, identity
       transposes, `x * 1`, `x + 0`, `x - 0`, `x / 1`, `sits.activation
       <none>`.
    3. Structured pruning of channels and heads whose contribution to the
       model's outputs is zero (`threshold` = 0) or whose weights are all at
       most `threshold` in magnitude (max-abs over the channel's or head's
       slice):
       * FFN channels of `sits.matmul -> [activation] -> sits.matmul` and
         output channels of `sits.conv -> [activation] -> sits.conv`
         (groups 1): channel `j` goes when the consumer's weights reading it
         are zero, or when the producer's weights writing it are zero: the
         channel is then the constant `act(bias[j])`, whose contribution is
         folded into the consumer's bias (for a convolution only when the
         consumer does not pad, as padding makes the contribution depend on
         the position; when `act(bias[j]) = 0` it is nothing at all);
       * heads of `sits.attention` fed by projections (`sits.matmul`, split
         by `tensor.extract_slice`, `tensor.expand_shape` to heads,
         `linalg.transpose`, for keys and values possibly after a KV cache:
         `tensor.concat` of past heads along the sequence, unless the cache
         is also returned, as the attention would then read a copy of its
         live heads) and read by an output projection: head `h`
         goes when its rows of the output projection are zero, or its value
         columns and bias are (the head then averages zero vectors). Query,
         key and value columns of pruned heads leave the projection weights;
         other users of the per-head keys/values (e.g. a returned KV cache)
         see zeros for those heads when they are exactly zero, and
         otherwise keep them computed. With grouped-query attention (`Hkv <
         Hq` key/value heads, MQA when 1) query head `h` reads key/value
         head `h / (Hq / Hkv)`; head `h` goes when its output rows are zero
         or its group's value columns are. As the attention over the kept
         heads maps them the same way, every key/value head must keep the
         same number of query heads: groups keep as many as the fullest
         one, prunable heads with the largest weights being put back (the
         report's `kept_for_groups`; exactly zero ones change nothing), and
         a remark says so when that leaves nothing to remove. A key/value
         head whose query heads all go loses its key and value columns
         (`kv_removed`, `kv_total`, `kv_indices`). Zero query columns alone
         do not make a head dead: it then averages the values uniformly.
       The number of channels kept is rounded up to a multiple of
       `channel-multiple` (by default the target's SIMD width: float lanes on
       a CPU, the warp on a GPU), as a width that is not one leaves partial
       vectors in every row and can run slower than the unpruned model.
       Recognised structures that cannot be rewritten get a remark and are
       left alone.
    4. Dead code elimination.

    With `threshold` = 0 outputs do not change beyond floating-point
    rounding; a positive threshold deliberately accepts an approximation.
    Every removal is recorded in the module attribute `sits.report.pruning`
    (`{op, kind, ...}` entries) and in the pass statistics.

    ```mlir
    // Before: FFN channel 1 has zero weights in %w2 (row 1).
    %h = sits.matmul %x, %w1 bias(%b1) {activation = #sits.activation<gelu>}
        : (tensor<8x16xf32>, tensor<16x4xf32>, tensor<4xf32>) -> tensor<8x4xf32>
    %y = sits.matmul %h, %w2 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    // After: column 1 of %w1 and %b1, row 1 of %w2 are gone.
    %h = sits.matmul %x, %w1p bias(%b1p) {activation = #sits.activation<gelu>}
        : (tensor<8x16xf32>, tensor<16x3xf32>, tensor<3xf32>) -> tensor<8x3xf32>
    %y = sits.matmul %h, %w2p : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"threshold", "threshold", "double", /*default=*/"0.0",
           "Prune channels and heads whose weights are all at most this in "
           "magnitude (0: only those contributing exactly zero)">,
    Option<"structured", "structured", "bool", /*default=*/"true",
           "Prune channels and heads (false: only fold, remove identities "
           "and dead code)">,
    Option<"channelMultiple", "channel-multiple", "int64_t", /*default=*/"0",
           "Keep a multiple of this many FFN/convolution channels, putting "
           "back prunable ones (0: the module's target's SIMD width, 1 "
           "without a target; 1: no rounding)">,
  ];
  let statistics = [
    Statistic<"numFolded", "num-folded", "Ops folded into constants">,
    Statistic<"numIdentities", "num-identities", "Identity ops removed">,
    Statistic<"numDead", "num-dead", "Dead ops erased">,
    Statistic<"numChannels", "num-channels",
              "FFN and convolution channels pruned">,
    Statistic<"numHeads", "num-heads", "Attention heads pruned">,
    Statistic<"numKVHeads", "num-kv-heads",
              "Key/value heads of grouped-query attention pruned">,
    Statistic<"numBytes", "num-bytes", "Constant bytes removed">,
  ];
}

def SitsPruneChannels : Pass<"sits-prune-channels", "::mlir::ModuleOp"> {
  let summary = "Prune FFN and convolution channels alone (step 3 of sits-prune)";
  let description = [{
    Runs only the channel step of `sits-prune` (see there for the rules):
    channels between `sits.matmul -> [activation] -> sits.matmul` or
    `sits.conv -> [activation] -> sits.conv` whose consumer weights, or
    whose producer weights, are all at most `threshold` in magnitude leave
    both weights (a constant channel's contribution is folded into the
    consumer's bias), then dead code goes. Does not fold constants or
    remove identities first: run `sits-prune{structured=false}` (or
    `canonicalize`) before it when the graph needs that. Removals are
    appended to `sits.report.pruning`, with a summary entry.

    ```mlir
    // FFN channel 1 has zero weights in %w2 (row 1): it leaves %w1 and %w2.
    %h = sits.matmul %x, %w1 : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %y = sits.matmul %h, %w2 : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect"];
  let options = [
    Option<"threshold", "threshold", "double", /*default=*/"0.0",
           "Prune channels whose weights are all at most this in magnitude "
           "(0: only those contributing exactly zero)">,
    Option<"channelMultiple", "channel-multiple", "int64_t", /*default=*/"0",
           "Keep a multiple of this many channels, putting back prunable "
           "ones (0: the module's target's SIMD width, 1 without a target)">,
  ];
  let statistics = [
    Statistic<"numChannels", "num-channels",
              "FFN and convolution channels pruned">,
    Statistic<"numBytes", "num-bytes", "Constant bytes removed">,
  ];
}

def SitsPruneHeads : Pass<"sits-prune-heads", "::mlir::ModuleOp"> {
  let summary = "Prune attention heads alone (step 3 of sits-prune)";
  let description = [{
    Runs only the head step of `sits-prune` (see there for the rules): heads
    of `sits.attention` whose rows of the output projection, or whose value
    columns and bias, are all at most `threshold` in magnitude leave the
    projections, the attention and the output projection; grouped-query
    attention keeps as many query heads per key/value head. Dead code goes
    afterwards. Removals are appended to `sits.report.pruning`, with a
    summary entry.

    ```mlir
    // Head 1 of %a reads zero rows of %wo: its query, key and value columns
    // leave the projections, %a attends over 3 heads, %wo loses those rows.
    %a = sits.attention %q, %k, %v {causal} : (tensor<1x4x8x16xf32>,
        tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"threshold", "threshold", "double", /*default=*/"0.0",
           "Prune heads whose weights are all at most this in magnitude "
           "(0: only those contributing exactly zero)">,
  ];
  let statistics = [
    Statistic<"numHeads", "num-heads", "Attention heads pruned">,
    Statistic<"numKVHeads", "num-kv-heads",
              "Key/value heads of grouped-query attention pruned">,
    Statistic<"numBytes", "num-bytes", "Constant bytes removed">,
  ];
}

def SitsPageKVCache : Pass<"sits-page-kv-cache", "::mlir::ModuleOp"> {
  let summary = "Serve a decoder's past/present K/V from a paged KV pool";
  let description = [{
    Rewrites the public function `@main` of a decoder exported with its KV
    cache (past K/V arguments `[B, Hkv, P, D]`, present K/V results) to the
    paged signature of the runtime's KV allocator. Every causal
    `sits.attention` whose key and value are `tensor.concat` (dim 2) of a
    past argument and the new tokens' K/V becomes a `sits.paged_attention`
    of the next layer, and so does every `sits.paged_attention` over a pool
    of one block per sequence built from past arguments (onnxruntime's
    GroupQueryAttention as imported), whose own sequence lengths are
    replaced by `context_lens` wherever they are read; then:

    - the past K/V arguments and the present results are removed, and so
      are the arguments only they needed (GroupQueryAttention's lengths);
    - four arguments are appended: `kv_pool`
      `[num_blocks, layers, 2, Hkv, block-size, D]` (the allocator's pool,
      updated in place), `block_tables [B, max_blocks]` (i32),
      `slot_mapping [B, S]` (i64, -1 for padding) and `context_lens [B]`
      (i32, past plus new tokens of each sequence);
    - the updated pool is returned last, marked `sits.updates = <index of
      kv_pool>`: the CPU pipeline writes the argument in place and drops that
      result from the compiled signature.

    With `kv-dtype=int8` or `fp8` the pool holds K/V quantized per token and
    head: `kv_pool` is `[num_blocks, layers, 2, Hkv, block-size, D + 4]` of
    i8 or f8E4M3FN, each row `D` codes and the 4 bytes of their f32 scale
    (the allocator's `per_token_head` layout), and carries
    `sits.kv_quantization = "per_token_head"`; new K/V are quantized as
    they are written. With `kv-dtype=int4` or `int2` (f32 models) the pool
    is KIVI blocks: `kv_pool` is `[num_blocks, block_stride]` i8 in the
    runtime's `sits/runtime/kivi_layout.h` layout, marked
    `sits.kv_quantization = "kivi"` and `sits.kivi = [bits, layers, Hkv,
    block-size, D]`, and every `sits.paged_attention` carries `kivi =
    [bits, layers, Hkv, block-size]`. `int4-token` / `int2-token` are the
    same blocks with keys quantized per token like values (bits plus 256,
    `sits.kv_quantization = "per_token_group"`): the plain per-token
    layout KIVI is measured against. `kv-dtype=mixed kv-widths=w,...`
    gives each (layer, kv head) its own width, 4 or 2 bits (the compiler's
    `kv_dtype="auto"` chooses them from calibration prompts): bits is 512
    in `sits.kivi` and `kivi`, each followed by the widths, and the runtime
    keeps the table in the pool's null block.

    New arguments carry `sits.name`. A batch may mix sequences of different
    lengths: shorter ones are left-padded (slot -1). Every layer must share
    the pool's heads, head dim and element type; an attention that reads a
    past argument in any other way is an error.

    ```mlir
    // Before (one layer)
    %k = tensor.concat dim(2) %past_k, %k_new : ... -> tensor<?x2x?x16xf32>
    %v = tensor.concat dim(2) %past_v, %v_new : ... -> tensor<?x2x?x16xf32>
    %o = sits.attention %q, %k, %v {causal} : ...
    return %logits, %k, %v
    // After
    %o, %pool1 = sits.paged_attention %q, %k_new, %v_new, %kv_pool,
        %block_tables, %slot_mapping, %context_lens {layer = 0} : ...
    return %logits, %pool1
    ```
  }];
  let dependentDialects = ["::mlir::sits::SitsDialect"];
  let options = [
    Option<"blockSize", "block-size", "int64_t", /*default=*/"16",
           "Token positions per KV block (the allocator's block size)">,
    Option<"kvDType", "kv-dtype", "std::string", /*default=*/"\"\"",
           "Pool element type: empty for the model's K/V type, int8 or "
           "fp8 (E4M3): codes with an f32 scale per token and head, int4 "
           "or int2: KIVI blocks, int4-token or int2-token: the same with "
           "keys per token, mixed: KIVI blocks of kv-widths">,
    ListOption<"kvWidths", "kv-widths", "int64_t",
               "With kv-dtype=mixed: the bits (4 or 2) of each (layer, kv "
               "head), layer by layer (kv_dtype \"auto\" chooses them)">,
  ];
  let statistics = [
    Statistic<"numLayers", "num-layers", "Attention layers paged">,
  ];
}

def SitsLastPosition : Pass<"sits-last-position", "::mlir::ModuleOp"> {
  let summary = "Compute @main's results for the last position of the sequence only";
  let description = [{
    Serving samples the next token from the logits of each prompt's last
    position, but a decoder computes them for every position: in a prefill
    the LM head (hidden x vocabulary per position) is the largest matmul of
    the model, and its result the largest tensor. This pass makes every
    result of the public function `@main` (but those updating an argument
    in place, `sits.updates`) keep only the last position along `axis`:
    `[B, S, V]` becomes `[B, min(S, 1), V]`, the last row when `S >= 1`
    (prompts are left-padded, so it is every prompt's last token), nothing
    when `S = 0`.

    The slice is moved up through ops that compute each position from the
    same position of their first operand alone, as long as nothing else
    reads their results: `sits.matmul` with 2-D weights, `sits.rms_norm`
    and `sits.layer_norm` normalizing dimensions after `axis`, and
    `sits.activation`. The LM head and the final norm then run on one row
    per sequence.

    ```mlir
    // Before
    %n = sits.rms_norm %h, %g : (tensor<?x?x64xf32>, ...) -> tensor<?x?x64xf32>
    %logits = sits.matmul %n, %w : (...) -> tensor<?x?x1000xf32>
    return %logits
    // After
    %last = tensor.extract_slice %h[0, %s_minus_one_or_zero, 0] [%b, %one_or_zero, 64] [1, 1, 1]
    %n = sits.rms_norm %last, %g : (tensor<?x?x64xf32>, ...) -> tensor<?x?x64xf32>
    %logits = sits.matmul %n, %w : (...) -> tensor<?x?x1000xf32>
    return %logits
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"axis", "axis", "int64_t", /*default=*/"1",
           "The position (sequence) axis of the results">,
  ];
  let statistics = [
    Statistic<"numResults", "num-results", "Results sliced">,
    Statistic<"numHoisted", "num-hoisted",
              "Ops now computed for the last position only">,
  ];
}

def SitsOutlineKernels : Pass<"sits-outline-kernels", "::mlir::ModuleOp"> {
  let summary = "Outline loop nests into functions, one per distinct body";
  let description = [{
    After bufferization, every top-level loop nest, linalg op or copy of a
    public function (a kernel: `scf.forall`, `scf.for`, `scf.parallel`,
    `scf.while`, a linalg op on buffers or `memref.copy`) moves into a private function of its own and
    is replaced by a call. Buffers, sizes and other values the kernel reads
    from its function become arguments, so weights (views into the weights
    buffer) and per-layer caches are arguments too; constants are cloned
    into the kernel. Kernels with the same body and signature become one
    function called from every place.

    A transformer's layers therefore lower and compile once however many
    there are: the rest of the pipeline and LLVM see each distinct kernel
    once, and code size follows the distinct layers of the graph, not its
    depth.

    ```mlir
    // Before: two layers, the same loop nest on different weights.
    scf.forall (%i) in (4) { ... %w0 ... }
    scf.forall (%i) in (4) { ... %w1 ... }
    // After
    call @main_kernel_0(%w0, %x, %y) : (...) -> ()
    call @main_kernel_0(%w1, %y, %z) : (...) -> ()
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
  let statistics = [
    Statistic<"numKernels", "num-kernels", "Kernels outlined">,
    Statistic<"numFunctions", "num-functions",
              "Distinct kernel functions created">,
  ];
}

def SitsOutlineLayers : Pass<"sits-outline-layers", "::mlir::ModuleOp"> {
  let summary = "Outline a model's repeated layers into one function";
  let description = [{
    A transformer repeats one layer N times; every pass after import would
    see N copies of the same ops on other weights, so compile time would
    grow with the depth. This pass finds, in each public function, the
    longest run of N >= 2 consecutive blocks of ops that are equal but for
    their weights (non-splat tensor constants, which stay in the caller) and
    the layer a `sits.paged_attention` reads (which becomes an operand), and
    replaces each block by a call to one private function marked
    `sits.layer`. Everything a block reads from outside (the previous
    layer's results, the weights, the inputs it shares with the other
    layers) is an argument; scalar and splat constants are cloned into the
    function; every call returns what any block's results are read for
    outside it, so that all share one signature. A first block that also
    computes what every block reads (the rotary tables reshaped for the
    heads) has those ops moved before it. Runs covering under a tenth of
    the function are left inline (a call boundary, which fusion does not
    cross, for little compile time); the ops before and after a run are
    searched the same way.

    The rest of the pipeline compiles the layer once: weight re-layouts
    apply to every call's constants, the KV pool a layer writes is its
    argument updated in place (`sits.updates`), and the layer returns the
    new buffers it computes.

    ```mlir
    // Before: two layers.
    %w0 = arith.constant dense_resource<w0> : tensor<64x64xf32>
    %a = sits.matmul %x, %w0 : ...
    %b = sits.gelu %a : ...
    %w1 = arith.constant dense_resource<w1> : tensor<64x64xf32>
    %c = sits.matmul %b, %w1 : ...
    %d = sits.gelu %c : ...
    // After
    %w0 = arith.constant dense_resource<w0> : tensor<64x64xf32>
    %b = call @main_layer(%x, %w0) : ...
    %w1 = arith.constant dense_resource<w1> : tensor<64x64xf32>
    %d = call @main_layer(%b, %w1) : ...
    ```
  }];
  let options = [
    Option<"minOps", "min-ops", "int64_t", /*default=*/"16",
           "Fewest ops a repeated block must have to be outlined">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect",
                           "::mlir::arith::ArithDialect"];
  let statistics = [
    Statistic<"numLayers", "num-layers", "Blocks replaced by a call">,
    Statistic<"numFunctions", "num-functions", "Layer functions created">,
  ];
}

def SitsInlineLayers : Pass<"sits-inline-layers", "::mlir::ModuleOp"> {
  let summary = "Inline the layer functions the ONNX importer emits once";
  let description = [{
    The importer emits each distinct repeated layer once, as a private
    function marked `sits.inline`, and calls it once per layer: shape
    inference, folding and emission run once per distinct layer. This pass,
    run right after import, inlines every call of such a function (in any
    function of the module) and erases the function, so that the module is
    flat as if every layer had been imported on its own.

    The function has one block; its ops but the `func.return` are cloned
    before the call, its arguments standing for the call's operands, and
    the returned values replace the call's results (constants stay clones).
    The function's `sits.node_names`, an array of strings N_0..N_{P-1}
    (the first of equal names wins), names the ONNX nodes of the layer it
    was imported from; a call's `sits.node_names`, as long, names those of
    its own layer. In every op cloned for the call (nested ones and their
    block arguments included), each NameLoc named N_j, also inside a fused,
    call-site or name location, is named by the call's j-th name, its child
    location kept. A call without `sits.node_names` keeps the function's
    locations. Errors: a call's `sits.node_names` that is not an array of
    strings as long as the function's; a `sits.inline` function that is a
    declaration, has more than one block, lacks its `sits.node_names` or
    calls another `sits.inline` function.

    ```mlir
    // Before
    func.func private @layer(%x: tensor<4xf32>) -> tensor<4xf32>
        attributes {sits.inline, sits.node_names = ["/l0/Relu"]} {
      %y = sits.activation <relu> %x : ... loc("/l0/Relu")
      return %y : tensor<4xf32>
    }
    %a = call @layer(%x) {sits.node_names = ["/l0/Relu"]} : ...
    %b = call @layer(%a) {sits.node_names = ["/l1/Relu"]} : ...
    // After
    %a = sits.activation <relu> %x : ... loc("/l0/Relu")
    %b = sits.activation <relu> %a : ... loc("/l1/Relu")
    ```
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

def SitsReadOnlyInputs : Pass<"sits-read-only-inputs", "::mlir::ModuleOp"> {
  let summary = "Mark the inputs of public functions read-only for bufferization";
  let description = [{
    One-Shot Bufferize takes every tensor argument of a function as
    writable unless it carries `bufferization.writable = false`. The
    arguments of a public function are the caller's arrays (the runtime
    passes aligned inputs without copying them), so an op that could update
    its operand in place (a scatter, an in-place elementwise op) would
    overwrite the user's input. This pass marks every tensor argument of a
    public function read-only, except those a result marked
    `sits.updates = i` updates in place (the paged KV pool); bufferization
    then copies an input before writing into it. Run before bufferization.
  }];
  let dependentDialects = ["::mlir::bufferization::BufferizationDialect"];
}

def SitsFoldEmptyTensors : Pass<"sits-fold-empty-tensors"> {
  let summary = "Fold ops that read or produce tensors with no elements";
  let description = [{
    ONNX allows extents of 0 (an empty slice, a reduction over an empty
    axis, a split of zero size); tiling and vectorization do not: a loop of
    zero trips gives a tile size of 0, which they take for "not tiled". The
    semantics are simple, so they are folded before codegen:

    - a linalg op on tensors whose iteration space has a static extent of 0
      runs no iteration: its results are its `outs` (a reduction over an
      empty axis is its init, the reduction's identity; a matmul with K = 0
      is its filled accumulator);
    - a side-effect-free op whose results all have static shapes with a 0
      extent becomes `tensor.empty` (nothing is read to produce them);
    - an insert of an empty tensor is its destination, and a concat drops
      its empty operands.

    ```mlir
    %r = linalg.reduce { arith.addf } ins(%x : tensor<2x0x4xf32>)
                                      outs(%init : tensor<2x4xf32>)
    // becomes %init
    ```

    Extents that are 0 only at run time need nothing: every loop runs zero
    trips.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def SitsSplitEmptyTensors : Pass<"sits-split-empty-tensors"> {
  let summary = "One tensor.empty per use";
  let description = [{
    Gives every use of a `tensor.empty` a `tensor.empty` of its own, placed
    right before the user. CSE merges equal `tensor.empty` ops (every
    hidden-state-sized destination of every layer becomes one value), and
    One-Shot Bufferize then sees all the writes into them as writes into one
    buffer: its conflict analysis, and that of `eliminate-empty-tensors`,
    costs the product of that buffer's reads and writes, quadratic in the
    depth of the model. Run right before bufferization; the buffers are the
    same either way (an empty tensor has no contents to copy).

    ```mlir
    %e = tensor.empty(%n) : tensor<?x256xf32>
    %0 = call @dispatch_1(%x, %e)
    %1 = call @dispatch_1(%0, %e)
    // becomes
    %e0 = tensor.empty(%n) : tensor<?x256xf32>
    %0 = call @dispatch_1(%x, %e0)
    %e1 = tensor.empty(%n) : tensor<?x256xf32>
    %1 = call @dispatch_1(%0, %e1)
    ```

    An insert of a tensor over the whole of a `tensor.empty` (as a padded
    image gets its unit batch dimension back) becomes a reshape of that
    tensor, which bufferizes as a view instead of a new buffer and a copy.
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
  let statistics = [
    Statistic<"numSplit", "num-split", "tensor.empty ops added">,
    Statistic<"numWholeInserts", "num-whole-inserts",
              "Inserts over a whole tensor.empty made reshapes">,
  ];
}

def SitsDeallocAfterLastUse : Pass<"sits-dealloc-after-last-use"> {
  let summary = "Free each buffer right after its last use";
  let description = [{
    Ownership-based buffer deallocation frees a buffer at the end of the
    block that allocated it, so every intermediate of a model stays alive
    until `@main` returns: a prefill's peak memory is the sum of all its
    activations, layer after layer. This pass moves each unconditional
    `memref.dealloc` of a fresh buffer of the same block (a `memref.alloc`,
    or the result of a call whose callee returns a `memref.alloc` of its
    own: an outlined layer's activations), or of its base buffer, up to
    right after the last op of the block that uses the buffer or a view of
    it (any op result of memref type derived from it, through regions and
    calls, except the fresh results of such a call). The runtime's allocator then hands the freed memory to the next
    layer. Buffers that escape (returned or yielded out of a region, stored,
    turned into pointers) keep their deallocation where it was. Run after
    `buffer-deallocation-pipeline`.

    ```mlir
    %a = memref.alloc(%n) : memref<?x256xf32>
    call @layer_0(%x, %a)
    %b = memref.alloc(%n) : memref<?x256xf32>
    call @layer_1(%a, %b)
    ...
    memref.dealloc %a : memref<?x256xf32>
    // becomes
    call @layer_1(%a, %b)
    memref.dealloc %a : memref<?x256xf32>
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect"];
  let statistics = [
    Statistic<"numMoved", "num-moved", "Deallocations moved up">,
  ];
}

def SitsSplitFreshDeallocs : Pass<"sits-split-fresh-deallocs"> {
  let summary = "One bufferization.dealloc per distinct fresh allocation";
  let description = [{
    Splits each `bufferization.dealloc` that retains nothing and frees
    several distinct fresh buffers into one op per buffer: `memref.alloc`
    results, results of calls whose callee returns `memref.alloc`s of its
    own (outlined layers), or their base buffers. Distinct fresh buffers
    never alias, while `buffer-deallocation-simplification` would query the
    aliasing of every pair of them, and the lowering would check it at run
    time and free them all at the end of the block: ownership-based
    deallocation frees all the activations of `@main` in one op at its end,
    so that cost grows with the square of the model's depth. Run between `ownership-based-buffer-deallocation` and
    `buffer-deallocation-simplification`.

    ```mlir
    bufferization.dealloc (%a, %b : memref<?xf32>, memref<?xf32>) if (%t, %t)
    // becomes
    bufferization.dealloc (%a : memref<?xf32>) if (%t)
    bufferization.dealloc (%b : memref<?xf32>) if (%t)
    ```
  }];
}

def SitsResolveExpandShapes
    : Pass<"sits-resolve-expand-shapes", "::mlir::ModuleOp"> {
  let summary = "Expand buffer shapes with several dynamic extents in a group";
  let description = [{
    Rewrites each `memref.expand_shape` that splits one dimension into
    several dynamic extents (`[B * S, N]` into `[B, S, N]`) into a
    `memref.reinterpret_cast` of its source's base buffer, with the extents
    of its `output_shape` and the strides they imply. Upstream's
    `expand-strided-metadata` accepts at most one dynamic extent per group;
    with this pass first, a contraction may merge any batch extents into its
    M dimension and expand its result back. Other expand shapes are left to
    `expand-strided-metadata`.

    ```mlir
    %0 = memref.expand_shape %m [[0, 1], [2]] output_shape [%b, %s, 64]
        : memref<?x64xf32> into memref<?x?x64xf32>
    // becomes
    %base, %offset, %sizes:2, %strides:2 = memref.extract_strided_metadata %m
    %0 = memref.reinterpret_cast %base to offset: [%offset],
        sizes: [%b, %s, 64], strides: [%s * 64, 64, 1]  // (an affine.apply)
    ```
  }];
  let dependentDialects = ["::mlir::affine::AffineDialect",
                           "::mlir::memref::MemRefDialect"];
}

def SitsExternalizeWeights
    : Pass<"sits-externalize-weights", "::mlir::ModuleOp"> {
  let summary = "Read large constants from a weights buffer instead of code";
  let description = [{
    After bufferization, every `memref.get_global` of a constant global of at
    least `min-bytes` bytes in a public function becomes a `memref.view` into
    a new leading function argument `%weights: memref<?xi8>`, at an offset
    aligned to 64 bytes. The module records the layout in the
    `sits.weights` attribute (an array of `{name, offset, value}`, `value`
    being the constant itself) and the globals are erased.

    The compiled code then stays as small as the graph, while the weights
    go into their own section of the artifact, which the runtime maps and
    passes in; `sitsSerializeWeights` (C API) writes that section from the
    `sits.weights` attribute.

    Weights a pass already wrote to their place in the artifact being
    compiled (the compile's weight file, see `makeFinalWeightBlob`) keep
    that offset and come first; `sits.weights_placed` records the bytes
    they span, which the artifact writer does not copy again. Without a
    weight file (as in `sits-opt`) the layout is first-use order.

    ```mlir
    // Before
    memref.global "private" constant @w : memref<1024x4096xf32> = dense_resource<fc1.weight>
    func.func @main(%x: memref<8x1024xf32>, %y: memref<8x4096xf32>) {
      %w = memref.get_global @w : memref<1024x4096xf32>
    // After (the module's sits.weights records name "w" at offset 0 with
    // its value)
      func.func @main(%weights: memref<?xi8>, %x: memref<8x1024xf32>, %y: memref<8x4096xf32>) {
        %c0 = arith.constant 0 : index
        %w = memref.view %weights[%c0][] : memref<?xi8> to memref<1024x4096xf32>
    ```
  }];
  let dependentDialects = ["::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
  let options = [
    Option<"minBytes", "min-bytes", "int64_t", /*default=*/"4096",
           "Smallest constant moved to the weights buffer">,
  ];
  let statistics = [
    Statistic<"numWeights", "num-weights", "Constants moved to the weights buffer">,
    Statistic<"numBytes", "num-bytes", "Bytes in the weights buffer">,
    Statistic<"numPlacedBytes", "num-placed-bytes",
              "Bytes of the weights buffer already at their place">,
  ];
}

def SitsMixedPrecision : Pass<"sits-mixed-precision", "::mlir::ModuleOp"> {
  let summary = "Quantize constant matmul weights (INT8, INT4, FP8, or per block) and conv filters (INT8)";
  let description = [{
    Rewrites every `sits.matmul` whose rhs is a constant 2-D f32 weight into
    `sits.qmatmul` with the dequantization fused into the contraction:

    * `int8`: symmetric, one scale per output channel;
    * `int4`: symmetric, one scale per `group-size` rows of K per column,
      packed two per byte along K (`#sits.packed<storage = i8, axis = 0>`);
    * `fp8`: E4M3 with one scale per output channel, only for targets whose
      table lists FP8 E4M3 (the module's `sits.target`, the host by
      default); asking for it elsewhere is an error;
    * `auto`: the weight is cut into `block-k` x `block-n` blocks (by
      default strips of 64 columns spanning K; e.g. `block-k=64` for 64x64
      blocks) and each
      block gets the cheapest format (INT4, then INT8 or FP8, then fp32)
      such that the weight's estimated relative RMS output error stays
      within `error-budget`. Formats are upgraded greedily, the block with
      the largest error reduction per extra byte first.

    The error estimate of a format for a block is the exact quantization
    residual `r = W - Q(W)` weighted by the input's second moment per row:
    `sum_k E[x_k^2] r_kn^2`, relative to the output's `sum_k E[x_k^2] W_kn^2`.
    Input statistics come from a `sits.input_stats = {mean, mean_square}`
    attribute on the matmul (measured on a calibration set), else from the
    producer when it is a layer norm (`E[x] = beta`, `E[x^2] = gamma^2 +
    beta^2`), else zero mean and unit variance.

    Bias correction adds `E[x] . r` to each output channel's bias (creating
    the bias when needed): the residual's mean contribution is removed, so
    only its variance (`E[x^2] - E[x]^2` in the estimate) remains.

    A weight whose blocks have different formats is executed as one
    `sits.qmatmul` (or `sits.matmul` for fp32) per run of equal-format
    blocks along K within each strip of equal-pattern columns; the runs'
    products are added and the strips concatenated. Each piece then keeps
    the uniform layout the contraction kernels stream. Pieces keep the codes
    and scales of the whole-weight quantization (8-bit formats per output
    channel, INT4 per group), so the executed quantization is the estimated
    one and 8-bit pieces take the per-channel GEMM path.

    Blocks that cut K trade a finer choice for more pieces (one contraction
    per run, partial sums added), hence the strip default.

    Every `sits.conv` whose filter is a constant f32 tensor becomes a
    `sits.qconv` of its INT8 codes with one scale per output channel (the
    filter seen as a `[C/groups x window, O]` weight): with `int8`, and with
    `auto` when that keeps the estimated error within `error-budget` (else
    the filter stays f32). Other formats leave convolutions alone, with a
    reason in the report. Input statistics come from `sits.input_stats` on
    the conv (one entry per input channel), else zero mean and unit
    variance; bias correction adds `E[x_c] . r` summed over each output
    channel's window.

    A weight that is an argument of a private function (a model's repeated
    layer, outlined once) is quantized when every use of the function is a
    call passing a constant: each call's constant as it would be on its own
    (its input statistics and bias read through the call), in a fixed
    format (`int8`, `int4`, `fp8`; a filter with `auto` when every call's
    error is within the budget). The function gets one new argument per
    constant of the rewrite (codes, scales, corrected bias), each call
    passing those of its own weight; the weight and bias arguments go once
    unused. A matmul weight with `auto`, or calls whose biases would be
    corrected differently, are skipped: one rewrite serves all calls.

    Every decision goes into the module's `sits.report.precision` array:
    per weight its `op` (location name), `kind` (`quantized` or `skipped`
    with a `reason`), `shape` (`[K, N]`, or the conv filter's),
    `format` per block (row-major), `block_shape`,
    `est_error`, `bytes` (weights + scales), `fp32_bytes` and
    `bias_correction` (L2 norm of the correction); a weight passed by calls
    has one entry per call, with its `call` (location name).

    ```mlir
    // precision=int8
    %y = sits.matmul %x, %w : (tensor<8x768xf32>, tensor<768x3072xf32>) -> tensor<8x3072xf32>
    // becomes
    %y = sits.qmatmul %x, %q, %s bias(%b) {axis = 1 : i64}
        : (tensor<8x768xf32>, tensor<768x3072xi8>, tensor<3072xf32>, tensor<3072xf32>) -> tensor<8x3072xf32>
    ```
  }];
  let dependentDialects = ["::mlir::sits::SitsDialect",
                           "::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
  let options = [
    Option<"precision", "precision", "std::string", /*default=*/"\"fp32\"",
           "fp32 (leave weights alone), int8, int4, fp8 or auto">,
    Option<"errorBudget", "error-budget", "double", /*default=*/"0.01",
           "precision=auto: estimated relative RMS output error allowed per weight">,
    Option<"groupSize", "group-size", "int64_t", /*default=*/"64",
           "INT4 group along K: 32, 64 or 128">,
    Option<"blockK", "block-k", "int64_t", /*default=*/"0",
           "precision=auto: block rows (along K), a multiple of group-size; 0: all of K">,
    Option<"blockN", "block-n", "int64_t", /*default=*/"64",
           "precision=auto: block columns (along N)">,
    Option<"biasCorrection", "bias-correction", "bool", /*default=*/"true",
           "Fold the quantization residual's mean contribution into the bias">,
  ];
  let statistics = [
    Statistic<"numQuantized", "num-quantized", "Weights quantized">,
    Statistic<"numFp32Bytes", "fp32-bytes", "Bytes of the quantized weights in fp32">,
    Statistic<"numBytes", "bytes", "Bytes of the quantized weights and scales">,
  ];
}

def SitsReorder : Pass<"sits-reorder", "::mlir::ModuleOp"> {
  let summary = "Fusion groups and an order of them for peak memory and overlap";
  let description = [{
    Schedules the body of every public function with the roofline cost
    model of its target (`target`, else the module's `sits.target`, else
    the host CPU), whose figures come from the known-target table:

    * Fusion groups, as the code generators fuse: a contraction with the
      elementwise ops that alone read its result (its epilogue), chains of
      elementwise ops, and transposes, broadcasts, copies and pads folded
      into the group that reads all they produce. Each group is costed as
      one kernel: its FLOPs, and the bytes entering and leaving it.
    * An order of the groups, applied to the IR (each group's ops
      together, reshapes and constants right before their first user): the
      valid order of lowest peak live memory among a greedy one, a
      depth-first one and the current one (`profile=memory`), or with
      `profile=latency` one alternating memory-bound and compute-bound
      groups where they are independent, if its peak stays within the
      original order's (or the lowest found, whichever is higher).
    * A memory plan: every tensor passed between groups gets an offset in
      one arena, largest first, best fit among tensors alive at the same
      time.

    A schedule whose peak live memory plus the weights exceeds the target's
    memory (or `memory-limit`) is still applied, with a warning.

    The decisions are recorded in the module attribute
    `sits.report.schedule` and, with `schedule-file`, written as a schedule
    file (format: passes/Analysis/ScheduleFormat.md), which also carries
    the precision decisions of `sits.report.precision`.
  }];
  let dependentDialects = ["::mlir::sits::SitsDialect"];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "Known target whose figures the cost model uses (default: the "
           "module's sits.target, else the host CPU)">,
    Option<"profile", "profile", "std::string", /*default=*/"\"latency\"",
           "'latency': overlap memory- and compute-bound groups within the "
           "lowest peak memory; 'memory': lowest peak memory only">,
    Option<"scheduleFile", "schedule-file", "std::string", /*default=*/"\"\"",
           "Write the schedule to this file ('-': stdout)">,
    Option<"memoryLimit", "memory-limit", "int64_t", /*default=*/"0",
           "Bytes the schedule must fit in (0: the target's memory)">,
    Option<"peakGflops", "peak-gflops", "double", /*default=*/"0",
           "Override the target's fp32 peak (GFLOP/s; other dtypes scale "
           "with it)">,
    Option<"bandwidthGBs", "bandwidth-gbs", "double", /*default=*/"0",
           "Override the target's memory bandwidth (GB/s)">,
  ];
  let statistics = [
    Statistic<"numGroups", "num-groups", "Fusion groups scheduled">,
    Statistic<"numMoved", "num-moved", "Groups whose position changed">,
    Statistic<"statPeakBefore", "peak-bytes-before",
              "Peak live bytes in the original order">,
    Statistic<"statPeakAfter", "peak-bytes-after",
              "Peak live bytes in the chosen order">,
  ];
}

def SitsPrintTarget : Pass<"sits-print-target", "::mlir::ModuleOp"> {
  let summary = "Print the known-target table entry the module compiles for";
  let description = [{
    Prints to stdout, one `key: value` line each, the figures of `target`
    (default: the module's `sits.target`, else the host CPU) from the
    known-target table, or of every known target with `target=all`. The IR
    is unchanged.
  }];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"\"",
           "A known target name or alias, or 'all'">,
  ];
}

def SitsSetTarget : Pass<"sits-set-target", "::mlir::ModuleOp"> {
  let summary = "Name the target the module compiles for";
  let description = [{
    Sets the module's `sits.target` to `target` (a known target name or
    alias, stored as its canonical name), replacing any there. Every
    target-dependent pass reads that attribute, so a pipeline that starts
    with this pass compiles for the same target wherever it runs, e.g.
    `sits-cpu-pipeline{target=x86-64-v3}` on any host. An unknown name is an
    error listing the known ones.

    ```mlir
    // sits-opt --sits-set-target=target=avx2
    module attributes {sits.target = #sits.target<"x86-64-v3">} { ... }
    ```
  }];
  let dependentDialects = ["::mlir::sits::SitsDialect"];
  let options = [
    Option<"target", "target", "std::string", /*default=*/"\"cpu\"",
           "A known target name or alias">,
  ];
}

#endif // SITS_PASSES_TRANSFORMS_PASSES_TD
