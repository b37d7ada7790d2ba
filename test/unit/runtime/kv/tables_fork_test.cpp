//===- tables_fork_test.cpp - Spec §5 C and D: T17–T28
//---------------------===//
#include "kv_test_util.h"

#include <algorithm>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

//===----------------------------------------------------------------------===//
// C. Block tables and kernel views
//===----------------------------------------------------------------------===//

TEST(KVAlloc, T17_WriteBlockTablesPadsWithTheNullId) {
  auto a = makePool(poolConfig(32));
  KV_ASSERT_OK(a->addSequence(1, 40)); // 3 blocks
  KV_ASSERT_OK(a->addSequence(2, 5));  // 1 block
  KV_ASSERT_OK(a->addSequence(3, 0));  // empty
  const uint64_t seqs[] = {1, 2, 3};
  std::vector<int32_t> out(3 * 4, -7);
  KV_ASSERT_OK(a->writeBlockTables(seqs, 3, out.data(), 4));
  EXPECT_EQ(out, (std::vector<int32_t>{1, 2, 3, 0, 4, 0, 0, 0, 0, 0, 0, 0}));
  KV_ASSERT_OK(a->writeBlockTables(seqs, 3, out.data(), 3, /*pad=*/-1));
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + 9),
            (std::vector<int32_t>{1, 2, 3, 4, -1, -1, -1, -1, -1}));
  // Stride smaller than the longest table: error, nothing written.
  std::vector<int32_t> small(3 * 2, -7);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->writeBlockTables(seqs, 3, small.data(), 2),
                            StatusCode::kInvalidArgument);
  EXPECT_EQ(a->writeBlockTables(seqs, 3, small.data(), 2).info().subject,
            "stride");
  EXPECT_EQ(small, std::vector<int32_t>(6, -7));
  const uint64_t bad[] = {1, 42};
  const Status st = a->writeBlockTables(bad, 2, out.data(), 4);
  EXPECT_EQ(st.code(), StatusCode::kUnknownSequence);
  EXPECT_EQ(st.info().batch_index, 1);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T18_SlotMappingIsIdTimesBlockSizePlusOffset) {
  auto a = makePool(poolConfig(32));
  KV_ASSERT_OK(a->addSequence(9, 5));  // takes block 1
  KV_ASSERT_OK(a->addSequence(1, 40)); // [2, 3, 4]
  std::vector<int64_t> slots(40);
  KV_ASSERT_OK(a->slotMapping(1, 0, 40, slots.data()));
  const auto t = table(*a, 1);
  for (int64_t p = 0; p < 40; ++p)
    EXPECT_EQ(slots[size_t(p)], int64_t(t[size_t(p / 16)]) * 16 + p % 16);
  // A window that spans a block boundary.
  std::vector<int64_t> window(4);
  KV_ASSERT_OK(a->slotMapping(1, 14, 4, window.data()));
  EXPECT_EQ(window, (std::vector<int64_t>{2 * 16 + 14, 2 * 16 + 15, 3 * 16,
                                          3 * 16 + 1}));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(1, 30, 11, window.data()),
                            StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(1, -1, 1, window.data()),
                            StatusCode::kInvalidArgument);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T19_TableCopiesOutliveTheSequence) {
  auto a = makePool(poolConfig(32));
  KV_ASSERT_OK(a->addSequence(1, 40));
  const std::vector<int32_t> copy = table(*a, 1);
  KV_ASSERT_OK(a->free(1));
  KV_ASSERT_OK(a->addSequence(2, 64)); // reuses the ids
  EXPECT_EQ(copy, (std::vector<int32_t>{1, 2, 3}));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->blockTable(1), StatusCode::kUnknownSequence);
}

TEST(KVAlloc, T20_SwappedSequenceHasNoTable) {
  PoolConfig c = poolConfig(32);
  c.num_host_blocks = 8;
  auto a = makePool(c);
  KV_ASSERT_OK(a->addSequence(1, 40));
  KV_ASSERT_OK(a->swapOut(1));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->blockTable(1), StatusCode::kInvalidState);
  EXPECT_EQ(a->blockTable(1).status().info().state, "SWAPPED");
  const uint64_t seqs[] = {1};
  std::vector<int32_t> out(8);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->writeBlockTables(seqs, 1, out.data(), 8),
                            StatusCode::kInvalidState);
  std::vector<int64_t> slots(1);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(1, 0, 1, slots.data()),
                            StatusCode::kInvalidState);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(1, 1), StatusCode::kInvalidState);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->fork(1, 2), StatusCode::kInvalidState);
  KV_ASSERT_INVARIANTS(*a);
}

//===----------------------------------------------------------------------===//
// D. Fork and copy-on-write
//===----------------------------------------------------------------------===//

TEST(KVAlloc, T21_ForkAtBlockAlignedNSharesEverythingWithZeroFreeBlocks) {
  auto a = makePool(poolConfig(5)); // 4 usable
  KV_ASSERT_OK(a->addSequence(1, 64));
  EXPECT_EQ(*a->numFreeBlocks(), 0);
  KV_ASSERT_OK(a->fork(1, 2));
  EXPECT_EQ(table(*a, 2), table(*a, 1));
  for (int32_t b : table(*a, 1))
    EXPECT_EQ(block(*a, b).ref, 2);
  EXPECT_EQ(stats(*a).shared_blocks, 4);
  EXPECT_EQ(stats(*a).forks, 1);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T22_ParentAppendsFirstAndCopiesTheSharedTail) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 20)); // [1, 2], tail holds 4 tokens
  KV_ASSERT_OK(a->fork(1, 2));
  EXPECT_EQ(block(*a, 2).ref, 2);
  AppendResult out;
  KV_ASSERT_OK(a->append(1, 1, &out));
  ASSERT_EQ(out.copies.size(), 1u);
  EXPECT_EQ(out.copies[0].src, 2);
  EXPECT_EQ(out.copies[0].dst, 3);
  EXPECT_EQ(out.copies[0].tokens, 4); // n mod bs
  EXPECT_EQ(out.copies[0].src_tier, Tier::kDevice);
  EXPECT_EQ(out.new_block_ids, std::vector<int32_t>{3});
  EXPECT_EQ(table(*a, 1), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(table(*a, 2), (std::vector<int32_t>{1, 2})); // child keeps it
  EXPECT_EQ(block(*a, 2).ref, 1);
  EXPECT_EQ(stats(*a).cow_copies, 1);
  std::vector<BlockCopy> pending;
  KV_ASSERT_OK(a->takePendingCopies(&pending));
  EXPECT_EQ(pending, out.copies);
  // The child now owns the old tail exclusively: no second copy.
  KV_ASSERT_OK(a->append(2, 1, &out));
  EXPECT_TRUE(out.copies.empty());
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T23_ChildWritesFirstSymmetric) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 20));
  KV_ASSERT_OK(a->fork(1, 2));
  AppendResult out;
  KV_ASSERT_OK(a->append(2, 3, &out));
  ASSERT_EQ(out.copies.size(), 1u);
  EXPECT_EQ(out.copies[0].src, 2);
  EXPECT_EQ(out.copies[0].dst, 3);
  EXPECT_EQ(out.copies[0].tokens, 4);
  EXPECT_EQ(table(*a, 2), (std::vector<int32_t>{1, 3}));
  EXPECT_EQ(table(*a, 1), (std::vector<int32_t>{1, 2}));
  KV_ASSERT_OK(a->append(1, 1, &out));
  EXPECT_TRUE(out.copies.empty());
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T24_ForkMidBlockThenChildAppendCopies) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 40)); // [1, 2, 3]
  KV_ASSERT_OK(a->fork(1, 2, 20));     // ceil(20/16) = 2 blocks
  EXPECT_EQ(table(*a, 2), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(a->sequenceInfo(2)->num_tokens, 20);
  AppendResult out;
  KV_ASSERT_OK(a->append(2, 1, &out));
  ASSERT_EQ(out.copies.size(), 1u);
  EXPECT_EQ(out.copies[0].src, 2);
  EXPECT_EQ(out.copies[0].tokens, 4); // pos mod bs
  EXPECT_EQ(table(*a, 2), (std::vector<int32_t>{1, out.copies[0].dst}));
  // Fork at 0 gives an empty child.
  KV_ASSERT_OK(a->fork(1, 3, 0));
  EXPECT_TRUE(table(*a, 3).empty());
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T25_ForkOfForkFreedInEveryOrder) {
  std::vector<int> order = {0, 1, 2};
  do {
    auto a = makePool(poolConfig(16));
    KV_ASSERT_OK(a->addSequence(1, 40));
    KV_ASSERT_OK(a->fork(1, 2));
    KV_ASSERT_OK(a->fork(2, 3, 30));
    EXPECT_EQ(block(*a, 1).ref, 3);
    EXPECT_EQ(block(*a, 2).ref, 3);
    EXPECT_EQ(block(*a, 3).ref, 2);
    for (int i : order) {
      KV_ASSERT_OK(a->free(uint64_t(i + 1)));
      KV_ASSERT_INVARIANTS(*a);
      for (int32_t b = 1; b < 16; ++b)
        EXPECT_GE(block(*a, b).ref, 0);
    }
    EXPECT_EQ(*a->numFreeBlocks(), 15);
    EXPECT_EQ(stats(*a).active_blocks, 0);
  } while (std::next_permutation(order.begin(), order.end()));
}

TEST(KVAlloc, T26_ParallelSamplingSharesThePrompt) {
  const int64_t p = 100; // 7 blocks, the last one partial
  auto a = makePool(poolConfig(256));
  KV_ASSERT_OK(a->addSequence(1, p));
  for (uint64_t c = 0; c < 32; ++c)
    KV_ASSERT_OK(a->fork(1, 100 + c));
  for (uint64_t c = 0; c < 32; ++c)
    KV_ASSERT_OK(a->append(100 + c, 1));
  // ceil(p/bs) shared prompt blocks plus one private tail per child.
  EXPECT_EQ(stats(*a).active_blocks, 7 + 32);
  const int64_t unshared = 33 * 7;
  EXPECT_LT(stats(*a).active_blocks * 100 / unshared, 20); // > 80% fewer
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T27_CopyOnWriteWhenThePoolIsFull) {
  auto a = makePool(poolConfig(3));    // 2 usable
  KV_ASSERT_OK(a->addSequence(1, 20)); // [1, 2]
  KV_ASSERT_OK(a->fork(1, 2));
  EXPECT_EQ(*a->blocksNeeded(1, 1), 1); // the pending CoW block
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(1, 1), StatusCode::kOutOfBlocks);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(2, 1), StatusCode::kOutOfBlocks);
  EXPECT_EQ(table(*a, 1), table(*a, 2));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T28_ForkErrors) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 20));
  KV_ASSERT_OK(a->addSequence(2, 5));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->fork(1, 2), StatusCode::kSequenceExists);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->fork(1, 1), StatusCode::kSequenceExists);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->fork(77, 3), StatusCode::kUnknownSequence);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->fork(1, 3, 21),
                            StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->fork(1, 3, -2),
                            StatusCode::kInvalidArgument);
  EXPECT_EQ(a->fork(1, 3, -2).info().subject, "pos");
  KV_ASSERT_INVARIANTS(*a);
}
