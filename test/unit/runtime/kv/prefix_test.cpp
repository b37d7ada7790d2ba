//===- prefix_test.cpp - Spec §5 E: T30–T40
//---------------------------------===//
#include "kv_test_util.h"

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

TEST(KVAlloc, T30_ExtraKeyAndSaltIsolation) {
  auto a = makePool(poolConfig(64));
  const auto prompt = tokenRange(64, 1);
  AddOptions lora;
  lora.extra_key = "model-v3/lora-12";
  AddOptions tenantA;
  tenantA.cache_salt = "tenant-a";
  AddOptions tenantB;
  tenantB.cache_salt = "tenant-b";
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  EXPECT_EQ(addTokens(*a, 2, prompt, lora), 0);    // other namespace
  EXPECT_EQ(addTokens(*a, 3, prompt, tenantA), 0); // other salt
  EXPECT_EQ(addTokens(*a, 4, prompt, tenantB), 0);
  EXPECT_EQ(addTokens(*a, 5, prompt, tenantA), 48); // same salt: hit
  EXPECT_EQ(addTokens(*a, 6, prompt, lora), 48);
  EXPECT_EQ(addTokens(*a, 7, prompt), 48);
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 64, tenantB), 48);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T31_MultimodalExtrasSeparateIdenticalPlaceholders) {
  auto a = makePool(poolConfig(64));
  std::vector<int32_t> prompt = tokenRange(16, 1);
  for (int i = 0; i < 32; ++i)
    prompt.push_back(9999); // image placeholder tokens in blocks 1 and 2
  prompt = concat(prompt, tokenRange(17, 50));
  AddOptions img1;
  img1.block_extras = {{1, "img:aaaa@0"}, {2, "img:aaaa@16"}};
  AddOptions img2;
  img2.block_extras = {{1, "img:bbbb@0"}, {2, "img:bbbb@16"}};
  EXPECT_EQ(addTokens(*a, 1, prompt, img1), 0);
  EXPECT_EQ(addTokens(*a, 2, prompt, img2), 16); // only the text block 0
  EXPECT_EQ(addTokens(*a, 3, prompt, img1), 64);
  AddOptions dup;
  dup.block_extras = {{1, "a"}, {1, "b"}};
  KV_EXPECT_FAILS_UNCHANGED(
      *a, a->addSequence(4, prompt.data(), int64_t(prompt.size()), dup),
      StatusCode::kInvalidArgument);
  KV_ASSERT_INVARIANTS(*a);
  // Appended blocks keep using the extras of their index.
  KV_ASSERT_OK(a->free(1));
  KV_ASSERT_OK(a->free(3));
  const auto head = std::vector<int32_t>(prompt.begin(), prompt.begin() + 20);
  KV_ASSERT_OK(a->addSequence(5, head.data(), 20, img1));
  const auto rest = std::vector<int32_t>(prompt.begin() + 20, prompt.end());
  KV_ASSERT_OK(a->append(5, rest.data(), int64_t(rest.size())));
  EXPECT_EQ(addTokens(*a, 6, prompt, img1), 64);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T32_HitWhileTheOriginalIsInUse) {
  auto a = makePool(poolConfig(32));
  const auto prompt = tokenRange(50, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2, 3, 4]
  auto r = a->addSequence(2, prompt.data(), 50);
  KV_ASSERT_OK(r);
  EXPECT_EQ(r->cached_tokens, 48);
  EXPECT_EQ(r->num_new_blocks, 1);
  EXPECT_EQ(r->block_ids, (std::vector<int32_t>{1, 2, 3, 5}));
  for (int32_t b : {1, 2, 3})
    EXPECT_EQ(block(*a, b).ref, 2);
  EXPECT_EQ(stats(*a).active_blocks, 5);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T33_HitAfterFreeTakesBlocksOutOfTheFreeList) {
  auto a = makePool(poolConfig(32));
  const auto prompt = tokenRange(50, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  KV_ASSERT_OK(a->free(1));
  EXPECT_EQ(stats(*a).cached_blocks, 3);
  EXPECT_EQ(*a->numEvictableBlocks(), 3);
  EXPECT_EQ(*a->numFreeBlocks(), 31);
  EXPECT_EQ(addTokens(*a, 2, prompt), 48);
  EXPECT_EQ(*a->numFreeBlocks(), 27); // 3 hits + 1 new block left the list
  const auto order = freeOrder(*a);
  EXPECT_EQ(order.size(), 27u);
  for (int32_t b : {1, 2, 3}) {
    EXPECT_EQ(std::count(order.begin(), order.end(), b), 0);
    EXPECT_EQ(block(*a, b).ref, 1);
    EXPECT_EQ(block(*a, b).state, BlockState::kActive);
  }
  EXPECT_EQ(stats(*a).cached_blocks, 0);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T34_HitCapRecomputesTheLastBlock) {
  auto a = makePool(poolConfig(32));
  const auto prompt = tokenRange(64, 1); // block-aligned, 4 blocks
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  EXPECT_EQ(addTokens(*a, 2, prompt), 64 - 16);
  AddOptions all;
  all.max_cache_hit = 64;
  EXPECT_EQ(addTokens(*a, 3, prompt, all), 64);
  AddOptions some;
  some.max_cache_hit = 40; // rounded down to 32
  EXPECT_EQ(addTokens(*a, 4, prompt, some), 32);
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 64), 48);
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 64, all), 64);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T35_PartialLastBlockIsNeverCached) {
  auto a = makePool(poolConfig(32));
  const auto prompt = tokenRange(40, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  const auto t = table(*a, 1);
  EXPECT_TRUE(block(*a, t[0]).sealed);
  EXPECT_TRUE(block(*a, t[1]).sealed);
  EXPECT_FALSE(block(*a, t[2]).sealed);
  KV_ASSERT_OK(a->free(1));
  EXPECT_EQ(block(*a, t[2]).state, BlockState::kFree);
  AddOptions all;
  all.max_cache_hit = 40;
  EXPECT_EQ(addTokens(*a, 2, prompt, all), 32);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T36_DuplicateContentInTwoBlocks) {
  auto a = makePool(poolConfig(32));
  const auto prompt = tokenRange(16, 1);
  // Two sequences prefill the same block concurrently (neither is full at
  // admission, so neither hits the other).
  const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 15);
  KV_ASSERT_OK(a->addSequence(1, head.data(), 15));
  KV_ASSERT_OK(a->addSequence(2, head.data(), 15));
  KV_ASSERT_OK(a->append(1, &prompt[15], 1));
  KV_ASSERT_OK(a->append(2, &prompt[15], 1));
  const int32_t b1 = table(*a, 1)[0], b2 = table(*a, 2)[0];
  EXPECT_NE(b1, b2);
  EXPECT_TRUE(block(*a, b1).sealed);
  EXPECT_TRUE(block(*a, b2).sealed);
  EXPECT_EQ(block(*a, b1).hash, block(*a, b2).hash);
  KV_ASSERT_INVARIANTS(*a);
  const auto full = tokenRange(20, 1);
  EXPECT_EQ(*a->lookupPrefix(full.data(), 20), 16);
  KV_ASSERT_OK(a->free(1));
  EXPECT_EQ(*a->lookupPrefix(full.data(), 20), 16);
  KV_ASSERT_OK(a->free(2));
  EXPECT_EQ(*a->lookupPrefix(full.data(), 20), 16);
  EXPECT_EQ(stats(*a).cached_blocks, 2);
  EXPECT_EQ(AllocatorTestHooks::evictBlock(*a, b1).code(), StatusCode::kOk);
  EXPECT_EQ(*a->lookupPrefix(full.data(), 20), 16); // the other one stays
  KV_ASSERT_INVARIANTS(*a);
}

// The index is a Robin Hood table: an insert may displace entries. A hit on
// duplicate content must still take the oldest block (the reference model
// of test/python/runtime/kv predicts ids that way), so a displaced entry
// may not pass a later duplicate of its own key.
TEST(KVAlloc, T36_DuplicatesKeepTheirOrderWhenDisplaced) {
  auto a = makePool(poolConfig(64));
  const auto prompt = tokenRange(16, 1);
  const std::vector<int32_t> head(prompt.begin(), prompt.begin() + 15);
  for (uint64_t seq : {1, 2}) { // duplicates: the older block, then the newer
    KV_ASSERT_OK(a->addSequence(seq, head.data(), 15));
    KV_ASSERT_OK(a->append(seq, &prompt[15], 1));
  }
  const int32_t older = table(*a, 1)[0];
  // Two more sealed blocks, re-keyed to the home just before the
  // duplicates' one: the second insert displaces the older duplicate.
  const Hash128 key = block(*a, older).hash;
  for (uint64_t seq : {3, 4}) {
    EXPECT_EQ(addTokens(*a, seq, tokenRange(16, int32_t(100 * seq))), 0);
    KV_ASSERT_OK(
        AllocatorTestHooks::setBlockHash(*a, Tier::kDevice, table(*a, seq)[0],
                                         Hash128{key.lo - 1, key.hi + seq}));
  }
  // (No invariant check: the re-keyed blocks no longer carry their chain
  // hash, which I6 verifies.)
  const auto full = tokenRange(20, 1);
  EXPECT_EQ(addTokens(*a, 5, full), 16);
  EXPECT_EQ(table(*a, 5)[0], older);
}

TEST(KVAlloc, T37_LookupPrefixIsSideEffectFree) {
  PoolConfig c = poolConfig(32);
  c.num_host_blocks = 8;
  auto a = makePool(c);
  const auto prompt = tokenRange(50, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  KV_ASSERT_OK(a->free(1));
  auto before = a->snapshot();
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 50), 48);
  EXPECT_EQ(*a->canAdd(50, prompt.data()), true);
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 10), 0);
  auto after = a->snapshot();
  EXPECT_EQ(before->diff(*after), "");
  EXPECT_EQ(stats(*a).lookups, 2);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T38_CachingDisabled) {
  PoolConfig c = poolConfig(32);
  c.enable_prefix_caching = false;
  auto a = makePool(c);
  const auto prompt = tokenRange(50, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  for (int32_t b : table(*a, 1))
    EXPECT_FALSE(block(*a, b).sealed);
  EXPECT_EQ(addTokens(*a, 2, prompt), 0);
  KV_ASSERT_OK(a->free(1));
  KV_ASSERT_OK(a->free(2));
  EXPECT_EQ(stats(*a).cached_blocks, 0);
  EXPECT_EQ(stats(*a).prefix_queries, 0);
  // Every free went to the head: 5..8 (seq 2) then 1..4 (seq 1), LIFO.
  EXPECT_EQ(freeOrder(*a), concat({5, 6, 7, 8, 1, 2, 3, 4}, ids(9, 32)));
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 50), 0);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T39_HashCollisionIsRejectedByTokenVerification) {
  const auto victim = tokenRange(32, 1);
  const auto attacker = tokenRange(32, 500);
  for (bool fastHash : {true, false}) {
    PoolConfig c = poolConfig(32);
    if (fastHash)
      c.hash_algo = HashAlgo::kXxh3_128; // verification is forced on
    else
      c.verify_hits = true; // optional for SHA-256
    auto a = makePool(c);
    EXPECT_TRUE(a->geometry().verify_hits);
    EXPECT_EQ(addTokens(*a, 1, attacker), 0);
    // Make the attacker's block 0 collide with the victim's chain.
    const auto victimHashes =
        AllocatorTestHooks::chainHashes(*a, victim.data(), 32, AddOptions());
    const int32_t b = table(*a, 1)[0];
    KV_ASSERT_OK(AllocatorTestHooks::setBlockHash(*a, Tier::kDevice, b,
                                                  victimHashes[0]));
    EXPECT_EQ(*a->lookupPrefix(victim.data(), 32), 0);
    EXPECT_EQ(addTokens(*a, 2, victim), 0);
    EXPECT_NE(table(*a, 2)[0], b);
  }
  // Without verification the same injected collision is served: this is
  // why non-cryptographic hashes force it.
  auto plain = makePool(poolConfig(32));
  EXPECT_FALSE(plain->geometry().verify_hits);
  EXPECT_EQ(addTokens(*plain, 1, attacker), 0);
  const auto victimHashes =
      AllocatorTestHooks::chainHashes(*plain, victim.data(), 32, AddOptions());
  KV_ASSERT_OK(AllocatorTestHooks::setBlockHash(
      *plain, Tier::kDevice, table(*plain, 1)[0], victimHashes[0]));
  EXPECT_EQ(*plain->lookupPrefix(victim.data(), 32), 16);
}

TEST(KVAlloc, T40_ResetPrefixCache) {
  auto a = makePool(poolConfig(16));
  const auto prompt = tokenRange(50, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0);
  KV_EXPECT_FAILS_UNCHANGED(*a, a->resetPrefixCache(),
                            StatusCode::kInvalidState);
  KV_ASSERT_OK(a->addSequence(2, 10));
  KV_ASSERT_OK(a->free(1));
  KV_EXPECT_FAILS_UNCHANGED(*a, a->resetPrefixCache(),
                            StatusCode::kInvalidState);
  KV_ASSERT_OK(a->free(2));
  EXPECT_EQ(stats(*a).cached_blocks, 3);
  KV_ASSERT_OK(a->resetPrefixCache());
  EXPECT_EQ(*a->lookupPrefix(prompt.data(), 50), 0);
  EXPECT_EQ(freeOrder(*a), ids(1, 16));
  EXPECT_EQ(stats(*a).cached_blocks, 0);
  EXPECT_EQ(addTokens(*a, 3, prompt), 0);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, DropBlocksEvictsTokensAndStopsCaching) {
  auto a = makePool(poolConfig(32));
  const auto prompt = tokenRange(70, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // [1, 2, 3, 4, 5], tail of 6
  KV_ASSERT_OK(a->reserve(1, 20));        // a reservation is dropped too
  // Blocks 1 and 2 of the table go; the later entries move down.
  KV_ASSERT_OK(a->dropBlocks(1, 1, 2));
  auto info = a->sequenceInfo(1);
  EXPECT_EQ(info->num_tokens, 70 - 32);
  EXPECT_EQ(info->lookahead, 0);
  EXPECT_FALSE(info->tokens_known);
  EXPECT_EQ(*a->blockTable(1), (std::vector<int32_t>{1, 4, 5}));
  // Sealed blocks keep their hashes: the dropped ones are cached.
  EXPECT_EQ(stats(*a).cached_blocks, 2);
  EXPECT_EQ(stats(*a).logical_tokens, 38);
  KV_ASSERT_INVARIANTS(*a);
  // Filled after the drop: never sealed, never a prefix hit.
  const auto more = tokenRange(10, 500);
  KV_ASSERT_OK(a->append(1, more.data(), 10)); // fills block 5
  KV_ASSERT_INVARIANTS(*a);
  KV_ASSERT_OK(a->free(1));
  auto again = concat(prompt, more);
  auto hit = a->lookupPrefix(again.data(), int64_t(again.size()));
  KV_ASSERT_OK(hit);
  EXPECT_EQ(*hit, 64); // the 4 blocks sealed before the drop, not block 5
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, DropBlocksChecksItsRange) {
  auto a = makePool(poolConfig(32));
  const auto prompt = tokenRange(40, 1);
  EXPECT_EQ(addTokens(*a, 1, prompt), 0); // 2 full blocks, tail of 8
  EXPECT_EQ(a->dropBlocks(1, 0, 3).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->dropBlocks(1, 2, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->dropBlocks(1, -1, 1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->dropBlocks(1, 0, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(a->dropBlocks(9, 0, 1).code(), StatusCode::kUnknownSequence);
  KV_ASSERT_OK(a->dropBlocks(1, 1, 0)); // nothing: tokens still known
  EXPECT_TRUE(a->sequenceInfo(1)->tokens_known);
  // A forked child drops its own entries; the parent keeps the shared ones.
  KV_ASSERT_OK(a->fork(1, 2));
  KV_ASSERT_OK(a->dropBlocks(2, 0, 2));
  EXPECT_EQ(a->blockTable(2)->size(), 1u);
  EXPECT_EQ(a->blockTable(1)->size(), 3u);
  EXPECT_EQ(a->sequenceInfo(2)->num_tokens, 8);
  KV_ASSERT_INVARIANTS(*a);
  // The child's tail is still shared: its next token copies it.
  KV_ASSERT_OK(a->append(2, 1));
  KV_ASSERT_INVARIANTS(*a);
}
