//===- alloc_test.cpp - Spec §5 B: T07–T16
//---------------------------------===//
#include "kv_test_util.h"

#include <random>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

TEST(KVAlloc, T07_AddSequenceTakesCeilBlocksInExactIds) {
  auto a = makePool(poolConfig(64));
  const int64_t lengths[] = {1, 15, 16, 17, 7 * 16};
  const std::vector<std::vector<int32_t>> expected = {
      {1}, {2}, {3}, {4, 5}, {6, 7, 8, 9, 10, 11, 12}};
  for (size_t i = 0; i < 5; ++i) {
    auto r = a->addSequence(100 + i, lengths[i]);
    KV_ASSERT_OK(r);
    EXPECT_EQ(r->block_ids, expected[i]) << "n = " << lengths[i];
    EXPECT_EQ(r->num_new_blocks, int64_t(expected[i].size()));
    EXPECT_EQ(r->cached_tokens, 0);
    KV_ASSERT_INVARIANTS(*a);
  }
  EXPECT_EQ(stats(*a).active_blocks, 12);
}

TEST(KVAlloc, T08_ZeroLengthSequence) {
  auto a = makePool(poolConfig(16));
  auto r = a->addSequence(5, 0);
  KV_ASSERT_OK(r);
  EXPECT_TRUE(r->block_ids.empty());
  EXPECT_TRUE(table(*a, 5).empty());
  EXPECT_EQ(stats(*a).num_sequences, 1);
  KV_ASSERT_INVARIANTS(*a);
  AppendResult out;
  KV_ASSERT_OK(a->append(5, 3, &out));
  EXPECT_EQ(out.new_block_ids, std::vector<int32_t>{1});
  EXPECT_EQ(table(*a, 5), std::vector<int32_t>{1});
  KV_ASSERT_OK(a->free(5));
  EXPECT_EQ(stats(*a).num_sequences, 0);
  KV_ASSERT_INVARIANTS(*a);
  // The token form works at length 0 too (the sequence then tracks tokens).
  auto t = a->addSequence(6, nullptr, 0);
  KV_ASSERT_OK(t);
  const auto toks = tokenRange(20, 1);
  KV_ASSERT_OK(a->append(6, toks.data(), 20));
  EXPECT_TRUE(block(*a, table(*a, 6)[0]).sealed);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T09_DecodeLoopAllocatesOnlyAtBoundaries) {
  const int bs = 16;
  auto a = makePool(poolConfig(64, bs));
  KV_ASSERT_OK(a->addSequence(1, 1));
  int64_t n = 1;
  AppendResult out;
  for (int step = 0; step < 3 * bs; ++step) {
    KV_ASSERT_OK(a->append(1, 1, &out));
    ++n;
    const bool boundary = (n - 1) % bs == 0;
    EXPECT_EQ(out.new_block_ids.size(), boundary ? 1u : 0u) << "n = " << n;
    EXPECT_EQ(int64_t(table(*a, 1).size()), (n + bs - 1) / bs);
  }
  EXPECT_EQ(table(*a, 1), (std::vector<int32_t>{1, 2, 3, 4}));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T10_AppendAcrossSeveralBlocksInOneCall) {
  auto a = makePool(poolConfig(64));
  KV_ASSERT_OK(a->addSequence(1, 10));
  AppendResult out;
  KV_ASSERT_OK(a->append(1, 40, &out)); // 10 + 40 = 50 -> 4 blocks
  EXPECT_EQ(out.new_block_ids, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(table(*a, 1), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(a->sequenceInfo(1)->num_tokens, 50);
  EXPECT_EQ(stats(*a).physical_tokens, 50);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T11_FreeReturnsUnsealedBlocksToTheHeadLifo) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 20)); // [1, 2]
  KV_ASSERT_OK(a->addSequence(2, 5));  // [3]
  KV_ASSERT_OK(a->free(1));            // releases 2 then 1: head is 1, 2
  EXPECT_EQ(freeOrder(*a), concat({1, 2}, ids(4, 16)));
  auto r = a->addSequence(3, 1);
  KV_ASSERT_OK(r);
  EXPECT_EQ(r->block_ids, std::vector<int32_t>{1}); // the last-freed id
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T12_FreeOfSealedBlocksAppendsToTheLruTailDeepestFirst) {
  // vLLM test_prefill: 11 blocks of 16, a 3-block common prefix.
  auto a = makePool(poolConfig(11));
  const auto common = tokenRange(48, 1000);
  const auto req0 = concat(common, tokenRange(7, 5000));
  const auto req1 = concat(common, tokenRange(5, 6000));
  EXPECT_EQ(addTokens(*a, 0, req0), 0);
  EXPECT_EQ(table(*a, 0), (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(addTokens(*a, 1, req1), 48);
  EXPECT_EQ(table(*a, 1), (std::vector<int32_t>{1, 2, 3, 5}));
  KV_ASSERT_OK(a->free(0));
  KV_ASSERT_OK(a->free(1));
  EXPECT_EQ(freeOrder(*a),
            (std::vector<int32_t>{5, 4, 6, 7, 8, 9, 10, 3, 2, 1}));
  EXPECT_EQ(stats(*a).cached_blocks, 3);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T13_OutOfBlocksWhenFull) {
  auto a = makePool(poolConfig(9));
  KV_ASSERT_OK(a->addSequence(1, 4 * 16));
  KV_ASSERT_OK(a->addSequence(2, 4 * 16));
  EXPECT_EQ(*a->numFreeBlocks(), 0);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(1, 1), StatusCode::kOutOfBlocks);
  const Status st = a->append(1, 1);
  EXPECT_EQ(st.info().needed, 1);
  EXPECT_EQ(st.info().available, 0);
  EXPECT_EQ(st.info().evictable, 0);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(3, 1), StatusCode::kOutOfBlocks);
  EXPECT_EQ(stats(*a).out_of_blocks_failures, 3);
  EXPECT_EQ(stats(*a).failed_calls, 3);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T14_BlocksNeededAndCanAddAgreeWithTheOperation) {
  std::mt19937_64 rng(14);
  auto a = makePool(poolConfig(40, 4));
  std::vector<uint64_t> live;
  uint64_t nextId = 1;
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  for (int iter = 0; iter < 10000; ++iter) {
    const int op = int(pick(0, 9));
    if (op <= 3) {
      // add (tokens from a tiny alphabet so prefixes collide)
      const int64_t n = pick(0, 40);
      std::vector<int32_t> toks(static_cast<size_t>(n));
      for (auto &t : toks)
        t = int32_t(pick(0, 2));
      const bool withTokens = pick(0, 1);
      auto can = a->canAdd(n, withTokens ? toks.data() : nullptr);
      StatusOr<AddResult> r = withTokens
                                  ? a->addSequence(nextId, toks.data(), n)
                                  : a->addSequence(nextId, n);
      if (!can.ok()) {
        EXPECT_EQ(can.code(), r.code());
      } else if (*can) {
        KV_ASSERT_OK(r);
      } else {
        EXPECT_EQ(r.code(), StatusCode::kOutOfBlocks);
      }
      if (r.ok())
        live.push_back(nextId);
      ++nextId;
    } else if (op <= 6 && !live.empty()) {
      const uint64_t s = live[size_t(pick(0, int64_t(live.size()) - 1))];
      const int64_t k = pick(0, 9);
      auto needed = a->blocksNeeded(s, k);
      auto info = a->sequenceInfo(s);
      ASSERT_TRUE(info.ok());
      auto allocatable = a->numAllocatableBlocks();
      std::vector<int32_t> toks(size_t(k), 1);
      AppendResult out;
      const Status st = info->tokens_known ? a->append(s, toks.data(), k, &out)
                                           : a->append(s, k, &out);
      ASSERT_TRUE(needed.ok());
      if (*needed <= *allocatable) {
        KV_ASSERT_OK(st);
        EXPECT_EQ(int64_t(out.new_block_ids.size()), *needed);
      } else {
        EXPECT_EQ(st.code(), StatusCode::kOutOfBlocks);
        EXPECT_EQ(st.info().needed, *needed);
      }
    } else if (op <= 7 && !live.empty()) {
      const size_t i = size_t(pick(0, int64_t(live.size()) - 1));
      const uint64_t child = nextId++;
      if (a->fork(live[i], child).ok())
        live.push_back(child);
    } else if (!live.empty()) {
      const size_t i = size_t(pick(0, int64_t(live.size()) - 1));
      KV_ASSERT_OK(a->free(live[i]));
      live.erase(live.begin() + ptrdiff_t(i));
    }
    if (iter % 500 == 0)
      KV_ASSERT_INVARIANTS(*a);
  }
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T15_ReserveAddsSlotsWithoutTokensTruncateRemovesThem) {
  auto a = makePool(poolConfig(32));
  KV_ASSERT_OK(a->addSequence(1, 20)); // [1, 2]
  AppendResult out;
  KV_ASSERT_OK(a->reserve(1, 30, &out)); // 50 slots -> 4 blocks
  EXPECT_EQ(out.new_block_ids, (std::vector<int32_t>{3, 4}));
  auto info = a->sequenceInfo(1);
  EXPECT_EQ(info->num_tokens, 20);
  EXPECT_EQ(info->lookahead, 30);
  EXPECT_EQ(info->num_blocks, 4);
  EXPECT_EQ(stats(*a).logical_tokens, 20);
  EXPECT_EQ(stats(*a).physical_tokens, 20); // drafts are not tokens
  KV_ASSERT_INVARIANTS(*a);
  // Draft slots are exposed for writing.
  std::vector<int64_t> slots(30);
  KV_ASSERT_OK(a->slotMapping(1, 20, 30, slots.data()));
  EXPECT_EQ(slots[0], 2 * 16 + 4);
  EXPECT_EQ(slots[29], 4 * 16 + 1);
  // Shrinking the reservation releases blocks; truncate drops it.
  KV_ASSERT_OK(a->reserve(1, 5));
  EXPECT_EQ(a->sequenceInfo(1)->num_blocks, 2);
  KV_ASSERT_OK(a->reserve(1, 20));
  KV_ASSERT_OK(a->truncate(1, 20));
  info = a->sequenceInfo(1);
  EXPECT_EQ(info->lookahead, 0);
  EXPECT_EQ(info->num_blocks, 2);
  KV_ASSERT_INVARIANTS(*a);
  // append consumes the reservation: 3 accepted of 20 drafts.
  KV_ASSERT_OK(a->reserve(1, 20));
  EXPECT_EQ(a->sequenceInfo(1)->num_blocks, 3);
  KV_ASSERT_OK(a->append(1, 3));
  info = a->sequenceInfo(1);
  EXPECT_EQ(info->num_tokens, 23);
  EXPECT_EQ(info->lookahead, 0);
  EXPECT_EQ(info->num_blocks, 2);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T16_BatchCallsEqualSequentialCalls) {
  PoolConfig c = poolConfig(128, 4);
  auto seqPool = makePool(c);
  auto batchPool = makePool(c);
  const auto prompt = tokenRange(13, 7);
  std::vector<std::vector<int32_t>> toks;
  for (int i = 0; i < 6; ++i)
    toks.push_back(concat(prompt, tokenRange(i + 1, 100 * (i + 1))));
  std::vector<AddRequest> reqs;
  for (int i = 0; i < 6; ++i)
    reqs.push_back(AddRequest{uint64_t(10 + i), int64_t(toks[size_t(i)].size()),
                              toks[size_t(i)].data(), nullptr});
  reqs.push_back(AddRequest{99, 9, nullptr, nullptr});
  std::vector<AddResult> batchResults;
  KV_ASSERT_OK(
      batchPool->addSequences(reqs.data(), reqs.size(), &batchResults));
  for (size_t i = 0; i < reqs.size(); ++i) {
    StatusOr<AddResult> r =
        reqs[i].tokens ? seqPool->addSequence(reqs[i].seq, reqs[i].tokens,
                                              reqs[i].num_tokens)
                       : seqPool->addSequence(reqs[i].seq, reqs[i].num_tokens);
    KV_ASSERT_OK(r);
    EXPECT_EQ(r->block_ids, batchResults[i].block_ids);
    EXPECT_EQ(r->cached_tokens, batchResults[i].cached_tokens);
  }
  const int32_t one = 5;
  std::vector<AppendRequest> apps;
  for (int i = 0; i < 6; ++i)
    apps.push_back(AppendRequest{uint64_t(10 + i), 1, &one});
  apps.push_back(AppendRequest{99, 7, nullptr});
  apps.push_back(AppendRequest{10, 1, &one}); // same sequence twice
  std::vector<AppendResult> appResults;
  KV_ASSERT_OK(batchPool->appendBatch(apps.data(), apps.size(), &appResults));
  for (size_t i = 0; i < apps.size(); ++i) {
    AppendResult out;
    KV_ASSERT_OK(apps[i].tokens
                     ? seqPool->append(apps[i].seq, apps[i].tokens,
                                       apps[i].num_tokens, &out)
                     : seqPool->append(apps[i].seq, apps[i].num_tokens, &out));
    EXPECT_EQ(out.new_block_ids, appResults[i].new_block_ids);
    EXPECT_EQ(out.copies, appResults[i].copies);
  }
  const uint64_t frees[] = {12, 10, 99, 15};
  KV_ASSERT_OK(batchPool->freeBatch(frees, 4));
  for (uint64_t f : frees)
    KV_ASSERT_OK(seqPool->free(f));
  auto s1 = seqPool->snapshot();
  auto s2 = batchPool->snapshot();
  EXPECT_EQ(s1->diff(*s2), "");
  KV_ASSERT_INVARIANTS(*seqPool);
  KV_ASSERT_INVARIANTS(*batchPool);
}
