//===- attention_scores.h - Attention weights out of paged attention ------===//
//
// Score-based KV eviction (H2O, SnapKV) keeps the tokens attention uses
// most, so it needs the softmax weights the paged attention kernels
// compute. Compiled code calls those kernels with the model's operands
// only; the weights are an engine policy, not part of the model, so they
// leave through a side channel: while a sink is attached to a pool, every
// `sitsRuntimePagedAttention*` call over that pool (any layer) also adds,
// for the last `observe` queries of each sequence of the call, each
// position's softmax weight summed over the query heads of a kv head into
//
//   out[(row * positions + t) * kv_heads + g]
//
// (row: the sequence's row in the call; t: the position in its context; g:
// the kv head). Positions at or past `positions` and rows at or past
// `rows` are not written. Every layer's call adds into the same array, so
// after a step `out` holds the weight summed over layers, query heads and
// observed queries: per query and query head the weights sum to 1.
//
// The pass recomputes q.K for the observed queries (one more read of the
// keys they see), so a call pays for it only while a sink is attached.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_ATTENTION_SCORES_H
#define SITS_RUNTIME_ATTENTION_SCORES_H

#include "sits/runtime/export.h"
#include "sits/runtime/status.h"

#include <cstdint>

namespace sits::runtime {

struct AttentionScores {
  /// [rows][positions][kv_heads], added to (not cleared).
  float *out = nullptr;
  int64_t rows = 0, positions = 0, kv_heads = 0;
  /// How many of each sequence's last queries are scored (>= 1).
  int64_t observe = 1;
  /// Optional, [rows]: row b's own count (at most `observe`; 0 scores
  /// nothing), for calls whose rows are left-padded to different lengths.
  const int64_t *row_observe = nullptr;
};

/// Attaches `sink` to the pool at [pool, pool + bytes): calls whose pool
/// pointer lies in that range feed it until `detachAttentionScores(pool)`.
/// InvalidArgument for a null or empty range or sink, or a range that
/// overlaps an attached one.
SITS_RUNTIME_API Status attachAttentionScores(const void *pool, int64_t bytes,
                                              const AttentionScores &sink);
/// Detaches the sink attached at `pool` (nothing attached: no-op).
SITS_RUNTIME_API void detachAttentionScores(const void *pool);

} // namespace sits::runtime

#endif // SITS_RUNTIME_ATTENTION_SCORES_H
