//===- block_hasher.cpp - Chained block hashes ----------------------------===//
#include "sha256.h"
#include "sha256_compress.h"
#include "sits/runtime/kv/hash.h"
#include "xxh3.h"

#include <cstring>
#include <vector>

namespace sits::runtime::kv {
namespace {

inline void putU32(uint8_t *p, uint32_t v) {
  p[0] = uint8_t(v);
  p[1] = uint8_t(v >> 8);
  p[2] = uint8_t(v >> 16);
  p[3] = uint8_t(v >> 24);
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
inline void putU64(uint8_t *p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint64_t getU64(const uint8_t *p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
#else
inline void putU64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = uint8_t(v >> (8 * i));
}
inline uint64_t getU64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}
#endif

inline Hash128 keyFromBytes(const uint8_t *p) {
  return Hash128{getU64(p), getU64(p + 8)};
}

/// Appends int32 tokens little-endian (memcpy on little-endian hosts).
inline void putTokens(uint8_t *p, const int32_t *tokens, int32_t count) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  std::memcpy(p, tokens, size_t(count) * 4);
#else
  for (int32_t i = 0; i < count; ++i)
    putU32(p + 4 * i, uint32_t(tokens[i]));
#endif
}

} // namespace

std::string Hash128::hex() const {
  static const char digits[] = "0123456789abcdef";
  uint8_t bytes[16];
  putU64(bytes, lo);
  putU64(bytes + 8, hi);
  std::string out(32, '0');
  for (int i = 0; i < 16; ++i) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  return out;
}

const char *hashAlgoName(HashAlgo algo) {
  switch (algo) {
  case HashAlgo::kSha256:
    return "sha256";
  case HashAlgo::kXxh3_128:
    return "xxh3_128";
  }
  return "unknown";
}

bool isCryptographic(HashAlgo algo) { return algo == HashAlgo::kSha256; }

Hash128 hashBytes(HashAlgo algo, const void *data, size_t len) {
  if (algo == HashAlgo::kXxh3_128) {
    uint8_t out[16];
    detail::xxh3_128(data, len, out);
    return keyFromBytes(out);
  }
  uint8_t out[32];
  ::sits::runtime::sha256(data, len, out);
  return keyFromBytes(out);
}

BlockHasher::BlockHasher(HashAlgo algo, std::string seed, int32_t blockSize)
    : algo_(algo), seed_(std::move(seed)), blockSize_(blockSize) {}

Hash128 BlockHasher::root(std::string_view nameSpace,
                          std::string_view salt) const {
  std::vector<uint8_t> msg(seed_.size() + 8 + nameSpace.size() + salt.size());
  uint8_t *p = msg.data();
  std::memcpy(p, seed_.data(), seed_.size());
  p += seed_.size();
  putU32(p, uint32_t(nameSpace.size()));
  p += 4;
  if (!nameSpace.empty())
    std::memcpy(p, nameSpace.data(), nameSpace.size());
  p += nameSpace.size();
  putU32(p, uint32_t(salt.size()));
  p += 4;
  if (!salt.empty())
    std::memcpy(p, salt.data(), salt.size());
  return hashBytes(algo_, msg.data(), msg.size());
}

Hash128 BlockHasher::block(const Hash128 &parent, const int32_t *tokens,
                           std::string_view extra) const {
  const size_t len = 16 + size_t(blockSize_) * 4 + 4 + extra.size();
  if (algo_ == HashAlgo::kSha256 && len + 9 <= 128) {
    // The common case (bs <= 16 without a long extra) fits two SHA-256
    // blocks: pad in place and compress once, no intermediate copies.
    alignas(16) uint8_t msg[128];
    putU64(msg, parent.lo);
    putU64(msg + 8, parent.hi);
    putTokens(msg + 16, tokens, blockSize_);
    uint8_t *p = msg + 16 + size_t(blockSize_) * 4;
    putU32(p, uint32_t(extra.size()));
    if (!extra.empty())
      std::memcpy(p + 4, extra.data(), extra.size());
    const size_t blocks = len + 9 <= 64 ? 1 : 2;
    const size_t total = blocks * 64;
    msg[len] = 0x80;
    std::memset(msg + len + 1, 0, total - len - 1 - 8);
    const uint64_t bits = uint64_t(len) * 8;
    for (int i = 0; i < 8; ++i)
      msg[total - 1 - i] = uint8_t(bits >> (8 * i));
    uint32_t state[8];
    std::memcpy(state, ::sits::runtime::detail::kSha256InitialState,
                sizeof(state));
    ::sits::runtime::detail::sha256Compress(state, msg, blocks);
    // Key = digest bytes 0..15 = state[0..3] big-endian, read little-endian.
    auto be = [](uint32_t w) { return uint64_t(__builtin_bswap32(w)); };
    return Hash128{be(state[0]) | be(state[1]) << 32,
                   be(state[2]) | be(state[3]) << 32};
  }
  // Block size <= 256 tokens: the common message fits on the stack.
  uint8_t stackBuf[16 + 256 * 4 + 4 + 256];
  std::vector<uint8_t> heapBuf;
  uint8_t *msg = stackBuf;
  if (len > sizeof(stackBuf)) {
    heapBuf.resize(len);
    msg = heapBuf.data();
  }
  putU64(msg, parent.lo);
  putU64(msg + 8, parent.hi);
  putTokens(msg + 16, tokens, blockSize_);
  uint8_t *p = msg + 16 + size_t(blockSize_) * 4;
  putU32(p, uint32_t(extra.size()));
  if (!extra.empty())
    std::memcpy(p + 4, extra.data(), extra.size());
  return hashBytes(algo_, msg, len);
}

} // namespace sits::runtime::kv
