//===- property_test.cpp - Spec §5 J (C++ side): T70, T74, T75 ------------===//
#include "kv_test_util.h"
#include "op_stream.h"

#include <cstdlib>
#include <random>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

namespace {

int64_t envOr(const char *name, int64_t fallback) {
  const char *v = std::getenv(name);
  return v ? std::atoll(v) : fallback;
}

} // namespace

TEST(KVProperty, T74_RandomOperationStreamsKeepEveryInvariant) {
  // Seeded random byte streams through the op interpreter: invariants after
  // every operation, snapshot equality after every error.
  const int64_t streams = envOr("KV_OPSTREAM_STREAMS", 400);
  std::mt19937_64 rng(uint64_t(envOr("KV_OPSTREAM_SEED", 74)));
  int64_t ops = 0, errors = 0;
  for (int64_t s = 0; s < streams; ++s) {
    std::vector<uint8_t> bytes(200 + rng() % 1800);
    for (auto &b : bytes)
      b = uint8_t(rng());
    const OpStreamResult r = runOpStream(bytes.data(), bytes.size());
    ASSERT_EQ(r.failure, "") << "stream " << s;
    ops += r.ops;
    errors += r.errors;
  }
  RecordProperty("ops", std::to_string(ops));
  RecordProperty("errors", std::to_string(errors));
  EXPECT_GT(ops, streams * 20);
  EXPECT_GT(errors, 0); // the streams do reach error paths
}

namespace {

struct LoggedOp {
  int kind;
  uint64_t seq;
  int64_t arg;
  std::vector<int32_t> tokens;
};

/// Replays `log` and returns every block id the calls returned, in order.
std::vector<int32_t> replay(const std::vector<LoggedOp> &log) {
  PoolConfig c = poolConfig(64, 4);
  c.num_host_blocks = 8;
  auto a = makePool(c);
  std::vector<int32_t> out;
  for (const LoggedOp &op : log) {
    switch (op.kind) {
    case 0: {
      auto r =
          a->addSequence(op.seq, op.tokens.data(), int64_t(op.tokens.size()));
      if (r.ok())
        out.insert(out.end(), r->block_ids.begin(), r->block_ids.end());
      out.push_back(-int32_t(r.code()) - 100);
      break;
    }
    case 1: {
      AppendResult res;
      const Status st =
          a->append(op.seq, op.tokens.data(), int64_t(op.tokens.size()), &res);
      out.insert(out.end(), res.new_block_ids.begin(), res.new_block_ids.end());
      out.push_back(-int32_t(st.code()) - 100);
      break;
    }
    case 2:
      out.push_back(-int32_t(a->fork(op.seq, op.seq + 1000, op.arg).code()) -
                    100);
      break;
    case 3:
      out.push_back(-int32_t(a->free(op.seq).code()) - 100);
      break;
    case 4:
      out.push_back(-int32_t(a->swapOut(op.seq).code()) - 100);
      break;
    case 5:
      out.push_back(-int32_t(a->swapIn(op.seq).code()) - 100);
      break;
    }
  }
  EXPECT_TRUE(a->checkInvariants().ok());
  return out;
}

} // namespace

TEST(KVProperty, T70_SameOpLogGivesIdenticalIds) {
  std::mt19937_64 rng(70);
  std::vector<LoggedOp> log;
  for (int i = 0; i < 3000; ++i) {
    LoggedOp op;
    op.kind = int(rng() % 6);
    op.seq = rng() % 24;
    op.arg = int64_t(rng() % 20) - 1;
    const size_t n = op.kind <= 1 ? rng() % 20 : 0;
    for (size_t t = 0; t < n; ++t)
      op.tokens.push_back(int32_t(rng() % 3));
    log.push_back(std::move(op));
  }
  const auto first = replay(log);
  const auto second = replay(log);
  EXPECT_EQ(first, second);
  EXPECT_GT(first.size(), 3000u);
}

TEST(KVProperty, T75_CachingOnOrOffGivesTheSameIdsWithoutSharedPrefixes) {
  PoolConfig on = poolConfig(256, 4);
  PoolConfig off = on;
  off.enable_prefix_caching = false;
  auto a = makePool(on);
  auto b = makePool(off);
  std::mt19937_64 rng(75);
  int32_t nextToken = 1; // every token unique: no prefix is ever shared
  auto fresh = [&](size_t n) {
    std::vector<int32_t> t(n);
    for (auto &x : t)
      x = nextToken++;
    return t;
  };
  std::vector<uint64_t> live;
  for (uint64_t i = 0; i < 400; ++i) {
    const int kind = int(rng() % 3);
    if (kind == 0 || live.empty()) {
      const auto t = fresh(rng() % 30);
      auto ra = a->addSequence(i, t.data(), int64_t(t.size()));
      auto rb = b->addSequence(i, t.data(), int64_t(t.size()));
      ASSERT_EQ(ra.code(), rb.code());
      if (!ra.ok())
        continue;
      EXPECT_EQ(ra->block_ids, rb->block_ids);
      EXPECT_EQ(ra->cached_tokens, 0);
      live.push_back(i);
    } else if (kind == 1) {
      const uint64_t s = live[rng() % live.size()];
      const auto t = fresh(rng() % 9);
      AppendResult oa, ob;
      const Status sa = a->append(s, t.data(), int64_t(t.size()), &oa);
      const Status sb = b->append(s, t.data(), int64_t(t.size()), &ob);
      ASSERT_EQ(sa.code(), sb.code());
      EXPECT_EQ(oa.new_block_ids, ob.new_block_ids);
      EXPECT_EQ(oa.copies, ob.copies);
    } else {
      const uint64_t s = live[rng() % live.size()];
      const Status sa = a->fork(s, 100000 + i);
      ASSERT_EQ(sa.code(), b->fork(s, 100000 + i).code());
      if (sa.ok())
        live.push_back(100000 + i);
    }
  }
  for (uint64_t s : live)
    EXPECT_EQ(table(*a, s), table(*b, s));
  KV_ASSERT_INVARIANTS(*a);
  KV_ASSERT_INVARIANTS(*b);
}
