//===- paged_attention.h - The paged attention's paths (internal) ---------===//
//
// `sitsRuntimePagedAttention` (paged_attention.cpp) picks one
// implementation per process from the CPU's features. The unit tests run
// each path the CPU has through `run` and compare it with a plain
// double-precision reference. Exported (sits::runtime is) only for those
// tests; compiled code calls `sitsRuntimePagedAttention`.
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

namespace sits::runtime::pattn {

enum class Isa { kScalar, kAvx2, kAvx512 };

/// "scalar", "avx2", "avx512".
SITS_RUNTIME_API const char *isaName(Isa isa);
/// Whether this build and CPU can run `isa` (kScalar always).
SITS_RUNTIME_API bool isaAvailable(Isa isa);
/// The path `sitsRuntimePagedAttention` takes on this CPU.
SITS_RUNTIME_API Isa selectedIsa();
/// The arguments of `sitsRuntimePagedAttention`, in order.
struct Args {
  int64_t batch, queries, qHeads, kvHeads, headDim;
  const float *q;
  int64_t qBatchStride, qHeadStride, qTokenStride;
  const float *pool;
  int64_t numBlocks, blockStride, keyOffset, valueOffset, kvHeadStride;
  int64_t blockSize, positionStride;
  const int32_t *tables;
  int64_t tableWidth, tableStride;
  const int32_t *contextLens;
  float scale;
  float *out;
  int64_t outBatchStride, outHeadStride, outTokenStride;
};

/// `sitsRuntimePagedAttention` on path `isa` (threads and argument checks
/// included; a head size the path's vectors do not divide takes the next
/// narrower path, as the exported function does); false, with nothing read
/// or written, when `isa` is not available.
SITS_RUNTIME_API bool run(Isa isa, const Args &args);

} // namespace sits::runtime::pattn

#endif // SITS_RUNTIME_CORE_PAGED_ATTENTION_H
