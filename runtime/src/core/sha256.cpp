//===- sha256.cpp - SHA-256 ------------------------------------------------===//
#include "sha256.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace sits::runtime {
namespace {

alignas(16) constexpr uint32_t kK[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
    0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
    0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
    0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
    0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
    0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
    0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
    0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
    0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

inline uint32_t rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

void compressPortable(uint32_t state[8], const uint8_t *p, size_t blocks) {
  for (; blocks; --blocks, p += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 |
             uint32_t(p[4 * i + 2]) << 8 | uint32_t(p[4 * i + 3]);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3],
             e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t S1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + S1 + ch + kK[i] + w[i];
      uint32_t S0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = S0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    state[0] += a;
    state[1] += b;
    state[2] += c;
    state[3] += d;
    state[4] += e;
    state[5] += f;
    state[6] += g;
    state[7] += h;
  }
}

#if defined(__x86_64__)
bool detectShaNi() {
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
    return false;
  bool sha = (b >> 29) & 1;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  bool sse41 = (c >> 19) & 1, ssse3 = (c >> 9) & 1;
  return sha && sse41 && ssse3;
}

// Four rounds of group G (0..15) with the message words in M[G % 4]; the
// schedule of later groups is interleaved as in Intel's reference code.
#define SITS_SHA_GROUP(G)                                                      \
  do {                                                                         \
    if ((G) < 4)                                                               \
      M[(G) % 4] = _mm_shuffle_epi8(                                           \
          _mm_loadu_si128(reinterpret_cast<const __m128i *>(p + 16 * (G))),    \
          kMask);                                                              \
    __m128i msg = _mm_add_epi32(                                               \
        M[(G) % 4],                                                            \
        _mm_load_si128(reinterpret_cast<const __m128i *>(kK + 4 * (G))));      \
    state1 = _mm_sha256rnds2_epu32(state1, state0, msg);                       \
    if ((G) >= 3 && (G) <= 14) {                                               \
      __m128i tmp = _mm_alignr_epi8(M[(G) % 4], M[((G) + 3) % 4], 4);          \
      M[((G) + 1) % 4] = _mm_add_epi32(M[((G) + 1) % 4], tmp);                 \
      M[((G) + 1) % 4] = _mm_sha256msg2_epu32(M[((G) + 1) % 4], M[(G) % 4]);   \
    }                                                                          \
    msg = _mm_shuffle_epi32(msg, 0x0E);                                        \
    state0 = _mm_sha256rnds2_epu32(state0, state1, msg);                       \
    if ((G) >= 1 && (G) <= 12)                                                 \
      M[((G) + 3) % 4] = _mm_sha256msg1_epu32(M[((G) + 3) % 4], M[(G) % 4]);   \
  } while (0)

__attribute__((target("sha,sse4.1,ssse3"))) void
compressShaNi(uint32_t state[8], const uint8_t *p, size_t blocks) {
  const __m128i kMask =
      _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i *>(&state[0]));
  __m128i state1 =
      _mm_loadu_si128(reinterpret_cast<const __m128i *>(&state[4]));
  tmp = _mm_shuffle_epi32(tmp, 0xB1);           // CDAB
  state1 = _mm_shuffle_epi32(state1, 0x1B);     // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8); // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);  // CDGH

  for (; blocks; --blocks, p += 64) {
    __m128i abefSave = state0, cdghSave = state1;
    __m128i M[4];
    SITS_SHA_GROUP(0);
    SITS_SHA_GROUP(1);
    SITS_SHA_GROUP(2);
    SITS_SHA_GROUP(3);
    SITS_SHA_GROUP(4);
    SITS_SHA_GROUP(5);
    SITS_SHA_GROUP(6);
    SITS_SHA_GROUP(7);
    SITS_SHA_GROUP(8);
    SITS_SHA_GROUP(9);
    SITS_SHA_GROUP(10);
    SITS_SHA_GROUP(11);
    SITS_SHA_GROUP(12);
    SITS_SHA_GROUP(13);
    SITS_SHA_GROUP(14);
    SITS_SHA_GROUP(15);
    state0 = _mm_add_epi32(state0, abefSave);
    state1 = _mm_add_epi32(state1, cdghSave);
  }

  tmp = _mm_shuffle_epi32(state0, 0x1B);        // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);     // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0);  // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);     // ABEF
  _mm_storeu_si128(reinterpret_cast<__m128i *>(&state[0]), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(&state[4]), state1);
}
#undef SITS_SHA_GROUP
#endif

bool shaNiAvailable() {
#if defined(__x86_64__)
  static const bool available = detectShaNi();
  return available;
#else
  return false;
#endif
}

} // namespace

bool Sha256::hasAcceleration() { return shaNiAvailable(); }

Sha256::Sha256(bool accelerated)
    : state_{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f,
             0x9b05688c, 0x1f83d9ab, 0x5be0cd19},
      accelerated_(accelerated && shaNiAvailable()) {}

void Sha256::compress(const uint8_t *blocks, size_t count) {
#if defined(__x86_64__)
  if (accelerated_) {
    compressShaNi(state_, blocks, count);
    return;
  }
#endif
  compressPortable(state_, blocks, count);
}

void Sha256::update(const void *data, size_t size) {
  const auto *p = static_cast<const uint8_t *>(data);
  length_ += size;
  if (buffered_) {
    size_t take = std::min(size, sizeof(buffer_) - buffered_);
    std::memcpy(buffer_ + buffered_, p, take);
    buffered_ += take;
    p += take;
    size -= take;
    if (buffered_ < sizeof(buffer_))
      return;
    compress(buffer_, 1);
    buffered_ = 0;
  }
  if (size >= 64) {
    compress(p, size / 64);
    p += size / 64 * 64;
    size %= 64;
  }
  if (size) {
    std::memcpy(buffer_, p, size);
    buffered_ = size;
  }
}

Sha256::Digest Sha256::finish() {
  uint64_t bits = length_ * 8;
  uint8_t pad[72] = {0x80};
  size_t padLen = (buffered_ < 56 ? 56 : 120) - buffered_;
  uint8_t lenBytes[8];
  for (int i = 0; i < 8; ++i)
    lenBytes[i] = uint8_t(bits >> (56 - 8 * i));
  update(pad, padLen);
  update(lenBytes, 8);
  Digest out;
  for (int i = 0; i < 8; ++i) {
    out[4 * i] = uint8_t(state_[i] >> 24);
    out[4 * i + 1] = uint8_t(state_[i] >> 16);
    out[4 * i + 2] = uint8_t(state_[i] >> 8);
    out[4 * i + 3] = uint8_t(state_[i]);
  }
  return out;
}

std::string Sha256::hex(const Digest &digest) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint8_t b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

} // namespace sits::runtime
