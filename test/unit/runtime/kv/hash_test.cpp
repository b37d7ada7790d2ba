//===- hash_test.cpp - SHA-256, XXH3-128 and the block chain (T29, T82) ---===//
//
// Golden values were produced independently with Python's hashlib (SHA-256)
// and the `xxhash` package (4.1.0, xxHash 0.8.4: xxh3_128_hexdigest), on the
// chain encoding of hash.h:
//   root = H(seed ‖ u32 len(ns) ‖ ns ‖ u32 len(salt) ‖ salt)
//   h_i  = H(h_{i-1} ‖ int32 tokens ‖ u32 len(extra) ‖ extra)
//
//===----------------------------------------------------------------------===//
#include "kv_test_util.h"

#include "sha256.h" // internal (runtime/src/support)
#include "sits/runtime/kv/hash.h"

#include <cstring>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

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
    EXPECT_EQ(
        sha256Hex("", portable),
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(
        sha256Hex("abc", portable),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(
        sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                  portable),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(
        sha256Hex(std::string(1000000, 'a'), portable),
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

namespace {

/// xxHash's sanity-check input (XSUM_fillTestBuffer in the upstream
/// xxhsum): byte i is the top byte of PRIME32 * PRIME64^i (mod 2^64).
std::vector<uint8_t> xxhSanityBuffer(size_t len) {
  std::vector<uint8_t> buffer(len);
  uint64_t byteGen = 2654435761u; // PRIME32
  for (size_t i = 0; i < len; ++i) {
    buffer[i] = uint8_t(byteGen >> 56);
    byteGen *= 11400714785074694797ull; // PRIME64
  }
  return buffer;
}

} // namespace

TEST(KVHash, Xxh3_128UpstreamSanityVectors) {
  // The XXH3_128bits (seed 0) test vectors of upstream xxHash's self-test
  // (xxhsum's XSUM_XXH128_testdata), one or more per code path of XXH3:
  // 0, 1-3, 4-8, 9-16, 17-128, 129-240 bytes and the long-input loop (one
  // block, several blocks, overlapping last stripe). {low64, high64} there;
  // here the canonical digest high64 ‖ low64, as xxhsum -H2 and
  // python-xxhash's xxh3_128_hexdigest print it (checked against the
  // `xxhash` 4.1.0 package, xxHash 0.8.4).
  const struct {
    size_t len;
    const char *hex;
  } vectors[] = {
      {0, "99aa06d3014798d86001c324468d497f"},
      {1, "a6cd5e9392000f6ac44bdff4074eecdb"},
      {6, "082afe0b8162d12a3e7039bdda43cfc6"},
      {12, "6e3efd8fc7802b18061a192713f69ad9"},
      {24, "0ce966e4678d37611e7044d28b1b901d"},
      {48, "a002ac4e5478227ef942219aed80f67b"},
      {81, "4952f58181ab00425e8bafb9f95fb803"},
      {222, "337e09641b948717f1aebd597cec6b3a"},
      {403, "1b6de21e332dd73dcdeb804d65c6dea4"},
      {512, "18d2d110dcc9bca1617e49599013cb6b"},
      {2048, "f736557fd47073a5dd59e2c3a5f038e0"},
      {2240, "ccb134fbfa7ce49d6e73a90539cf2948"},
      {2367, "e89c0f6ff369b427cb37aeb9e5d361ed"},
  };
  const std::vector<uint8_t> buffer = xxhSanityBuffer(2367);
  for (const auto &v : vectors)
    EXPECT_EQ(hashBytes(HashAlgo::kXxh3_128, buffer.data(), v.len).hex(), v.hex)
        << "len " << v.len;
}

TEST(KVHash, Xxh3_128KnownAnswers) {
  // python: xxhash.xxh3_128_hexdigest(msg) (xxhash 4.1.0, xxHash 0.8.4).
  auto xxh = [](const std::string &msg) {
    return hashBytes(HashAlgo::kXxh3_128, msg.data(), msg.size()).hex();
  };
  EXPECT_EQ(xxh(""), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(xxh("abc"), "06b05ab6733a618578af5f94892f3950");
  EXPECT_EQ(xxh("The quick brown fox jumps over the lazy dog"),
            "ddd650205ca3e7fa24a1cc2e3a8a7651");
  // SHA-256 keys are the digest's first 16 bytes.
  EXPECT_EQ(hashBytes(HashAlgo::kSha256, "abc", 3).hex(),
            "ba7816bf8f01cfea414140de5dae2223");
}

TEST(KVHash, Xxh3_128IsDeterministicAndSpreadsEverySingleBitFlip) {
  // Same bytes, same key (also from another copy of the bytes: no
  // dependence on the address or alignment); every one-bit change of a
  // 16-token block message gives a distinct key, and about half of the
  // 128 key bits flip on average (avalanche).
  std::mt19937_64 rng(11);
  std::vector<uint8_t> msg(16 + 16 * 4 + 4);
  for (uint8_t &b : msg)
    b = uint8_t(rng());
  const Hash128 base = hashBytes(HashAlgo::kXxh3_128, msg.data(), msg.size());
  std::vector<uint8_t> shifted(msg.size() + 1);
  std::memcpy(shifted.data() + 1, msg.data(), msg.size());
  EXPECT_EQ(hashBytes(HashAlgo::kXxh3_128, shifted.data() + 1, msg.size()),
            base);
  EXPECT_EQ(hashBytes(HashAlgo::kXxh3_128, msg.data(), msg.size()), base);

  std::set<std::pair<uint64_t, uint64_t>> seen{{base.lo, base.hi}};
  double flipped = 0;
  for (size_t bit = 0; bit < msg.size() * 8; ++bit) {
    std::vector<uint8_t> m = msg;
    m[bit / 8] ^= uint8_t(1u << (bit % 8));
    const Hash128 h = hashBytes(HashAlgo::kXxh3_128, m.data(), m.size());
    EXPECT_TRUE(seen.insert({h.lo, h.hi}).second) << "bit " << bit;
    flipped += __builtin_popcountll(h.lo ^ base.lo) +
               __builtin_popcountll(h.hi ^ base.hi);
  }
  const double mean = flipped / double(msg.size() * 8);
  EXPECT_GT(mean, 56.0);
  EXPECT_LT(mean, 72.0);
  // Every length prefix hashes differently (the length is part of XXH3).
  std::set<std::pair<uint64_t, uint64_t>> prefixes;
  for (size_t len = 0; len <= msg.size(); ++len) {
    const Hash128 h = hashBytes(HashAlgo::kXxh3_128, msg.data(), len);
    EXPECT_TRUE(prefixes.insert({h.lo, h.hi}).second) << "len " << len;
  }
}

TEST(KVHash, AlgorithmNamesAndTheMurmurAlias) {
  EXPECT_STREQ(hashAlgoName(HashAlgo::kSha256), "sha256");
  EXPECT_STREQ(hashAlgoName(HashAlgo::kXxh3_128), "xxh3_128");
  EXPECT_EQ(parseHashAlgo("sha256").value(), HashAlgo::kSha256);
  EXPECT_EQ(parseHashAlgo("xxh3_128").value(), HashAlgo::kXxh3_128);
  // The fast option's old name stays accepted (deprecated alias).
  EXPECT_EQ(parseHashAlgo("murmur3_128").value(), HashAlgo::kXxh3_128);
  for (const char *bad : {"", "xxh3", "xxh3-128", "XXH3_128", "md5"}) {
    StatusOr<HashAlgo> r = parseHashAlgo(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().info().subject, "hash_algo");
    EXPECT_NE(r.status().message().find("supported: sha256, xxh3_128"),
              std::string::npos)
        << r.status().message();
  }
  EXPECT_TRUE(isCryptographic(HashAlgo::kSha256));
  EXPECT_FALSE(isCryptographic(HashAlgo::kXxh3_128));
  // A non-cryptographic hash forces hit verification (spec §4.7).
  PoolConfig c;
  c.num_blocks = 8;
  c.hash_algo = HashAlgo::kXxh3_128;
  ASSERT_TRUE(validatePoolConfig(c).ok());
  EXPECT_TRUE(validatePoolConfig(c)->verify_hits);
  c.hash_algo = HashAlgo::kSha256;
  EXPECT_FALSE(validatePoolConfig(c)->verify_hits);
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
      {HashAlgo::kXxh3_128,
       "3b9d742f81cf983f02869eb0096505e6",
       {"80a196f82c504ae96409a846a72d2d75", "90e022b5214efbbc76e6651b5b115f6e",
        "7cd732339ec319472d4f2258adcac11a"}},
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
  const Golden goldens[] = {
      {HashAlgo::kSha256,
       "94f44c202a748299cd9e0a2678c3cb28",
       {"59467dfebf2880341ea3a6795b6f7cc1", "e7938479b761cccd96da4775a885b274",
        "fe7f10ecd2adf824d609d502af984464"}},
      {HashAlgo::kXxh3_128,
       "a5bef7536ac5c93459211a573c75b0fd",
       {"be3e23a971099314a8ea1ce1f4810f99", "2ba2950f901275f14cb7de24f45e4e8e",
        "d0a699ed316dc5220ffe3f60bf0270ac"}},
  };
  for (const Golden &g : goldens) {
    SCOPED_TRACE(hashAlgoName(g.algo));
    BlockHasher hasher(g.algo, kDefaultHashSeed, 4);
    const Hash128 root = hasher.root("lora-7", "tenant-a");
    EXPECT_EQ(root.hex(), g.root);
    EXPECT_NE(root, hasher.root("lora-7", "tenant-b"));
    EXPECT_NE(root, hasher.root("lora-8", "tenant-a"));
    const auto h = chain(hasher, root, tokenRange(12, 100), {"", "img:42@3"});
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(h[size_t(i)].hex(), g.h[i]) << "block " << i;
  }
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
