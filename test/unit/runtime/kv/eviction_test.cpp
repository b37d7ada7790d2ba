//===- eviction_test.cpp - Spec §5 F: T41–T45
//-------------------------------===//
#include "kv_test_util.h"

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

TEST(KVAlloc, T41_EvictionTakesFreeBeforeCachedThenLeastRecentlyReleased) {
  auto a = makePool(poolConfig(9)); // 8 usable
  const auto p1 = tokenRange(32, 100);
  const auto p2 = tokenRange(32, 200);
  EXPECT_EQ(addTokens(*a, 1, p1), 0); // [1, 2]
  EXPECT_EQ(addTokens(*a, 2, p2), 0); // [3, 4]
  KV_ASSERT_OK(a->free(1));           // LRU: 2, 1
  KV_ASSERT_OK(a->free(2));           // LRU: 2, 1, 4, 3
  EXPECT_EQ(freeOrder(*a), (std::vector<int32_t>{5, 6, 7, 8, 2, 1, 4, 3}));
  auto r = a->addSequence(3, 5 * 16);
  KV_ASSERT_OK(r);
  // FREE 5..8 first, then the least recently released cached block (2).
  EXPECT_EQ(r->block_ids, (std::vector<int32_t>{5, 6, 7, 8, 2}));
  EXPECT_EQ(stats(*a).evictions, 1);
  AddOptions all;
  all.max_cache_hit = 32;
  // p1's deepest block went first; its head block is still cached.
  EXPECT_EQ(*a->lookupPrefix(p1.data(), 32, all), 16);
  EXPECT_EQ(*a->lookupPrefix(p2.data(), 32, all), 32);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T42_ComputedBlocksAreNotEvictedWhileFreeBlocksExist) {
  auto a = makePool(poolConfig(11));
  const auto prompt = tokenRange(48, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  KV_ASSERT_OK(a->free(1));                // 3 cached
  KV_ASSERT_OK(a->addSequence(2, 7 * 16)); // exactly the 7 FREE blocks
  EXPECT_EQ(stats(*a).evictions, 0);
  AddOptions all;
  all.max_cache_hit = 48;
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 48, all), 48);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T43_PrefixHitStopsAtAnEvictedMiddleBlock) {
  auto a = makePool(poolConfig(16));
  const auto prompt = tokenRange(64, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2, 3, 4]
  KV_ASSERT_OK(a->free(1));
  KV_ASSERT_OK(AllocatorTestHooks::evictBlock(*a, 3)); // the third block
  AddOptions all;
  all.max_cache_hit = 64;
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 64, all), 2 * 16);
  EXPECT_EQ(addTokens(*a, 2, prompt, all), 2 * 16);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T44_HashOfAReusedBlockIsCleared) {
  auto a = makePool(poolConfig(3)); // 2 usable
  const auto prompt = tokenRange(32, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  KV_ASSERT_OK(a->free(1));
  EXPECT_TRUE(block(*a, 2).sealed);
  KV_ASSERT_OK(a->addSequence(2, 16)); // reuses block 2 (LRU first)
  EXPECT_EQ(table(*a, 2), std::vector<int32_t>{2});
  EXPECT_FALSE(block(*a, 2).sealed);
  EXPECT_TRUE(block(*a, 2).hash.isZero());
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T45_LruPressureDropsTheHitRateToCold) {
  auto a = makePool(poolConfig(65)); // 64 usable
  const auto prompt = tokenRange(16 * 16, 1);
  const auto request = concat(prompt, tokenRange(20, 5000));
  EXPECT_EQ(addTokens(*a, 1, request), 0);
  KV_ASSERT_OK(a->free(1));
  EXPECT_EQ(addTokens(*a, 2, request), 16 * 17); // warm
  KV_ASSERT_OK(a->free(2));
  // Fillers with unrelated content take the whole pool.
  for (uint64_t f = 0; f < 4; ++f) {
    const auto filler = tokenRange(16 * 16, int32_t(100000 + 1000 * f));
    KV_ASSERT_OK(a->addSequence(100 + f, filler.data(), 16 * 16));
  }
  for (uint64_t f = 0; f < 4; ++f)
    KV_ASSERT_OK(a->free(100 + f));
  EXPECT_EQ(addTokens(*a, 3, request), 0); // cold again
  KV_ASSERT_INVARIANTS(*a);
}
