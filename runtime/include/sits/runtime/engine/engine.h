//===- engine.h - Generation engine: continuous batching over the KV pool -===//
//
// `Engine` runs prefill and decode steps for many requests at once over a
// `kv::Allocator` and a `ModelRunner`, one `step()` at a time:
//
//   1. Decode: every running sequence gets one slot for its last sampled
//      token (`append`, oldest admission first). When the pool is out of
//      blocks, the most recently admitted running sequence is preempted.
//      By recompute (the default): its blocks are freed and it goes back to
//      the head of the waiting queue with its generated tokens, to be
//      prefilled again as prompt + generated (prefix caching usually serves
//      most of it back). By swap (PreemptionMode::kSwap, needs a host
//      tier): its exclusive blocks move to the host (`swapOut`, D2H copies)
//      and it waits in the swapped queue; recompute when the host tier is
//      full.
//   2. Resume, then admit: unless this step preempted, swapped sequences
//      are swapped back in (oldest first; they are running again from the
//      next step's decode on), and only once none is left waiting
//      sequences are admitted in FIFO order (`addSequence` with token ids, so
//      shared prompts hit the prefix cache) while the batch has room
//      (max_batch_size; a fresh request with n parallel samples needs n places)
//      and the pool has blocks. The head blocks the queue (no overtaking).
//   3. The runner computes the batch; each sequence samples its next token.
//      A request with n > 1 is prefilled once, then forked into n sequences
//      that share the prompt's blocks; each samples its own first token from
//      the same logits (a shared partial tail is copied on first write).
//   4. A stop token or max_new_tokens finishes a sample and frees its blocks.
//
// `abort(id)` (between steps) finishes a waiting, running or swapped request
// at once (FinishReason::kAbort) and frees its blocks before it returns.
//
// Requests that can never fit (prompt + max_new_tokens > max_seq_len, or
// more blocks than the pool has; with token eviction, the blocks of the
// prompt or the budget) fail at `addRequest` with
// CapacityExceeded; nothing in a step crashes or loops forever.
//
// Sampling is keyed per sample (see sampler.h), so results do not depend on
// batch size, pool size, preemptions or prefix caching.
//
// The engine must be the allocator's only user (it checks the pool is empty
// at creation) and is not thread-safe: one thread drives it.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_ENGINE_ENGINE_H
#define SITS_RUNTIME_ENGINE_ENGINE_H

#include "sits/runtime/engine/model_runner.h"
#include "sits/runtime/engine/sampler.h"
#include "sits/runtime/kv/allocator.h"
#include "sits/runtime/status.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace sits::runtime::engine {

enum class PreemptionMode : int32_t {
  /// Free the blocks; prefill prompt + generated again later.
  kRecompute = 0,
  /// Move the blocks to the host tier (recompute when it is full).
  kSwap = 1,
};
const char *preemptionModeName(PreemptionMode mode);

struct EngineConfig {
  /// Most sequences in one step (running + admitted). >= 1.
  int64_t max_batch_size = 8;
  PreemptionMode preemption = PreemptionMode::kRecompute;
  /// Keys the draws of requests without a seed of their own.
  uint64_t seed = 0;
  /// The model's vocabulary: prompt tokens and stop tokens must be below
  /// it (a token id past the embedding table is refused, not read). 0: not
  /// known, not checked.
  int64_t vocab_size = 0;
};

/// Token eviction (the KV cache's token axis): what a sequence drops once
/// it holds more than its budget.
enum class EvictionPolicy : int32_t {
  kNone = 0,
  /// StreamingLLM: keep the attention sinks and the most recent tokens; the
  /// oldest block between them goes first.
  kWindow = 1,
  /// H2O / SnapKV: the block between sinks and recent tokens that received
  /// the least attention weight so far (summed over layers, heads and the
  /// observed queries) goes first.
  kAttention = 2,
};

const char *evictionPolicyName(EvictionPolicy policy);

/// Eviction works on whole KV blocks, so it serves every pool format
/// (quantized KIVI blocks included) without moving K/V: after each step a
/// sequence holding more than `budget` tokens drops blocks until it holds
/// at most `budget` (so between budget - block_size and budget). Positions
/// stay the tokens' own (RoPE was applied before the K/V were cached); the
/// model attends over the kept tokens only. The prompt is prefilled whole
/// first (SnapKV scores it with its last queries); a sequence preempted by
/// recompute prefills its kept tokens only, at their own positions (their
/// K/V now computed over the kept context, as StreamingLLM recomputes; its
/// attention scores start over). So a request needs pool room for its
/// prompt or budget + 1 tokens, whichever is larger, however many tokens
/// it generates. Blocks filled after a drop hold K/V computed without the
/// dropped tokens and never enter the prefix cache. With a budget above
/// the sequence's length nothing is dropped and the tokens are the same as
/// without eviction.
struct KVEviction {
  EvictionPolicy policy = EvictionPolicy::kNone;
  /// Most tokens kept in the pool after a step; at least (sink blocks +
  /// recent blocks + 1) × block_size.
  int64_t budget = 0;
  /// The first tokens (attention sinks), never dropped; whole blocks.
  int64_t sink_tokens = 4;
  /// The latest tokens, never dropped; whole blocks. -1: a quarter of the
  /// budget for kAttention (at a 50% budget on the 55 M Llama of
  /// test/bench/kv_compression.py, mean KL 0.0083 / 0.0147 on its two
  /// models where H2O's half gives 0.0103 / 0.0159), none beyond the block
  /// being filled for kWindow.
  int64_t recent_tokens = -1;
  /// kAttention: how many of a prefill's last queries score the prompt
  /// (SnapKV's observation window); a decode step scores with its query.
  int64_t observe = 32;
};

struct Request {
  /// Token ids, >= 0; at least one.
  std::vector<int32_t> prompt;
  /// >= 1.
  int64_t max_new_tokens = 16;
  SamplingParams sampling;
  /// Parallel samples, in [1, max_batch_size].
  int64_t n = 1;
  /// Stop token ids: any of them ends a sample when drawn (and is its last
  /// token). Duplicates are harmless; empty: none.
  std::vector<int32_t> stop_tokens;
  /// Log-probabilities to record per generated token, of the model's
  /// distribution (log-softmax of the raw logits row, before temperature
  /// and filters): -1 none; 0 the sampled token's; k in [1, kMaxLogprobs]
  /// also the k most likely tokens' (ties: lower id first).
  int32_t logprobs = -1;
  /// Token eviction under a KV budget (none by default).
  KVEviction eviction;
  /// Tokens every sample emits in place of drawing, one per step, before
  /// sampling takes over (teacher forcing: scoring a given continuation,
  /// comparing a model's distributions along a fixed path). Token ids as
  /// for the prompt; stop tokens among them end the sample as usual.
  std::vector<int32_t> forced_tokens;
  /// Keep every step's raw logits row (SampleResult::logits).
  bool return_logits = false;
};

constexpr int32_t kMaxLogprobs = 20;

struct TokenLogprob {
  int32_t token = 0;
  float logprob = 0;
};

enum class FinishReason : int32_t {
  kNone = 0,   ///< still running
  kStop = 1,   ///< drew the stop token
  kLength = 2, ///< reached max_new_tokens
  kError = 3,  ///< the request failed (RequestResult::status)
  kAbort = 4,  ///< aborted by `Engine::abort` before it finished
};
const char *finishReasonName(FinishReason reason);

struct SampleResult {
  /// Generated tokens, the stop token included.
  std::vector<int32_t> tokens;
  FinishReason finish_reason = FinishReason::kNone;
  /// With Request::logprobs >= 0: one per token, the sampled token's
  /// log-probability; with logprobs k > 0 also, per token, the k most likely.
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> top_logprobs;
  /// With Request::return_logits: [tokens][vocab], the raw logits row each
  /// token was drawn (or forced) from.
  std::vector<float> logits;
};

/// Times are seconds on the engine's steady clock (0 = engine creation).
struct RequestMetrics {
  double arrival_s = 0;
  /// -1 until the first token.
  double first_token_s = -1;
  double finish_s = -1;
  /// first_token_s - arrival_s (-1 until the first token).
  double ttft_s = -1;
  /// Mean over samples of (finish - first token) / (tokens - 1), for
  /// samples with more than one token; 0 when none.
  double tpot_s = 0;
  int64_t prompt_tokens = 0;
  /// Over all samples.
  int64_t output_tokens = 0;
  /// Tokens served by the prefix cache at admissions (re-admissions after a
  /// preemption included).
  int64_t cached_tokens = 0;
  int64_t preemptions = 0;
  /// Tokens dropped by eviction (all samples).
  int64_t evicted_tokens = 0;
};

struct RequestResult {
  uint64_t id = 0;
  bool finished = false;
  /// OK, or why the request failed (every sample then has kError).
  Status status;
  /// n entries, in sample order.
  std::vector<SampleResult> samples;
  /// The request's Request::logprobs (what the samples record).
  int32_t logprobs = -1;
  RequestMetrics metrics;
};

struct EngineMetrics {
  int64_t steps = 0;
  /// Sequences scheduled as prefills / decodes, summed over steps.
  int64_t prefills = 0;
  int64_t decodes = 0;
  /// Tokens whose K/V the runner computed (prefill and decode).
  int64_t computed_tokens = 0;
  int64_t output_tokens = 0;
  /// Preemptions, and of those the ones done by swapping out (the rest
  /// recompute).
  int64_t preemptions = 0;
  int64_t swap_outs = 0;
  int64_t swap_ins = 0;
  /// Tokens the prefix cache served at admissions.
  int64_t prefix_cache_hit_tokens = 0;
  /// Tokens dropped by eviction, and the KV blocks that freed.
  int64_t evicted_tokens = 0;
  int64_t evicted_blocks = 0;
  int64_t requests_finished = 0;
  int64_t requests_failed = 0;
  int64_t requests_aborted = 0;
  /// Wall time inside step(), and output tokens per second of it.
  double busy_s = 0;
  double tokens_per_s = 0;
  /// Device blocks in use (usable - free - cached) after each step's
  /// scheduling: peak, and utilization (of usable) peak and mean over steps.
  int64_t kv_blocks_peak = 0;
  double kv_utilization_peak = 0;
  double kv_utilization_mean = 0;
  /// Means over finished requests (those that produced tokens).
  double mean_ttft_s = 0;
  double mean_tpot_s = 0;
};

class Engine {
public:
  /// `allocator` and `runner` must outlive the engine. Errors:
  /// InvalidArgument (null pointer, max_batch_size < 1, an allocator that
  /// already holds sequences, swap preemption without a host tier),
  /// Unimplemented (copy_ordering ASYNC).
  static StatusOr<std::unique_ptr<Engine>> create(const EngineConfig &config,
                                                  kv::Allocator *allocator,
                                                  ModelRunner *runner);
  ~Engine();
  Engine(const Engine &) = delete;
  Engine &operator=(const Engine &) = delete;

  /// Queues a request; returns its id (1, 2, ...). InvalidArgument for bad
  /// fields (`subject` names it), CapacityExceeded for one that can never
  /// fit (`subject` "max_seq_len" or "usable_blocks").
  StatusOr<uint64_t> addRequest(Request request);

  /// One scheduling step (nothing to do: OK). A runner error fails the
  /// requests of that batch and is returned; the engine stays usable. An
  /// allocator error other than OutOfBlocks (a bug: the pool is poisoned)
  /// is returned by this and every later step.
  Status step();
  /// Steps until every request has finished. Returns the first error of a
  /// step (after running the rest to completion).
  Status runUntilDone();

  bool hasUnfinished() const;
  size_t numRunning() const { return running_.size(); }
  size_t numWaiting() const { return waiting_.size(); }
  size_t numSwapped() const { return swapped_.size(); }

  /// A copy of the request's state (finished or not). UnknownSequence-free:
  /// InvalidArgument with subject "request_id" for an unknown id.
  StatusOr<RequestResult> result(uint64_t requestId) const;
  /// Forgets a finished request (its result is gone afterwards).
  Status release(uint64_t requestId);
  /// Finishes an unfinished request now: its unfinished samples get
  /// FinishReason::kAbort (tokens generated so far are kept in the result)
  /// and every block its sequences hold is freed before this returns. A
  /// finished request is left as it is (OK). Not during `step` (the engine
  /// is single-threaded). InvalidArgument with subject "request_id" for an
  /// unknown (or released) id.
  Status abort(uint64_t requestId);

  /// Derived fields (tokens_per_s, means) are computed on each call.
  EngineMetrics metrics() const;

private:
  struct RequestState;
  struct Seq;

  Engine(const EngineConfig &config, kv::Allocator *allocator,
         ModelRunner *runner);
  double now() const;
  Status stepImpl();
  Status preemptNewest();
  Status recomputeSwapped();
  void failRequest(RequestState *request, const Status &status);
  /// Frees the sequence's blocks (an allocator error breaks the engine) and
  /// marks it finished.
  void releaseSeq(Seq *seq);
  /// releaseSeq for every unfinished sequence of `request`, running, waiting
  /// or swapped.
  void releaseRequestSeqs(RequestState *request);
  void finishSeq(Seq *seq, FinishReason reason, double t);
  void finishRequest(RequestState *request, double t);
  void sampleNext(Seq *seq, const float *row, int64_t vocab, double t);
  /// Drops blocks of running sequences over their KV budget.
  Status evictOverBudget();
  /// Adds the step's attention weights to the scored sequences' blocks.
  Status addAttention(const StepBatch &stepBatch, const StepOutput &out,
                      const std::vector<Seq *> &batch);
  Status validateEviction(const KVEviction &eviction) const;
  /// The recent tokens an eviction keeps (its default resolved).
  static int64_t recentTokens(const KVEviction &eviction);
  void dropFinished();

  EngineConfig config_;
  kv::Allocator *allocator_;
  ModelRunner *runner_;
  int64_t usableBlocks_ = 0;
  int64_t blockSize_ = 0;
  int64_t maxSeqLen_ = 0;
  int64_t watermark_ = 0;
  Sampler sampler_;
  StepOutput stepOutput_;
  std::chrono::steady_clock::time_point epoch_;
  uint64_t nextRequestId_ = 1;
  uint64_t nextSeqId_ = 1;
  std::map<uint64_t, std::unique_ptr<RequestState>> requests_;
  std::deque<std::unique_ptr<Seq>> waiting_;
  /// Admission order: the back is the most recently admitted.
  std::vector<std::unique_ptr<Seq>> running_;
  /// Swapped out, in preemption order (the front resumes first).
  std::deque<std::unique_ptr<Seq>> swapped_;
  /// Sticky: the allocator failed in a way the engine cannot recover from.
  Status broken_;
  EngineMetrics metrics_;
  double utilizationSum_ = 0;
  double ttftSum_ = 0, tpotSum_ = 0;
  int64_t ttftCount_ = 0, tpotCount_ = 0;
};

} // namespace sits::runtime::engine

#endif // SITS_RUNTIME_ENGINE_ENGINE_H
