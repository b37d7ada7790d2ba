//===- engine.cpp - Continuous batching over the paged KV pool
//-------------===//
//
// See engine.h for the step. Bookkeeping: a `Seq` is one sample of one
// request while it is waiting or running (a fresh request with n > 1 is a
// single Seq until its prompt is prefilled and forked); `tokens` is prompt +
// generated, `num_computed` the prefix whose K/V was computed (of which
// `evicted` tokens were dropped again by token eviction). Between
// steps a running Seq has num_computed == tokens.size() - 1: its last
// sampled token gets a slot at the next decode. Finished Seqs are only
// marked during a step and erased at its end, so the raw pointers of the
// step's batch stay valid.
//
//===----------------------------------------------------------------------===//
#include "sits/runtime/engine/engine.h"

#include "errors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

namespace sits::runtime::engine {

const char *finishReasonName(FinishReason reason) {
  switch (reason) {
  case FinishReason::kNone:
    return "none";
  case FinishReason::kStop:
    return "stop";
  case FinishReason::kLength:
    return "length";
  case FinishReason::kError:
    return "error";
  case FinishReason::kAbort:
    return "abort";
  }
  return "unknown";
}

const char *evictionPolicyName(EvictionPolicy policy) {
  switch (policy) {
  case EvictionPolicy::kNone:
    return "none";
  case EvictionPolicy::kWindow:
    return "window";
  case EvictionPolicy::kAttention:
    return "attention";
  }
  return "unknown";
}

const char *preemptionModeName(PreemptionMode mode) {
  switch (mode) {
  case PreemptionMode::kRecompute:
    return "recompute";
  case PreemptionMode::kSwap:
    return "swap";
  }
  return "unknown";
}

struct Engine::RequestState {
  Request request;
  RequestResult result;
  int64_t unfinished = 0;
  bool aborted = false;
  /// Per sample: time of its first token (-1 before).
  std::vector<double> first_token_s;
  double tpot_sum = 0;
  int64_t tpot_count = 0;
};

struct Engine::Seq {
  RequestState *req = nullptr;
  int64_t sample = 0;
  int64_t prompt_len = 0;
  std::vector<int32_t> tokens;
  /// 0 while waiting (allocator ids start at 1).
  uint64_t alloc_id = 0;
  int64_t num_computed = 0;
  /// Tokens dropped by eviction since admission: the pool holds
  /// num_computed - evicted of them.
  int64_t evicted = 0;
  /// EvictionPolicy::kAttention: per block of the table, the attention
  /// weight its tokens received so far.
  std::vector<double> block_scores;
  /// The dropped blocks, as logical block numbers (positions [k × bs,
  /// (k + 1) × bs)), ascending: a drop removes a whole block from the
  /// middle, so every block of the table holds one such aligned run. A
  /// recompute prefills the kept positions only.
  std::vector<int64_t> dropped;
  /// A fresh request with n > 1: fork after the prefill.
  bool fork_pending = false;
  bool is_prefill = false;
  bool finished = false;
};

namespace {

/// log-softmax of `row` at `token`, and the `top` most likely entries
/// (descending, ties: lower id first). -inf entries have probability 0.
float logprobsOf(const float *row, int64_t vocab, int32_t token, int32_t top,
                 std::vector<TokenLogprob> *best) {
  float peak = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i)
    peak = std::max(peak, row[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i)
    sum += std::exp(static_cast<double>(row[i]) - peak);
  const double lse = peak + std::log(sum);
  if (top > 0) {
    std::vector<int32_t> ids(static_cast<size_t>(vocab));
    for (int64_t i = 0; i < vocab; ++i)
      ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
    const size_t k = std::min<size_t>(static_cast<size_t>(top), ids.size());
    std::partial_sort(ids.begin(), ids.begin() + static_cast<ptrdiff_t>(k),
                      ids.end(), [&](int32_t a, int32_t b) {
                        return row[a] > row[b] || (row[a] == row[b] && a < b);
                      });
    best->clear();
    for (size_t i = 0; i < k; ++i)
      best->push_back({ids[i], static_cast<float>(row[ids[i]] - lse)});
  }
  return static_cast<float>(row[token] - lse);
}

/// The error of a call naming a request the engine does not hold.
Status noSuchRequest(uint64_t requestId) {
  Status st = invalidArgument("request_id",
                              "request_id = " + std::to_string(requestId) +
                                  ": no such request");
  st.withValue(static_cast<int64_t>(requestId));
  return st;
}

Status capacityExceeded(const char *subject, int64_t value, int64_t limit,
                        std::string message) {
  ErrorInfo e;
  e.code = StatusCode::kCapacityExceeded;
  e.message = std::move(message);
  e.subject = subject;
  e.value = value;
  e.limit = limit;
  return Status(std::move(e));
}

} // namespace

Engine::Engine(const EngineConfig &config, kv::Allocator *allocator,
               ModelRunner *runner)
    : config_(config), allocator_(allocator), runner_(runner),
      epoch_(std::chrono::steady_clock::now()) {
  usableBlocks_ = allocator->geometry().usable_blocks;
  blockSize_ = allocator->config().block_size;
  maxSeqLen_ = allocator->config().max_seq_len;
  watermark_ = allocator->config().watermark_blocks;
}

Engine::~Engine() = default;

StatusOr<std::unique_ptr<Engine>> Engine::create(const EngineConfig &config,
                                                 kv::Allocator *allocator,
                                                 ModelRunner *runner) {
  if (!allocator)
    return invalidArgument("allocator", "allocator is null");
  if (!runner)
    return invalidArgument("runner", "runner is null");
  if (config.max_batch_size < 1)
    return invalidArgument(
        "max_batch_size",
        "max_batch_size = " + std::to_string(config.max_batch_size) +
            ": must be >= 1");
  if (config.preemption != PreemptionMode::kRecompute &&
      config.preemption != PreemptionMode::kSwap)
    return invalidArgument(
        "preemption",
        "preemption = " + std::to_string(static_cast<int>(config.preemption)) +
            ": use recompute or swap");
  if (config.vocab_size < 0)
    return invalidArgument("vocab_size",
                           "vocab_size = " + std::to_string(config.vocab_size) +
                               ": must be >= 0 (0: not checked)");
  if (config.preemption == PreemptionMode::kSwap &&
      allocator->config().num_host_blocks == 0)
    return invalidArgument("preemption", "preemption = swap needs a host tier "
                                         "(num_host_blocks > 0)");
  if (allocator->config().copy_ordering != kv::CopyOrdering::kStreamOrdered)
    return Status(StatusCode::kUnimplemented,
                  "the engine runs the KV pool with copy_ordering = "
                  "stream_ordered only (got async)");
  auto stats = allocator->stats();
  if (!stats.ok())
    return stats.status();
  if (stats->num_sequences != 0)
    return invalidArgument("allocator",
                           "the allocator already holds " +
                               std::to_string(stats->num_sequences) +
                               " sequences: the engine must be its only user");
  return std::unique_ptr<Engine>(new Engine(config, allocator, runner));
}

double Engine::now() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                       epoch_)
      .count();
}

Status Engine::validateEviction(const KVEviction &e) const {
  if (e.policy == EvictionPolicy::kNone)
    return Status::OK();
  if (e.policy != EvictionPolicy::kWindow &&
      e.policy != EvictionPolicy::kAttention)
    return invalidArgument(
        "eviction",
        "eviction policy = " + std::to_string(static_cast<int>(e.policy)) +
            ": use none, window or attention");
  if (!runner_->takesPositions())
    return invalidArgument("eviction",
                           "token eviction needs a model that takes "
                           "position_ids (this one derives positions from "
                           "the context length)");
  if (e.policy == EvictionPolicy::kAttention && !runner_->scoresAttention())
    return invalidArgument("eviction",
                           "eviction = attention needs a runner that returns "
                           "attention weights (use window)");
  if (e.sink_tokens < 0)
    return invalidArgument("sink_tokens",
                           "sink_tokens = " + std::to_string(e.sink_tokens) +
                               ": must be >= 0");
  if (e.recent_tokens < -1)
    return invalidArgument(
        "recent_tokens", "recent_tokens = " + std::to_string(e.recent_tokens) +
                             ": must be >= 0, or -1 for the default");
  if (e.observe < 1)
    return invalidArgument("observe", "observe = " + std::to_string(e.observe) +
                                          ": must be >= 1");
  // Over budget there must always be a block to drop.
  const int64_t sinks = (e.sink_tokens + blockSize_ - 1) / blockSize_;
  const int64_t recent = (recentTokens(e) + blockSize_ - 1) / blockSize_;
  const int64_t least = (sinks + recent + 1) * blockSize_;
  if (e.budget < least || e.budget > maxSeqLen_) {
    Status st = invalidArgument(
        "kv_budget", "kv_budget = " + std::to_string(e.budget) +
                         ": must be in [" + std::to_string(least) +
                         ", max_seq_len = " + std::to_string(maxSeqLen_) +
                         "] (the sink and recent blocks and one more, of " +
                         std::to_string(blockSize_) + " tokens)");
    st.withValue(e.budget);
    return st;
  }
  return Status::OK();
}

int64_t Engine::recentTokens(const KVEviction &e) {
  if (e.recent_tokens >= 0)
    return e.recent_tokens;
  return e.policy == EvictionPolicy::kAttention ? e.budget / 4 : 0;
}

StatusOr<uint64_t> Engine::addRequest(Request request) {
  if (request.prompt.empty())
    return invalidArgument("prompt", "prompt is empty: at least one token is "
                                     "needed to compute logits");
  const int64_t vocab = config_.vocab_size;
  const std::string range =
      vocab > 0 ? "in [0, vocab_size = " + std::to_string(vocab) + ")" : ">= 0";
  for (size_t i = 0; i < request.prompt.size(); ++i)
    if (request.prompt[i] < 0 || (vocab > 0 && request.prompt[i] >= vocab)) {
      Status st =
          invalidArgument("prompt", "prompt[" + std::to_string(i) + "] = " +
                                        std::to_string(request.prompt[i]) +
                                        ": token ids must be " + range);
      st.withIndex(static_cast<int64_t>(i));
      return st;
    }
  if (request.max_new_tokens < 1)
    return invalidArgument(
        "max_new_tokens",
        "max_new_tokens = " + std::to_string(request.max_new_tokens) +
            ": must be >= 1");
  if (request.n < 1 || request.n > config_.max_batch_size)
    return invalidArgument("n", "n = " + std::to_string(request.n) +
                                    ": must be in [1, max_batch_size = " +
                                    std::to_string(config_.max_batch_size) +
                                    "]");
  SITS_RETURN_IF_ERROR(validateSamplingParams(request.sampling));
  for (size_t i = 0; i < request.stop_tokens.size(); ++i) {
    const int32_t t = request.stop_tokens[i];
    if (t < 0 || (vocab > 0 && t >= vocab)) {
      Status st =
          invalidArgument("stop_tokens", "stop_token = " + std::to_string(t) +
                                             ": token ids must be " + range);
      st.withIndex(static_cast<int64_t>(i));
      return st;
    }
  }
  for (size_t i = 0; i < request.forced_tokens.size(); ++i) {
    const int32_t t = request.forced_tokens[i];
    if (t < 0 || (vocab > 0 && t >= vocab)) {
      Status st = invalidArgument("forced_tokens",
                                  "forced_tokens[" + std::to_string(i) +
                                      "] = " + std::to_string(t) +
                                      ": token ids must be " + range);
      st.withIndex(static_cast<int64_t>(i));
      return st;
    }
  }
  if (request.logprobs < -1 || request.logprobs > kMaxLogprobs)
    return invalidArgument("logprobs",
                           "logprobs = " + std::to_string(request.logprobs) +
                               ": must be -1 (none) or in [0, " +
                               std::to_string(kMaxLogprobs) + "]");
  SITS_RETURN_IF_ERROR(validateEviction(request.eviction));
  // Sorted and unique, so that each draw is checked by binary search.
  std::sort(request.stop_tokens.begin(), request.stop_tokens.end());
  request.stop_tokens.erase(
      std::unique(request.stop_tokens.begin(), request.stop_tokens.end()),
      request.stop_tokens.end());
  const int64_t promptLen = static_cast<int64_t>(request.prompt.size());
  if (request.max_new_tokens > maxSeqLen_ ||
      promptLen + request.max_new_tokens > maxSeqLen_) {
    const int64_t total = request.max_new_tokens > maxSeqLen_
                              ? request.max_new_tokens
                              : promptLen + request.max_new_tokens;
    return capacityExceeded(
        "max_seq_len", total, maxSeqLen_,
        "prompt + max_new_tokens = " + std::to_string(total) +
            " exceeds max_seq_len = " + std::to_string(maxSeqLen_) +
            " (can never fit)");
  }
  // The longest sequence held in the pool: the last token never gets a
  // slot. Admission (also after a preemption) must leave the watermark.
  // With eviction: the prompt, then at most the budget and the token being
  // computed (a recompute prefills the kept tokens only).
  int64_t slots = promptLen + request.max_new_tokens - 1;
  if (request.eviction.policy != EvictionPolicy::kNone)
    slots = std::min(slots, std::max(promptLen, request.eviction.budget + 1));
  const int64_t blocks = (slots + blockSize_ - 1) / blockSize_;
  const int64_t limit = usableBlocks_ - watermark_;
  if (blocks > limit)
    return capacityExceeded(
        "usable_blocks", blocks, limit,
        "a sample needs up to " + std::to_string(blocks) +
            " blocks, more than usable_blocks - watermark_blocks = " +
            std::to_string(limit) + " (can never fit)");

  const uint64_t id = nextRequestId_++;
  auto state = std::make_unique<RequestState>();
  state->request = std::move(request);
  const int64_t n = state->request.n;
  state->result.id = id;
  state->result.samples.resize(static_cast<size_t>(n));
  state->result.logprobs = state->request.logprobs;
  state->result.metrics.arrival_s = now();
  state->result.metrics.prompt_tokens = promptLen;
  state->unfinished = n;
  state->first_token_s.assign(static_cast<size_t>(n), -1.0);

  auto seq = std::make_unique<Seq>();
  seq->req = state.get();
  seq->prompt_len = promptLen;
  seq->tokens = state->request.prompt;
  seq->fork_pending = n > 1;
  waiting_.push_back(std::move(seq));
  requests_.emplace(id, std::move(state));
  return id;
}

bool Engine::hasUnfinished() const {
  return !running_.empty() || !waiting_.empty() || !swapped_.empty();
}

StatusOr<RequestResult> Engine::result(uint64_t requestId) const {
  auto it = requests_.find(requestId);
  if (it == requests_.end())
    return noSuchRequest(requestId);
  return it->second->result;
}

Status Engine::release(uint64_t requestId) {
  auto it = requests_.find(requestId);
  if (it == requests_.end())
    return noSuchRequest(requestId);
  if (!it->second->result.finished)
    return invalidArgument("request_id",
                           "request_id = " + std::to_string(requestId) +
                               ": the request has not finished");
  requests_.erase(it);
  return Status::OK();
}

Status Engine::abort(uint64_t requestId) {
  auto it = requests_.find(requestId);
  if (it == requests_.end())
    return noSuchRequest(requestId);
  RequestState *r = it->second.get();
  if (r->result.finished)
    return Status::OK();
  // Every sequence of the request, wherever it is queued: a swapped one
  // holds host blocks (and maybe shared device ones) that free releases too.
  releaseRequestSeqs(r);
  for (SampleResult &sample : r->result.samples)
    if (sample.finish_reason == FinishReason::kNone)
      sample.finish_reason = FinishReason::kAbort;
  r->aborted = true;
  r->unfinished = 0;
  finishRequest(r, now());
  // Between steps nothing points at the Seqs: drop them now, so that the
  // queue sizes say at once that the request is gone.
  dropFinished();
  return broken_;
}

EngineMetrics Engine::metrics() const {
  EngineMetrics m = metrics_;
  m.tokens_per_s = m.busy_s > 0 ? m.output_tokens / m.busy_s : 0;
  m.kv_utilization_mean = m.steps > 0 ? utilizationSum_ / m.steps : 0;
  m.mean_ttft_s = ttftCount_ > 0 ? ttftSum_ / ttftCount_ : 0;
  m.mean_tpot_s = tpotCount_ > 0 ? tpotSum_ / tpotCount_ : 0;
  return m;
}

Status Engine::preemptNewest() {
  std::unique_ptr<Seq> victim = std::move(running_.back());
  running_.pop_back();
  ++victim->req->result.metrics.preemptions;
  ++metrics_.preemptions;
  if (config_.preemption == PreemptionMode::kSwap) {
    Status st = allocator_->swapOut(victim->alloc_id);
    if (st.ok()) {
      ++metrics_.swap_outs;
      swapped_.push_back(std::move(victim));
      return Status::OK();
    }
    if (st.code() != StatusCode::kHostTierFull)
      return st;
    // Host tier full: recompute instead.
  }
  Status st = allocator_->free(victim->alloc_id);
  if (!st.ok())
    return st;
  victim->alloc_id = 0;
  victim->num_computed = 0;
  victim->block_scores.clear();
  waiting_.push_front(std::move(victim));
  return Status::OK();
}

Status Engine::recomputeSwapped() {
  // Back to front, so the waiting queue keeps the swapped order at its head.
  while (!swapped_.empty()) {
    std::unique_ptr<Seq> s = std::move(swapped_.back());
    swapped_.pop_back();
    if (!s->finished) {
      SITS_RETURN_IF_ERROR(allocator_->free(s->alloc_id));
      s->alloc_id = 0;
      s->num_computed = 0;
      s->block_scores.clear();
    }
    waiting_.push_front(std::move(s));
  }
  return Status::OK();
}

void Engine::finishRequest(RequestState *r, double t) {
  RequestMetrics &m = r->result.metrics;
  r->result.finished = true;
  m.finish_s = t;
  m.tpot_s = r->tpot_count > 0 ? r->tpot_sum / r->tpot_count : 0;
  if (r->aborted) {
    ++metrics_.requests_aborted;
  } else if (r->result.status.ok()) {
    ++metrics_.requests_finished;
    if (m.ttft_s >= 0) {
      ttftSum_ += m.ttft_s;
      ++ttftCount_;
    }
    if (r->tpot_count > 0) {
      tpotSum_ += m.tpot_s;
      ++tpotCount_;
    }
  } else {
    ++metrics_.requests_failed;
  }
}

void Engine::releaseSeq(Seq *s) {
  if (s->alloc_id != 0) {
    Status st = allocator_->free(s->alloc_id);
    if (!st.ok() && broken_.ok())
      broken_ = st;
    s->alloc_id = 0;
  }
  s->finished = true;
}

void Engine::releaseRequestSeqs(RequestState *r) {
  auto release = [&](auto &queue) {
    for (auto &s : queue)
      if (s->req == r && !s->finished)
        releaseSeq(s.get());
  };
  release(running_);
  release(waiting_);
  release(swapped_);
}

void Engine::finishSeq(Seq *s, FinishReason reason, double t) {
  releaseSeq(s);
  RequestState *r = s->req;
  r->result.samples[static_cast<size_t>(s->sample)].finish_reason = reason;
  const int64_t generated =
      static_cast<int64_t>(s->tokens.size()) - s->prompt_len;
  const double first = r->first_token_s[static_cast<size_t>(s->sample)];
  if (generated > 1 && first >= 0) {
    r->tpot_sum += (t - first) / static_cast<double>(generated - 1);
    ++r->tpot_count;
  }
  if (--r->unfinished == 0)
    finishRequest(r, t);
}

void Engine::failRequest(RequestState *r, const Status &status) {
  if (r->result.finished)
    return;
  releaseRequestSeqs(r);
  r->result.status = status;
  for (SampleResult &sample : r->result.samples)
    if (sample.finish_reason == FinishReason::kNone)
      sample.finish_reason = FinishReason::kError;
  r->unfinished = 0;
  finishRequest(r, now());
}

void Engine::dropFinished() {
  auto done = [](const std::unique_ptr<Seq> &s) { return s->finished; };
  running_.erase(std::remove_if(running_.begin(), running_.end(), done),
                 running_.end());
  waiting_.erase(std::remove_if(waiting_.begin(), waiting_.end(), done),
                 waiting_.end());
  swapped_.erase(std::remove_if(swapped_.begin(), swapped_.end(), done),
                 swapped_.end());
}

void Engine::sampleNext(Seq *s, const float *row, int64_t vocab, double t) {
  RequestState *r = s->req;
  const SamplingParams &p = r->request.sampling;
  // A seeded request is keyed by its seed and sample index only, so the
  // same request reproduces whatever its id; otherwise the engine seed and
  // the request id key it.
  const uint64_t seed = p.seed ? *p.seed : config_.seed;
  const uint64_t stream =
      p.seed ? static_cast<uint64_t>(s->sample)
             : (r->result.id << 32) ^ static_cast<uint64_t>(s->sample);
  const int64_t generated =
      static_cast<int64_t>(s->tokens.size()) - s->prompt_len;
  const std::vector<int32_t> &forced = r->request.forced_tokens;
  StatusOr<int32_t> tok =
      generated < static_cast<int64_t>(forced.size())
          ? StatusOr<int32_t>(forced[static_cast<size_t>(generated)])
          : sampler_.sample(row, vocab, p, seed, stream,
                            static_cast<uint64_t>(generated));
  if (!tok.ok()) {
    failRequest(r, tok.status());
    return;
  }
  s->tokens.push_back(*tok);
  SampleResult &out = r->result.samples[static_cast<size_t>(s->sample)];
  out.tokens.push_back(*tok);
  if (r->request.return_logits)
    out.logits.insert(out.logits.end(), row, row + vocab);
  if (r->request.logprobs >= 0) {
    std::vector<TokenLogprob> best;
    out.logprobs.push_back(
        logprobsOf(row, vocab, *tok, r->request.logprobs, &best));
    if (r->request.logprobs > 0)
      out.top_logprobs.push_back(std::move(best));
  }
  ++r->result.metrics.output_tokens;
  ++metrics_.output_tokens;
  if (generated == 0) {
    r->first_token_s[static_cast<size_t>(s->sample)] = t;
    if (r->result.metrics.first_token_s < 0) {
      r->result.metrics.first_token_s = t;
      r->result.metrics.ttft_s = t - r->result.metrics.arrival_s;
    }
  }
  const std::vector<int32_t> &stops = r->request.stop_tokens;
  if (std::binary_search(stops.begin(), stops.end(), *tok))
    finishSeq(s, FinishReason::kStop, t);
  else if (generated + 1 >= r->request.max_new_tokens)
    finishSeq(s, FinishReason::kLength, t);
}

Status Engine::step() {
  if (!broken_.ok())
    return broken_;
  if (!hasUnfinished())
    return Status::OK();
  const double start = now();
  Status st = stepImpl();
  if (!broken_.ok() && st.ok())
    st = broken_;
  dropFinished();
  metrics_.busy_s += now() - start;
  return st;
}

Status Engine::stepImpl() {
  std::vector<Seq *> batch;
  bool preempted = false;

  // 1. Decode: a slot for each running sequence's last sampled token.
  for (size_t i = 0; i < running_.size();) {
    Seq *s = running_[i].get();
    Status st = allocator_->append(s->alloc_id, &s->tokens.back(), 1);
    if (st.ok()) {
      s->is_prefill = false;
      batch.push_back(s);
      ++i;
      continue;
    }
    if (st.code() != StatusCode::kOutOfBlocks)
      return broken_ = st;
    if (running_.size() == 1 && !swapped_.empty()) {
      // Swapped sequences keep their shared blocks on the device; let them
      // go (recompute later) so that the oldest sequence can progress.
      Status rst = recomputeSwapped();
      if (!rst.ok())
        return broken_ = rst;
      preempted = true;
      continue;
    }
    if (running_.size() == 1) {
      // Alone in the pool and still out of blocks (addRequest's checks make
      // this unreachable): fail rather than preempt itself forever.
      failRequest(s->req, capacityExceeded("usable_blocks", 0, usableBlocks_,
                                           "sequence cannot grow even alone "
                                           "in the pool: " +
                                               st.message()));
      break;
    }
    // The victim is the newest: s itself or one not appended yet.
    Status pst = preemptNewest();
    if (!pst.ok())
      return broken_ = pst;
    preempted = true;
  }

  // 2. Resume swapped sequences, then admit waiting ones (FIFO), unless
  // this step had to preempt. A resumed sequence decodes from next step.
  int64_t room = config_.max_batch_size - static_cast<int64_t>(running_.size());
  while (!preempted && !swapped_.empty() && room > 0) {
    Seq *s = swapped_.front().get();
    if (s->finished) {
      swapped_.pop_front();
      continue;
    }
    Status st = allocator_->swapIn(s->alloc_id);
    if (st.code() == StatusCode::kOutOfBlocks) {
      // With nothing running, only other swapped sequences' shared blocks
      // can be in the way: recompute them all rather than wait forever.
      if (running_.empty()) {
        Status rst = recomputeSwapped();
        if (!rst.ok())
          return broken_ = rst;
      }
      break;
    }
    if (!st.ok())
      return broken_ = st;
    ++metrics_.swap_ins;
    running_.push_back(std::move(swapped_.front()));
    swapped_.pop_front();
    --room;
  }
  if (!preempted && swapped_.empty()) {
    while (!waiting_.empty()) {
      Seq *s = waiting_.front().get();
      if (s->finished) {
        waiting_.pop_front();
        continue;
      }
      const int64_t width = s->fork_pending ? s->req->request.n : 1;
      if (width > room)
        break;
      const uint64_t id = nextSeqId_;
      const int64_t len = static_cast<int64_t>(s->tokens.size());
      kv::AddOptions opts;
      // Score-based eviction: the prompt's observed queries are computed
      // (the prefix cache serves at most what comes before them).
      const KVEviction &ev = s->req->request.eviction;
      if (ev.policy == EvictionPolicy::kAttention)
        opts.max_cache_hit = std::max<int64_t>(0, len - ev.observe);
      // A sequence that dropped blocks before a recompute gets slots for
      // its kept tokens only, without ids (they are no prefix of anything).
      StatusOr<kv::AddResult> added =
          s->dropped.empty()
              ? allocator_->addSequence(id, s->tokens.data(), len, opts)
              : allocator_->addSequence(id, len - s->evicted);
      if (!added.ok()) {
        if (added.code() == StatusCode::kOutOfBlocks)
          break;
        if (added.code() == StatusCode::kCapacityExceeded) {
          failRequest(s->req, added.status());
          continue;
        }
        return broken_ = added.status();
      }
      ++nextSeqId_;
      s->alloc_id = id;
      s->num_computed = added->cached_tokens;
      s->is_prefill = true;
      s->req->result.metrics.cached_tokens += added->cached_tokens;
      metrics_.prefix_cache_hit_tokens += added->cached_tokens;
      running_.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
      batch.push_back(s);
      room -= width;
    }
  }

  batch.erase(std::remove_if(batch.begin(), batch.end(),
                             [](Seq *s) { return s->finished; }),
              batch.end());
  if (batch.empty()) {
    // Nothing runs and the head cannot be admitted into an empty pool:
    // it never will be (addRequest's checks make this unreachable).
    if (running_.empty() && swapped_.empty() && !waiting_.empty() &&
        !waiting_.front()->finished)
      failRequest(waiting_.front()->req,
                  capacityExceeded("usable_blocks", 0, usableBlocks_,
                                   "request cannot be admitted even into an "
                                   "empty pool"));
    return Status::OK();
  }

  // 3. The runner's view of the step.
  StepBatch stepBatch;
  Status st = allocator_->takePendingCopies(&stepBatch.copies);
  if (!st.ok())
    return broken_ = st;
  stepBatch.sequences.resize(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    Seq *s = batch[i];
    ScheduledSequence &q = stepBatch.sequences[i];
    const int64_t len = static_cast<int64_t>(s->tokens.size());
    int64_t count = len - s->num_computed;
    q.seq_id = s->alloc_id;
    q.is_prefill = s->is_prefill;
    if (s->num_computed == 0 && !s->dropped.empty()) {
      // Recomputing an evicting sequence: its kept positions only.
      count = len - s->evicted;
      q.token_ids.clear();
      q.positions.clear();
      size_t next = 0; // into dropped
      for (int64_t p = 0; p < len; ++p) {
        const int64_t block = p / blockSize_;
        while (next < s->dropped.size() && s->dropped[next] < block)
          ++next;
        if (next < s->dropped.size() && s->dropped[next] == block)
          continue;
        q.token_ids.push_back(s->tokens[static_cast<size_t>(p)]);
        q.positions.push_back(p);
      }
    } else {
      q.token_ids.assign(s->tokens.begin() + s->num_computed, s->tokens.end());
      q.positions.resize(static_cast<size_t>(count));
      for (int64_t k = 0; k < count; ++k)
        q.positions[static_cast<size_t>(k)] = s->num_computed + k;
    }
    q.slot_mapping.resize(static_cast<size_t>(count));
    st = allocator_->slotMapping(s->alloc_id, len - s->evicted - count, count,
                                 q.slot_mapping.data());
    if (!st.ok())
      return broken_ = st;
    StatusOr<std::vector<int32_t>> table = allocator_->blockTable(s->alloc_id);
    if (!table.ok())
      return broken_ = table.status();
    q.block_table = std::move(*table);
    q.context_len = len - s->evicted;
    const KVEviction &ev = s->req->request.eviction;
    if (ev.policy == EvictionPolicy::kAttention)
      q.score_queries = s->is_prefill ? std::min(ev.observe, count) : 1;
  }

  StatusOr<int64_t> freeBlocks = allocator_->numFreeBlocks();
  if (!freeBlocks.ok())
    return broken_ = freeBlocks.status();
  const int64_t used = usableBlocks_ - *freeBlocks;
  const double utilization =
      usableBlocks_ > 0 ? static_cast<double>(used) / usableBlocks_ : 0;
  metrics_.kv_blocks_peak = std::max(metrics_.kv_blocks_peak, used);
  metrics_.kv_utilization_peak =
      std::max(metrics_.kv_utilization_peak, utilization);
  utilizationSum_ += utilization;
  ++metrics_.steps;

  // 4. Run the model (into the last step's output: its logits' storage is
  // reused).
  StepOutput &out = stepOutput_;
  Status rs = runner_->execute(stepBatch, &out);
  if (rs.ok() &&
      (out.vocab_size <= 0 ||
       out.logits.size() != batch.size() * static_cast<size_t>(out.vocab_size)))
    rs = invalidArgument(
        "logits",
        "runner returned " + std::to_string(out.logits.size()) +
            " logits with vocab_size = " + std::to_string(out.vocab_size) +
            " for " + std::to_string(batch.size()) + " sequences");
  if (rs.ok())
    rs = addAttention(stepBatch, out, batch);
  if (!rs.ok()) {
    for (Seq *s : batch)
      failRequest(s->req, rs);
    return rs;
  }

  // 5. Sample, fork fresh n > 1 requests, finish.
  const double t = now();
  const int64_t vocab = out.vocab_size;
  for (size_t i = 0; i < batch.size(); ++i) {
    Seq *s = batch[i];
    if (s->finished) // a sibling's failure ended the request this step
      continue;
    const int64_t computed =
        static_cast<int64_t>(stepBatch.sequences[i].token_ids.size());
    metrics_.computed_tokens += computed;
    ++(s->is_prefill ? metrics_.prefills : metrics_.decodes);
    s->num_computed = static_cast<int64_t>(s->tokens.size());
    const float *row = out.logits.data() + i * static_cast<size_t>(vocab);
    if (!s->fork_pending) {
      sampleNext(s, row, vocab, t);
      continue;
    }
    // Children share every block of the prefilled prompt (no new block).
    s->fork_pending = false;
    std::vector<Seq *> group{s};
    for (int64_t k = 1; k < s->req->request.n; ++k) {
      auto child = std::make_unique<Seq>();
      child->req = s->req;
      child->sample = k;
      child->prompt_len = s->prompt_len;
      child->tokens = s->tokens;
      child->num_computed = s->num_computed;
      child->evicted = s->evicted;
      child->block_scores = s->block_scores;
      child->dropped = s->dropped;
      child->alloc_id = nextSeqId_++;
      Status fs = allocator_->fork(s->alloc_id, child->alloc_id);
      if (!fs.ok())
        return broken_ = fs;
      group.push_back(child.get());
      running_.push_back(std::move(child));
    }
    for (Seq *g : group)
      if (!g->finished)
        sampleNext(g, row, vocab, t);
  }
  return evictOverBudget();
}

Status Engine::addAttention(const StepBatch &stepBatch, const StepOutput &out,
                            const std::vector<Seq *> &batch) {
  for (size_t i = 0; i < batch.size(); ++i) {
    const ScheduledSequence &q = stepBatch.sequences[i];
    if (q.score_queries == 0)
      continue;
    const int64_t heads = out.attention_heads;
    if (out.attention.size() != batch.size() || heads <= 0 ||
        static_cast<int64_t>(out.attention[i].size()) != q.context_len * heads)
      return invalidArgument("attention",
                             "the runner returned no attention weights of [" +
                                 std::to_string(q.context_len) +
                                 "][heads] for a scored sequence");
    std::vector<double> &scores = batch[i]->block_scores;
    scores.resize(
        static_cast<size_t>((q.context_len + blockSize_ - 1) / blockSize_),
        0.0);
    const float *w = out.attention[i].data();
    for (int64_t t = 0; t < q.context_len; ++t) {
      double sum = 0;
      for (int64_t h = 0; h < heads; ++h)
        sum += w[t * heads + h];
      scores[static_cast<size_t>(t / blockSize_)] += sum;
    }
  }
  return Status::OK();
}

Status Engine::evictOverBudget() {
  for (auto &owned : running_) {
    Seq *s = owned.get();
    const KVEviction &ev = s->req->request.eviction;
    if (s->finished || ev.policy == EvictionPolicy::kNone)
      continue;
    const int64_t sinks = (ev.sink_tokens + blockSize_ - 1) / blockSize_;
    const int64_t recent = (recentTokens(ev) + blockSize_ - 1) / blockSize_;
    int64_t kept = s->num_computed - s->evicted;
    while (kept > ev.budget) {
      // Full blocks strictly between the sinks and the recent ones.
      const int64_t first = sinks, last = kept / blockSize_ - recent;
      if (first >= last)
        break; // validateEviction makes this unreachable
      int64_t victim = first;
      if (ev.policy == EvictionPolicy::kAttention) {
        const std::vector<double> &sc = s->block_scores;
        for (int64_t j = first; j < last; ++j) {
          const double a = static_cast<size_t>(j) < sc.size()
                               ? sc[static_cast<size_t>(j)]
                               : 0.0;
          const double b = static_cast<size_t>(victim) < sc.size()
                               ? sc[static_cast<size_t>(victim)]
                               : 0.0;
          if (a < b)
            victim = j;
        }
      }
      Status st = allocator_->dropBlocks(s->alloc_id, victim, 1);
      if (!st.ok())
        return broken_ = st;
      // The logical block of table entry `victim`: the victim-th one not
      // dropped yet.
      int64_t logical = 0;
      for (int64_t seen = -1;; ++logical)
        if (!std::binary_search(s->dropped.begin(), s->dropped.end(),
                                logical) &&
            ++seen == victim)
          break;
      s->dropped.insert(
          std::upper_bound(s->dropped.begin(), s->dropped.end(), logical),
          logical);
      if (static_cast<size_t>(victim) < s->block_scores.size())
        s->block_scores.erase(s->block_scores.begin() +
                              static_cast<ptrdiff_t>(victim));
      s->evicted += blockSize_;
      kept -= blockSize_;
      s->req->result.metrics.evicted_tokens += blockSize_;
      metrics_.evicted_tokens += blockSize_;
      ++metrics_.evicted_blocks;
    }
  }
  return Status::OK();
}

Status Engine::runUntilDone() {
  Status first;
  while (hasUnfinished()) {
    Status st = step();
    if (!st.ok()) {
      if (first.ok())
        first = st;
      if (!broken_.ok())
        return first;
    }
  }
  return first;
}

} // namespace sits::runtime::engine
