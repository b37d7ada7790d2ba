//===- kv_bench.cpp - Replay of spec §6's seeded workload (T80–T82, T84)
//---===//
//
// Replays the workload of spec kv-allocator.md §6 through the C++ API and
// prints per-operation costs next to vLLM 0.33.0's figures from the spec.
// The seeded inputs come from runtime/bench/data (written by generate.py with
// Python's random.Random, so the lengths are exactly the spec's).
//
//   kv_bench [--data DIR] [--runs N] [--only
//   allocation|hashing|decode|prefix|micro]
//
// Timings are the best of N runs (default 6, like the spec's vLLM figures).
// The hit rates, rounds and waste are checked: the exit status is 1 if any
// differs from the spec's value.
//
//===----------------------------------------------------------------------===//
#include "kv_workloads.h"
#include "sha256.h" // internal (runtime/src/support): the portable fallback
#include "sits/runtime/kv/allocator.h"
#include "sits/runtime/kv/hash.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::bench;
using sits::runtime::sha256HardwareAccelerated;
using sits::runtime::sha256Portable;
using Clock = std::chrono::steady_clock;

namespace {

int gFailures = 0;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void check(bool ok, const std::string &what) {
  if (!ok) {
    std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
    ++gFailures;
  }
}

void must(const Status &st, const char *what) {
  if (!st.ok()) {
    std::fprintf(stderr, "%s failed: %s\n", what, st.toString().c_str());
    std::exit(2);
  }
}
template <typename T> T must(StatusOr<T> r, const char *what) {
  must(r.status(), what);
  return std::move(*r);
}

std::vector<int64_t> requireColumn(const std::string &path) {
  std::vector<int64_t> v = readColumn(path);
  if (v.empty()) {
    std::fprintf(stderr, "cannot read %s\n", path.c_str());
    std::exit(2);
  }
  return v;
}

std::unique_ptr<Allocator> makePool(const PoolConfig &c) {
  return must(Allocator::create(c), "create");
}

/// Best of `runs` calls of fn(), which returns the seconds it measured.
double bestOf(int runs, const std::function<double()> &fn) {
  double best = 1e100;
  for (int i = 0; i < runs; ++i)
    best = std::min(best, fn());
  return best;
}

struct Row {
  std::string op;
  std::string vllm;
  double vllmValue; // NaN when not comparable
  double ours;
  std::string unit;
  std::string note;
};
std::vector<Row> gRows;

void addRow(std::string op, double vllm, double ours, std::string unit,
            std::string note = "") {
  char buf[32];
  if (std::isnan(vllm))
    std::snprintf(buf, sizeof(buf), "-");
  else
    std::snprintf(buf, sizeof(buf), "%.3g", vllm);
  gRows.push_back(
      Row{std::move(op), buf, vllm, ours, std::move(unit), std::move(note)});
}

//===----------------------------------------------------------------------===//
// Workload B/C: 1000 sequences (seed 1234) in rounds through 100k blocks
//===----------------------------------------------------------------------===//

std::vector<std::vector<size_t>> makeRounds(const std::vector<int64_t> &lens) {
  std::vector<std::vector<size_t>> rounds(1);
  int64_t used = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    if (used + blocksOf(lens[i]) > kPoolBlocks - 1) {
      rounds.emplace_back();
      used = 0;
    }
    used += blocksOf(lens[i]);
    rounds.back().push_back(i);
  }
  return rounds;
}

struct AllocTimes {
  double alloc = 0;
  double free = 0;
};

/// One pass over the rounds. `tokens` null: count-only adds.
AllocTimes allocationPass(Allocator &a, const std::vector<int64_t> &lens,
                          const std::vector<std::vector<size_t>> &rounds,
                          const std::vector<std::vector<int32_t>> *tokens,
                          bool batch, uint64_t idBase) {
  AllocTimes t;
  for (const auto &round : rounds) {
    if (batch) {
      std::vector<AddRequest> reqs;
      for (size_t i : round)
        reqs.push_back(AddRequest{idBase + i, lens[i],
                                  tokens ? (*tokens)[i].data() : nullptr,
                                  nullptr});
      auto t0 = Clock::now();
      must(a.addSequences(reqs.data(), reqs.size()), "addSequences");
      auto t1 = Clock::now();
      std::vector<uint64_t> ids;
      for (size_t i : round)
        ids.push_back(idBase + i);
      auto t2 = Clock::now();
      must(a.freeBatch(ids.data(), ids.size()), "freeBatch");
      auto t3 = Clock::now();
      t.alloc += seconds(t0, t1);
      t.free += seconds(t2, t3);
    } else {
      auto t0 = Clock::now();
      for (size_t i : round) {
        if (tokens)
          must(a.addSequence(idBase + i, (*tokens)[i].data(), lens[i]).status(),
               "add");
        else
          must(a.addSequence(idBase + i, lens[i]).status(), "add");
      }
      auto t1 = Clock::now();
      for (size_t i : round)
        must(a.free(idBase + i), "free");
      auto t2 = Clock::now();
      t.alloc += seconds(t0, t1);
      t.free += seconds(t1, t2);
    }
  }
  return t;
}

void allocationWorkload(const std::string &dir, int runs) {
  const auto lens = requireColumn(dir + "/lengths_seed1234.txt");
  int64_t tokens = 0, blocks = 0;
  for (int64_t n : lens) {
    tokens += n;
    blocks += blocksOf(n);
  }
  const auto rounds = makeRounds(lens);
  std::printf("allocation workload: %zu sequences, %lld tokens, %lld blocks, "
              "rounds",
              lens.size(), (long long)tokens, (long long)blocks);
  for (const auto &r : rounds)
    std::printf(" %zu", r.size());
  std::printf("\n");
  check(lens.size() == 1000 && tokens == 2160580 && blocks == 135501,
        "seed-1234 totals (2,160,580 tokens, 135,501 blocks)");
  check(rounds.size() == 2 && rounds[0].size() == 741 &&
            rounds[1].size() == 259,
        "rounds 741 + 259");

  // Unique token ids per sequence (no two sequences share a prefix).
  std::vector<std::vector<int32_t>> toks(lens.size());
  for (size_t i = 0; i < lens.size(); ++i) {
    toks[i].resize(size_t(lens[i]));
    for (int64_t j = 0; j < lens[i]; ++j)
      toks[i][size_t(j)] = int32_t(i * 5000 + size_t(j));
  }
  const double nb = double(blocks);

  for (bool batch : {false, true}) {
    const char *how = batch ? "batch" : "single";
    // Caching off.
    AllocTimes off{1e100, 1e100};
    for (int r = 0; r < runs; ++r) {
      auto a = makePool(benchConfig(false));
      AllocTimes t = allocationPass(*a, lens, rounds, nullptr, batch, 0);
      off.alloc = std::min(off.alloc, t.alloc);
      off.free = std::min(off.free, t.free);
    }
    addRow(std::string("allocate, prefix caching off (") + how + ")", 0.087,
           off.alloc / nb * 1e6, "us/block");
    addRow(std::string("free, caching off (") + how + ")", 0.12,
           off.free / nb * 1e6, "us/block", "to the FREE head");

    // Caching on. Pass 1 allocates never-hashed blocks (what vLLM's
    // get_new_blocks does on a fresh pool); pass 2 adds the same lengths
    // with unique token ids (hashing, a lookup miss, allocation, sealing);
    // pass 3 allocates again, now from CACHED victims whose hash is dropped.
    AllocTimes fresh{1e100, 1e100}, lookup{1e100, 1e100}, victims{1e100, 1e100};
    for (int r = 0; r < runs; ++r) {
      auto a = makePool(benchConfig(true));
      AllocTimes t1 = allocationPass(*a, lens, rounds, nullptr, batch, 0);
      AllocTimes t2 = allocationPass(*a, lens, rounds, &toks, batch, 10000);
      AllocTimes t3 = allocationPass(*a, lens, rounds, nullptr, batch, 20000);
      fresh.alloc = std::min(fresh.alloc, t1.alloc);
      lookup.alloc = std::min(lookup.alloc, t2.alloc);
      lookup.free = std::min(lookup.free, t2.free);
      victims.alloc = std::min(victims.alloc, t3.alloc);
    }
    addRow(std::string("allocate, prefix caching on (") + how + ")", 0.25,
           fresh.alloc / nb * 1e6, "us/block", "never-hashed FREE blocks");
    addRow(std::string("allocate, caching on, CACHED victims (") + how + ")",
           0.25, victims.alloc / nb * 1e6, "us/block",
           "every block evicts a cached hash");
    addRow(std::string("free of sealed blocks, caching on (") + how + ")", 0.12,
           lookup.free / nb * 1e6, "us/block", "to the LRU tail");
    addRow(std::string("hash + lookup + allocate, new request (") + how + ")",
           1.6 + 2.4, lookup.alloc / nb * 1e6, "us/block",
           "vLLM: 2.4 hashing at request creation + 1.6 manager lookup + "
           "allocate");
  }
}

//===----------------------------------------------------------------------===//
// Hashing (T82)
//===----------------------------------------------------------------------===//

void hashingWorkload(const std::string &dir, int runs) {
  const auto lens = requireColumn(dir + "/lengths_seed1234.txt");
  std::vector<int32_t> tokens;
  int64_t blocks = 0;
  for (size_t i = 0; i < lens.size(); ++i) {
    const int64_t full = lens[i] / kBlockSize;
    blocks += full;
    for (int64_t j = 0; j < full * kBlockSize; ++j)
      tokens.push_back(int32_t(i * 5000 + size_t(j)));
  }
  struct Algo {
    const char *name;
    HashAlgo algo;
  } algos[] = {{"sha256", HashAlgo::kSha256},
               {"xxh3_128", HashAlgo::kXxh3_128}};
  for (const Algo &al : algos) {
    BlockHasher hasher(al.algo, kDefaultHashSeed, int32_t(kBlockSize));
    volatile uint64_t sink = 0;
    const double t = bestOf(runs, [&] {
      auto t0 = Clock::now();
      Hash128 parent = hasher.root("", "");
      for (size_t off = 0; off < tokens.size(); off += kBlockSize)
        parent = hasher.block(parent, &tokens[off]);
      auto t1 = Clock::now();
      sink = sink + parent.lo;
      return seconds(t0, t1);
    });
    std::string name = std::string("chained hashing, ") + al.name;
    std::string note;
    if (al.algo == HashAlgo::kSha256)
      note = sha256HardwareAccelerated() ? "SHA-NI" : "portable";
    else
      note = "hits verified against stored tokens";
    addRow(name, al.algo == HashAlgo::kSha256 ? 2.4 : NAN,
           t / double(blocks) * 1e6, "us/block", note);
  }
  // The portable SHA-256, for machines without SHA-NI.
  {
    std::vector<uint8_t> msg(16 + kBlockSize * 4 + 4);
    uint8_t out[32];
    const int64_t n = 200000;
    const double t = bestOf(std::min(runs, 3), [&] {
      auto t0 = Clock::now();
      for (int64_t i = 0; i < n; ++i) {
        msg[0] = uint8_t(i);
        sha256Portable(msg.data(), msg.size(), out);
      }
      auto t1 = Clock::now();
      return seconds(t0, t1);
    });
    addRow("chained hashing, sha256 portable fallback", 2.4,
           t / double(n) * 1e6, "us/block", "no SHA-NI");
  }
}

//===----------------------------------------------------------------------===//
// Decode: 256 sequences × 256 steps of append(1)
//===----------------------------------------------------------------------===//

void decodeWorkload(const std::string &dir, int runs) {
  const auto prompts = requireColumn(dir + "/decode_prompts_seed1235.txt");
  const size_t nseq = prompts.size();
  const int steps = 256;
  for (bool withTokens : {false, true}) {
    for (bool batch : {false, true}) {
      const double t = bestOf(runs, [&] {
        auto a = makePool(benchConfig(true));
        for (size_t i = 0; i < nseq; ++i) {
          if (withTokens) {
            std::vector<int32_t> t(static_cast<size_t>(prompts[i]));
            for (size_t j = 0; j < t.size(); ++j)
              t[j] = int32_t(i * 4096 + j);
            must(a->addSequence(i, t.data(), prompts[i]).status(), "add");
          } else {
            must(a->addSequence(i, prompts[i]).status(), "add");
          }
        }
        std::vector<int32_t> tok(nseq);
        std::vector<AppendRequest> reqs(nseq);
        auto t0 = Clock::now();
        for (int s = 0; s < steps; ++s) {
          for (size_t i = 0; i < nseq; ++i)
            tok[i] = int32_t(1000000 + i * 512 + size_t(s));
          if (batch) {
            for (size_t i = 0; i < nseq; ++i)
              reqs[i] = AppendRequest{i, 1, withTokens ? &tok[i] : nullptr};
            must(a->appendBatch(reqs.data(), nseq), "appendBatch");
          } else {
            for (size_t i = 0; i < nseq; ++i)
              must(withTokens ? a->append(i, &tok[i], 1) : a->append(i, 1),
                   "append");
          }
        }
        auto t1 = Clock::now();
        return seconds(t0, t1);
      });
      std::string name = std::string("decode step append(1), ") +
                         (withTokens ? "token ids + sealing" : "count only") +
                         (batch ? ", append_batch of 256" : ", single call");
      addRow(name, 5.6, t / double(nseq * steps) * 1e6, "us/seq");
    }
  }
}

//===----------------------------------------------------------------------===//
// Prefix: 16 system prompts × 1000 requests (seed 1237)
//===----------------------------------------------------------------------===//

//===----------------------------------------------------------------------===//
// Waste (T76) and microbenchmarks (T81)
//===----------------------------------------------------------------------===//

double wastePct(const std::string &dir) {
  const auto lens = requireColumn(dir + "/lengths_seed1237.txt");
  auto a = makePool(benchConfig(false));
  for (size_t i = 0; i < lens.size(); ++i)
    must(a->addSequence(i, lens[i]).status(), "add");
  return must(a->stats(), "stats").waste_pct;
}

void microbenchmarks(int runs) {
  // fork of a 64-block sequence, and its free.
  {
    auto a = makePool(benchConfig(true));
    must(a->addSequence(1, 64 * 16 + 5).status(), "add");
    const int n = 20000;
    double tf = 1e100, tfree = 1e100;
    for (int r = 0; r < runs; ++r) {
      auto t0 = Clock::now();
      for (int i = 0; i < n; ++i)
        must(a->fork(1, 100 + uint64_t(i)), "fork");
      auto t1 = Clock::now();
      for (int i = 0; i < n; ++i)
        must(a->free(100 + uint64_t(i)), "free");
      auto t2 = Clock::now();
      tf = std::min(tf, seconds(t0, t1));
      tfree = std::min(tfree, seconds(t1, t2));
    }
    addRow("fork of a 65-block sequence", NAN, tf / n * 1e6, "us/call");
    addRow("free of a 65-block fork (all shared)", NAN, tfree / n * 1e6,
           "us/call");
  }
  // A prefix hit of 64 blocks (1024 cached tokens + 1 new).
  {
    auto a = makePool(benchConfig(true));
    std::vector<int32_t> t(64 * 16 + 1);
    for (size_t j = 0; j < t.size(); ++j)
      t[j] = int32_t(j);
    must(a->addSequence(1, t.data(), int64_t(t.size())).status(), "add");
    const int n = 5000;
    const double th = bestOf(runs, [&] {
      auto t0 = Clock::now();
      for (int i = 0; i < n; ++i)
        must(a->addSequence(100 + uint64_t(i), t.data(), int64_t(t.size()))
                 .status(),
             "hit");
      auto t1 = Clock::now();
      for (int i = 0; i < n; ++i)
        must(a->free(100 + uint64_t(i)), "free");
      return seconds(t0, t1);
    });
    addRow("prefix hit of 64 blocks (add, hashing included)", NAN, th / n * 1e6,
           "us/call");
  }
  // Eight threads of decode appends on their own sequences.
  {
    auto a = makePool(benchConfig(false));
    const int threads = 8, seqs = 32, steps = 2000;
    for (int t = 0; t < threads; ++t)
      for (int s = 0; s < seqs; ++s)
        must(a->addSequence(uint64_t(t * 1000 + s), 100).status(), "add");
    auto t0 = Clock::now();
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        std::vector<AppendRequest> reqs;
        for (int s = 0; s < seqs; ++s)
          reqs.push_back(AppendRequest{uint64_t(t * 1000 + s), 1, nullptr});
        for (int i = 0; i < steps; ++i)
          must(a->appendBatch(reqs.data(), reqs.size()), "appendBatch");
      });
    for (auto &th : pool)
      th.join();
    auto t1 = Clock::now();
    const double total = double(threads) * seqs * steps;
    addRow("8 threads x append_batch(32) decode, aggregate", NAN,
           seconds(t0, t1) / total * 1e6, "us/seq");
    must(a->checkInvariants(), "checkInvariants");
  }
}

} // namespace

int main(int argc, char **argv) {
  std::string dir = SITS_KV_BENCH_DATA_DIR;
  std::string only;
  int runs = 6;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--data" && i + 1 < argc)
      dir = argv[++i];
    else if (arg == "--runs" && i + 1 < argc)
      runs = std::max(1, std::atoi(argv[++i]));
    else if (arg == "--only" && i + 1 < argc)
      only = argv[++i];
    else {
      std::fprintf(stderr, "usage: kv_bench [--data DIR] [--runs N] [--only "
                           "allocation|hashing|decode|prefix|micro]\n");
      return 2;
    }
  }
  auto want = [&](const char *part) { return only.empty() || only == part; };
  std::printf("kv_bench: pool %lld blocks x %lld tokens, best of %d runs, "
              "SHA-NI %s\n\n",
              (long long)kPoolBlocks, (long long)kBlockSize, runs,
              sha256HardwareAccelerated() ? "yes" : "no");

  if (want("allocation"))
    allocationWorkload(dir, runs);
  if (want("hashing"))
    hashingWorkload(dir, runs);
  if (want("decode"))
    decodeWorkload(dir, runs);

  PrefixResult single{}, batch{};
  if (want("prefix")) {
    const auto reqs = readRows(dir + "/prefix_requests_seed1237.txt");
    if (reqs.size() != 1000) {
      std::fprintf(stderr, "cannot read the prefix requests in %s\n",
                   dir.c_str());
      return 2;
    }
    double bestSingle = 1e100, bestBatch = 1e100;
    for (int r = 0; r < runs; ++r) {
      PrefixResult s = must(runPrefixWorkload(reqs, false), "prefix workload");
      PrefixResult b = must(runPrefixWorkload(reqs, true), "prefix workload");
      if (s.addSeconds < bestSingle) {
        bestSingle = s.addSeconds;
        single = s;
      }
      if (b.addSeconds < bestBatch) {
        bestBatch = b.addSeconds;
        batch = b;
      }
    }
    addRow("prefix workload: hash + lookup + allocate, 4 rounds (single)",
           1.6 + 2.4, single.addSeconds / double(single.addBlocks) * 1e6,
           "us/block", "hits, hashing, sealing; vLLM 2.4 + 1.6");
    addRow("prefix workload: hash + lookup + allocate, 4 rounds (batch)",
           1.6 + 2.4, batch.addSeconds / double(batch.addBlocks) * 1e6,
           "us/block", "");
  }

  if (want("micro"))
    microbenchmarks(runs);

  std::printf(
      "\n| operation | vLLM 0.33.0 | SITS C++ | unit | ratio | note |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const Row &r : gRows) {
    char ratio[32] = "-";
    if (!std::isnan(r.vllmValue) && r.ours > 0)
      std::snprintf(ratio, sizeof(ratio), "%.0fx", r.vllmValue / r.ours);
    std::printf("| %s | %s | %.4f | %s | %s | %s |\n", r.op.c_str(),
                r.vllm.c_str(), r.ours, r.unit.c_str(), ratio, r.note.c_str());
  }

  if (want("prefix")) {
    std::printf("\nprefix hit rate (cold / warm in use / warm cached / after "
                "LRU pressure): %.5f / %.5f / %.5f / %.5f   (spec: 0.767 / "
                "0.994 / 0.994 / 0.767)\n",
                single.cold, single.warmInUse, single.warmCached,
                single.afterPressure);
    check(std::round(single.cold * 1000) == 767, "cold hit rate 0.767");
    check(std::round(single.warmInUse * 1000) == 994, "warm hit rate 0.994");
    check(std::round(single.warmCached * 1000) == 994,
          "warm (cached) hit rate 0.994");
    check(std::round(single.afterPressure * 1000) == 767,
          "after-pressure hit rate 0.767");
    check(single.cold == batch.cold && single.warmInUse == batch.warmInUse &&
              single.warmCached == batch.warmCached &&
              single.afterPressure == batch.afterPressure,
          "batch and single calls give the same hit rates");
  }
  if (only.empty()) {
    const double waste = wastePct(dir);
    std::printf("waste_pct, seed-1237 lengths: %.4f%%   (spec: 0.70%%, "
                "analytic 0.6967%%)\n",
                waste);
    check(std::fabs(waste - 0.6967) < 5e-5, "waste_pct 0.6967%");
    auto meta = must(Allocator::create(benchConfig(true)), "create");
    std::printf("metadata: %.2f bytes per device block (T84)\n",
                meta->metadataBytesPerDeviceBlock());
  }
  if (gFailures) {
    std::printf("%d check(s) FAILED\n", gFailures);
    return 1;
  }
  std::printf("all workload checks passed\n");
  return 0;
}
