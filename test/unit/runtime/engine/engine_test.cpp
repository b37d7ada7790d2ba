//===- engine_test.cpp - Continuous batching, preemption, prefix caching, fork
//
// Every run checks its tokens against `referenceGenerate` (the same model
// evaluated on the token history, no KV at all) and the allocator's
// invariants after every step; the FakeRunner fails a step when a sequence
// reads K/V that is not its own history.
//
//===----------------------------------------------------------------------===//
#include "fake_runner.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>

using namespace sits::runtime;
using namespace sits::runtime::engine;
using namespace sits::runtime::engine::test;

namespace {

constexpr int64_t kVocab = 32;

#define ENGINE_ASSERT_OK(expr)                                                 \
  do {                                                                         \
    const Status _st = (expr);                                                 \
    ASSERT_TRUE(_st.ok()) << #expr << " -> " << _st.toString();                \
  } while (0)

kv::PoolConfig poolConfig(int64_t numBlocks, bool caching = true,
                          int64_t hostBlocks = 0) {
  constexpr int64_t blockSize = 4;
  kv::PoolConfig c;
  c.num_host_blocks = hostBlocks;
  c.num_blocks = numBlocks;
  c.block_size = blockSize;
  c.head_dim = 8;
  c.max_seq_len = 256;
  c.enable_prefix_caching = caching;
  return c;
}

struct RunOutput {
  std::vector<RequestResult> results;
  EngineMetrics metrics;
  kv::Stats stats;
  int64_t runner_max_batch = 0;
  int64_t runner_mixed_steps = 0;
  int64_t runner_prefill_tokens = 0;
  int64_t runner_copies = 0;
};

/// Runs `requests` to completion, checking invariants after every step.
void runAll(const kv::PoolConfig &pool, int64_t maxBatch,
            const std::vector<Request> &requests, RunOutput *out,
            PreemptionMode preemption = PreemptionMode::kRecompute) {
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok()) << alloc.status().toString();
  FakeRunner runner(pool, kVocab);
  for (const Request &r : requests)
    runner.evicting |= r.eviction.policy != EvictionPolicy::kNone;
  EngineConfig cfg;
  cfg.max_batch_size = maxBatch;
  cfg.seed = 99;
  cfg.preemption = preemption;
  auto engine = Engine::create(cfg, alloc->get(), &runner);
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  std::vector<uint64_t> ids;
  for (const Request &r : requests) {
    auto id = (*engine)->addRequest(r);
    ASSERT_TRUE(id.ok()) << id.status().toString();
    ids.push_back(*id);
  }
  int64_t guard = 0;
  while ((*engine)->hasUnfinished()) {
    ENGINE_ASSERT_OK((*engine)->step());
    ENGINE_ASSERT_OK((*alloc)->checkInvariants());
    ASSERT_LT(++guard, 100000) << "engine does not make progress";
  }
  for (uint64_t id : ids) {
    auto r = (*engine)->result(id);
    ASSERT_TRUE(r.ok());
    EXPECT_TRUE(r->finished);
    EXPECT_TRUE(r->status.ok()) << r->status.toString();
    out->results.push_back(*r);
  }
  out->metrics = (*engine)->metrics();
  if (std::getenv("SITS_ENGINE_TEST_VERBOSE")) {
    const EngineMetrics &m = out->metrics;
    std::printf("  blocks=%lld host=%lld batch=%lld: steps=%lld prefills=%lld "
                "decodes=%lld computed=%lld out=%lld preempt=%lld (swap "
                "%lld/%lld) hits=%lld kv_peak=%lld util peak=%.2f mean=%.2f\n",
                (long long)pool.num_blocks, (long long)pool.num_host_blocks,
                (long long)maxBatch, (long long)m.steps, (long long)m.prefills,
                (long long)m.decodes, (long long)m.computed_tokens,
                (long long)m.output_tokens, (long long)m.preemptions,
                (long long)m.swap_outs, (long long)m.swap_ins,
                (long long)m.prefix_cache_hit_tokens,
                (long long)m.kv_blocks_peak, m.kv_utilization_peak,
                m.kv_utilization_mean);
  }
  auto stats = (*alloc)->stats();
  ASSERT_TRUE(stats.ok());
  out->stats = *stats;
  EXPECT_EQ(stats->num_sequences, 0) << "sequences leaked";
  EXPECT_EQ(stats->active_blocks, 0) << "blocks leaked";
  out->runner_max_batch = runner.max_batch;
  out->runner_mixed_steps = runner.mixed_steps;
  out->runner_prefill_tokens = runner.prefill_tokens;
  out->runner_copies = runner.copies;
}

/// Prompts sharing system prefixes (two families), varied lengths, some
/// with a stop token.
std::vector<Request> workload(int count, float temperature = 0.0f,
                              int64_t n = 1) {
  std::vector<Request> reqs;
  for (int i = 0; i < count; ++i) {
    Request r;
    const int family = i % 2;
    for (int t = 0; t < 13 + 4 * family; ++t)
      r.prompt.push_back(100 + family * 50 + t);
    for (int t = 0; t < 1 + (i * 7) % 11; ++t)
      r.prompt.push_back(static_cast<int32_t>((i * 31 + t * 17) % 1000));
    r.max_new_tokens = 5 + (i * 5) % 17;
    r.sampling.temperature = temperature;
    if (temperature > 0)
      r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    if (i % 3 == 0)
      r.stop_tokens = {7};
    else if (i % 3 == 1)
      r.stop_tokens = {3, 11, 3}; // a set: duplicates are harmless
    r.n = n;
    reqs.push_back(r);
  }
  return reqs;
}

void expectMatchesReference(const std::vector<Request> &reqs,
                            const RunOutput &out) {
  ASSERT_EQ(reqs.size(), out.results.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    const RequestResult &res = out.results[i];
    ASSERT_EQ(static_cast<int64_t>(res.samples.size()), reqs[i].n);
    for (int64_t k = 0; k < reqs[i].n; ++k) {
      const auto &sample = res.samples[static_cast<size_t>(k)];
      const uint64_t seed = reqs[i].sampling.seed ? *reqs[i].sampling.seed : 0;
      ASSERT_TRUE(reqs[i].sampling.seed || reqs[i].sampling.isGreedy());
      const auto expected =
          referenceGenerate(reqs[i], kVocab, seed, static_cast<uint64_t>(k));
      EXPECT_EQ(sample.tokens, expected) << "request " << i << " sample " << k;
      const auto &stops = reqs[i].stop_tokens;
      const bool stopped =
          !expected.empty() &&
          std::find(stops.begin(), stops.end(), expected.back()) != stops.end();
      EXPECT_EQ(sample.finish_reason,
                stopped ? FinishReason::kStop : FinishReason::kLength);
    }
  }
}

std::vector<std::vector<std::vector<int32_t>>> tokensOf(const RunOutput &out) {
  std::vector<std::vector<std::vector<int32_t>>> t;
  for (const auto &r : out.results) {
    t.emplace_back();
    for (const auto &s : r.samples)
      t.back().push_back(s.tokens);
  }
  return t;
}

} // namespace

TEST(Engine, GreedyIsTheSameWithBatchSize1And8) {
  const auto reqs = workload(12);
  RunOutput one, eight;
  runAll(poolConfig(512), 1, reqs, &one);
  runAll(poolConfig(512), 8, reqs, &eight);
  expectMatchesReference(reqs, one);
  expectMatchesReference(reqs, eight);
  EXPECT_EQ(tokensOf(one), tokensOf(eight));
  EXPECT_EQ(one.runner_max_batch, 1);
  EXPECT_EQ(eight.runner_max_batch, 8);
  EXPECT_EQ(one.metrics.preemptions, 0);
  EXPECT_EQ(eight.metrics.preemptions, 0);
}

TEST(Engine, ContinuousBatchingAdmitsAsOthersFinish) {
  const auto reqs = workload(10);
  RunOutput out;
  runAll(poolConfig(512), 3, reqs, &out);
  expectMatchesReference(reqs, out);
  EXPECT_EQ(out.runner_max_batch, 3);
  // New prefills ran beside decodes of older sequences.
  EXPECT_GT(out.runner_mixed_steps, 0);
  EXPECT_EQ(out.metrics.prefills, 10);
  int64_t outputTokens = 0;
  for (const auto &r : out.results)
    outputTokens += r.metrics.output_tokens;
  EXPECT_EQ(out.metrics.output_tokens, outputTokens);
  // Every step runs at most 3 sequences, so the decodes need at least
  // (output tokens - prefills) / 3 steps.
  EXPECT_GE(out.metrics.steps * 3, out.metrics.decodes + out.metrics.prefills);
}

TEST(Engine, PreemptionByRecomputeKeepsTheTokens) {
  const auto reqs = workload(12);
  RunOutput large, small;
  runAll(poolConfig(512), 8, reqs, &large);
  // 13 usable blocks of 4 tokens: the longest sample (41 tokens, 11 blocks)
  // fits alone, eight sequences do not.
  runAll(poolConfig(14), 8, reqs, &small);
  expectMatchesReference(reqs, small);
  EXPECT_EQ(tokensOf(large), tokensOf(small));
  EXPECT_EQ(large.metrics.preemptions, 0);
  EXPECT_GT(small.metrics.preemptions, 0);
  int64_t perRequest = 0;
  for (const auto &r : small.results)
    perRequest += r.metrics.preemptions;
  EXPECT_EQ(perRequest, small.metrics.preemptions);
  EXPECT_LE(small.metrics.kv_blocks_peak, 13);
  EXPECT_GT(small.metrics.kv_utilization_peak, 0.7);
  // Recompute costs prefill work.
  EXPECT_GT(small.metrics.computed_tokens,
            large.metrics.computed_tokens -
                large.metrics.prefix_cache_hit_tokens);
}

TEST(Engine, PreemptionWithoutPrefixCachingKeepsTheTokens) {
  const auto reqs = workload(12);
  RunOutput out;
  runAll(poolConfig(14, /*caching=*/false), 8, reqs, &out);
  expectMatchesReference(reqs, out);
  EXPECT_GT(out.metrics.preemptions, 0);
  EXPECT_EQ(out.metrics.prefix_cache_hit_tokens, 0);
}

TEST(Engine, PrefixCachingOnAndOffGiveTheSameTokens) {
  const auto reqs = workload(12);
  RunOutput on, off;
  runAll(poolConfig(512, true), 4, reqs, &on);
  runAll(poolConfig(512, false), 4, reqs, &off);
  expectMatchesReference(reqs, on);
  EXPECT_EQ(tokensOf(on), tokensOf(off));
  EXPECT_GT(on.metrics.prefix_cache_hit_tokens, 0);
  EXPECT_EQ(off.metrics.prefix_cache_hit_tokens, 0);
  EXPECT_EQ(on.stats.prefix_hit_tokens, on.metrics.prefix_cache_hit_tokens);
  // The hits are prefill tokens the runner did not compute.
  EXPECT_EQ(off.runner_prefill_tokens - on.runner_prefill_tokens,
            on.metrics.prefix_cache_hit_tokens);
  int64_t cached = 0;
  for (const auto &r : on.results)
    cached += r.metrics.cached_tokens;
  EXPECT_EQ(cached, on.metrics.prefix_cache_hit_tokens);
}

TEST(Engine, ParallelSamplesForkAndShareThePromptBlocks) {
  Request r;
  for (int t = 0; t < 22; ++t) // 5 full blocks + 2 tokens
    r.prompt.push_back(300 + t);
  r.max_new_tokens = 6;
  r.sampling.temperature = 0;
  r.n = 4;
  const auto pool = poolConfig(64);
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  EngineConfig cfg;
  cfg.max_batch_size = 4;
  auto engine = Engine::create(cfg, alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  auto id = (*engine)->addRequest(r);
  ASSERT_TRUE(id.ok());
  ENGINE_ASSERT_OK((*engine)->step()); // prefill, fork, first tokens
  auto stats = (*alloc)->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->forks, 3);
  EXPECT_EQ(stats->num_sequences, 4);
  // One copy of the prompt: 6 blocks, all shared by the 4 samples.
  EXPECT_EQ(stats->active_blocks, 6);
  EXPECT_EQ(stats->shared_blocks, 6);
  EXPECT_EQ((*engine)->numRunning(), 4u);
  ENGINE_ASSERT_OK((*engine)->step()); // first decode: the partial tail CoWs
  stats = (*alloc)->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->shared_blocks, 5); // the full prompt blocks stay shared
  EXPECT_EQ(stats->active_blocks, 5 + 4);
  EXPECT_EQ(stats->cow_copies, 3);
  EXPECT_EQ(runner.copies, 3);
  ENGINE_ASSERT_OK((*engine)->runUntilDone());
  auto res = (*engine)->result(*id);
  ASSERT_TRUE(res.ok());
  ASSERT_TRUE(res->finished);
  const auto expected = referenceGenerate(r, kVocab, 0, 0);
  for (const auto &s : res->samples) {
    EXPECT_EQ(s.tokens, expected);
    EXPECT_EQ(s.finish_reason, FinishReason::kLength);
  }
  EXPECT_EQ(res->metrics.output_tokens, 4 * 6);
  EXPECT_EQ((*engine)->metrics().prefills, 1);
  ENGINE_ASSERT_OK((*alloc)->checkInvariants());
}

TEST(Engine, TemperatureSamplesDifferButAreSeedReproducible) {
  const auto reqs = workload(6, /*temperature=*/1.0f, /*n=*/4);
  RunOutput a, b, c;
  runAll(poolConfig(512), 8, reqs, &a);
  runAll(poolConfig(512), 4, reqs, &b);
  runAll(poolConfig(14), 8, reqs, &c); // preempts
  expectMatchesReference(reqs, a);
  EXPECT_EQ(tokensOf(a), tokensOf(b));
  EXPECT_EQ(tokensOf(a), tokensOf(c));
  EXPECT_GT(c.metrics.preemptions, 0);
  int differing = 0;
  for (const auto &r : a.results) {
    std::set<std::vector<int32_t>> distinct;
    for (const auto &s : r.samples)
      distinct.insert(s.tokens);
    differing += distinct.size() > 1;
  }
  EXPECT_GE(differing, 5);
}

TEST(Engine, UnseededRequestsAreReproducibleForOneSubmissionOrder) {
  auto reqs = workload(5, 1.0f, 2);
  for (auto &r : reqs)
    r.sampling.seed.reset();
  RunOutput a, b;
  runAll(poolConfig(512), 8, reqs, &a);
  runAll(poolConfig(16), 2, reqs, &b);
  EXPECT_EQ(tokensOf(a), tokensOf(b));
}

TEST(Engine, ForkedSamplesSurvivePreemption) {
  // 4 greedy samples of a 30-token prompt growing by 40: together they need
  // far more than the 24 usable blocks.
  Request r;
  for (int t = 0; t < 30; ++t)
    r.prompt.push_back(t * 3);
  r.max_new_tokens = 40;
  r.sampling.temperature = 0.8f;
  r.sampling.top_k = 8;
  r.sampling.top_p = 0.9f;
  r.sampling.seed = 5;
  r.n = 4;
  RunOutput out;
  runAll(poolConfig(25), 4, {r}, &out);
  expectMatchesReference({r}, out);
  EXPECT_GT(out.metrics.preemptions, 0);
}

TEST(Engine, RequestValidation) {
  const auto pool = poolConfig(16); // 15 usable blocks of 4, max_seq_len 256
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  EngineConfig cfg;
  cfg.max_batch_size = 4;
  auto engine = Engine::create(cfg, alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  auto expectInvalid = [&](Request r, const char *subject) {
    auto id = (*engine)->addRequest(std::move(r));
    ASSERT_FALSE(id.ok()) << subject;
    EXPECT_EQ(id.code(), StatusCode::kInvalidArgument) << subject;
    EXPECT_EQ(id.status().info().subject, subject);
  };
  Request good;
  good.prompt = {1, 2, 3};
  good.max_new_tokens = 4;
  Request r = good;
  r.prompt.clear();
  expectInvalid(r, "prompt");
  r = good;
  r.prompt[1] = -3;
  expectInvalid(r, "prompt");
  r = good;
  r.max_new_tokens = 0;
  expectInvalid(r, "max_new_tokens");
  r = good;
  r.n = 0;
  expectInvalid(r, "n");
  r = good;
  r.n = 5;
  expectInvalid(r, "n");
  r = good;
  r.sampling.temperature = -1;
  expectInvalid(r, "temperature");
  r = good;
  r.sampling.top_p = 0;
  expectInvalid(r, "top_p");
  r = good;
  r.sampling.top_k = -2;
  expectInvalid(r, "top_k");
  r = good;
  r.stop_tokens = {1, -1};
  expectInvalid(r, "stop_tokens");

  // Can never fit: longer than max_seq_len, or than the pool.
  r = good;
  r.max_new_tokens = 254;
  auto id = (*engine)->addRequest(r);
  ASSERT_EQ(id.code(), StatusCode::kCapacityExceeded);
  EXPECT_EQ(id.status().info().subject, "max_seq_len");
  EXPECT_EQ(id.status().info().limit, 256);
  r.max_new_tokens = int64_t{1} << 62; // no overflow
  EXPECT_EQ((*engine)->addRequest(r).code(), StatusCode::kCapacityExceeded);
  r = good;
  r.max_new_tokens = 58; // 60 slots = 15 blocks: fits exactly
  EXPECT_TRUE((*engine)->addRequest(r).ok());
  r.max_new_tokens = 59; // 16 blocks
  id = (*engine)->addRequest(r);
  ASSERT_EQ(id.code(), StatusCode::kCapacityExceeded);
  EXPECT_EQ(id.status().info().subject, "usable_blocks");
  EXPECT_EQ(id.status().info().limit, 15);
  EXPECT_EQ((*engine)->numWaiting(), 1u); // only the valid one was queued
  ENGINE_ASSERT_OK((*engine)->runUntilDone());

  EXPECT_EQ((*engine)->result(12345).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*engine)->release(12345).code(), StatusCode::kInvalidArgument);
  ENGINE_ASSERT_OK((*engine)->release(1));
  EXPECT_FALSE((*engine)->result(1).ok());
}

TEST(Engine, CreateValidation) {
  auto pool = poolConfig(16);
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  EngineConfig cfg;
  EXPECT_EQ(Engine::create(cfg, nullptr, &runner).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Engine::create(cfg, alloc->get(), nullptr).code(),
            StatusCode::kInvalidArgument);
  cfg.max_batch_size = 0;
  auto e = Engine::create(cfg, alloc->get(), &runner);
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.status().info().subject, "max_batch_size");
  cfg.max_batch_size = 2;
  ENGINE_ASSERT_OK((*alloc)->addSequence(77, 3).status());
  EXPECT_EQ(Engine::create(cfg, alloc->get(), &runner).code(),
            StatusCode::kInvalidArgument);
  pool.copy_ordering = kv::CopyOrdering::kAsync;
  auto asyncAlloc = kv::Allocator::create(pool);
  ASSERT_TRUE(asyncAlloc.ok());
  EXPECT_EQ(Engine::create(cfg, asyncAlloc->get(), &runner).code(),
            StatusCode::kUnimplemented);
  // Swap preemption needs a host tier.
  auto noHost = kv::Allocator::create(poolConfig(16));
  ASSERT_TRUE(noHost.ok());
  cfg.preemption = PreemptionMode::kSwap;
  e = Engine::create(cfg, noHost->get(), &runner);
  EXPECT_EQ(e.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(e.status().info().subject, "preemption");
  cfg.preemption = static_cast<PreemptionMode>(7);
  EXPECT_EQ(Engine::create(cfg, noHost->get(), &runner).code(),
            StatusCode::kInvalidArgument);
}

TEST(Engine, RunnerFailureFailsItsBatchOnly) {
  const auto pool = poolConfig(64);
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  runner.fail_at_step = 2;
  EngineConfig cfg;
  cfg.max_batch_size = 2;
  auto engine = Engine::create(cfg, alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  auto reqs = workload(4);
  std::vector<uint64_t> ids;
  for (auto &r : reqs) {
    r.stop_tokens.clear();
    r.max_new_tokens = 6;
    ids.push_back(*(*engine)->addRequest(r));
  }
  ENGINE_ASSERT_OK((*engine)->step());
  ENGINE_ASSERT_OK((*engine)->step());
  Status st = (*engine)->step();
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  ENGINE_ASSERT_OK((*engine)->runUntilDone());
  for (size_t i = 0; i < ids.size(); ++i) {
    auto res = (*engine)->result(ids[i]);
    ASSERT_TRUE(res.ok());
    EXPECT_TRUE(res->finished);
    if (i < 2) { // in the failed batch
      EXPECT_EQ(res->status.code(), StatusCode::kInternal);
      EXPECT_EQ(res->samples[0].finish_reason, FinishReason::kError);
    } else {
      EXPECT_TRUE(res->status.ok());
      EXPECT_EQ(res->samples[0].tokens,
                referenceGenerate(reqs[i], kVocab, 0, 0));
    }
  }
  const EngineMetrics m = (*engine)->metrics();
  EXPECT_EQ(m.requests_failed, 2);
  EXPECT_EQ(m.requests_finished, 2);
  auto stats = (*alloc)->stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->num_sequences, 0);
  ENGINE_ASSERT_OK((*alloc)->checkInvariants());
}

TEST(Engine, Metrics) {
  const auto reqs = workload(8);
  RunOutput out;
  runAll(poolConfig(512), 4, reqs, &out);
  const EngineMetrics &m = out.metrics;
  EXPECT_EQ(m.requests_finished, 8);
  EXPECT_EQ(m.requests_failed, 0);
  EXPECT_GT(m.steps, 0);
  EXPECT_GT(m.busy_s, 0);
  EXPECT_GT(m.tokens_per_s, 0);
  EXPECT_GE(m.mean_ttft_s, 0);
  EXPECT_GE(m.mean_tpot_s, 0);
  EXPECT_GT(m.kv_blocks_peak, 0);
  EXPECT_LE(m.kv_utilization_mean, m.kv_utilization_peak);
  EXPECT_NEAR(m.kv_utilization_peak, m.kv_blocks_peak / 511.0, 1e-12);
  EXPECT_EQ(m.computed_tokens, out.runner_prefill_tokens + m.decodes);
  for (const auto &r : out.results) {
    EXPECT_GE(r.metrics.ttft_s, 0);
    EXPECT_GE(r.metrics.first_token_s, r.metrics.arrival_s);
    EXPECT_GE(r.metrics.finish_s, r.metrics.first_token_s);
    EXPECT_GE(r.metrics.tpot_s, 0);
    EXPECT_EQ(r.metrics.output_tokens,
              static_cast<int64_t>(r.samples[0].tokens.size()));
  }
}

TEST(Engine, StepWithNothingToDoIsOk) {
  const auto pool = poolConfig(8);
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  auto engine = Engine::create(EngineConfig(), alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  ENGINE_ASSERT_OK((*engine)->step());
  ENGINE_ASSERT_OK((*engine)->runUntilDone());
  EXPECT_EQ((*engine)->metrics().steps, 0);
  EXPECT_FALSE((*engine)->hasUnfinished());
}

TEST(Engine, SwapPreemptionKeepsTheTokens) {
  const auto reqs = workload(12);
  RunOutput recompute, swap;
  runAll(poolConfig(14), 8, reqs, &recompute);
  runAll(poolConfig(14, true, /*hostBlocks=*/128), 8, reqs, &swap,
         PreemptionMode::kSwap);
  expectMatchesReference(reqs, swap);
  EXPECT_EQ(tokensOf(recompute), tokensOf(swap));
  EXPECT_GT(swap.metrics.swap_outs, 0);
  EXPECT_GT(swap.metrics.swap_ins, 0);
  EXPECT_EQ(swap.stats.swapped_out_blocks > 0, true);
  EXPECT_EQ(swap.stats.host_used, 0);
  // Swapped sequences resume without a second prefill.
  EXPECT_LT(swap.metrics.prefills, recompute.metrics.prefills);
}

TEST(Engine, SwapPreemptionOfForkedSamples) {
  const auto reqs = workload(6, 1.0f, 4);
  RunOutput recompute, swap;
  runAll(poolConfig(512), 8, reqs, &recompute);
  runAll(poolConfig(14, true, 128), 8, reqs, &swap, PreemptionMode::kSwap);
  expectMatchesReference(reqs, swap);
  EXPECT_EQ(tokensOf(recompute), tokensOf(swap));
  EXPECT_GT(swap.metrics.swap_outs, 0);
}

TEST(Engine, SwapFallsBackToRecomputeWhenTheHostTierIsFull) {
  const auto reqs = workload(12);
  RunOutput out;
  runAll(poolConfig(14, true, /*hostBlocks=*/3), 8, reqs, &out,
         PreemptionMode::kSwap);
  expectMatchesReference(reqs, out);
  EXPECT_GT(out.metrics.swap_outs, 0);
  EXPECT_GT(out.metrics.preemptions, out.metrics.swap_outs);
}

TEST(Engine, HostTierOffloadAndOnboardKeepTheTokens) {
  // Recompute with a host tier: evicted prefix blocks are offloaded and
  // re-admissions onboard them (H2D copies the runner must execute).
  const auto reqs = workload(12);
  RunOutput out;
  runAll(poolConfig(14, true, /*hostBlocks=*/64), 8, reqs, &out);
  expectMatchesReference(reqs, out);
  EXPECT_GT(out.stats.offloads, 0);
  EXPECT_GT(out.stats.onboards, 0);
  EXPECT_GT(out.metrics.preemptions, 0);
}

TEST(Engine, SamplesThatFinishAtTheirFirstToken) {
  // max_new_tokens = 1, and a stop token drawn first: forks finish (and
  // free their blocks) in the step that created them.
  Request one;
  for (int t = 0; t < 9; ++t)
    one.prompt.push_back(40 + t);
  one.max_new_tokens = 1;
  one.n = 3;
  one.sampling.temperature = 0;
  Request stop = one;
  stop.max_new_tokens = 10;
  stop.stop_tokens = {referenceGenerate(one, kVocab, 0, 0)[0]};
  Request hot = one;
  hot.sampling.temperature = 1.0f;
  hot.sampling.seed = 3;
  RunOutput out;
  runAll(poolConfig(64), 4, {one, stop, hot}, &out);
  expectMatchesReference({one, stop, hot}, out);
  for (const auto &s : out.results[1].samples) {
    EXPECT_EQ(s.tokens.size(), 1u);
    EXPECT_EQ(s.finish_reason, FinishReason::kStop);
  }
  EXPECT_EQ(out.stats.forks, 6);
}

TEST(Engine, AbortFreesTheBlocksAtOnceAndKeepsTheOthersRunning) {
  const kv::PoolConfig pool = poolConfig(512);
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  EngineConfig cfg;
  cfg.max_batch_size = 4;
  auto engine = Engine::create(cfg, alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  auto reqs = workload(6);
  for (Request &r : reqs) {
    r.max_new_tokens = 20;
    r.stop_tokens.clear(); // so that nothing finishes before the aborts
  }
  reqs[1].n = 2; // forked samples share the prompt's blocks
  std::vector<uint64_t> ids;
  for (const Request &r : reqs) {
    auto id = (*engine)->addRequest(r);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  for (int i = 0; i < 3; ++i)
    ENGINE_ASSERT_OK((*engine)->step());
  // Requests 0, 1 (forked) and 2 fill the 4 places; 3, 4 and 5 wait.
  auto before = (*alloc)->stats();
  ASSERT_TRUE(before.ok());
  auto running = (*engine)->result(ids[1]);
  ASSERT_TRUE(running.ok());
  ASSERT_EQ(running->samples[0].tokens.size(), 3u);
  ASSERT_EQ((*engine)->numWaiting(), 3u);
  ASSERT_EQ((*engine)->numRunning(), 4u);

  ENGINE_ASSERT_OK((*engine)->abort(ids[1]));
  ENGINE_ASSERT_OK((*engine)->abort(ids[5]));
  ENGINE_ASSERT_OK((*alloc)->checkInvariants());
  auto after = (*alloc)->stats();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->num_sequences, before->num_sequences - 2);
  EXPECT_LT(after->active_blocks, before->active_blocks);
  EXPECT_EQ((*engine)->numRunning(), 2u);
  EXPECT_EQ((*engine)->numWaiting(), 2u);

  auto aborted = (*engine)->result(ids[1]);
  ASSERT_TRUE(aborted.ok());
  EXPECT_TRUE(aborted->finished);
  EXPECT_TRUE(aborted->status.ok());
  for (int k = 0; k < 2; ++k) {
    const SampleResult &s = aborted->samples[static_cast<size_t>(k)];
    EXPECT_EQ(s.finish_reason, FinishReason::kAbort);
    ASSERT_EQ(s.tokens.size(), 3u) << "sample " << k;
    auto ref = referenceGenerate(reqs[1], kVocab, 0, static_cast<uint64_t>(k));
    EXPECT_EQ(s.tokens, std::vector<int32_t>(ref.begin(), ref.begin() + 3));
  }
  auto waiting = (*engine)->result(ids[5]);
  ASSERT_TRUE(waiting.ok());
  EXPECT_TRUE(waiting->finished);
  EXPECT_EQ(waiting->samples[0].finish_reason, FinishReason::kAbort);
  EXPECT_TRUE(waiting->samples[0].tokens.empty());
  EXPECT_STREQ(finishReasonName(FinishReason::kAbort), "abort");

  // Again, and on a finished request: nothing happens.
  ENGINE_ASSERT_OK((*engine)->abort(ids[1]));
  ENGINE_ASSERT_OK((*engine)->runUntilDone());
  ENGINE_ASSERT_OK((*engine)->abort(ids[0]));
  for (size_t i : {0u, 2u, 3u, 4u}) {
    auto r = (*engine)->result(ids[i]);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->samples[0].finish_reason, FinishReason::kLength);
    EXPECT_EQ(r->samples[0].tokens, referenceGenerate(reqs[i], kVocab, 0, 0));
  }
  EngineMetrics m = (*engine)->metrics();
  EXPECT_EQ(m.requests_aborted, 2);
  EXPECT_EQ(m.requests_finished, 4);
  auto end = (*alloc)->stats();
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->num_sequences, 0);
  EXPECT_EQ(end->active_blocks, 0);

  // Unknown and released ids are typed errors.
  Status st = (*engine)->abort(12345);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.info().subject, "request_id");
  ENGINE_ASSERT_OK((*engine)->release(ids[1]));
  EXPECT_EQ((*engine)->abort(ids[1]).code(), StatusCode::kInvalidArgument);
}

TEST(Engine, AbortOfSwappedAndPreemptedRequestsFreesEverything) {
  // A pool too small for the batch, swapping to the host tier: abort every
  // request once some are swapped out.
  const kv::PoolConfig pool = poolConfig(14, true, /*hostBlocks=*/128);
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  EngineConfig cfg;
  cfg.max_batch_size = 8;
  cfg.preemption = PreemptionMode::kSwap;
  auto engine = Engine::create(cfg, alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  std::vector<uint64_t> ids;
  for (const Request &r : workload(12)) {
    auto id = (*engine)->addRequest(r);
    ASSERT_TRUE(id.ok());
    ids.push_back(*id);
  }
  int64_t guard = 0;
  while ((*engine)->numSwapped() == 0) {
    ASSERT_TRUE((*engine)->hasUnfinished()) << "nothing was swapped out";
    ENGINE_ASSERT_OK((*engine)->step());
    ASSERT_LT(++guard, 1000);
  }
  auto mid = (*alloc)->stats();
  ASSERT_TRUE(mid.ok());
  EXPECT_GT(mid->host_used, 0);
  for (uint64_t id : ids)
    ENGINE_ASSERT_OK((*engine)->abort(id));
  ENGINE_ASSERT_OK((*alloc)->checkInvariants());
  EXPECT_FALSE((*engine)->hasUnfinished());
  EXPECT_EQ((*engine)->numSwapped(), 0u);
  auto end = (*alloc)->stats();
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->num_sequences, 0);
  EXPECT_EQ(end->active_blocks, 0);
  EXPECT_EQ(end->host_used, 0);
  ENGINE_ASSERT_OK((*engine)->step()); // nothing left to do
  const EngineMetrics m = (*engine)->metrics();
  EXPECT_EQ(m.requests_aborted + m.requests_finished, 12);
  EXPECT_GT(m.requests_aborted, 0);
}

TEST(Engine, AnyOfSeveralStopTokensEndsASample) {
  Request r;
  r.prompt = {5, 6, 7, 8, 9};
  r.max_new_tokens = 12;
  r.sampling.temperature = 0;
  const auto free = referenceGenerate(r, kVocab, 0, 0);
  ASSERT_EQ(free.size(), 12u);
  // The fourth token and a token never drawn: the sample stops at the
  // first of them it draws.
  int32_t never = 0;
  while (std::find(free.begin(), free.end(), never) != free.end())
    ++never;
  r.stop_tokens = {never, free[3]};
  RunOutput out;
  runAll(poolConfig(64), 2, {r}, &out);
  const auto &s = out.results[0].samples[0];
  const size_t first = static_cast<size_t>(
      std::find(free.begin(), free.end(), free[3]) - free.begin());
  EXPECT_EQ(s.tokens,
            std::vector<int32_t>(free.begin(), free.begin() + first + 1));
  EXPECT_EQ(s.finish_reason, FinishReason::kStop);
}

TEST(Engine, LogprobsAreTheModelsLogSoftmax) {
  Request r;
  r.prompt = {9, 8, 7, 6, 5, 4};
  r.max_new_tokens = 6;
  r.sampling.temperature = 0.7f; // logprobs ignore temperature
  r.sampling.seed = 3;
  r.logprobs = 3;
  r.n = 2;
  Request none = r;
  none.logprobs = -1;
  RunOutput out;
  runAll(poolConfig(64), 4, {r, none}, &out);
  expectMatchesReference({r, none}, out);
  EXPECT_EQ(out.results[0].logprobs, 3);
  std::vector<float> row(kVocab);
  for (const SampleResult &s : out.results[0].samples) {
    ASSERT_EQ(s.logprobs.size(), s.tokens.size());
    ASSERT_EQ(s.top_logprobs.size(), s.tokens.size());
    std::vector<int32_t> history = r.prompt;
    for (size_t i = 0; i < s.tokens.size(); ++i) {
      logitsFor(
          historyHash(history.data(), static_cast<int64_t>(history.size())),
          kVocab, row.data());
      double sum = 0;
      for (float v : row)
        sum += std::exp(static_cast<double>(v));
      const double lse = std::log(sum);
      EXPECT_NEAR(s.logprobs[i], row[static_cast<size_t>(s.tokens[i])] - lse,
                  1e-4);
      const auto &top = s.top_logprobs[i];
      ASSERT_EQ(top.size(), 3u);
      EXPECT_GE(top[0].logprob, top[1].logprob);
      EXPECT_GE(top[1].logprob, top[2].logprob);
      const int32_t argmax = static_cast<int32_t>(
          std::max_element(row.begin(), row.end()) - row.begin());
      EXPECT_EQ(top[0].token, argmax);
      EXPECT_NEAR(top[0].logprob, row[static_cast<size_t>(argmax)] - lse, 1e-4);
      EXPECT_LE(s.logprobs[i], top[0].logprob);
      history.push_back(s.tokens[i]);
    }
  }
  for (const SampleResult &s : out.results[1].samples) {
    EXPECT_TRUE(s.logprobs.empty());
    EXPECT_TRUE(s.top_logprobs.empty());
  }
}

TEST(Engine, LogprobsValidation) {
  const kv::PoolConfig pool = poolConfig(64);
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  auto engine = Engine::create(EngineConfig(), alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  Request r;
  r.prompt = {1, 2};
  for (int32_t bad : {-2, kMaxLogprobs + 1}) {
    r.logprobs = bad;
    auto id = (*engine)->addRequest(r);
    ASSERT_EQ(id.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(id.status().info().subject, "logprobs");
  }
  r.logprobs = kMaxLogprobs; // the limit itself is fine
  ASSERT_TRUE((*engine)->addRequest(r).ok());
}

//===----------------------------------------------------------------------===//
// Token eviction
//===----------------------------------------------------------------------===//

namespace {

/// Long generations without stop tokens, so that sequences outgrow a budget.
std::vector<Request> longWorkload(int count, KVEviction eviction,
                                  float temperature = 0.0f, int64_t n = 1) {
  std::vector<Request> reqs = workload(count, temperature, n);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].stop_tokens.clear();
    reqs[i].max_new_tokens = 30 + static_cast<int64_t>(i % 4) * 7;
    reqs[i].eviction = eviction;
  }
  return reqs;
}

KVEviction evictionOf(EvictionPolicy policy, int64_t budget) {
  KVEviction e;
  e.policy = policy;
  e.budget = budget;
  e.observe = 8;
  return e;
}

} // namespace

TEST(Engine, EvictionWithABudgetAboveTheSequenceChangesNothing) {
  // The budget is never exceeded: the same tokens as without eviction
  // (scoring the attention changes nothing either).
  const auto plain = longWorkload(10, KVEviction());
  RunOutput base;
  runAll(poolConfig(512), 4, plain, &base);
  expectMatchesReference(plain, base);
  for (EvictionPolicy policy :
       {EvictionPolicy::kWindow, EvictionPolicy::kAttention}) {
    const auto reqs = longWorkload(10, evictionOf(policy, 256));
    RunOutput out;
    runAll(poolConfig(512), 4, reqs, &out);
    EXPECT_EQ(tokensOf(out), tokensOf(base)) << evictionPolicyName(policy);
    EXPECT_EQ(out.metrics.evicted_tokens, 0);
  }
}

TEST(Engine, WindowEvictionKeepsTheSinksAndTheLatestTokens) {
  // Budget 24 (6 blocks of 4): the first block and the latest ones stay;
  // the model sees exactly the kept tokens (the reference drops the same
  // blocks), and the pool never holds more than budget + a block per
  // sequence.
  for (int64_t batch : {1, 4}) {
    const auto reqs = longWorkload(8, evictionOf(EvictionPolicy::kWindow, 24));
    RunOutput out;
    runAll(poolConfig(512, /*caching=*/true), batch, reqs, &out);
    expectMatchesReference(reqs, out);
    EXPECT_GT(out.metrics.evicted_tokens, 0);
    EXPECT_EQ(out.metrics.evicted_tokens, 4 * out.metrics.evicted_blocks);
    int64_t evicted = 0;
    for (const RequestResult &r : out.results)
      evicted += r.metrics.evicted_tokens;
    EXPECT_EQ(evicted, out.metrics.evicted_tokens);
    // The longest prompt (28 tokens: 7 blocks) is held whole once; after
    // that a sequence keeps at most 24 + its next token.
    EXPECT_LE(out.metrics.kv_blocks_peak, batch * 8);
  }
}

TEST(Engine, AttentionEvictionDropsTheLeastAttendedBlock) {
  // Greedy and sampled, with parallel samples sharing the prompt's blocks:
  // every sample drops its own blocks by its own accumulated weights.
  for (float temperature : {0.0f, 0.8f})
    for (int64_t n : {1, 2}) {
      KVEviction e = evictionOf(EvictionPolicy::kAttention, 24);
      e.recent_tokens = 8;
      const auto reqs = longWorkload(6, e, temperature, n);
      RunOutput out;
      runAll(poolConfig(512), 8, reqs, &out);
      expectMatchesReference(reqs, out);
      EXPECT_GT(out.metrics.evicted_tokens, 0);
    }
}

TEST(Engine, EvictedSequencesSwapOutAndBackWithTheirScores) {
  // A pool too small for all: swapped sequences keep what they evicted and
  // their scores, so the tokens still match the reference.
  KVEviction e = evictionOf(EvictionPolicy::kAttention, 16);
  e.recent_tokens = 4;
  const auto reqs = longWorkload(8, e);
  int64_t swaps = 0;
  for (int64_t blocks : {21, 22, 23, 24, 25}) {
    RunOutput out;
    runAll(poolConfig(blocks, true, 64), 8, reqs, &out, PreemptionMode::kSwap);
    expectMatchesReference(reqs, out);
    EXPECT_GT(out.metrics.evicted_tokens, 0);
    swaps += out.metrics.swap_outs;
  }
  EXPECT_GT(swaps, 0);
}

TEST(Engine, BadEvictionsAreRefused) {
  const kv::PoolConfig pool = poolConfig(64);
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  auto engine = Engine::create(EngineConfig(), alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  Request r;
  r.prompt = {1, 2, 3};
  auto refused = [&](KVEviction e, const char *subject) {
    r.eviction = e;
    auto id = (*engine)->addRequest(r);
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(id.status().info().subject, subject) << id.status().toString();
  };
  // Sinks (1 block) + recent (a quarter of 8: 1 block) + 1 block = 12.
  refused(evictionOf(EvictionPolicy::kAttention, 8), "kv_budget");
  refused(evictionOf(EvictionPolicy::kWindow, 300), "kv_budget");
  KVEviction e = evictionOf(EvictionPolicy::kWindow, 16);
  e.sink_tokens = -1;
  refused(e, "sink_tokens");
  e = evictionOf(EvictionPolicy::kWindow, 16);
  e.recent_tokens = -2;
  refused(e, "recent_tokens");
  e = evictionOf(EvictionPolicy::kAttention, 16);
  e.observe = 0;
  refused(e, "observe");
  refused(evictionOf(static_cast<EvictionPolicy>(7), 16), "eviction");
  runner.scores_attention = false;
  refused(evictionOf(EvictionPolicy::kAttention, 16), "eviction");
  runner.takes_positions = false;
  refused(evictionOf(EvictionPolicy::kWindow, 16), "eviction");
  // A budget of 12 is enough for window eviction (sinks + 1 block + tail).
  runner.takes_positions = true;
  r.eviction = evictionOf(EvictionPolicy::kWindow, 8);
  EXPECT_TRUE((*engine)->addRequest(r).ok());
}

TEST(Engine, RecomputedEvictingSequencesPrefillTheirKeptTokens) {
  // A pool far smaller than the generations (up to 28 + 51 tokens each, 8
  // sequences, 24 blocks of 4): preempted by recompute, a sequence
  // prefills only the tokens it kept, at their own positions, so it sees
  // exactly what the reference keeps.
  const auto reqs = longWorkload(8, evictionOf(EvictionPolicy::kWindow, 16));
  RunOutput out;
  runAll(poolConfig(24), 8, reqs, &out);
  expectMatchesReference(reqs, out);
  EXPECT_GT(out.metrics.preemptions, 0);
  EXPECT_GT(out.metrics.evicted_tokens, 0);
}

TEST(Engine, AnEvictingRequestNeedsRoomForItsPromptOrBudgetOnly) {
  // 600 tokens would need 150 blocks; under a budget of 16 the request
  // fits a pool of 12 (its 28-token prompt: 7 blocks) and completes.
  Request r = longWorkload(1, evictionOf(EvictionPolicy::kWindow, 16))[0];
  r.max_new_tokens = 220;
  kv::PoolConfig pool = poolConfig(12);
  RunOutput out;
  runAll(pool, 1, {r}, &out);
  expectMatchesReference({r}, out);
  EXPECT_EQ(out.results[0].samples[0].tokens.size(), 220u);
  // Without eviction the same request can never fit.
  auto alloc = kv::Allocator::create(pool);
  ASSERT_TRUE(alloc.ok());
  FakeRunner runner(pool, kVocab);
  auto engine = Engine::create(EngineConfig(), alloc->get(), &runner);
  ASSERT_TRUE(engine.ok());
  r.eviction = KVEviction();
  auto id = (*engine)->addRequest(r);
  ASSERT_FALSE(id.ok());
  EXPECT_EQ(id.status().code(), StatusCode::kCapacityExceeded);
}
