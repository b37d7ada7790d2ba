//===- host_tier_test.cpp - Spec §5 G: T47–T53
//-----------------------------===//
#include "kv_test_util.h"

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

namespace {

PoolConfig hostConfig(int64_t device, int64_t host) {
  PoolConfig c = poolConfig(device);
  c.num_host_blocks = host;
  return c;
}

std::vector<BlockCopy> take(Allocator &a) {
  std::vector<BlockCopy> out;
  EXPECT_TRUE(a.takePendingCopies(&out).ok());
  return out;
}

} // namespace

TEST(KVAlloc, T47_SwapOutMovesExclusiveBlocks) {
  auto a = makePool(hostConfig(32, 8));
  const auto prompt = tokenRange(40, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2, 3]
  KV_ASSERT_OK(a->fork(1, 2, 16));        // shares block 1
  take(*a);
  const int64_t freeBefore = *a->numFreeBlocks();
  KV_ASSERT_OK(a->swapOut(1));
  const Stats s = stats(*a);
  EXPECT_EQ(s.host_used, 2);
  EXPECT_EQ(s.swapped_sequences, 1);
  EXPECT_EQ(s.swapped_out_blocks, 2);
  EXPECT_EQ(*a->numFreeBlocks(), freeBefore + 2);
  const auto copies = take(*a);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src_tier, Tier::kDevice);
  EXPECT_EQ(copies[0].dst_tier, Tier::kHost);
  EXPECT_EQ(copies[0].src, 2);
  EXPECT_EQ(copies[0].dst, 0);
  EXPECT_EQ(copies[0].tokens, 16);
  EXPECT_EQ(copies[1].src, 3);
  EXPECT_EQ(copies[1].dst, 1);
  EXPECT_EQ(copies[1].tokens, 8);
  // The shared block stays resident with both references.
  EXPECT_EQ(block(*a, 1).ref, 2);
  // The sealed block's hash moved to the host with its content.
  EXPECT_TRUE(block(*a, 0, Tier::kHost).sealed);
  EXPECT_FALSE(block(*a, 1, Tier::kHost).sealed);
  EXPECT_EQ(block(*a, 2).state, BlockState::kFree);
  EXPECT_EQ(a->sequenceInfo(1)->num_host_blocks, 2);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T48_SwapInRestoresTheSequence) {
  auto a = makePool(hostConfig(32, 8));
  const auto prompt = tokenRange(40, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2, 3]
  KV_ASSERT_OK(a->fork(1, 2, 16));
  KV_ASSERT_OK(a->swapOut(1));
  const auto out = take(*a);
  KV_ASSERT_OK(a->addSequence(3, 32)); // takes the freed ids 3, 2
  KV_ASSERT_OK(a->swapIn(1));
  const auto in = take(*a);
  const auto t = table(*a, 1);
  ASSERT_EQ(t.size(), 3u);
  EXPECT_EQ(t[0], 1); // shared block never moved
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[0].src_tier, Tier::kHost);
  EXPECT_EQ(in[0].src, out[0].dst);
  EXPECT_EQ(in[0].dst, t[1]);
  EXPECT_EQ(in[0].tokens, 16);
  EXPECT_EQ(in[1].src, out[1].dst);
  EXPECT_EQ(in[1].dst, t[2]);
  EXPECT_EQ(in[1].tokens, 8);
  EXPECT_EQ(stats(*a).swapped_sequences, 0);
  // Host copies stay cached (sealed one) or free (partial one).
  EXPECT_EQ(stats(*a).host_used, 0);
  EXPECT_EQ(stats(*a).host_cached, 1);
  // The sequence keeps growing and sealing normally.
  const auto more = tokenRange(30, 900);
  KV_ASSERT_OK(a->append(1, more.data(), 30));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T49_SwapInWithoutDeviceBlocksFails) {
  auto a = makePool(hostConfig(5, 8)); // 4 usable
  KV_ASSERT_OK(a->addSequence(1, 48));
  KV_ASSERT_OK(a->swapOut(1));
  KV_ASSERT_OK(a->addSequence(2, 32));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->swapIn(1), StatusCode::kOutOfBlocks);
  EXPECT_EQ(a->swapIn(1).info().needed, 3);
  EXPECT_EQ(a->sequenceInfo(1)->state, SeqState::kSwapped);
  KV_ASSERT_OK(a->free(2));
  KV_ASSERT_OK(a->swapIn(1));
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T50_SwapOutWithoutHostSpaceFails) {
  auto a = makePool(hostConfig(32, 2));
  KV_ASSERT_OK(a->addSequence(1, 48));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->swapOut(1), StatusCode::kHostTierFull);
  const Status st = a->swapOut(1);
  EXPECT_EQ(st.info().needed, 3);
  EXPECT_EQ(st.info().available, 2);
  auto noHost = makePool(poolConfig(8));
  KV_ASSERT_OK(noHost->addSequence(1, 16));
  KV_EXPECT_FAILS_UNCHANGED(*noHost, noHost->swapOut(1),
                            StatusCode::kInvalidState);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->swapIn(1), StatusCode::kInvalidState);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T51_OffloadOnEvictionAndOnboardOnHit) {
  auto a = makePool(hostConfig(5, 8)); // 4 usable device blocks
  const auto prompt = tokenRange(40, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2, 3]
  KV_ASSERT_OK(a->free(1));               // 1, 2 cached; 3 FREE
  take(*a);
  KV_ASSERT_OK(a->addSequence(2, 64)); // FREE 4, 3, then victims 2, 1
  const auto copies = take(*a);
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].src, 2); // deepest first: LRU order
  EXPECT_EQ(copies[0].dst_tier, Tier::kHost);
  EXPECT_EQ(copies[1].src, 1);
  EXPECT_EQ(stats(*a).offloads, 2);
  EXPECT_EQ(stats(*a).host_cached, 2);
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 40), 32); // served by the host
  KV_ASSERT_OK(a->free(2));
  auto r = a->addSequence(3, prompt.data(), 40);
  KV_ASSERT_OK(r);
  EXPECT_EQ(r->cached_tokens, 32);
  EXPECT_EQ(r->num_onboarded, 2);
  ASSERT_EQ(r->copies.size(), 2u);
  EXPECT_EQ(r->copies[0].src_tier, Tier::kHost);
  EXPECT_EQ(r->copies[0].dst_tier, Tier::kDevice);
  EXPECT_EQ(r->copies[0].dst, r->block_ids[0]);
  EXPECT_EQ(r->copies[1].dst, r->block_ids[1]);
  EXPECT_EQ(stats(*a).onboards, 2);
  EXPECT_TRUE(block(*a, r->block_ids[0]).sealed);
  // Onboarded blocks are device hits from now on.
  EXPECT_EQ(addTokens(*a, 4, prompt), 32);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T52_AsyncCopiesPinTheirSourcesUntilComplete) {
  PoolConfig c = hostConfig(5, 8);
  c.copy_ordering = CopyOrdering::kAsync;
  auto a = makePool(c);
  const auto prompt = tokenRange(40, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2, 3]
  KV_ASSERT_OK(a->free(1));               // 2, 1 cached; 3 FREE
  KV_ASSERT_OK(a->addSequence(2, 32));    // FREE 3, 4
  // Cached blocks need an offload before reuse: not allocatable.
  EXPECT_EQ(*a->numAllocatableBlocks(), 0);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(3, 16),
                            StatusCode::kOutOfBlocks);
  EXPECT_EQ(a->addSequence(3, 16).status().info().evictable, 2);
  EXPECT_EQ(*a->evict(2), 2);
  EXPECT_EQ(stats(*a).evicting_blocks, 2);
  EXPECT_EQ(block(*a, 2).state, BlockState::kEvicting);
  const Status st = a->addSequence(3, 16).status();
  EXPECT_EQ(st.code(), StatusCode::kOutOfBlocks);
  EXPECT_EQ(st.info().evicting, 2);
  KV_ASSERT_INVARIANTS(*a);
  std::vector<BlockCopy> copies;
  KV_ASSERT_OK(a->takePendingCopies(&copies));
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_EQ(copies[0].epoch, 0u);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->complete(1), StatusCode::kInvalidArgument);
  EXPECT_EQ(*a->complete(0), 2);
  EXPECT_EQ(stats(*a).evicting_blocks, 0);
  KV_ASSERT_OK(a->addSequence(3, 16));
  KV_ASSERT_INVARIANTS(*a);

  // A CoW source freed by its last holder while the copy is pending.
  auto b = makePool(c);
  KV_ASSERT_OK(b->addSequence(1, 20)); // [1, 2]
  KV_ASSERT_OK(b->fork(1, 2));
  KV_ASSERT_OK(b->append(1, 1)); // CoW 2 -> 3; both pinned
  KV_ASSERT_OK(b->free(2));      // 2 loses its last holder: EVICTING
  EXPECT_EQ(block(*b, 2).state, BlockState::kEvicting);
  EXPECT_EQ(block(*b, 3).pins, 1);
  KV_ASSERT_INVARIANTS(*b);
  KV_ASSERT_OK(b->takePendingCopies(&copies));
  EXPECT_EQ(*b->complete(0), 1);
  EXPECT_EQ(block(*b, 2).state, BlockState::kFree);
  EXPECT_EQ(block(*b, 3).pins, 0);
  KV_ASSERT_INVARIANTS(*b);
}

TEST(KVAlloc, T52_StreamOrderedCopyPrecedesTheWriteIntoTheVictim) {
  auto a = makePool(hostConfig(4, 8)); // 3 usable
  const auto prompt = tokenRange(32, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2]
  KV_ASSERT_OK(a->addSequence(2, 12));    // [3], partial
  KV_ASSERT_OK(a->fork(2, 3));            // shares the partial block 3
  KV_ASSERT_OK(a->free(1));               // 2, 1 cached: the only allocatable
  take(*a);
  AppendResult out;
  KV_ASSERT_OK(a->append(3, 1, &out)); // CoW into the victim (block 2)
  ASSERT_EQ(out.copies.size(), 2u);
  // Epoch order: the victim's D2H offload first, then the CoW write into it.
  EXPECT_EQ(out.copies[0].src, 2);
  EXPECT_EQ(out.copies[0].dst_tier, Tier::kHost);
  EXPECT_EQ(out.copies[1].src, 3);
  EXPECT_EQ(out.copies[1].dst, 2);
  EXPECT_EQ(out.copies[0].epoch, out.copies[1].epoch);
  EXPECT_EQ(table(*a, 3), std::vector<int32_t>{2});
  EXPECT_EQ(*a->complete(0), 0); // accepted, nothing pinned in this mode
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T53_FreeingASwappedSequenceReleasesEverything) {
  auto a = makePool(hostConfig(32, 8));
  const auto prompt = tokenRange(40, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  KV_ASSERT_OK(a->fork(1, 2, 16));
  KV_ASSERT_OK(a->swapOut(1));
  KV_ASSERT_OK(a->free(1));
  const Stats s = stats(*a);
  EXPECT_EQ(s.host_used, 0);
  EXPECT_EQ(s.host_cached, 1); // the sealed host copy stays hittable
  EXPECT_EQ(block(*a, 1).ref, 1);
  KV_ASSERT_OK(a->free(2));
  EXPECT_EQ(stats(*a).active_blocks, 0);
  EXPECT_EQ(*a->numFreeBlocks(), 31);
  KV_ASSERT_INVARIANTS(*a);
}
