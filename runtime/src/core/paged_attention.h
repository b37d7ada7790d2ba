//===- paged_attention.h - The paged attention's paths (internal) ---------===//
//
// `sitsRuntimePagedAttention` (f32 pool) and `sitsRuntimePagedAttentionI8`
// (int8 pool: each K/V row `headDim` int8 codes then its f32 scale, strides
// in bytes) (paged_attention.cpp) pick one implementation per process from
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

extern "C" SITS_RUNTIME_API void sitsRuntimePagedAttention(
    int64_t batch, int64_t queries, int64_t qHeads, int64_t kvHeads,
    int64_t headDim, const float *q, int64_t qBatchStride, int64_t qHeadStride,
    int64_t qTokenStride, const float *pool, int64_t numBlocks,
    int64_t blockStride, int64_t keyOffset, int64_t valueOffset,
    int64_t kvHeadStride, int64_t blockSize, int64_t positionStride,
    const int32_t *tables, int64_t tableWidth, int64_t tableStride,
    const int32_t *contextLens, float scale, float *out, int64_t outBatchStride,
    int64_t outHeadStride, int64_t outTokenStride);

/// As sitsRuntimePagedAttention, over a pool of int8 rows: the K or V row
/// of (block, kv head, position) is `headDim` int8 codes followed by one
/// f32 scale (native byte order, at byte `headDim` of the row, any
/// alignment); element d is `code[d] * scale`. Pool strides and offsets
/// count bytes; a row spans `headDim + 4` bytes and `positionStride >=
/// headDim + 4` when `blockSize > 1`.
extern "C" SITS_RUNTIME_API void sitsRuntimePagedAttentionI8(
    int64_t batch, int64_t queries, int64_t qHeads, int64_t kvHeads,
    int64_t headDim, const float *q, int64_t qBatchStride, int64_t qHeadStride,
    int64_t qTokenStride, const int8_t *pool, int64_t numBlocks,
    int64_t blockStride, int64_t keyOffset, int64_t valueOffset,
    int64_t kvHeadStride, int64_t blockSize, int64_t positionStride,
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

/// What the pool holds: f32 elements (`sitsRuntimePagedAttention`) or
/// int8 rows, each `headDim` codes and an f32 scale
/// (`sitsRuntimePagedAttentionI8`; pool strides in bytes).
enum class Format { kF32, kI8Row };

/// The arguments of `sitsRuntimePagedAttention` or
/// `sitsRuntimePagedAttentionI8`, in order (`pool` a `const float *` or a
/// `const int8_t *`), then which of the two.
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
};

/// `sitsRuntimePagedAttention` (or `...I8`, per `args.format`) on path `isa`
/// (threads and argument checks included; a head size the path's vectors do not
/// divide takes the next narrower path, as the exported function does); false,
/// with nothing read or written, when `isa` is not available.
SITS_RUNTIME_API bool run(Isa isa, const Args &args);

} // namespace sits::runtime::pattn

#endif // SITS_RUNTIME_CORE_PAGED_ATTENTION_H
