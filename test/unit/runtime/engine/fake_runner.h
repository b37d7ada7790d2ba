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

/// What one sample of `request` must produce: `seed`/`stream` as the engine
/// keys them (for a seeded request: the seed and the sample index).
inline std::vector<int32_t> referenceGenerate(const Request &request,
                                              int64_t vocab, uint64_t seed,
                                              uint64_t stream) {
  std::vector<int32_t> tokens = request.prompt;
  std::vector<int32_t> out;
  std::vector<float> row(static_cast<size_t>(vocab));
  Sampler sampler;
  for (int64_t i = 0; i < request.max_new_tokens; ++i) {
    logitsFor(historyHash(tokens.data(), static_cast<int64_t>(tokens.size())),
              vocab, row.data());
    auto tok = sampler.sample(row.data(), vocab, request.sampling, seed, stream,
                              static_cast<uint64_t>(i));
    if (!tok.ok())
      return {};
    tokens.push_back(*tok);
    out.push_back(*tok);
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
        const int64_t pos = q.positions[k];
        if (pos != q.context_len - static_cast<int64_t>(count) +
                       static_cast<int64_t>(k))
          return fail("positions not ending at context_len - 1");
        const int64_t slot =
            q.block_table[static_cast<size_t>(pos / blockSize_)] * blockSize_ +
            pos % blockSize_;
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
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const ScheduledSequence &q = batch.sequences[i];
      history.clear();
      for (int64_t p = 0; p < q.context_len; ++p) {
        const Slot &s = device_[static_cast<size_t>(
            q.block_table[static_cast<size_t>(p / blockSize_)] * blockSize_ +
            p % blockSize_)];
        if (!s.valid || s.pos != p)
          return fail("seq " + std::to_string(q.seq_id) + " position " +
                      std::to_string(p) + " reads a slot holding position " +
                      std::to_string(s.valid ? s.pos : -1));
        history.push_back(s.token);
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
