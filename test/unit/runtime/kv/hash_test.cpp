//===- hash_test.cpp - SHA-256, MurmurHash3 and the block chain (T29, T82) -===//
//
// Golden values were produced independently with Python's hashlib (SHA-256)
// and the `mmh3` package (MurmurHash3_x64_128), on the chain encoding of
// hash.h:
//   root = H(seed ‖ u32 len(ns) ‖ ns ‖ u32 len(salt) ‖ salt)
//   h_i  = H(h_{i-1} ‖ int32 tokens ‖ u32 len(extra) ‖ extra)
//
//===----------------------------------------------------------------------===//
#include "kv_test_util.h"

#include "sha256.h" // internal (runtime/src/support)
#include "sits/runtime/kv/hash.h"

#include <random>
#include <string>

using namespace sits::runtime::kv;
using namespace sits::runtime::kv::test;
using sits::runtime::sha256;
using sits::runtime::sha256HardwareAccelerated;
using sits::runtime::sha256Portable;

namespace {

std::string hexOf(const uint8_t *p, size_t n) {
  static const char d[] = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += d[p[i] >> 4];
    s += d[p[i] & 15];
  }
  return s;
}

std::string sha256Hex(const std::string &msg, bool portable = false) {
  uint8_t out[32];
  if (portable)
    sha256Portable(msg.data(), msg.size(), out);
  else
    sha256(msg.data(), msg.size(), out);
  return hexOf(out, 32);
}

} // namespace

TEST(KVHash, Sha256KnownAnswers) {
  for (bool portable : {false, true}) {
    EXPECT_EQ(sha256Hex("", portable),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sha256Hex("abc", portable),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                        portable),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(sha256Hex(std::string(1000000, 'a'), portable),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
}

TEST(KVHash, Sha256HardwarePathMatchesPortable) {
  std::mt19937_64 rng(7);
  for (size_t len = 0; len < 300; ++len) {
    std::string msg(len, '\0');
    for (char &c : msg)
      c = char(rng());
    EXPECT_EQ(sha256Hex(msg, false), sha256Hex(msg, true)) << "len " << len;
  }
  RecordProperty("sha_ni", sha256HardwareAccelerated() ? "yes" : "no");
}

TEST(KVHash, Murmur3SmhasherVerificationValue) {
  // SMHasher's VerificationTest: hash {}, {0}, {0,1}, ... with seed 256 - i,
  // then hash the concatenation with seed 0; the first 4 bytes must read
  // 0x6384BA69 for MurmurHash3_x64_128.
  uint8_t key[256];
  uint8_t hashes[16 * 256];
  for (int i = 0; i < 256; ++i) {
    key[i] = uint8_t(i);
    murmur3x64_128(key, size_t(i), uint32_t(256 - i), &hashes[16 * i]);
  }
  uint8_t final[16];
  murmur3x64_128(hashes, sizeof(hashes), 0, final);
  const uint32_t verification = uint32_t(final[0]) | uint32_t(final[1]) << 8 |
                                uint32_t(final[2]) << 16 |
                                uint32_t(final[3]) << 24;
  EXPECT_EQ(verification, 0x6384BA69u);
}

TEST(KVHash, Murmur3KnownAnswers) {
  uint8_t out[16];
  murmur3x64_128("", 0, 0, out);
  EXPECT_EQ(hexOf(out, 16), "00000000000000000000000000000000");
  murmur3x64_128("hello", 5, 0, out);
  EXPECT_EQ(hexOf(out, 16), "029bbd41b3a7d8cb191dae486a901e5b");
  const std::string fox = "The quick brown fox jumps over the lazy dog";
  murmur3x64_128(fox.data(), fox.size(), 42, out);
  EXPECT_EQ(hexOf(out, 16), "d7d50bfe93cf0d748f5c70ecf46c54c4");
}

namespace {

struct Golden {
  HashAlgo algo;
  const char *root;
  const char *h[3];
};

std::vector<Hash128> chain(const BlockHasher &hasher, const Hash128 &root,
                           const std::vector<int32_t> &tokens,
                           const std::vector<std::string> &extras = {}) {
  std::vector<Hash128> out;
  Hash128 parent = root;
  for (size_t i = 0; i + 4 <= tokens.size(); i += 4) {
    std::string_view extra;
    if (i / 4 < extras.size())
      extra = extras[i / 4];
    parent = hasher.block(parent, &tokens[i], extra);
    out.push_back(parent);
  }
  return out;
}

} // namespace

TEST(KVHash, T29_HashChainGoldenValues) {
  const Golden goldens[] = {
      {HashAlgo::kSha256,
       "8676bf605af04f7d2cca8c1f7c2ef6bb",
       {"1e4af50fd48376190dff9213d29a6b59", "71feeaacf11f3701ad245afb61e330c2",
        "016348dac44bbe901f95d82db4c8df10"}},
      {HashAlgo::kMurmur3_128,
       "a2014826bfb505a90c954990c3d08534",
       {"96fb5824fce7792e2e1dcdc5773efad5", "50a429dd27738dba8e9689ef46abd06f",
        "b0bbbdac97739f0ff1281b90c774362c"}},
  };
  const std::vector<int32_t> tokens = tokenRange(12, 100);
  for (const Golden &g : goldens) {
    SCOPED_TRACE(hashAlgoName(g.algo));
    BlockHasher hasher(g.algo, kDefaultHashSeed, 4);
    const Hash128 root = hasher.root("", "");
    EXPECT_EQ(root.hex(), g.root);
    const auto h = chain(hasher, root, tokens);
    ASSERT_EQ(h.size(), 3u);
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(h[size_t(i)].hex(), g.h[i]) << "block " << i;

    // One token changed in block 0 changes all three hashes.
    std::vector<int32_t> t0 = tokens;
    t0[1] += 1;
    const auto h0 = chain(hasher, root, t0);
    for (int i = 0; i < 3; ++i)
      EXPECT_NE(h0[size_t(i)], h[size_t(i)]) << "block " << i;
    // One token changed in block 2 changes only h_2.
    std::vector<int32_t> t2 = tokens;
    t2[10] += 1;
    const auto h2 = chain(hasher, root, t2);
    EXPECT_EQ(h2[0], h[0]);
    EXPECT_EQ(h2[1], h[1]);
    EXPECT_NE(h2[2], h[2]);
  }
}

TEST(KVHash, T29_NamespaceSaltAndExtrasGoldenValues) {
  BlockHasher hasher(HashAlgo::kSha256, kDefaultHashSeed, 4);
  const Hash128 root = hasher.root("lora-7", "tenant-a");
  EXPECT_EQ(root.hex(), "94f44c202a748299cd9e0a2678c3cb28");
  const auto h = chain(hasher, root, tokenRange(12, 100), {"", "img:42@3"});
  EXPECT_EQ(h[0].hex(), "59467dfebf2880341ea3a6795b6f7cc1");
  EXPECT_EQ(h[1].hex(), "e7938479b761cccd96da4775a885b274");
  EXPECT_EQ(h[2].hex(), "fe7f10ecd2adf824d609d502af984464");
}

TEST(KVHash, T29_AllocatorUsesTheSameChain) {
  PoolConfig c = poolConfig(16, 4);
  auto a = makePool(c);
  const auto tokens = tokenRange(12, 100);
  const auto h =
      AllocatorTestHooks::chainHashes(*a, tokens.data(), 12, AddOptions());
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].hex(), "1e4af50fd48376190dff9213d29a6b59");
  EXPECT_EQ(h[2].hex(), "016348dac44bbe901f95d82db4c8df10");
  // A sequence's sealed blocks carry exactly these hashes.
  ASSERT_EQ(addTokens(*a, 1, tokens), 0);
  const auto t = table(*a, 1);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(block(*a, t[size_t(i)]).sealed);
    EXPECT_EQ(block(*a, t[size_t(i)]).hash, h[size_t(i)]);
  }
  KV_ASSERT_INVARIANTS(*a);
}
