//===- model_runner.h - What the engine asks of a model, one step at a time
//===//
//
// The engine is model-agnostic: each step it hands a `ModelRunner` the batch
// it scheduled and gets back one logits row per sequence. The runner owns
// the KV tensors (sized from the pool's `bytes_per_block`, e.g. a
// `kv::Memory`) and, before computing anything, must execute `copies` in
// order (copy-on-write after a fork, host-tier offload and onboarding; the
// engine runs the allocator in STREAM_ORDERED mode). Then, per sequence, it
// writes the K/V of `token_ids` at `slot_mapping` and attends over the
// `context_len` positions of `block_table`. A prefill's early tokens may sit
// in blocks that another sequence of the same batch writes in this step (a
// prefix-cache hit on a block sealed this step), so all K/V writes of a
// layer must land before that layer's attention reads, as in paged
// attention kernels.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_ENGINE_MODEL_RUNNER_H
#define SITS_RUNTIME_ENGINE_MODEL_RUNNER_H

#include "sits/runtime/kv/allocator.h"
#include "sits/runtime/status.h"

#include <cstdint>
#include <vector>

namespace sits::runtime::engine {

/// One sequence of a step.
struct ScheduledSequence {
  /// The allocator's sequence id (changes when a preempted sequence is
  /// admitted again).
  uint64_t seq_id = 0;
  /// True for the first step after admission: the whole uncached part of
  /// the sequence (prompt, plus what it generated before a preemption).
  /// False for a decode step: one token.
  bool is_prefill = false;
  /// The tokens whose K/V this step computes, and their positions
  /// (consecutive, ending at the sequence's length - 1; with token
  /// eviction the context holds fewer positions than that, and the new
  /// tokens are its last context entries).
  std::vector<int32_t> token_ids;
  std::vector<int64_t> positions;
  /// Where each new token's K/V goes: block_id * block_size + offset.
  std::vector<int64_t> slot_mapping;
  /// The sequence's whole block table (ceil(context_len / block_size)
  /// blocks).
  std::vector<int32_t> block_table;
  /// Tokens in the sequence's context after this step: cached + computed
  /// (less any evicted ones).
  int64_t context_len = 0;
  /// Score-based eviction: return the attention weights of the last
  /// `score_queries` new tokens over the context (StepOutput::attention);
  /// 0: none.
  int64_t score_queries = 0;
};

struct StepBatch {
  /// Copies to run before this step's kernels, in order.
  std::vector<kv::BlockCopy> copies;
  std::vector<ScheduledSequence> sequences;
};

struct StepOutput {
  int64_t vocab_size = 0;
  /// [sequences.size()][vocab_size]: row i is the logits of the last
  /// position of sequence i.
  std::vector<float> logits;
  /// For the sequences with score_queries > 0 (empty for the others):
  /// [context_len][attention_heads], each context entry's softmax weight
  /// summed over layers, the query heads of each kv head and the scored
  /// queries.
  std::vector<std::vector<float>> attention;
  int64_t attention_heads = 0;
};

class ModelRunner {
public:
  virtual ~ModelRunner() = default;
  /// Runs one step. `out` holds the previous step's output (its storage is
  /// reused): set both fields. An error fails the requests of this batch
  /// (the engine cannot know what the KV tensors hold) and is returned by
  /// Engine::step.
  virtual Status execute(const StepBatch &batch, StepOutput *out) = 0;
  /// Whether the model takes the positions of the new tokens (rather than
  /// deriving them from context_len), which token eviction needs.
  virtual bool takesPositions() const { return true; }
  /// Whether it returns attention weights (score_queries).
  virtual bool scoresAttention() const { return false; }
};

} // namespace sits::runtime::engine

#endif // SITS_RUNTIME_ENGINE_MODEL_RUNNER_H
