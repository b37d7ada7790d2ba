//===- kv_workloads.h - Spec §6 workloads shared by kv_bench and tests
//-----===//
//
// One home for the seeded workload of spec kv-allocator.md §6: the pool
// configuration, the data-file readers and the four-round prefix workload.
// kv_bench times it; the unit tests check its hit rates.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_BENCH_KV_WORKLOADS_H
#define SITS_RUNTIME_BENCH_KV_WORKLOADS_H

#include "sits/runtime/kv/allocator.h"

#include <chrono>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace sits::runtime::kv::bench {

constexpr int64_t kPoolBlocks = 100000;
constexpr int64_t kBlockSize = 16;

/// The §6 pool: 100,000 blocks of 16 tokens, block 0 the null block.
inline PoolConfig benchConfig(bool caching) {
  PoolConfig c;
  c.num_blocks = kPoolBlocks;
  c.block_size = kBlockSize;
  c.num_layers = 32;
  c.num_kv_heads = 8;
  c.head_dim = 128;
  c.dtype = DType::kBF16;
  c.max_seq_len = 1 << 20;
  c.enable_prefix_caching = caching;
  return c;
}

inline int64_t blocksOf(int64_t n) { return (n + kBlockSize - 1) / kBlockSize; }

/// Rows of integers from a data file ('#' lines are comments). Empty when
/// the file cannot be read.
inline std::vector<std::vector<int64_t>> readRows(const std::string &path) {
  std::ifstream in(path);
  std::vector<std::vector<int64_t>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream ls(line);
    std::vector<int64_t> row;
    int64_t v;
    while (ls >> v)
      row.push_back(v);
    rows.push_back(row);
  }
  return rows;
}

inline std::vector<int64_t> readColumn(const std::string &path) {
  std::vector<int64_t> out;
  for (const auto &r : readRows(path))
    if (!r.empty())
      out.push_back(r[0]);
  return out;
}

struct PrefixResult {
  double cold = 0, warmInUse = 0, warmCached = 0, afterPressure = 0;
  /// Time spent in the add calls of the four rounds, and their blocks.
  double addSeconds = 0;
  int64_t addBlocks = 0;
};

/// The prefix workload: 16 shared 1024-token system prompts, each request a
/// (prompt, unique suffix length) row; tokens are derived from the ids.
///   round 1 (cold): add every request, keep them live;
///   round 2 (warm, blocks in use): the same requests again, new ids;
///   free rounds 1 and 2; round 3 (warm, cached-but-free blocks); free it;
///   390 fillers of 4096 unrelated tokens are added, then freed (LRU
///   pressure); round 4: the requests again.
/// Each rate is hit tokens / query tokens of that round's adds.
inline StatusOr<PrefixResult>
runPrefixWorkload(const std::vector<std::vector<int64_t>> &reqs, bool batch) {
  auto created = Allocator::create(benchConfig(true));
  if (!created.ok())
    return created.status();
  Allocator &a = **created;
  std::vector<std::vector<int32_t>> toks(reqs.size());
  for (size_t r = 0; r < reqs.size(); ++r) {
    if (reqs[r].size() < 2) {
      ErrorInfo e;
      e.code = StatusCode::kInvalidArgument;
      e.message = "prefix request row " + std::to_string(r) +
                  " needs a prompt id and a suffix length";
      return Status(std::move(e));
    }
    const int64_t p = reqs[r][0], suffix = reqs[r][1];
    for (int64_t j = 0; j < 1024; ++j)
      toks[r].push_back(int32_t(1000 + p * 1024 + j)); // system prompt p
    for (int64_t j = 0; j < suffix; ++j)
      toks[r].push_back(int32_t(10000000 + r * 1024 + size_t(j))); // unique
  }
  PrefixResult out;
  Status failure;
  auto round = [&](uint64_t base) -> double {
    auto before = a.stats();
    const auto t0 = std::chrono::steady_clock::now();
    if (batch) {
      std::vector<AddRequest> rq;
      for (size_t r = 0; r < toks.size(); ++r)
        rq.push_back(AddRequest{base + r, int64_t(toks[r].size()),
                                toks[r].data(), nullptr});
      Status st = a.addSequences(rq.data(), rq.size());
      if (!st.ok() && failure.ok())
        failure = st;
    } else {
      for (size_t r = 0; r < toks.size(); ++r) {
        auto st =
            a.addSequence(base + r, toks[r].data(), int64_t(toks[r].size()));
        if (!st.ok() && failure.ok())
          failure = st.status();
      }
    }
    const auto t1 = std::chrono::steady_clock::now();
    auto after = a.stats();
    if (!before.ok() || !after.ok())
      return 0;
    out.addSeconds += std::chrono::duration<double>(t1 - t0).count();
    for (const auto &t : toks)
      out.addBlocks += blocksOf(int64_t(t.size()));
    return double(after->prefix_hit_tokens - before->prefix_hit_tokens) /
           double(after->prefix_query_tokens - before->prefix_query_tokens);
  };
  auto freeAll = [&](uint64_t base) {
    std::vector<uint64_t> ids;
    for (size_t r = 0; r < toks.size(); ++r)
      ids.push_back(base + r);
    Status st = a.freeBatch(ids.data(), ids.size());
    if (!st.ok() && failure.ok())
      failure = st;
  };
  out.cold = round(0);
  out.warmInUse = round(1000);
  freeAll(0);
  freeAll(1000);
  out.warmCached = round(2000);
  freeAll(2000);
  for (uint64_t f = 0; f < 390; ++f) {
    std::vector<int32_t> t(4096);
    for (size_t j = 0; j < t.size(); ++j)
      t[j] = int32_t(50000000 + f * 4096 + j);
    auto st = a.addSequence(100000 + f, t.data(), 4096);
    if (!st.ok() && failure.ok())
      failure = st.status();
  }
  for (uint64_t f = 0; f < 390; ++f) {
    Status st = a.free(100000 + f);
    if (!st.ok() && failure.ok())
      failure = st;
  }
  out.afterPressure = round(3000);
  freeAll(3000);
  if (failure.ok())
    failure = a.checkInvariants();
  if (!failure.ok())
    return failure;
  return out;
}

} // namespace sits::runtime::kv::bench

#endif // SITS_RUNTIME_BENCH_KV_WORKLOADS_H
