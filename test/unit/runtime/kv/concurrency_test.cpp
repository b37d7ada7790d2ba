//===- concurrency_test.cpp - Spec §5 I: T67–T69, T79 ---------------------===//
//
// Run these under ThreadSanitizer too (T71): build with
// -DSITS_SANITIZE=thread and run `sits_kv_tests
// --gtest_filter=KVConcurrency.*`. KV_STRESS_OPS overrides the operations per
// thread (default 100000).
//
//===----------------------------------------------------------------------===//
#include "kv_test_util.h"

#include <atomic>
#include <cstdlib>
#include <map>
#include <random>
#include <thread>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

namespace {

int64_t stressOps() {
  const char *v = std::getenv("KV_STRESS_OPS");
  return v ? std::atoll(v) : 100000;
}

struct LocalSeq {
  int64_t n = 0;
  bool tokens = false;
  bool swapped = false;
  bool reserved = false;
};

/// One thread's random walk over its own sequence ids. Returns the number of
/// unexpected errors (anything but OutOfBlocks / HostTierFull).
int64_t randomWalk(Allocator &a, int thread, int64_t ops,
                   std::vector<std::string> *unexpected) {
  std::mt19937_64 rng(1000 + thread);
  std::map<uint64_t, LocalSeq> live;
  uint64_t next = 0;
  int64_t bad = 0;
  auto id = [&](uint64_t k) { return (uint64_t(thread) << 40) | k; };
  auto check = [&](const Status &st, const char *what) {
    if (st.ok() || st.code() == StatusCode::kOutOfBlocks ||
        st.code() == StatusCode::kHostTierFull)
      return;
    ++bad;
    if (unexpected->size() < 5)
      unexpected->push_back(std::string(what) + ": " + st.toString());
  };
  const std::vector<int32_t> shared = tokenRange(64, 7); // common prompt
  for (int64_t i = 0; i < ops; ++i) {
    const int op = int(rng() % 100);
    if (op < 25 || live.empty()) {
      const int64_t n = int64_t(rng() % 80);
      const uint64_t s = id(next++);
      if (rng() & 1) {
        std::vector<int32_t> t(shared.begin(),
                               shared.begin() + std::min<int64_t>(n, 64));
        while (int64_t(t.size()) < n)
          t.push_back(int32_t(rng() % 5));
        auto r = a.addSequence(s, t.data(), n);
        check(r.status(), "add");
        if (r.ok())
          live[s] = LocalSeq{n, true, false, false};
      } else {
        auto r = a.addSequence(s, n);
        check(r.status(), "add");
        if (r.ok())
          live[s] = LocalSeq{n, false, false, false};
      }
      continue;
    }
    auto it = live.begin();
    std::advance(it, ptrdiff_t(rng() % live.size()));
    const uint64_t s = it->first;
    LocalSeq &ls = it->second;
    if (op < 55) {
      if (ls.swapped) {
        const Status st = a.swapIn(s);
        check(st, "swap_in");
        if (st.ok())
          ls.swapped = false;
        continue;
      }
      if (ls.n > 1500)
        continue; // stay far from CapacityExceeded
      const int64_t k = 1 + int64_t(rng() % 20);
      std::vector<int32_t> t(static_cast<size_t>(k), int32_t(rng() % 5));
      const Status st = ls.tokens ? a.append(s, t.data(), k) : a.append(s, k);
      check(st, "append");
      if (st.ok()) {
        ls.n += k;
        ls.reserved = false;
      }
    } else if (op < 63 && !ls.swapped && !ls.reserved) {
      const uint64_t c = id(next++);
      const int64_t pos = int64_t(rng() % uint64_t(ls.n + 1));
      const Status st = a.fork(s, c, pos);
      check(st, "fork");
      if (st.ok())
        live[c] = LocalSeq{pos, ls.tokens, false, false};
    } else if (op < 70 && !ls.swapped) {
      const int64_t newN = int64_t(rng() % uint64_t(ls.n + 1));
      const Status st = a.truncate(s, newN);
      check(st, "truncate");
      if (st.ok()) {
        ls.n = newN;
        ls.reserved = false;
      }
    } else if (op < 74 && !ls.swapped) {
      const int64_t lookahead = int64_t(rng() % 8);
      const Status st = a.reserve(s, lookahead);
      check(st, "reserve");
      if (st.ok())
        ls.reserved = lookahead > 0;
    } else if (op < 78 && !ls.swapped) {
      const Status st = a.swapOut(s);
      check(st, "swap_out");
      if (st.ok()) {
        ls.swapped = true;
        ls.reserved = false;
      }
    } else if (op < 82 && !ls.swapped) {
      auto t = a.blockTable(s);
      check(t.status(), "block_table");
    } else if (op < 84) {
      check(a.stats().status(), "stats");
    } else if (op < 86) {
      check(a.evict(int64_t(rng() % 3)).status(), "evict");
    } else if (op < 88) {
      std::vector<BlockCopy> copies;
      check(a.takePendingCopies(&copies), "take_pending_copies");
    } else {
      check(a.free(s), "free");
      live.erase(it);
    }
  }
  std::vector<uint64_t> rest;
  for (const auto &kv : live)
    rest.push_back(kv.first);
  check(a.freeBatch(rest.data(), rest.size()), "free_batch");
  return bad;
}

} // namespace

TEST(KVConcurrency, T67_EightThreadsRandomOperationsOnDisjointIds) {
  PoolConfig c = poolConfig(512, 8);
  c.num_host_blocks = 64;
  auto a = makePool(c);
  const int64_t ops = stressOps();
  std::vector<std::thread> threads;
  std::vector<int64_t> bad(8, 0);
  std::vector<std::vector<std::string>> msgs(8);
  for (int t = 0; t < 8; ++t)
    threads.emplace_back(
        [&, t] { bad[size_t(t)] = randomWalk(*a, t, ops, &msgs[size_t(t)]); });
  for (auto &th : threads)
    th.join();
  for (int t = 0; t < 8; ++t)
    EXPECT_EQ(bad[size_t(t)], 0)
        << "thread " << t << ": "
        << (msgs[size_t(t)].empty() ? "" : msgs[size_t(t)][0]);
  KV_ASSERT_INVARIANTS(*a);
  const Stats s = stats(*a);
  EXPECT_EQ(s.num_sequences, 0);
  EXPECT_EQ(s.active_blocks, 0);
  EXPECT_EQ(s.host_used, 0);
  EXPECT_EQ(*a->numFreeBlocks(), s.usable_blocks);
  EXPECT_EQ(s.free_blocks + s.cached_blocks, s.usable_blocks);
}

TEST(KVConcurrency, T68_SharedPrefixesFromEightThreads) {
  auto a = makePool(poolConfig(4096, 16));
  const auto prompt = tokenRange(256, 3); // 16 blocks, the same for all
  const int64_t rounds = std::max<int64_t>(50, stressOps() / 200);
  std::vector<std::thread> threads;
  std::atomic<int64_t> failures{0};
  std::atomic<int64_t> hits{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      for (int64_t r = 0; r < rounds; ++r) {
        const uint64_t base = (uint64_t(t) << 40) | uint64_t(r * 8);
        auto added = a->addSequence(base, prompt.data(), 256);
        if (!added.ok()) {
          ++failures;
          continue;
        }
        hits += added->cached_tokens;
        for (uint64_t c = 1; c <= 4; ++c)
          if (!a->fork(base, base + c, int64_t(c * 40)).ok())
            ++failures;
        const int32_t tok[3] = {int32_t(t), int32_t(r), 5};
        for (uint64_t c = 0; c <= 4; ++c)
          if (!a->append(base + c, tok, 3).ok())
            ++failures;
        const uint64_t all[] = {base + 4, base, base + 2, base + 1, base + 3};
        if (!a->freeBatch(all, 5).ok())
          ++failures;
      }
    });
  for (auto &th : threads)
    th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(hits.load(), 0);
  KV_ASSERT_INVARIANTS(*a);
  const Stats s = stats(*a);
  EXPECT_EQ(s.active_blocks, 0);
  EXPECT_EQ(s.num_sequences, 0);
  for (int32_t b = 1; b < 4096; ++b)
    ASSERT_EQ(block(*a, b).ref, 0) << "block " << b;
  EXPECT_EQ(*a->numFreeBlocks(), 4095);
}

TEST(KVConcurrency, T69_T79_ReadersSeeConsistentMonotonicSnapshots) {
  PoolConfig c = poolConfig(256, 8);
  c.num_host_blocks = 32;
  auto a = makePool(c);
  std::atomic<bool> stop{false};
  std::atomic<int64_t> torn{0}, nonMonotonic{0}, reads{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 2; ++r)
    readers.emplace_back([&] {
      Stats prev;
      while (!stop.load()) {
        auto s = a->stats();
        if (!s.ok()) {
          ++torn;
          continue;
        }
        ++reads;
        // I4 in every snapshot.
        if (s->free_blocks + s->cached_blocks + s->active_blocks +
                s->evicting_blocks + 1 !=
            s->total_blocks)
          ++torn;
        if (s->physical_tokens > s->active_blocks * 8)
          ++torn;
        // Monotonic counters never go back.
        if (s->blocks_allocated < prev.blocks_allocated ||
            s->blocks_released < prev.blocks_released ||
            s->sequences_added < prev.sequences_added ||
            s->prefix_hit_tokens < prev.prefix_hit_tokens ||
            s->prefix_query_tokens < prev.prefix_query_tokens ||
            s->evictions < prev.evictions ||
            s->peak_active_blocks < prev.peak_active_blocks)
          ++nonMonotonic;
        prev = *s;
        auto t = a->blockTable(1);
        if (t.ok())
          for (int32_t b : *t)
            if (b <= 0 || b >= 256)
              ++torn;
      }
    });
  std::vector<std::thread> writers;
  std::vector<std::vector<std::string>> msgs(4);
  std::vector<int64_t> bad(4, 0);
  const int64_t ops = std::max<int64_t>(2000, stressOps() / 10);
  for (int t = 0; t < 4; ++t)
    writers.emplace_back(
        [&, t] { bad[size_t(t)] = randomWalk(*a, t, ops, &msgs[size_t(t)]); });
  for (auto &w : writers)
    w.join();
  stop = true;
  for (auto &r : readers)
    r.join();
  for (int t = 0; t < 4; ++t)
    EXPECT_EQ(bad[size_t(t)], 0);
  EXPECT_EQ(torn.load(), 0);
  EXPECT_EQ(nonMonotonic.load(), 0);
  EXPECT_GT(reads.load(), 0);
  KV_ASSERT_INVARIANTS(*a);
}
