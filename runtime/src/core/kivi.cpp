//===- kivi.cpp - 4-/2-bit KV blocks: the writer and the dequantizers -----===//
//
// A block's rows stay in f32 in its tail until the block is full, because
// a key's scale is per channel over all the block's tokens (KIVI's
// "residual" of recent tokens); the last row's write quantizes the block,
// whose tail then stays until the attention of the same call has read it
// (releaseTail).
// Parameters are asymmetric (min and scale, f16), the min rounded down and
// the scale up to the next f16 so that no code clips: every element is
// within half a step of its value. Integers round half up from a clamped
// non-negative float, so NaN and infinities give codes in range (never a
// float-to-int conversion out of range).
//
//===----------------------------------------------------------------------===//
#include "kivi.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#endif
#include <sys/mman.h>
#include <unistd.h>

extern "C" void sitsRuntimeParallelFor(void (*)(void *, int64_t), void *,
                                       int64_t);

namespace sits::runtime::kivi {
namespace {

/// Below this many elements written, one thread writes them all.
constexpr double kSerialWork = 64 * 1024;

/// The largest f16 not above v (saturating at -65504 below it).
uint16_t halfAtMost(float v) {
  if (!(v > -65504.f))
    return 0xfbffu; // -65504 (and NaN)
  uint16_t h = floatToHalf(v);
  if (halfToFloat(h) > v)
    h = (h & 0x7fffu) == 0 ? uint16_t(0x8001u)
        : (h & 0x8000u)    ? uint16_t(h + 1)
                           : uint16_t(h - 1);
  return h;
}

/// The smallest f16 not below v >= 0 (saturating at 65504).
uint16_t halfAtLeast(float v) {
  if (!(v > 0.f))
    return 0;
  uint16_t h = floatToHalf(v);
  if (halfToFloat(h) < v && h < 0x7bffu)
    ++h;
  return h;
}

/// Quantizes x[i * stride], i < n, into `codes` (one per element, 0 ..
/// 2^bits - 1) and the f16 (scale, min) pair.
void quantizeRun(const float *x, int64_t n, int64_t stride, int64_t bits,
                 uint8_t *codes, uint16_t *scale, uint16_t *min) {
  float lo = INFINITY, hi = -INFINITY;
  for (int64_t i = 0; i < n; ++i) {
    const float e = x[i * stride];
    lo = e < lo ? e : lo;
    hi = e > hi ? e : hi;
  }
  if (!(hi >= lo)) // all NaN
    lo = hi = 0.f;
  const float qmax = float((1 << bits) - 1);
  *min = halfAtMost(lo);
  const float m = halfToFloat(*min);
  *scale = halfAtLeast((hi - m) / qmax);
  const float s = halfToFloat(*scale);
  const float inv = s > 0.f ? 1.f / s : 0.f;
  for (int64_t i = 0; i < n; ++i) {
    float c = (x[i * stride] - m) * inv;
    c = c > 0.f ? c : 0.f; // NaN too
    c = c < qmax ? c : qmax;
    codes[i] = uint8_t(c + 0.5f);
  }
}

/// Packs one row's codes (one per byte) into `row`.
void packRow(const uint8_t *codes, int64_t headDim, int64_t bits,
             uint8_t *row) {
  const int64_t per = 8 / bits;
  for (int64_t i = 0; i < headDim / per; ++i) {
    uint8_t b = 0;
    for (int64_t j = 0; j < per; ++j)
      b |= uint8_t(codes[i * per + j] << (j * bits));
    row[i] = b;
  }
}

/// Code d of a packed row.
template <int Bits> inline unsigned codeAt(const uint8_t *row, int64_t d) {
  constexpr int per = 8 / Bits;
  return (row[d / per] >> ((d % per) * Bits)) & ((1u << Bits) - 1);
}

/// Elements [d0, D) of a row: code * scale[d] + min[d], one at a time.
template <int Bits>
inline void dequantTail(const uint8_t *row, int64_t d0, int64_t D,
                        const float *scale, const float *min, float *dst) {
  for (int64_t d = d0; d < D; ++d)
    dst[d] = float(codeAt<Bits>(row, d)) * scale[d] + min[d];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SITS_KIVI_X86 1
#define SITS_KIVI_AVX512 __attribute__((target("avx512f,avx2,fma,f16c")))
#define SITS_KIVI_AVX2 __attribute__((target("avx2,fma,f16c")))

// The codes of a whole vector, widened to one byte each: 4-bit codes from
// W/2 bytes (byte b's low nibble, then its high one), 2-bit codes from W/4
// (bits 0-1, 2-3, 4-5, 6-7 of each byte).
SITS_KIVI_AVX2 inline __m128i spread4(__m128i bytes) {
  const __m128i x = _mm_cvtepu8_epi16(bytes); // byte b in the low half
  return _mm_or_si128(
      _mm_and_si128(x, _mm_set1_epi16(0x000f)),
      _mm_and_si128(_mm_slli_epi16(x, 4), _mm_set1_epi16(0x0f00)));
}
SITS_KIVI_AVX2 inline __m128i spread2(__m128i bytes) {
  const __m128i x = _mm_cvtepu8_epi32(bytes);
  return _mm_or_si128(
      _mm_or_si128(_mm_and_si128(x, _mm_set1_epi32(0x3)),
                   _mm_and_si128(_mm_slli_epi32(x, 6), _mm_set1_epi32(0x300))),
      _mm_or_si128(
          _mm_and_si128(_mm_slli_epi32(x, 12), _mm_set1_epi32(0x30000)),
          _mm_and_si128(_mm_slli_epi32(x, 18), _mm_set1_epi32(0x3000000))));
}

/// 8 codes of `row` from element d, as floats.
template <int Bits>
SITS_KIVI_AVX2 inline __m256 codes8(const uint8_t *row, int64_t d) {
  uint32_t raw = 0;
  std::memcpy(&raw, row + d * Bits / 8, Bits); // 4 or 2 bytes
  const __m128i bytes = _mm_cvtsi32_si128(int(raw));
  const __m128i spread = Bits == 4 ? spread4(bytes) : spread2(bytes);
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(spread));
}

/// 16 codes of `row` from element d, as floats.
template <int Bits>
SITS_KIVI_AVX512 inline __m512 codes16(const uint8_t *row, int64_t d) {
  uint64_t raw = 0;
  std::memcpy(&raw, row + d * Bits / 8, 2 * Bits); // 8 or 4 bytes
  const __m128i bytes = _mm_cvtsi64_si128(int64_t(raw));
  const __m128i spread = Bits == 4 ? spread4(bytes) : spread2(bytes);
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(spread));
}

/// n packed rows, element d of each code * scale[d] + min[d].
#define SITS_KIVI_ROWS(NAME, TARGET, LOAD, FMADD, STORE, CODES, W)             \
  template <int Bits>                                                          \
  TARGET void NAME(const uint8_t *rows, int64_t rowBytes, int64_t n,           \
                   int64_t D, const float *scale, const float *min,            \
                   float *dst) {                                               \
    for (int64_t r = 0; r < n; ++r, rows += rowBytes, dst += D) {              \
      int64_t d = 0;                                                           \
      for (; d + W <= D; d += W)                                               \
        STORE(dst + d,                                                         \
              FMADD(CODES<Bits>(rows, d), LOAD(scale + d), LOAD(min + d)));    \
      dequantTail<Bits>(rows, d, D, scale, min, dst);                          \
    }                                                                          \
  }
SITS_KIVI_ROWS(rowsAvx2, SITS_KIVI_AVX2, _mm256_loadu_ps, _mm256_fmadd_ps,
               _mm256_storeu_ps, codes8, 8)
SITS_KIVI_ROWS(rowsAvx512, SITS_KIVI_AVX512, _mm512_loadu_ps, _mm512_fmadd_ps,
               _mm512_storeu_ps, codes16, 16)
#undef SITS_KIVI_ROWS

SITS_KIVI_AVX2 void halvesF16c(const uint8_t *src, int64_t n, float *dst) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i,
                     _mm256_cvtph_ps(_mm_loadu_si128(
                         reinterpret_cast<const __m128i *>(src + 2 * i))));
  for (; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, sizeof h);
    dst[i] = _cvtsh_ss(h);
  }
}

/// V rows [r0, r1) whose groups are whole vectors: each group's (scale,
/// min) broadcast.
#define SITS_KIVI_VALUES(NAME, TARGET, VEC, SET1, FMADD, STORE, CODES, W)      \
  template <int Bits>                                                          \
  TARGET void NAME(const Layout &l, const Layout::Slab &sl,                    \
                   const uint8_t *slab, int64_t r0, int64_t r1, float *dst) {  \
    const int64_t D = l.headDim, G = l.valueGroup, groups = l.valueGroups();   \
    const uint8_t *params = slab + sl.paramsOffset;                            \
    const int64_t minAt = 2 * l.blockSize * groups;                            \
    for (int64_t r = r0; r < r1; ++r, dst += D) {                              \
      const uint8_t *row = slab + r * sl.rowBytes;                             \
      for (int64_t g = 0; g < groups; ++g) {                                   \
        uint16_t sh, mh;                                                       \
        std::memcpy(&sh, params + 2 * (r * groups + g), 2);                    \
        std::memcpy(&mh, params + minAt + 2 * (r * groups + g), 2);            \
        const VEC vs = SET1(_cvtsh_ss(sh)), vm = SET1(_cvtsh_ss(mh));          \
        for (int64_t d = g * G; d < (g + 1) * G; d += W)                       \
          STORE(dst + d, FMADD(CODES<Bits>(row, d), vs, vm));                  \
      }                                                                        \
    }                                                                          \
  }
SITS_KIVI_VALUES(valuesAvx2, SITS_KIVI_AVX2, __m256, _mm256_set1_ps,
                 _mm256_fmadd_ps, _mm256_storeu_ps, codes8, 8)
SITS_KIVI_VALUES(valuesAvx512, SITS_KIVI_AVX512, __m512, _mm512_set1_ps,
                 _mm512_fmadd_ps, _mm512_storeu_ps, codes16, 16)
#undef SITS_KIVI_VALUES
#else
#define SITS_KIVI_X86 0
#endif

template <int Bits>
void rowsPortable(const uint8_t *rows, int64_t rowBytes, int64_t n, int64_t D,
                  const float *scale, const float *min, float *dst) {
  for (int64_t r = 0; r < n; ++r, rows += rowBytes, dst += D)
    dequantTail<Bits>(rows, 0, D, scale, min, dst);
}

/// n packed rows, each element code * scale[d] + min[d], on path `lanes`
/// (16: AVX-512, 8: AVX2, else portable).
void dequantRows(int lanes, int64_t bits, const uint8_t *rows, int64_t rowBytes,
                 int64_t n, int64_t D, const float *scale, const float *min,
                 float *dst) {
#if SITS_KIVI_X86
  if (lanes == 16) {
    (bits == 4 ? rowsAvx512<4> : rowsAvx512<2>)(rows, rowBytes, n, D, scale,
                                                min, dst);
    return;
  }
  if (lanes == 8) {
    (bits == 4 ? rowsAvx2<4> : rowsAvx2<2>)(rows, rowBytes, n, D, scale, min,
                                            dst);
    return;
  }
#endif
  (bits == 4 ? rowsPortable<4> : rowsPortable<2>)(rows, rowBytes, n, D, scale,
                                                  min, dst);
}

/// Per-thread parameter scratch: [scale][min] of headDim floats.
thread_local std::vector<float> tParams;

float *paramsScratch(int64_t n) {
  if (tParams.size() < size_t(n))
    tParams.resize(size_t(n));
  return tParams.data();
}

void loadHalves(const uint8_t *src, int64_t n, float *dst) {
  for (int64_t i = 0; i < n; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, sizeof h);
    dst[i] = halfToFloat(h);
  }
}

void storeHalf(uint8_t *dst, uint16_t h) { std::memcpy(dst, &h, sizeof h); }

struct Write {
  Layout l;
  int64_t tokens;
  const float *k, *v;
  int64_t batchStride, tokenStride, headStride;
  const int64_t *slots;
  int64_t slotStride;
  uint8_t *pool;
  int64_t numBlocks, layer;
  bool release;
  int64_t pageBytes;
};

/// Sequence b's rows, in order.
void writeSequence(void *context, int64_t b) {
  const Write &w = *static_cast<const Write *>(context);
  const Layout &l = w.l;
  const int64_t bs = l.blockSize, D = l.headDim;
  for (int64_t s = 0; s < w.tokens; ++s) {
    const int64_t slot = w.slots[b * w.slotStride + s];
    if (slot < 0)
      continue;
    const int64_t block = slot / bs, pos = slot % bs;
    if (block <= 0 || block >= w.numBlocks)
      continue;
    uint8_t *header = w.pool + l.tail(block, w.layer);
    float *rows = reinterpret_cast<float *>(header);
    int32_t valid;
    std::memcpy(&valid, header, sizeof valid);
    // Rows before this one that the tail no longer holds (the block was
    // filled, then its sequence cut back into it): from the quantized slab.
    if (valid < 0 || valid > bs)
      valid = 0;
    if (valid < pos)
      for (int64_t h = 0; h < l.kvHeads; ++h) {
        dequantKeys(l, w.pool, block, w.layer, h, valid, pos,
                    rows + l.tailRow(0, h, valid), 0);
        dequantValues(l, w.pool, block, w.layer, h, valid, pos,
                      rows + l.tailRow(1, h, valid), 0);
      }
    const int64_t src = b * w.batchStride + s * w.tokenStride;
    for (int64_t h = 0; h < l.kvHeads; ++h) {
      std::memcpy(rows + l.tailRow(0, h, pos), w.k + src + h * w.headStride,
                  size_t(D) * sizeof(float));
      std::memcpy(rows + l.tailRow(1, h, pos), w.v + src + h * w.headStride,
                  size_t(D) * sizeof(float));
    }
    valid = int32_t(pos + 1);
    int32_t flags = 0;
    if (pos == bs - 1) {
      // Quantized, and kept for this call's attention (releaseTail).
      quantizeLayer(l, rows, w.pool, block, w.layer);
      flags = kTailRetained;
      if (w.release && reinterpret_cast<uintptr_t>(header) % w.pageBytes == 0 &&
          l.tailLayerBytes % w.pageBytes == 0)
        flags |= kTailReleasePages;
    }
    std::memcpy(header, &valid, sizeof valid);
    std::memcpy(header + 4, &flags, sizeof flags);
  }
}

} // namespace

bool tailRetained(const Layout &l, const uint8_t *pool, int64_t block,
                  int64_t layer) {
  const uint8_t *header = pool + l.tail(block, layer);
  int32_t rows, flags;
  std::memcpy(&rows, header, sizeof rows);
  std::memcpy(&flags, header + 4, sizeof flags);
  return rows == l.blockSize && (flags & kTailRetained) != 0;
}

void releaseTail(const Layout &l, uint8_t *pool, int64_t block, int64_t layer) {
  uint8_t *header = pool + l.tail(block, layer);
  int32_t flags;
  std::memcpy(&flags, header + 4, sizeof flags);
  // The writer's flag says the pool is anonymous memory (kReleaseTail):
  // given back, its pages read as zeros (no rows, no flags). Not reading
  // them here keeps them unmapped.
  if ((flags & kTailReleasePages) &&
      madvise(header, size_t(l.tailLayerBytes), MADV_DONTNEED) == 0)
    return;
  const int32_t zero[2] = {0, 0};
  std::memcpy(header, zero, sizeof zero);
}

namespace {

/// Rows [r0, r1) of a K slab of shape `sl` (see dequantKeys).
void keysOf(const Layout &l, const Layout::Slab &sl, const uint8_t *slab,
            int64_t r0, int64_t r1, float *dst, int lanes);

/// Rows [r0, r1) of a V slab of shape `sl` (see dequantValues).
void valuesOf(const Layout &l, const Layout::Slab &sl, const uint8_t *slab,
              int64_t r0, int64_t r1, float *dst, int lanes) {
  const int64_t D = l.headDim, groups = l.valueGroups(), G = l.valueGroup;
#if SITS_KIVI_X86
  if (lanes == 16 && G % 16 == 0) {
    (sl.bits == 4 ? valuesAvx512<4> : valuesAvx512<2>)(l, sl, slab, r0, r1,
                                                       dst);
    return;
  }
  if (lanes >= 8 && G % 8 == 0) {
    (sl.bits == 4 ? valuesAvx2<4> : valuesAvx2<2>)(l, sl, slab, r0, r1, dst);
    return;
  }
#endif
  const int64_t paramCount = l.blockSize * groups;
  float *scale = paramsScratch(2 * D), *min = scale + D;
  for (int64_t r = r0; r < r1; ++r, dst += D) {
    for (int64_t g = 0; g < groups; ++g) {
      uint16_t s, m;
      std::memcpy(&s, slab + sl.paramsOffset + 2 * (r * groups + g), 2);
      std::memcpy(
          &m, slab + sl.paramsOffset + 2 * (paramCount + r * groups + g), 2);
      std::fill_n(scale + g * G, G, halfToFloat(s));
      std::fill_n(min + g * G, G, halfToFloat(m));
    }
    dequantRows(lanes, sl.bits, slab + r * sl.rowBytes, sl.rowBytes, 1, D,
                scale, min, dst);
  }
}

void keysOf(const Layout &l, const Layout::Slab &sl, const uint8_t *slab,
            int64_t r0, int64_t r1, float *dst, int lanes) {
  if (l.keysPerToken) {
    valuesOf(l, sl, slab, r0, r1, dst, lanes);
    return;
  }
  const int64_t D = l.headDim;
  float *scale = paramsScratch(2 * D), *min = scale + D;
#if SITS_KIVI_X86
  if (lanes >= 8) {
    halvesF16c(slab + sl.paramsOffset, 2 * D, scale);
  } else
#endif
  {
    loadHalves(slab + sl.paramsOffset, 2 * D, scale);
  }
  dequantRows(lanes, sl.bits, slab + r0 * sl.rowBytes, sl.rowBytes, r1 - r0, D,
              scale, min, dst);
}

} // namespace

void dequantKeys(const Layout &l, const uint8_t *pool, int64_t block,
                 int64_t layer, int64_t head, int64_t r0, int64_t r1,
                 float *dst, int lanes) {
  keysOf(l, l.slabShape(layer, head), pool + l.slab(block, layer, 0, head), r0,
         r1, dst, lanes);
}

void dequantValues(const Layout &l, const uint8_t *pool, int64_t block,
                   int64_t layer, int64_t head, int64_t r0, int64_t r1,
                   float *dst, int lanes) {
  valuesOf(l, l.slabShape(layer, head), pool + l.slab(block, layer, 1, head),
           r0, r1, dst, lanes);
}

void quantizeLayer(const Layout &l, const float *rows, uint8_t *pool,
                   int64_t block, int64_t layer) {
  const int64_t bs = l.blockSize, D = l.headDim, G = l.valueGroup;
  const int64_t groups = l.valueGroups();
  // Codes one per byte: a block's K ([bs][D]), then one K column.
  thread_local std::vector<uint8_t> tCodes;
  if (tCodes.size() < size_t(bs * D + bs))
    tCodes.resize(size_t(bs * D + bs));
  uint8_t *codes = tCodes.data(), *column = codes + bs * D;
  for (int64_t h = 0; h < l.kvHeads; ++h) {
    const Layout::Slab sl = l.slabShape(layer, h);
    // Values, and keys with kKeysPerToken: per token and group of channels.
    auto perToken = [&](uint8_t *slab, const float *x) {
      for (int64_t t = 0; t < bs; ++t) {
        for (int64_t g = 0; g < groups; ++g) {
          uint16_t s, m;
          quantizeRun(x + t * D + g * G, G, 1, sl.bits, codes + g * G, &s, &m);
          storeHalf(slab + sl.paramsOffset + 2 * (t * groups + g), s);
          storeHalf(slab + sl.paramsOffset + 2 * (bs * groups + t * groups + g),
                    m);
        }
        packRow(codes, D, sl.bits, slab + t * sl.rowBytes);
      }
    };
    perToken(pool + l.slab(block, layer, 1, h), rows + l.tailRow(1, h, 0));
    if (l.keysPerToken) {
      perToken(pool + l.slab(block, layer, 0, h), rows + l.tailRow(0, h, 0));
      continue;
    }
    // Keys: per channel over the block's rows.
    uint8_t *slab = pool + l.slab(block, layer, 0, h);
    const float *keys = rows + l.tailRow(0, h, 0);
    for (int64_t d = 0; d < D; ++d) {
      uint16_t s, m;
      quantizeRun(keys + d, bs, D, sl.bits, column, &s, &m);
      for (int64_t t = 0; t < bs; ++t)
        codes[t * D + d] = column[t];
      storeHalf(slab + sl.paramsOffset + 2 * d, s);
      storeHalf(slab + sl.paramsOffset + 2 * (D + d), m);
    }
    for (int64_t t = 0; t < bs; ++t)
      packRow(codes + t * D, D, sl.bits, slab + t * sl.rowBytes);
  }
}

} // namespace sits::runtime::kivi

extern "C" void sitsRuntimeKiviWrite(
    int64_t batch, int64_t tokens, int64_t kvHeads, int64_t headDim,
    const float *k, const float *v, int64_t batchStride, int64_t tokenStride,
    int64_t headStride, const int64_t *slots, int64_t slotStride, uint8_t *pool,
    int64_t numBlocks, int64_t numLayers, int64_t layer, int64_t blockSize,
    int64_t bits, int64_t flags) {
  using namespace sits::runtime::kivi;
  Write w{};
  if (batch <= 0 || tokens <= 0 || numBlocks <= 0 || !k || !v || !slots ||
      !pool || layer < 0 || layer >= numLayers || batchStride < 0 ||
      tokenStride < 0 || headStride < 0 || slotStride < 0 ||
      !Layout::make(numLayers, kvHeads, blockSize, headDim, bits, &w.l, pool))
    return;
  int64_t poolBytes;
  if (__builtin_mul_overflow(numBlocks, w.l.blockStride, &poolBytes))
    return;
  w.tokens = tokens;
  w.k = k;
  w.v = v;
  w.batchStride = batchStride;
  w.tokenStride = tokenStride;
  w.headStride = headStride;
  w.slots = slots;
  w.slotStride = slotStride;
  w.pool = pool;
  w.numBlocks = numBlocks;
  w.layer = layer;
  w.release = (flags & kReleaseTail) != 0;
  const long page = sysconf(_SC_PAGESIZE);
  w.pageBytes = page > 0 ? page : 4096;
  if (batch == 1 ||
      double(batch) * double(tokens) * double(kvHeads) * double(headDim) <
          kSerialWork) {
    for (int64_t b = 0; b < batch; ++b)
      writeSequence(&w, b);
    return;
  }
  sitsRuntimeParallelFor(&writeSequence, &w, batch);
}
