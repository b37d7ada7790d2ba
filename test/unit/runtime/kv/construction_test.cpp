//===- construction_test.cpp - Spec §5 A: T01–T06
//--------------------------===//
#include "kv_test_util.h"

#include <climits>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;

TEST(KVAlloc, T01_ValidConfigInitialState) {
  auto a = makePool(poolConfig(32));
  ASSERT_TRUE(a);
  const Stats s = stats(*a);
  EXPECT_EQ(s.total_blocks, 32);
  EXPECT_EQ(s.usable_blocks, 31);
  EXPECT_EQ(s.free_blocks, 31);
  EXPECT_EQ(s.cached_blocks, 0);
  EXPECT_EQ(s.active_blocks, 0);
  EXPECT_EQ(s.num_sequences, 0);
  EXPECT_EQ(s.blocks_allocated, 0);
  EXPECT_EQ(s.prefix_queries, 0);
  EXPECT_EQ(s.failed_calls, 0);
  EXPECT_EQ(freeOrder(*a), ids(1, 32));
  EXPECT_EQ(block(*a, 0).state, BlockState::kReserved);
  EXPECT_EQ(*a->numFreeBlocks(), 31);
  EXPECT_EQ(a->defaultPad(), 0);
  // bytes_per_block = 2 × 2 layers × 2 heads × 64 × 16 × 2 bytes.
  EXPECT_EQ(a->geometry().bytes_per_block, 2 * 2 * 2 * 64 * 16 * 2);
  EXPECT_EQ(a->geometry().total_bytes, 32 * a->geometry().bytes_per_block);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T02_EachFieldZeroOrNegativeNamesTheField) {
  struct Case {
    const char *field;
    void (*mutate)(PoolConfig &);
  };
  const Case cases[] = {
      {"num_blocks", [](PoolConfig &c) { c.num_blocks = 0; }},
      {"num_blocks", [](PoolConfig &c) { c.num_blocks = -5; }},
      {"block_size", [](PoolConfig &c) { c.block_size = 0; }},
      {"block_size", [](PoolConfig &c) { c.block_size = -16; }},
      {"num_layers", [](PoolConfig &c) { c.num_layers = 0; }},
      {"num_layers", [](PoolConfig &c) { c.num_layers = -1; }},
      {"num_kv_heads", [](PoolConfig &c) { c.num_kv_heads = 0; }},
      {"head_dim", [](PoolConfig &c) { c.head_dim = -64; }},
      {"kv_factor", [](PoolConfig &c) { c.kv_factor = 0; }},
      {"kv_factor", [](PoolConfig &c) { c.kv_factor = 3; }},
      {"max_seq_len", [](PoolConfig &c) { c.max_seq_len = 0; }},
      {"num_host_blocks", [](PoolConfig &c) { c.num_host_blocks = -1; }},
      {"watermark_blocks", [](PoolConfig &c) { c.watermark_blocks = -1; }},
      {"watermark_blocks", [](PoolConfig &c) { c.watermark_blocks = 31; }},
      {"hash_seed", [](PoolConfig &c) { c.hash_seed = "short"; }},
  };
  for (const Case &tc : cases) {
    PoolConfig c = poolConfig(32);
    tc.mutate(c);
    auto r = Allocator::create(c);
    ASSERT_FALSE(r.ok()) << tc.field;
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument) << tc.field;
    EXPECT_EQ(r.status().info().subject, tc.field);
    EXPECT_NE(r.status().message().find(tc.field), std::string::npos);
  }
}

TEST(KVAlloc, T03_BytesPerBlockAndTotalOverflow) {
  PoolConfig c = poolConfig(32);
  c.num_layers = int64_t(1) << 40;
  c.num_kv_heads = int64_t(1) << 20;
  c.head_dim = 1024;
  auto r = Allocator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().subject, "bytes_per_block");

  PoolConfig t = poolConfig(int64_t(1) << 30);
  t.num_layers = int64_t(1) << 20;
  t.num_kv_heads = 64;
  t.head_dim = 256; // bytes_per_block = 2^46: fits; × 2^30 blocks does not
  auto g = validatePoolConfig(t);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().info().subject, "total_bytes");
  EXPECT_EQ(Allocator::create(t).code(), StatusCode::kInvalidArgument);

  PoolConfig h = poolConfig(32);
  h.num_layers = int64_t(1) << 20;
  h.num_kv_heads = 64;
  h.head_dim = 256;
  h.num_host_blocks = int64_t(1) << 30;
  EXPECT_EQ(validatePoolConfig(h).status().info().subject, "host_total_bytes");
}

TEST(KVAlloc, T04_UnsupportedBlockSizeOrDTypeListsTheSupportedSet) {
  PoolConfig c = poolConfig(32);
  c.block_size = 48;
  auto r = Allocator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().info().subject, "block_size");
  EXPECT_NE(r.status().message().find("1, 2, 4, 8, 16, 32, 64, 128, 256"),
            std::string::npos)
      << r.status().message();
  c.block_size = 512;
  EXPECT_EQ(Allocator::create(c).status().info().subject, "block_size");

  PoolConfig d = poolConfig(32);
  d.dtype = static_cast<DType>(99);
  auto rd = Allocator::create(d);
  ASSERT_FALSE(rd.ok());
  EXPECT_EQ(rd.status().info().subject, "dtype");
  EXPECT_NE(rd.status().message().find(supportedDTypes()), std::string::npos);

  auto p = parseDType("f64");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("bf16"), std::string::npos);
  EXPECT_EQ(*parseDType("fp8_e4m3"), DType::kFP8E4M3);

  PoolConfig h = poolConfig(32);
  h.hash_algo = static_cast<HashAlgo>(7);
  EXPECT_EQ(Allocator::create(h).status().info().subject, "hash_algo");
}

TEST(KVAlloc, QuantizedGeometryCountsTheScales) {
  // per_token_head: each row is head_dim int8 codes + a 4-byte f32 scale.
  PoolConfig c = poolConfig(32);
  c.quantization = KVQuantization::kPerTokenHead;
  c.num_host_blocks = 8;
  // INT8 and FP8 E4M3 codes: one byte each, then the scale.
  for (DType dtype : {DType::kFP8E4M3, DType::kInt8}) {
    c.dtype = dtype;
    auto g = validatePoolConfig(c);
    KV_ASSERT_OK(g);
    // kv 2 × 2 layers × 2 heads × block_size 16 × (64 codes + 4).
    EXPECT_EQ(g->bytes_per_block, 2 * 2 * 2 * 16 * (64 + 4));
    EXPECT_EQ(g->total_bytes, 32 * g->bytes_per_block);
    EXPECT_EQ(g->host_total_bytes, 8 * g->bytes_per_block);
    auto a = makePool(c);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->geometry().bytes_per_block, 2 * 2 * 2 * 16 * 68);
  }
  // Unquantized int8 and fp8_e4m3: head_dim bytes per row, as before.
  c.quantization = KVQuantization::kNone;
  EXPECT_EQ(validatePoolConfig(c)->bytes_per_block, 2 * 2 * 2 * 16 * 64);
  c.dtype = DType::kFP8E4M3;
  EXPECT_EQ(validatePoolConfig(c)->bytes_per_block, 2 * 2 * 2 * 16 * 64);
  // The scale counts in the overflow check: with one layer, head and token
  // per block, 2 × (2^62 − 2) bytes fit int64 (the pool's total does not),
  // 2 × (2^62 − 2 + 4) do not.
  PoolConfig o = poolConfig(2, 1);
  o.num_layers = o.num_kv_heads = 1;
  o.dtype = DType::kInt8;
  o.head_dim = (int64_t(1) << 62) - 2;
  EXPECT_EQ(validatePoolConfig(o).status().info().subject, "total_bytes");
  o.quantization = KVQuantization::kPerTokenHead;
  EXPECT_EQ(validatePoolConfig(o).status().info().subject, "bytes_per_block");
  o.dtype = DType::kFP8E4M3;
  EXPECT_EQ(validatePoolConfig(o).status().info().subject, "bytes_per_block");
  o.head_dim = INT64_MAX - 3; // the row itself overflows
  EXPECT_EQ(validatePoolConfig(o).status().info().subject, "bytes_per_block");
  o.dtype = DType::kInt8;
  EXPECT_EQ(validatePoolConfig(o).status().info().subject, "bytes_per_block");
}

TEST(KVAlloc, PerTokenHeadNeedsInt8OrFp8E4M3AndNamesAreChecked) {
  // One-byte codes: int8 and fp8_e4m3 (not fp8_e5m2, nor wider types).
  for (DType d : {DType::kF32, DType::kF16, DType::kBF16, DType::kFP8E5M2}) {
    PoolConfig c = poolConfig(32);
    c.dtype = d;
    c.quantization = KVQuantization::kPerTokenHead;
    auto r = Allocator::create(c);
    ASSERT_FALSE(r.ok()) << dtypeName(d);
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().info().subject, "quantization");
    EXPECT_NE(r.status().message().find(std::string("dtype int8 or fp8_e4m3, "
                                                    "not ") +
                                        dtypeName(d)),
              std::string::npos)
        << r.status().message();
  }
  for (DType d : {DType::kInt8, DType::kFP8E4M3}) {
    PoolConfig c = poolConfig(32);
    c.dtype = d;
    c.quantization = KVQuantization::kPerTokenHead;
    KV_ASSERT_OK(validatePoolConfig(c));
    EXPECT_TRUE(makePool(c)) << dtypeName(d);
  }
  PoolConfig c = poolConfig(32);
  c.quantization = static_cast<KVQuantization>(9);
  auto r = Allocator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().info().subject, "quantization");
  EXPECT_NE(r.status().message().find(supportedKVQuantizations()),
            std::string::npos);

  EXPECT_EQ(*parseKVQuantization("none"), KVQuantization::kNone);
  EXPECT_EQ(*parseKVQuantization("per_token_head"),
            KVQuantization::kPerTokenHead);
  for (const char *bad : {"int8", "per_token", "PER_TOKEN_HEAD", ""}) {
    auto p = parseKVQuantization(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(p.status().info().subject, "quantization");
    EXPECT_NE(p.status().message().find("supported: none, per_token_head"),
              std::string::npos)
        << p.status().message();
  }
  EXPECT_STREQ(kvQuantizationName(KVQuantization::kPerTokenHead),
               "per_token_head");
  EXPECT_STREQ(kvQuantizationName(KVQuantization::kNone), "none");
  EXPECT_EQ(PoolConfig().quantization, KVQuantization::kNone);
}

TEST(KVAlloc, T05_SingleBlockPool) {
  PoolConfig c = poolConfig(1);
  auto r = Allocator::create(c);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().subject, "num_blocks");

  c.reserve_null_block = false;
  auto a = makePool(c);
  ASSERT_TRUE(a);
  EXPECT_EQ(stats(*a).usable_blocks, 1);
  EXPECT_EQ(a->defaultPad(), -1);
  auto added = a->addSequence(7, 16);
  KV_ASSERT_OK(added);
  EXPECT_EQ(added->block_ids, std::vector<int32_t>{0});
  KV_EXPECT_FAILS_UNCHANGED(*a, a->addSequence(8, 1), StatusCode::kOutOfBlocks);
  KV_ASSERT_INVARIANTS(*a);
}

TEST(KVAlloc, T06_TwoAllocatorsAreIndependent) {
  auto a = makePool(poolConfig(16));
  auto b = makePool(poolConfig(16));
  KV_ASSERT_OK(a->addSequence(1, 40));
  KV_ASSERT_OK(b->addSequence(1, 16));
  EXPECT_EQ(table(*a, 1), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(table(*b, 1), (std::vector<int32_t>{1}));
  std::vector<int32_t> copy = table(*a, 1);
  a.reset(); // destroying one while a copy of its table is held
  EXPECT_EQ(copy, (std::vector<int32_t>{1, 2, 3}));
  KV_ASSERT_OK(b->append(1, 1));
  EXPECT_EQ(table(*b, 1), (std::vector<int32_t>{1, 2}));
  KV_ASSERT_INVARIANTS(*b);
}
