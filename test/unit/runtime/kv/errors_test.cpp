//===- errors_test.cpp - Spec §5 H: T54–T66
//--------------------------------===//
//
// Each case checks the exact error code and that the full state snapshot is
// unchanged by the failing call.
//
//===----------------------------------------------------------------------===//
#include "kv_test_util.h"

#include <set>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

TEST(KVAlloc, T54_DoubleFree) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 40));
  KV_ASSERT_OK(a->free(1));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->free(1), StatusCode::kUnknownSequence);
  EXPECT_EQ(a->free(1).info().seq_id, 1u);
  EXPECT_TRUE(a->free(1).info().has_seq_id);
  // Block level: unref of a ref-0 block.
  KV_EXPECT_FAILS_UNCHANGED(
      *a, AllocatorTestHooks::unrefBlock(*a, Tier::kDevice, 1),
      StatusCode::kDoubleFree);
  EXPECT_EQ(
      AllocatorTestHooks::unrefBlock(*a, Tier::kDevice, 1).info().block_id, 1);
  for (int32_t b = 1; b < 16; ++b)
    EXPECT_EQ(block(*a, b).ref, 0);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T55_DoubleFreeThenDrainHandsOutEachBlockOnce) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 40));
  KV_ASSERT_OK(a->free(1));
  EXPECT_EQ(a->free(1).code(), StatusCode::kUnknownSequence);
  EXPECT_EQ(a->free(1).code(), StatusCode::kUnknownSequence);
  std::multiset<int32_t> seen;
  for (uint64_t s = 10; s < 25; ++s) {
    auto r = a->addSequence(s, 16);
    KV_ASSERT_OK(r);
    seen.insert(r->block_ids.begin(), r->block_ids.end());
  }
  EXPECT_EQ(seen.size(), 15u);
  EXPECT_EQ(std::set<int32_t>(seen.begin(), seen.end()).size(), 15u);
  EXPECT_EQ(a->addSequence(99, 1).code(), StatusCode::kOutOfBlocks);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T56_UnknownSequence) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 20));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->free(42), StatusCode::kUnknownSequence);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(42, 1), StatusCode::kUnknownSequence);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->blockTable(42),
                            StatusCode::kUnknownSequence);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->reserve(42, 3),
                            StatusCode::kUnknownSequence);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->truncate(42, 0),
                            StatusCode::kUnknownSequence);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->blocksNeeded(42, 1),
                            StatusCode::kUnknownSequence);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->sequenceInfo(42),
                            StatusCode::kUnknownSequence);
  std::vector<int64_t> slots(1);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(42, 0, 1, slots.data()),
                            StatusCode::kUnknownSequence);
  EXPECT_EQ(a->append(42, 1).info().seq_id, 42u);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T57_OutOfBlocksThenRecovery) {
  auto a = makePool(poolConfig(33)); // 32 usable
  KV_ASSERT_OK(a->addSequence(1, 20 * 16));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(2, 20 * 16),
                            StatusCode::kOutOfBlocks);
  const Status st = a->addSequence(2, 20 * 16).status();
  EXPECT_EQ(st.info().needed, 20);
  EXPECT_EQ(st.info().available, 12);
  EXPECT_EQ(*a->numFreeBlocks(), 12);
  EXPECT_EQ(stats(*a).evictions, 0);
  KV_ASSERT_OK(a->free(1));
  KV_ASSERT_OK(a->addSequence(2, 20 * 16));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T58_HugeRequestIsCapacityExceeded) {
  PoolConfig c = poolConfig(33);
  c.max_seq_len = 100000;
  auto a = makePool(c);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(1, 32 * 16 + 1),
                            StatusCode::kCapacityExceeded);
  EXPECT_EQ(a->addSequence(1, 32 * 16 + 1).status().info().subject,
            "usable_blocks");
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(1, 100001),
                            StatusCode::kCapacityExceeded);
  EXPECT_EQ(a->addSequence(1, 100001).status().info().subject, "max_seq_len");
  EXPECT_EQ(a->canAdd(100001).code(), StatusCode::kCapacityExceeded);
  KV_ASSERT_OK(a->addSequence(1, 32 * 16)); // exactly fits
  KV_ASSERT_OK(a->free(1));
  KV_ASSERT_OK(a->addSequence(2, 100));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(2, 32 * 16),
                            StatusCode::kCapacityExceeded);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(2, INT64_MAX),
                            StatusCode::kCapacityExceeded);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->reserve(2, INT64_MAX),
                            StatusCode::kCapacityExceeded);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(3, INT64_MAX),
                            StatusCode::kCapacityExceeded);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T59_ZeroLengthEverywhere) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 0));
  KV_ASSERT_OK(a->addSequence(2, 20));
  auto before = a->snapshot();
  KV_ASSERT_OK(a->append(2, 0));
  KV_ASSERT_OK(a->truncate(2, 20));
  KV_ASSERT_OK(a->append(1, 0));
  EXPECT_EQ(before->diff(*a->snapshot()), "");
  KV_ASSERT_OK(a->fork(2, 3, 0));
  EXPECT_TRUE(table(*a, 3).empty());
  KV_ASSERT_OK(a->truncate(2, 0));
  EXPECT_TRUE(table(*a, 2).empty());
  KV_ASSERT_OK(a->free(1));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T60_ForkThenWriteNeverTouchesTheSharedBlock) {
  auto a = makePool(poolConfig(16));
  const auto prompt = tokenRange(20, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2]
  KV_ASSERT_OK(a->fork(1, 2));
  std::vector<int64_t> slots(8);
  // Position 20 would land in the shared partial block 2.
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(1, 16, 4, slots.data()),
                            StatusCode::kInvalidState);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(2, 0, 1, slots.data()),
                            StatusCode::kInvalidState);
  const int32_t t = 21;
  KV_ASSERT_OK(a->append(2, &t, 1)); // child CoWs
  KV_ASSERT_OK(a->slotMapping(2, 16, 5, slots.data()));
  EXPECT_EQ(slots[0], int64_t(table(*a, 2)[1]) * 16);
  // A prefix hit's sealed blocks are read-only for the new sequence.
  KV_ASSERT_OK(a->free(1));
  const auto p2 = tokenRange(40, 1);
  EXPECT_EQ(addTokens(*a, 3, p2), 16);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(3, 0, 1, slots.data()),
                            StatusCode::kInvalidState);
  KV_ASSERT_OK(a->slotMapping(3, 16, 4, slots.data()));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T60_PrefillSlotsStayWritableWhenALaterRequestHitsThem) {
  auto a = makePool(poolConfig(32));
  const auto prompt = tokenRange(40, 1);
  // Two requests of one step: the second hits the blocks the first fills.
  const AddRequest reqs[] = {{1, 40, prompt.data(), nullptr},
                             {2, 40, prompt.data(), nullptr}};
  std::vector<AddResult> results;
  KV_ASSERT_OK(a->addSequences(reqs, 2, &results));
  EXPECT_EQ(results[1].cached_tokens, 32);
  std::vector<int64_t> slots(40);
  KV_ASSERT_OK(a->slotMapping(1, 0, 40, slots.data())); // the writer
  EXPECT_EQ(slots[0], int64_t(results[0].block_ids[0]) * 16);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(2, 0, 32, slots.data()),
                            StatusCode::kInvalidState);
  KV_ASSERT_OK(a->slotMapping(2, 32, 8, slots.data()));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T60_AnInheritedTailWrittenInPlaceStaysWritable) {
  // Found by the KV memory's content checks: a fork child whose shared
  // partial tail became exclusive (the parent is gone) appends into it in
  // place, without a copy; once the block fills and is sealed, the slots of
  // the tokens it just appended must still be exposed.
  auto a = makePool(poolConfig(16));
  const auto prompt = tokenRange(20, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2], tail of 4
  KV_ASSERT_OK(a->fork(1, 2));
  KV_ASSERT_OK(a->free(1));
  const auto more = tokenRange(12, 100);
  AppendResult out;
  KV_ASSERT_OK(a->append(2, more.data(), 12, &out));
  EXPECT_TRUE(out.copies.empty()); // exclusive: no CoW
  EXPECT_TRUE(block(*a, 2).sealed);
  std::vector<int64_t> slots(12);
  KV_ASSERT_OK(a->slotMapping(2, 20, 12, slots.data()));
  EXPECT_EQ(slots[0], 2 * 16 + 4);
  // The block it inherited whole stays read-only.
  KV_EXPECT_FAILS_UNCHANGED(*a, a->slotMapping(2, 0, 1, slots.data()),
                            StatusCode::kInvalidState);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T61_InvalidSizes) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 20));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(1, -1), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->append(1, -1).info().subject, "k");
  KV_EXPECT_FAILS_UNCHANGED(*a, a->reserve(1, -1),
                            StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->truncate(1, -1),
                            StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->truncate(1, 21),
                            StatusCode::kInvalidArgument);
  EXPECT_EQ(a->truncate(1, 21).info().subject, "new_n");
  KV_EXPECT_FAILS_UNCHANGED(*a, a->fork(1, 2, -2),
                            StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(3, -5),
                            StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->blocksNeeded(1, -3),
                            StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->evict(-1), StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(4, nullptr, 5),
                            StatusCode::kInvalidArgument);
  AddOptions bad;
  bad.max_cache_hit = -2;
  const auto toks = tokenRange(5, 1);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(4, toks.data(), 5, bad),
                            StatusCode::kInvalidArgument);
  // A sequence tracking tokens refuses a count-only append.
  KV_ASSERT_OK(a->addSequence(5, toks.data(), 5));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(5, 2), StatusCode::kInvalidArgument);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->append(5, nullptr, 2),
                            StatusCode::kInvalidArgument);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T62_AddIntoALiveIdEvenWhenItWouldNotFit) {
  auto a = makePool(poolConfig(5));
  KV_ASSERT_OK(a->addSequence(1, 16));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(1, 16),
                            StatusCode::kSequenceExists);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(1, 4 * 16),
                            StatusCode::kSequenceExists);
  EXPECT_EQ(a->addSequence(1, 4 * 16).status().info().seq_id, 1u);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T63_ErrorsInTheMiddleOfBatchesRollBackTheWholeBatch) {
  auto a = makePool(poolConfig(12, 4)); // 11 usable
  const auto prompt = tokenRange(12, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2, 3]
  KV_ASSERT_OK(a->addSequence(2, 6));     // [4, 5]
  KV_ASSERT_OK(a->fork(2, 3));            // shares the partial tail 5
  // add: [ok (hits seq 1's blocks), ok, fails with OutOfBlocks]
  const auto p2 = tokenRange(9, 1);
  std::vector<AddRequest> adds = {{10, 9, p2.data(), nullptr},
                                  {11, 8, nullptr, nullptr},
                                  {12, 40, nullptr, nullptr}};
  std::vector<AddResult> results;
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequences(adds.data(), 3, &results),
                            StatusCode::kOutOfBlocks);
  const Status st = a->addSequences(adds.data(), 3, &results);
  EXPECT_EQ(st.info().batch_index, 2);
  EXPECT_TRUE(results.empty());
  // Duplicate id inside one batch.
  adds[2] = {10, 1, nullptr, nullptr};
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequences(adds.data(), 3, &results),
                            StatusCode::kSequenceExists);
  // append: [ok with CoW, ok, unknown sequence]
  const int32_t t = 7;
  std::vector<AppendRequest> apps = {
      {3, 1, nullptr}, {1, 1, &t}, {99, 1, nullptr}};
  KV_EXPECT_FAILS_UNCHANGED(*a, a->appendBatch(apps.data(), 3),
                            StatusCode::kUnknownSequence);
  EXPECT_EQ(a->appendBatch(apps.data(), 3).info().batch_index, 2);
  // free: [ok, ok, second free of the same id]
  const uint64_t frees[] = {1, 2, 1};
  KV_EXPECT_FAILS_UNCHANGED(*a, a->freeBatch(frees, 3),
                            StatusCode::kUnknownSequence);
  KV_ASSERT_INVARIANTS(*a);
  // The successful versions of the same batches.
  adds[2] = {12, 4, nullptr, nullptr};
  KV_ASSERT_OK(a->addSequences(adds.data(), 3, &results));
  EXPECT_EQ(results[0].cached_tokens, 8);
  apps.pop_back();
  KV_ASSERT_OK(a->appendBatch(apps.data(), 2));
  KV_ASSERT_OK(a->freeBatch(frees, 2));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T64_WatermarkAppliesToAdmissionOnly) {
  PoolConfig c = poolConfig(11); // 10 usable
  c.watermark_blocks = 2;
  auto a = makePool(c);
  KV_ASSERT_OK(a->addSequence(1, 8 * 16)); // leaves exactly 2
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(2, 1), StatusCode::kOutOfBlocks);
  EXPECT_EQ(*a->canAdd(1), false);
  KV_ASSERT_OK(a->append(1, 1)); // running sequences may dip below
  KV_ASSERT_OK(a->append(1, 16));
  EXPECT_EQ(*a->numFreeBlocks(), 0);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T65_PoisonedPoolFailsFast) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 40));
  KV_ASSERT_OK(AllocatorTestHooks::corruptRef(*a, Tier::kDevice, 2, 5));
  const Status st = a->checkInvariants();
  ASSERT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_EQ(st.info().invariant, 2);
  EXPECT_NE(st.message().find("I2"), std::string::npos) << st.message();
  EXPECT_TRUE(a->poisoned());
  EXPECT_EQ(a->addSequence(2, 1).code(), StatusCode::kInternal);
  EXPECT_EQ(a->addSequence(2, -1).code(), StatusCode::kInternal);
  EXPECT_EQ(a->append(1, 1).code(), StatusCode::kInternal);
  EXPECT_EQ(a->free(1).code(), StatusCode::kInternal);
  EXPECT_EQ(a->blockTable(1).code(), StatusCode::kInternal);
  EXPECT_EQ(a->stats().code(), StatusCode::kInternal);
  EXPECT_EQ(a->numFreeBlocks().code(), StatusCode::kInternal);
  EXPECT_EQ(a->evict(1).code(), StatusCode::kInternal);
  const uint64_t ids[] = {1};
  EXPECT_EQ(a->freeBatch(ids, 1).code(), StatusCode::kInternal);
  const Status again = a->checkInvariants();
  EXPECT_EQ(again.code(), StatusCode::kInternal);
  EXPECT_EQ(again.info().invariant, 2);
}

TEST(KVAlloc, T65_ImpossibleStateFoundByAnOperationPoisonsToo) {
  auto a = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 40)); // [1, 2, 3]
  // Block 3 claims no holder: releasing it is impossible.
  KV_ASSERT_OK(AllocatorTestHooks::corruptRef(*a, Tier::kDevice, 3, 0));
  EXPECT_EQ(a->free(1).code(), StatusCode::kInternal);
  EXPECT_TRUE(a->poisoned());
  EXPECT_EQ(a->addSequence(5, 1).code(), StatusCode::kInternal);
}

TEST(KVAlloc, T66_EvictMoreThanCachedEvictsWhatIsPossible) {
  auto a = makePool(poolConfig(16));
  const auto prompt = tokenRange(50, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  KV_ASSERT_OK(a->free(1));
  EXPECT_EQ(stats(*a).cached_blocks, 3);
  EXPECT_EQ(*a->evict(100), 3);
  EXPECT_EQ(stats(*a).cached_blocks, 0);
  EXPECT_EQ(stats(*a).evictions, 3);
  EXPECT_EQ(*a->evict(5), 0);
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 50), 0);
  // Evicted blocks stay where they were: right after the FREE blocks.
  const auto order = freeOrder(*a);
  EXPECT_EQ(std::vector<int32_t>(order.end() - 3, order.end()),
            (std::vector<int32_t>{3, 2, 1}));
  KV_ASSERT_INVARIANTS(*a);
}
