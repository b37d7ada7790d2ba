//===- fake_runner.h - A deterministic ModelRunner that checks the KV flow
//-===//
//
// `FakeRunner` simulates the KV tensors: every slot remembers the (token,
// position) written there; block copies move those records. The logits of
// a sequence are a hash of the token history it reads back through its
// block table, so a wrong block table, slot mapping, position, missed copy
// or stale prefix-cache hit changes the tokens (or fails the step with
// Internal when a slot holds the wrong position). `referenceGenerate` gives
// the expected tokens straight from the token history, with no KV at all.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_TEST_UNIT_RUNTIME_ENGINE_FAKE_RUNNER_H
#define SITS_TEST_UNIT_RUNTIME_ENGINE_FAKE_RUNNER_H

#include "sits/runtime/engine/engine.h"
#include "sits/runtime/engine/model_runner.h"
#include "sits/runtime/engine/sampler.h"
#include "sits/runtime/kv/allocator.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sits::runtime::engine::test {

inline uint64_t mixHash(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Hash of a token history (order and length sensitive).
inline uint64_t historyHash(const int32_t *tokens, int64_t n) {
  uint64_t h = 0x5151'5151'2024'0001ULL;
  for (int64_t i = 0; i < n; ++i)
    h = mixHash(h ^ static_cast<uint32_t>(tokens[i]));
  return mixHash(h ^ static_cast<uint64_t>(n));
}

/// Logits in [-3, 3) drawn from the history hash.
inline void logitsFor(uint64_t h, int64_t vocab, float *row) {
  for (int64_t v = 0; v < vocab; ++v) {
    const uint64_t x =
        mixHash(h ^ (static_cast<uint64_t>(v) * 0x100000001b3ULL));
    row[v] = static_cast<float>((x >> 40) * (1.0 / 16777216.0) * 6.0 - 3.0);
  }
}

/// The fake attention weight of the cached (token, position) for kv head
/// `head`: a multiple of 1/256 in [0, 1), so that sums are exact in any
/// order.
inline float fakeWeight(int32_t token, int64_t pos, int64_t head) {
  const uint64_t x =
      mixHash((static_cast<uint64_t>(token) << 32) ^
              (static_cast<uint64_t>(pos) << 4) ^ static_cast<uint64_t>(head));
  return static_cast<float>(x >> 56) / 256.f;
}

/// Kv heads of the fake model's attention weights.
constexpr int64_t kFakeHeads = 2;

/// The tokens a sequence under `eviction` keeps: (token, position) in
/// context order, whole blocks dropped as the engine drops them.
struct ReferenceContext {
  KVEviction eviction;
  int64_t block_size = 0;
  std::vector<std::pair<int32_t, int64_t>> kept;
  std::vector<double> scores; // per block of `kept`

  /// Appends the new tokens and scores the last `queries` of them.
  void add(const std::vector<int32_t> &tokens, int64_t from) {
    const size_t start = kept.size();
    for (size_t i = static_cast<size_t>(from); i < tokens.size(); ++i)
      kept.emplace_back(tokens[i], static_cast<int64_t>(i));
    if (eviction.policy != EvictionPolicy::kAttention)
      return;
    const int64_t added = static_cast<int64_t>(kept.size() - start);
    const int64_t queries = start == 0 ? std::min(eviction.observe, added) : 1;
    scores.resize((kept.size() + size_t(block_size) - 1) / size_t(block_size));
    for (int64_t q = static_cast<int64_t>(kept.size()) - queries;
         q < static_cast<int64_t>(kept.size()); ++q)
      for (int64_t p = 0; p <= q; ++p)
        for (int64_t h = 0; h < kFakeHeads; ++h)
          scores[size_t(p / block_size)] +=
              fakeWeight(kept[size_t(p)].first, kept[size_t(p)].second, h);
  }
  void evict() {
    if (eviction.policy == EvictionPolicy::kNone)
      return;
    const int64_t bs = block_size;
    const int64_t sinks = (eviction.sink_tokens + bs - 1) / bs;
    const int64_t recentTokens =
        eviction.recent_tokens >= 0                     ? eviction.recent_tokens
        : eviction.policy == EvictionPolicy::kAttention ? eviction.budget / 4
                                                        : 0;
    const int64_t recent = (recentTokens + bs - 1) / bs;
    while (static_cast<int64_t>(kept.size()) > eviction.budget) {
      const int64_t last = static_cast<int64_t>(kept.size()) / bs - recent;
      if (sinks >= last)
        return;
      int64_t victim = sinks;
      if (eviction.policy == EvictionPolicy::kAttention)
        for (int64_t j = sinks; j < last; ++j)
          if (scores[size_t(j)] < scores[size_t(victim)])
            victim = j;
      kept.erase(kept.begin() + victim * bs, kept.begin() + (victim + 1) * bs);
      if (!scores.empty())
        scores.erase(scores.begin() + victim);
    }
  }
  std::vector<int32_t> tokens() const {
    std::vector<int32_t> t;
    for (const auto &k : kept)
      t.push_back(k.first);
    return t;
  }
};

/// What one sample of `request` must produce: `seed`/`stream` as the engine
/// keys them (for a seeded request: the seed and the sample index). With
/// token eviction, the model sees the tokens the sequence keeps.
inline std::vector<int32_t> referenceGenerate(const Request &request,
                                              int64_t vocab, uint64_t seed,
                                              uint64_t stream,
                                              int64_t blockSize = 4) {
  std::vector<int32_t> tokens = request.prompt;
  std::vector<int32_t> out;
  std::vector<float> row(static_cast<size_t>(vocab));
  Sampler sampler;
  ReferenceContext context{request.eviction, blockSize, {}, {}};
  for (int64_t i = 0; i < request.max_new_tokens; ++i) {
    context.add(tokens, static_cast<int64_t>(
                            context.kept.empty() ? 0 : tokens.size() - 1));
    const std::vector<int32_t> seen = context.tokens();
    logitsFor(historyHash(seen.data(), static_cast<int64_t>(seen.size())),
              vocab, row.data());
    auto tok = sampler.sample(row.data(), vocab, request.sampling, seed, stream,
                              static_cast<uint64_t>(i));
    if (!tok.ok())
      return {};
    tokens.push_back(*tok);
    out.push_back(*tok);
    context.evict();
    if (std::find(request.stop_tokens.begin(), request.stop_tokens.end(),
                  *tok) != request.stop_tokens.end())
      break;
  }
  return out;
}

class FakeRunner : public ModelRunner {
public:
  FakeRunner(const kv::PoolConfig &config, int64_t vocab)
      : blockSize_(config.block_size), vocab_(vocab),
        device_(static_cast<size_t>(config.num_blocks * config.block_size)),
        host_(static_cast<size_t>(config.num_host_blocks * config.block_size)) {
  }

  /// Fail the step with this index (0-based) with Internal.
  std::optional<int64_t> fail_at_step;
  /// Positions may run ahead of context entries (token eviction).
  bool evicting = false;
  /// Returns attention weights (fakeWeight summed over the scored queries).
  bool scores_attention = true;
  bool takes_positions = true;

  bool takesPositions() const override { return takes_positions; }
  bool scoresAttention() const override { return scores_attention; }

  int64_t steps = 0;
  int64_t max_batch = 0;
  int64_t mixed_steps = 0; ///< steps with prefills and decodes together
  int64_t prefill_tokens = 0;
  int64_t copies = 0;

  Status execute(const StepBatch &batch, StepOutput *out) override {
    const int64_t step = steps++;
    if (fail_at_step && *fail_at_step == step)
      return Status(StatusCode::kInternal, "injected runner failure");
    max_batch = std::max<int64_t>(max_batch, batch.sequences.size());
    for (const kv::BlockCopy &c : batch.copies) {
      std::vector<Slot> &src = c.src_tier == kv::Tier::kHost ? host_ : device_;
      std::vector<Slot> &dst = c.dst_tier == kv::Tier::kHost ? host_ : device_;
      for (int64_t t = 0; t < c.tokens; ++t) {
        const size_t s = static_cast<size_t>(c.src * blockSize_ + t);
        const size_t d = static_cast<size_t>(c.dst * blockSize_ + t);
        if (s >= src.size() || d >= dst.size())
          return fail("copy out of range");
        dst[d] = src[s];
      }
      ++copies;
    }
    bool anyPrefill = false, anyDecode = false;
    // All K/V writes first (a prefill may hit blocks sealed this step).
    for (const ScheduledSequence &q : batch.sequences) {
      const size_t count = q.token_ids.size();
      if (count == 0 || q.positions.size() != count ||
          q.slot_mapping.size() != count)
        return fail("ragged inputs");
      if (!q.is_prefill && count != 1)
        return fail("decode with more than one token");
      (q.is_prefill ? anyPrefill : anyDecode) = true;
      if (q.is_prefill)
        prefill_tokens += static_cast<int64_t>(count);
      if (static_cast<int64_t>(q.block_table.size()) !=
          (q.context_len + blockSize_ - 1) / blockSize_)
        return fail("block table length");
      for (size_t k = 0; k < count; ++k) {
        // With eviction the context holds fewer entries than positions.
        const int64_t pos = q.positions[k];
        const int64_t at = q.context_len - static_cast<int64_t>(count) +
                           static_cast<int64_t>(k);
        // Consecutive, or with eviction increasing (a recompute prefills
        // the kept positions only).
        if ((k > 0 && pos <= q.positions[k - 1]) || pos < at ||
            (!evicting && pos != at))
          return fail("positions not increasing or before their entry");
        const int64_t slot =
            q.block_table[static_cast<size_t>(at / blockSize_)] * blockSize_ +
            at % blockSize_;
        if (slot != q.slot_mapping[k])
          return fail("slot mapping disagrees with the block table");
        device_[static_cast<size_t>(slot)] = Slot{true, q.token_ids[k], pos};
      }
    }
    if (anyPrefill && anyDecode)
      ++mixed_steps;
    out->vocab_size = vocab_;
    out->logits.assign(batch.sequences.size() * static_cast<size_t>(vocab_), 0);
    std::vector<int32_t> history;
    out->attention.assign(batch.sequences.size(), {});
    out->attention_heads = kFakeHeads;
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const ScheduledSequence &q = batch.sequences[i];
      history.clear();
      std::vector<int64_t> positions;
      for (int64_t p = 0; p < q.context_len; ++p) {
        const Slot &s = device_[static_cast<size_t>(
            q.block_table[static_cast<size_t>(p / blockSize_)] * blockSize_ +
            p % blockSize_)];
        // Kept positions increase; without eviction entry p holds p.
        const int64_t before = positions.empty() ? -1 : positions.back();
        if (!s.valid || s.pos <= before || (!evicting && s.pos != p))
          return fail("seq " + std::to_string(q.seq_id) + " entry " +
                      std::to_string(p) + " reads a slot holding position " +
                      std::to_string(s.valid ? s.pos : -1));
        history.push_back(s.token);
        positions.push_back(s.pos);
      }
      if (positions.back() != q.positions.back())
        return fail("the context does not end at the last new token");
      if (q.score_queries > 0) {
        if (!scores_attention)
          return fail("attention weights asked of a runner without them");
        std::vector<float> &w = out->attention[i];
        w.assign(static_cast<size_t>(q.context_len * kFakeHeads), 0.f);
        for (int64_t s = q.context_len - q.score_queries; s < q.context_len;
             ++s)
          for (int64_t p = 0; p <= s; ++p)
            for (int64_t h = 0; h < kFakeHeads; ++h)
              w[static_cast<size_t>(p * kFakeHeads + h)] +=
                  fakeWeight(history[size_t(p)], positions[size_t(p)], h);
      }
      logitsFor(historyHash(history.data(), q.context_len), vocab_,
                out->logits.data() + i * static_cast<size_t>(vocab_));
    }
    return Status::OK();
  }

private:
  struct Slot {
    bool valid = false;
    int32_t token = 0;
    int64_t pos = -1;
  };
  static Status fail(const std::string &what) {
    return Status(StatusCode::kInternal, "FakeRunner: " + what);
  }
  int64_t blockSize_;
  int64_t vocab_;
  std::vector<Slot> device_;
  std::vector<Slot> host_;
};

} // namespace sits::runtime::engine::test

#endif // SITS_TEST_UNIT_RUNTIME_ENGINE_FAKE_RUNNER_H
