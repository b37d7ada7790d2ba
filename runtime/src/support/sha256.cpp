//===- sha256.cpp - SHA-256 with SHA-NI dispatch and a portable fallback --===//
//
// FIPS 180-4 SHA-256, the runtime's only implementation (artifact content
// hashes and KV block hashes). The compression function has two
// implementations: the x86 SHA extensions (SHA-NI: sha256rnds2 / sha256msg1
// / sha256msg2), used when cpuid reports them, and a portable one. The
// choice is made once, at first use, and both produce identical digests
// (tested).
//
//===----------------------------------------------------------------------===//
#include "sha256.h"
#include "sha256_compress.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#define SITS_SHA_HAVE_X86 1
#include <cpuid.h>
#include <immintrin.h>
#else
#define SITS_SHA_HAVE_X86 0
#endif

namespace sits::runtime {
namespace {

constexpr uint32_t kRoundConstants[64] = {
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

inline uint32_t loadBigEndian32(const uint8_t *p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) |
         (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

/// Compresses `blocks` consecutive 64-byte blocks into `state`.
void compressPortable(uint32_t state[8], const uint8_t *data, size_t blocks) {
  for (; blocks > 0; --blocks, data += 64) {
    uint32_t w[64];
    for (int i = 0; i < 16; ++i)
      w[i] = loadBigEndian32(data + 4 * i);
    for (int i = 16; i < 64; ++i) {
      uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = state[0], b = state[1], c = state[2], d = state[3];
    uint32_t e = state[4], f = state[5], g = state[6], h = state[7];
    for (int i = 0; i < 64; ++i) {
      uint32_t s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + s1 + ch + kRoundConstants[i] + w[i];
      uint32_t s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = s0 + maj;
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

#if SITS_SHA_HAVE_X86
/// SHA-NI compression: four rounds per sha256rnds2 pair, the message
/// schedule W[g] = msg2(msg1(W[g-4], W[g-3]) + alignr(W[g-1], W[g-2], 4),
/// W[g-1]) for the 16 groups of 4 rounds.
__attribute__((target("sha,sse4.1,ssse3"))) void
compressShaNi(uint32_t state[8], const uint8_t *data, size_t blocks) {
  const __m128i byteSwap =
      _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
  __m128i tmp = _mm_loadu_si128(reinterpret_cast<const __m128i *>(&state[0]));
  __m128i state1 =
      _mm_loadu_si128(reinterpret_cast<const __m128i *>(&state[4]));
  tmp = _mm_shuffle_epi32(tmp, 0xB1);               // CDAB
  state1 = _mm_shuffle_epi32(state1, 0x1B);         // EFGH
  __m128i state0 = _mm_alignr_epi8(tmp, state1, 8); // ABEF
  state1 = _mm_blend_epi16(state1, tmp, 0xF0);      // CDGH

  // Four rounds on message words w (sha256rnds2 twice).
#define SITS_SHA_ROUNDS4(g, w)                                                 \
  do {                                                                         \
    __m128i msg =                                                              \
        _mm_add_epi32(w, _mm_loadu_si128(reinterpret_cast<const __m128i *>(    \
                             &kRoundConstants[4 * (g)])));                     \
    state1 = _mm_sha256rnds2_epu32(state1, state0, msg);                       \
    msg = _mm_shuffle_epi32(msg, 0x0E);                                        \
    state0 = _mm_sha256rnds2_epu32(state0, state1, msg);                       \
  } while (0)
  // W[g] = msg2(msg1(W[g-4], W[g-3]) + alignr(W[g-1], W[g-2], 4), W[g-1]),
  // computed in place over a rolling window of four registers.
#define SITS_SHA_SCHEDULE(g, a, b, c, d)                                       \
  do {                                                                         \
    a = _mm_sha256msg2_epu32(                                                  \
        _mm_add_epi32(_mm_sha256msg1_epu32(a, b), _mm_alignr_epi8(d, c, 4)),   \
        d);                                                                    \
    SITS_SHA_ROUNDS4(g, a);                                                    \
  } while (0)
  for (; blocks > 0; --blocks, data += 64) {
    const __m128i abefSave = state0;
    const __m128i cdghSave = state1;
    __m128i w0 = _mm_shuffle_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(data)), byteSwap);
    __m128i w1 = _mm_shuffle_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(data + 16)),
        byteSwap);
    __m128i w2 = _mm_shuffle_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(data + 32)),
        byteSwap);
    __m128i w3 = _mm_shuffle_epi8(
        _mm_loadu_si128(reinterpret_cast<const __m128i *>(data + 48)),
        byteSwap);
    SITS_SHA_ROUNDS4(0, w0);
    SITS_SHA_ROUNDS4(1, w1);
    SITS_SHA_ROUNDS4(2, w2);
    SITS_SHA_ROUNDS4(3, w3);
    SITS_SHA_SCHEDULE(4, w0, w1, w2, w3);
    SITS_SHA_SCHEDULE(5, w1, w2, w3, w0);
    SITS_SHA_SCHEDULE(6, w2, w3, w0, w1);
    SITS_SHA_SCHEDULE(7, w3, w0, w1, w2);
    SITS_SHA_SCHEDULE(8, w0, w1, w2, w3);
    SITS_SHA_SCHEDULE(9, w1, w2, w3, w0);
    SITS_SHA_SCHEDULE(10, w2, w3, w0, w1);
    SITS_SHA_SCHEDULE(11, w3, w0, w1, w2);
    SITS_SHA_SCHEDULE(12, w0, w1, w2, w3);
    SITS_SHA_SCHEDULE(13, w1, w2, w3, w0);
    SITS_SHA_SCHEDULE(14, w2, w3, w0, w1);
    SITS_SHA_SCHEDULE(15, w3, w0, w1, w2);
    state0 = _mm_add_epi32(state0, abefSave);
    state1 = _mm_add_epi32(state1, cdghSave);
  }
#undef SITS_SHA_SCHEDULE
#undef SITS_SHA_ROUNDS4

  tmp = _mm_shuffle_epi32(state0, 0x1B);       // FEBA
  state1 = _mm_shuffle_epi32(state1, 0xB1);    // DCHG
  state0 = _mm_blend_epi16(tmp, state1, 0xF0); // DCBA
  state1 = _mm_alignr_epi8(state1, tmp, 8);    // HGFE
  _mm_storeu_si128(reinterpret_cast<__m128i *>(&state[0]), state0);
  _mm_storeu_si128(reinterpret_cast<__m128i *>(&state[4]), state1);
}

bool cpuHasShaNi() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx))
    return false;
  const bool ssse3 = (ecx & (1u << 9)) != 0;
  const bool sse41 = (ecx & (1u << 19)) != 0;
  if (!ssse3 || !sse41)
    return false;
  if (__get_cpuid_max(0, nullptr) < 7)
    return false;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  return (ebx & (1u << 29)) != 0; // CPUID.(EAX=7,ECX=0):EBX.SHA[bit 29]
}
#endif

using CompressFn = void (*)(uint32_t *, const uint8_t *, size_t);

CompressFn detectCompress() {
#if SITS_SHA_HAVE_X86
  if (cpuHasShaNi())
    return compressShaNi;
#endif
  return compressPortable;
}

void compressFirstCall(uint32_t *state, const uint8_t *data, size_t blocks);

// The implementation in use. Constant-initialized to a resolver that picks
// one on the first call (so a caller running during static initialization
// is safe), then a relaxed load: a plain move on x86, no guard on the hot
// path.
std::atomic<CompressFn> gCompress{compressFirstCall};

void compressFirstCall(uint32_t *state, const uint8_t *data, size_t blocks) {
  const CompressFn fn = detectCompress();
  gCompress.store(fn, std::memory_order_relaxed);
  fn(state, data, blocks);
}

void sha256With(CompressFn compress, const void *data, size_t len,
                uint8_t out[32]) {
  uint32_t state[8];
  std::memcpy(state, detail::kSha256InitialState, sizeof(state));
  const uint8_t *bytes = static_cast<const uint8_t *>(data);
  const size_t fullBlocks = len / 64;
  if (fullBlocks)
    compress(state, bytes, fullBlocks);
  const size_t rest = len % 64;
  uint8_t tail[128] = {};
  if (rest)
    std::memcpy(tail, bytes + fullBlocks * 64, rest);
  tail[rest] = 0x80;
  const size_t tailBlocks = rest + 9 <= 64 ? 1 : 2;
  const uint64_t bitLen = uint64_t(len) * 8;
  for (int i = 0; i < 8; ++i)
    tail[tailBlocks * 64 - 1 - i] = uint8_t(bitLen >> (8 * i));
  compress(state, tail, tailBlocks);
  for (int i = 0; i < 8; ++i) {
    out[4 * i + 0] = uint8_t(state[i] >> 24);
    out[4 * i + 1] = uint8_t(state[i] >> 16);
    out[4 * i + 2] = uint8_t(state[i] >> 8);
    out[4 * i + 3] = uint8_t(state[i]);
  }
}

} // namespace

namespace detail {
const uint32_t kSha256InitialState[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372,
                                         0xa54ff53a, 0x510e527f, 0x9b05688c,
                                         0x1f83d9ab, 0x5be0cd19};

void sha256Compress(uint32_t state[8], const uint8_t *data, size_t blocks) {
  gCompress.load(std::memory_order_relaxed)(state, data, blocks);
}
} // namespace detail

//===----------------------------------------------------------------------===//
// One-shot
//===----------------------------------------------------------------------===//

void sha256(const void *data, size_t len, uint8_t out[32]) {
  sha256With(gCompress.load(std::memory_order_relaxed), data, len, out);
}

void sha256Portable(const void *data, size_t len, uint8_t out[32]) {
  sha256With(compressPortable, data, len, out);
}

bool sha256HardwareAccelerated() {
  static const bool accelerated = detectCompress() != compressPortable;
  return accelerated;
}

//===----------------------------------------------------------------------===//
// Streaming
//===----------------------------------------------------------------------===//

Sha256::Sha256(bool accelerated) : accelerated_(accelerated) {
  std::memcpy(state_, detail::kSha256InitialState, sizeof(state_));
}

void Sha256::compress(const uint8_t *blocks, size_t count) {
  if (accelerated_)
    detail::sha256Compress(state_, blocks, count);
  else
    compressPortable(state_, blocks, count);
}

void Sha256::update(const void *data, size_t size) {
  const auto *p = static_cast<const uint8_t *>(data);
  length_ += size;
  if (buffered_) {
    const size_t take = std::min(size, sizeof(buffer_) - buffered_);
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
  const uint64_t bits = length_ * 8;
  uint8_t pad[72] = {0x80};
  const size_t padLen = (buffered_ < 56 ? 56 : 120) - buffered_;
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
