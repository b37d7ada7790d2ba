//===- paged_attention.h - The paged attention's paths (internal) ---------===//
//
// `sitsRuntimePagedAttention` (f32 pool), `sitsRuntimePagedAttentionI8`
// (int8 pool: each K/V row `headDim` int8 codes then its f32 scale, strides
// in bytes) and `sitsRuntimePagedAttentionF8E4M3` (the same with FP8 E4M3FN
// codes) (paged_attention.cpp) pick one implementation per process from
// the CPU's features. The unit tests run each path the CPU has through
// `run` and compare it with a plain double-precision reference. Exported
// (sits::runtime is) only for those tests; compiled code calls the
// `sitsRuntimePagedAttention*` functions.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_PAGED_ATTENTION_H
#define SITS_RUNTIME_CORE_PAGED_ATTENTION_H

#include "sits/runtime/export.h"

#include <cstdint>

/// The signature of the entry points, which differ in the pool's element
/// type only.
#define SITS_PAGED_ATTENTION_SIGNATURE(NAME, POOL_TYPE)                        \
  extern "C" SITS_RUNTIME_API void NAME(                                       \
      int64_t batch, int64_t queries, int64_t qHeads, int64_t kvHeads,         \
      int64_t headDim, const float *q, int64_t qBatchStride,                   \
      int64_t qHeadStride, int64_t qTokenStride, const POOL_TYPE *pool,        \
      int64_t numBlocks, int64_t blockStride, int64_t keyOffset,               \
      int64_t valueOffset, int64_t kvHeadStride, int64_t blockSize,            \
      int64_t positionStride, const int32_t *tables, int64_t tableWidth,       \
      int64_t tableStride, const int32_t *contextLens, float scale,            \
      float *out, int64_t outBatchStride, int64_t outHeadStride,               \
      int64_t outTokenStride)

/// Attention over an f32 pool (strides in elements).
SITS_PAGED_ATTENTION_SIGNATURE(sitsRuntimePagedAttention, float);

/// As sitsRuntimePagedAttention, over a pool of int8 rows: the K or V row
/// of (block, kv head, position) is `headDim` int8 codes followed by one
/// f32 scale (native byte order, at byte `headDim` of the row, any
/// alignment); element d is `code[d] * scale`. Pool strides and offsets
/// count bytes; a row spans `headDim + 4` bytes and `positionStride >=
/// headDim + 4` when `blockSize > 1`.
SITS_PAGED_ATTENTION_SIGNATURE(sitsRuntimePagedAttentionI8, int8_t);

/// As sitsRuntimePagedAttentionI8, over rows of OCP FP8 E4M3FN codes (1
/// sign, 4 exponent bits of bias 7, 3 mantissa bits, no infinities, max
/// finite 448): the K or V row is `headDim` one-byte codes followed by one
/// f32 scale (native byte order, at byte `headDim`, any alignment); element
/// d is `fp8(code[d]) * scale`. Strides, offsets and checks as for I8 (a
/// row spans `headDim + 4` bytes). The NaN codes (0x7F, 0xFF), which
/// writers never produce, are not handled specially.
SITS_PAGED_ATTENTION_SIGNATURE(sitsRuntimePagedAttentionF8E4M3, uint8_t);

/// As sitsRuntimePagedAttention, over layer `layer` of a pool of
/// `numBlocks` KIVI blocks of `bits` (4 or 2) codes and f32 tails, laid out as
/// sits/runtime/kivi_layout.h says for (numLayers, kvHeads, blockSize,
/// headDim, bits): position t of sequence b is read from its block's
/// quantized slab when the block is full (contextLens[b] reaches its end),
/// else from the block's tail. Invalid geometry computes nothing.
extern "C" SITS_RUNTIME_API void sitsRuntimePagedAttentionKivi(
    int64_t batch, int64_t queries, int64_t qHeads, int64_t kvHeads,
    int64_t headDim, const float *q, int64_t qBatchStride, int64_t qHeadStride,
    int64_t qTokenStride, const uint8_t *pool, int64_t numBlocks,
    int64_t numLayers, int64_t layer, int64_t blockSize, int64_t bits,
    const int32_t *tables, int64_t tableWidth, int64_t tableStride,
    const int32_t *contextLens, float scale, float *out, int64_t outBatchStride,
    int64_t outHeadStride, int64_t outTokenStride);

namespace sits::runtime::pattn {

enum class Isa { kScalar, kAvx2, kAvx512 };

/// "scalar", "avx2", "avx512".
SITS_RUNTIME_API const char *isaName(Isa isa);
/// Whether this build and CPU can run `isa` (kScalar always).
SITS_RUNTIME_API bool isaAvailable(Isa isa);
/// The path `sitsRuntimePagedAttention*` takes on this CPU.
SITS_RUNTIME_API Isa selectedIsa();

/// What the pool holds: f32 elements (`sitsRuntimePagedAttention`), int8
/// rows, each `headDim` codes and an f32 scale
/// (`sitsRuntimePagedAttentionI8`; pool strides in bytes), or the same
/// with E4M3FN codes (`sitsRuntimePagedAttentionF8E4M3`).
/// `kKivi`: `sitsRuntimePagedAttentionKivi`'s pool of 4- or 2-bit blocks
/// and their f32 tails (sits/runtime/kivi_layout.h).
enum class Format { kF32, kI8Row, kF8E4M3Row, kKivi };

/// The arguments of `sitsRuntimePagedAttention`,
/// `sitsRuntimePagedAttentionI8` or `sitsRuntimePagedAttentionF8E4M3`, in
/// order (`pool` a `const float *`, `const int8_t *` or `const uint8_t *`),
/// then which of the three.
struct Args {
  int64_t batch, queries, qHeads, kvHeads, headDim;
  const float *q;
  int64_t qBatchStride, qHeadStride, qTokenStride;
  const void *pool;
  int64_t numBlocks, blockStride, keyOffset, valueOffset, kvHeadStride;
  int64_t blockSize, positionStride;
  const int32_t *tables;
  int64_t tableWidth, tableStride;
  const int32_t *contextLens;
  float scale;
  float *out;
  int64_t outBatchStride, outHeadStride, outTokenStride;
  Format format = Format::kF32;
  /// kKivi only: the layout's layers, the layer attended and the code
  /// width (the pool strides and offsets above are unused).
  int64_t numLayers = 0, layer = 0, bits = 0;
};

/// `sitsRuntimePagedAttention` (or `...I8`, `...F8E4M3`, per `args.format`)
/// on path `isa`
/// (threads and argument checks included; a head size the path's vectors do not
/// divide takes the next narrower path, as the exported function does); false,
/// with nothing read or written, when `isa` is not available.
SITS_RUNTIME_API bool run(Isa isa, const Args &args);

/// The E4M3FN codes[0, n) as path `isa`'s kernels read them (its vector
/// loads for whole vectors, then the portable conversion) into out[0, n);
/// false, with nothing written, when `isa` is not available. Exact for
/// every code but the NaNs (0x7F, 0xFF), which are not handled specially.
SITS_RUNTIME_API bool decodeF8E4M3(Isa isa, const uint8_t *codes, int64_t n,
                                   float *out);

} // namespace sits::runtime::pattn

#endif // SITS_RUNTIME_CORE_PAGED_ATTENTION_H
