//===- paged_attention.cpp - Attention over a paged KV pool ---------------===//
//
// `sitsRuntimePagedAttention` attends S >= 1 query tokens per sequence (the
// sequence's last S positions, each seeing the positions up to its own:
// causal) over that sequence's keys and values in the paged KV pool
// (the compiler's [numBlocks][layers][2][kvHeads][blockSize][headDim] f32,
// or any layout the strides describe), reading them in place through the
// block table. Compiled code calls it once per layer of a decode step
// (S = 1) or of a prefill (S > 1), directly on its buffers: the generic
// lowering would gather every sequence's K/V into contiguous tensors first
// (a copy of the whole context per layer and step) and does not share K/V
// loads between the query heads of a grouped-query head, and decode
// attention is bound by reading K/V.
//
// `sitsRuntimePagedAttentionI8` does the same over a pool of int8 rows, a
// quarter of the bytes: each K or V row is `headDim` int8 codes followed
// by one f32 scale (at byte `headDim` of the row, in native byte order,
// read unaligned), element d being code[d] * scale; the pool's strides and
// offsets count bytes. Each chunk's row scales are read once; the scores
// are (q . codes) * scale * kScale, the values sum (p * vScale) * codes.
// `sitsRuntimePagedAttentionF8E4M3` is the same with FP8 E4M3FN codes
// (element d = fp8(code[d]) * scale). The formats share everything but
// the scores and values kernels, which are templates over the element type
// whose only difference is how a run of elements is widened to f32.
//
// `sitsRuntimePagedAttentionKivi` reads a pool of 4- or 2-bit KIVI blocks
// (sits/runtime/kivi_layout.h): each chunk's K and V rows are first
// dequantized into per-thread scratch (from a full block's slab, or copied
// from the f32 tail of the block being filled), then the f32 kernels run
// on them, so every query head of the group shares one dequantization.
//
// The context a query sees is read in chunks of at most 256 positions. For
// each chunk, all query heads of a kv head are handled together, so each K
// and V row is read from memory once for the group: the scores of the
// chunk (16 dot products at a time, summed horizontally in one transposing
// tree), their softmax within the chunk (max-subtracted, vectorized exp),
// then the weighted sum of V rows.
//
// Work items are (sequence, query token, kv head, part), a part being a
// run of consecutive chunks. An item folds each chunk after its first
// into the sum so far (online softmax: the running max and sum per head,
// the sum rescaled by e^(old max - new max)). With enough (sequence, query,
// kv head) to keep the threads busy (prefill, large decode batches), a
// query's context is one part: its item walks all of it and writes the
// output, with no scratch. With few (decode of a few sequences), every
// chunk is a part (flash-decoding): each leaves (max, sum, unnormalized
// sum of V) per head in a scratch area (a row per chunk and query head of
// those few queries), and the caller combines them once all items ran.
// Chunks and parts depend only on the shapes and lengths, never on the
// thread count, so results are the same bits on any number of threads (not
// across paths: the paths round differently).
//
// Three paths, picked once per process: AVX-512 (head sizes a multiple of
// 16), AVX2 + FMA + F16C (multiples of 8; also what the AVX-512 path uses for
// other multiples of 8) and portable C++ (any head size), each for every
// format (int8 and E4M3 codes widened to f32 16 or 8 at a time).
//
// Items run on the worker pool (sitsRuntimeParallelFor), or on the calling
// thread when the whole call is too small to be worth waking helpers.
//
// With an attention-score sink attached to the pool
// (sits/runtime/attention_scores.h), a second pass over (sequence, kv head)
// recomputes the observed queries' scores, normalizes them over the whole
// context and adds the weights to the sink; the attention itself is
// unchanged (the same bits with or without a sink).
//
//===----------------------------------------------------------------------===//
#include "paged_attention.h"

#include "kivi.h"
#include "worker_pool.h"

#include "sits/runtime/attention_scores.h"
#include "sits/runtime/host.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <mutex>
#include <type_traits>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SITS_PATTN_X86 1
#include <immintrin.h>
#define SITS_PATTN_AVX512 __attribute__((target("avx512f,avx2,fma")))
#define SITS_PATTN_AVX2 __attribute__((target("avx2,fma,f16c")))
#define SITS_PATTN_INLINE inline __attribute__((always_inline))
#else
#define SITS_PATTN_X86 0
#endif

#define SITS_PATTN_UNROLL _Pragma("GCC unroll 16")

extern "C" void sitsRuntimeParallelFor(void (*)(void *, int64_t), void *,
                                       int64_t);

namespace sits::runtime::pattn {
namespace {

/// Most positions per item (the scores buffer's row length).
constexpr int64_t kMaxChunk = 256;
/// Most query heads one pass of an item handles (more per kv head are
/// handled in several passes over the chunk's K/V).
constexpr int64_t kMaxPassHeads = 32;

/// One pass of an item: `heads` query heads of one kv head over `n`
/// positions of one chunk.
struct Pass {
  /// Head j's query at q + j * qHeadStride.
  const float *q;
  int64_t qHeadStride;
  /// The pool's elements: float, or the bytes of int8 / E4M3 rows.
  const void *pool;
  /// Element offsets in the pool of the chunk's K rows; V row i is at
  /// rows[i] + vDelta.
  const int64_t *rows;
  int64_t vDelta;
  /// Int8 / E4M3 rows: the scales of the chunk's K and V rows (E4M3's
  /// times 2^8, see toFloat(E4M3); unused for f32).
  const float *kScale, *vScale;
  int64_t n, heads, headDim;
  float scale;
  /// [heads][kMaxChunk]: scale * q.K, then exp(score - max).
  float *scores;
  /// Per head: the max score and the sum of exp(score - max).
  float *maxes, *sums;
  /// Head j's result (sum of p * V, times post[j]) at dst + j * dstStride.
  float *dst;
  int64_t dstStride;
  const float *post;
};

using PassFn = void (*)(const Pass &);

struct Kernels {
  Isa isa;
  /// The head sizes the path takes: multiples of this.
  int64_t dimMultiple;
  PassFn scores, softmax, values;
  /// scores and values over int8 rows, and over E4M3 rows.
  PassFn scoresI8, valuesI8, scoresF8, valuesF8;
  /// For other head sizes.
  const Kernels *narrower;
};

//===----------------------------------------------------------------------===//
// Portable C++
//===----------------------------------------------------------------------===//

// Each path's scores and values are templates over the pool's element
// type T: float, int8_t or E4M3 (the codes of int8 or E4M3 rows, whose
// scales the pass holds: scores are scale * q.codes * kScale, values sum
// (p * vScale) * codes). Only the loads differ: toFloat here, load16 and
// load8 in the vector paths.

/// An OCP FP8 E4M3FN code (1 sign, 4 exponent bits of bias 7, 3 mantissa
/// bits; no infinities, 0x7F and 0xFF are NaN, max finite 448).
struct E4M3 {
  uint8_t bits;
};
static_assert(sizeof(E4M3) == 1, "E4M3 rows are bytes");

/// Rows of codes with an f32 scale (not plain f32 elements).
template <typename T> constexpr bool kScaled = !std::is_same_v<T, float>;

// E4M3FN codes widen to f32 exactly, as their value times 2^-8, for every
// code but the NaNs (0x7F, 0xFF: no writer produces them, and they are not
// handled specially; they read as +-480 * 2^-8). The 2^8 is folded into
// the row scales (chunkScales), which gives the same bits as the values
// themselves (scaling by a power of two commutes with rounding). No step
// goes through an f32 subnormal: an x86 multiply or FMA with a subnormal
// operand takes a microcode assist (rows of small codes ran about 15 times
// slower that way), and the CPU's denormals-are-zero mode would read them
// as 0. The vector paths make each code the f16 with its sign, 0 and its 7
// exponent and mantissa bits: its value times 2^-8 (the subnormal codes
// are f16 subnormals, which the F16C / AVX-512 conversion widens exactly,
// at full speed and whatever the MXCSR modes).

/// The f16 bits of E4M3FN code bits x, sign-extended to 16 bits: (x << 7)
/// with bit 14 (a copy of the sign) cleared.
constexpr int16_t kE4M3AsF16 = int16_t(0xBF80);
/// What the widened codes are short of: 2^8, the E4M3 rows' scales carry it.
constexpr float kE4M3Unit = 256.f;

inline float toFloat(float x) { return x; }
inline float toFloat(int8_t x) { return float(x); }
/// The portable path's widening (value times 2^-8): a normal code's bits
/// shifted into an f32 with the exponent rebiased (7 to 127 - 8), a
/// subnormal's mantissa times 2^-9 * 2^-8.
inline float toFloat(E4M3 x) {
  const uint32_t mag = x.bits & 0x7Fu;
  float f;
  if (mag >= 8) {
    const uint32_t bits = (mag << 20) + (uint32_t(127 - 7 - 8) << 23);
    std::memcpy(&f, &bits, sizeof f);
  } else {
    f = float(mag) * 0x1p-17f;
  }
  return x.bits & 0x80 ? -f : f;
}

template <typename T> void scalarScores(const Pass &p) {
  const T *pool = static_cast<const T *>(p.pool);
  for (int64_t j = 0; j < p.heads; ++j) {
    const float *q = p.q + j * p.qHeadStride;
    for (int64_t i = 0; i < p.n; ++i) {
      const T *k = pool + p.rows[i];
      float dot = 0.f;
      for (int64_t d = 0; d < p.headDim; ++d)
        dot += q[d] * toFloat(k[d]);
      float score = dot * p.scale;
      if constexpr (kScaled<T>)
        score *= p.kScale[i];
      p.scores[j * kMaxChunk + i] = score;
    }
  }
}

void scalarSoftmax(const Pass &p) {
  for (int64_t j = 0; j < p.heads; ++j) {
    float *s = p.scores + j * kMaxChunk;
    float m = s[0];
    for (int64_t i = 1; i < p.n; ++i)
      m = std::max(m, s[i]);
    float sum = 0.f;
    for (int64_t i = 0; i < p.n; ++i) {
      s[i] = std::exp(s[i] - m);
      sum += s[i];
    }
    p.maxes[j] = m;
    p.sums[j] = sum;
  }
}

template <typename T> void scalarValues(const Pass &p) {
  const T *pool = static_cast<const T *>(p.pool);
  for (int64_t j = 0; j < p.heads; ++j) {
    float *acc = p.dst + j * p.dstStride;
    std::fill(acc, acc + p.headDim, 0.f);
    const float *w = p.scores + j * kMaxChunk;
    for (int64_t i = 0; i < p.n; ++i) {
      const T *v = pool + (p.rows[i] + p.vDelta);
      float wi = w[i];
      if constexpr (kScaled<T>)
        wi *= p.vScale[i];
      for (int64_t d = 0; d < p.headDim; ++d)
        acc[d] += wi * toFloat(v[d]);
    }
    for (int64_t d = 0; d < p.headDim; ++d)
      acc[d] *= p.post[j];
  }
}

constexpr Kernels kScalarKernels = {
    Isa::kScalar,          1,
    &scalarScores<float>,  &scalarSoftmax,
    &scalarValues<float>,  &scalarScores<int8_t>,
    &scalarValues<int8_t>, &scalarScores<E4M3>,
    &scalarValues<E4M3>,   nullptr};

#if SITS_PATTN_X86
// exp(x) for x <= 0 (scores less their max): e^x = 2^n * e^r, n =
// round(x / ln 2), |r| <= ln 2 / 2, e^r by Cephes' expf polynomial (about
// 1 ulp). Below -87 the result is 0 to f32 accuracy in a sum that holds 1.
constexpr float kExpMin = -87.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693359375f;
constexpr float kLn2Lo = -2.12194440e-4f;
constexpr float kExpP[6] = {1.9875691500e-4f, 1.3981999507e-3f,
                            8.3334519073e-3f, 4.1665795894e-2f,
                            1.6666665459e-1f, 5.0000001201e-1f};

//===----------------------------------------------------------------------===//
// AVX-512
//===----------------------------------------------------------------------===//

/// All lanes: the maskz forms of the intrinsics whose plain forms GCC 12
/// warns about (their headers' deliberately undefined operands).
constexpr __mmask16 kAll = 0xFFFF;

/// The 16 horizontal sums of acc[0..15], in order, in one vector: a
/// transposing tree (15 adds, 30 shuffles instead of 16 separate
/// reductions). The tree leaves sum k in lane map(k) (an involution), so
/// it takes its inputs in that order.
SITS_PATTN_AVX512 SITS_PATTN_INLINE __m512 reduce16(const __m512 *acc) {
  constexpr int kMap[16] = {0, 2, 1, 3, 8,  10, 9,  11,
                            4, 6, 5, 7, 12, 14, 13, 15};
  __m512 x[8], y[4], z[2];
  SITS_PATTN_UNROLL for (int i = 0; i < 8; ++i) {
    __m512 a = acc[kMap[i]], b = acc[kMap[i + 8]];
    x[i] = _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, a, b, 0x44),
                         _mm512_maskz_shuffle_f32x4(kAll, a, b, 0xEE));
  }
  SITS_PATTN_UNROLL for (int i = 0; i < 4; ++i) y[i] =
      _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAll, x[i], x[i + 4], 0x88),
                    _mm512_maskz_shuffle_f32x4(kAll, x[i], x[i + 4], 0xDD));
  SITS_PATTN_UNROLL for (int i = 0; i < 2; ++i) z[i] =
      _mm512_add_ps(_mm512_shuffle_ps(y[i], y[i + 2], 0x44),
                    _mm512_shuffle_ps(y[i], y[i + 2], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_ps(z[0], z[1], 0x88),
                       _mm512_shuffle_ps(z[0], z[1], 0xDD));
}

SITS_PATTN_AVX512 SITS_PATTN_INLINE __m512 exp512(__m512 x) {
  x = _mm512_maskz_max_ps(kAll, x, _mm512_set1_ps(kExpMin));
  __m512 n =
      _mm512_maskz_roundscale_ps(kAll, _mm512_mul_ps(x, _mm512_set1_ps(kLog2e)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Lo), r);
  __m512 poly = _mm512_set1_ps(kExpP[0]);
  SITS_PATTN_UNROLL for (int i = 1; i < 6; ++i) poly =
      _mm512_fmadd_ps(poly, r, _mm512_set1_ps(kExpP[i]));
  poly = _mm512_fmadd_ps(poly, _mm512_mul_ps(r, r),
                         _mm512_add_ps(r, _mm512_set1_ps(1.f)));
  return _mm512_maskz_scalef_ps(kAll, poly, n);
}

/// Elements [0, 16) of a row as floats.
SITS_PATTN_AVX512 SITS_PATTN_INLINE __m512 load16(const float *x) {
  return _mm512_loadu_ps(x);
}

SITS_PATTN_AVX512 SITS_PATTN_INLINE __m512 load16(const int8_t *x) {
  return _mm512_maskz_cvtepi32_ps(
      kAll, _mm512_maskz_cvtepi8_epi32(
                kAll, _mm_loadu_si128(reinterpret_cast<const __m128i *>(x))));
}

/// The codes as f16 (see toFloat(E4M3)), widened: values times 2^-8.
SITS_PATTN_AVX512 SITS_PATTN_INLINE __m512 load16(const E4M3 *x) {
  const __m256i codes = _mm256_cvtepi8_epi16(
      _mm_loadu_si128(reinterpret_cast<const __m128i *>(x)));
  return _mm512_maskz_cvtph_ps(kAll,
                               _mm256_and_si256(_mm256_slli_epi16(codes, 7),
                                                _mm256_set1_epi16(kE4M3AsF16)));
}

/// Scores of H heads from j0 for every position: 16 / H positions at a
/// time, 16 dot products along d in 16 accumulators.
template <typename T, int H>
SITS_PATTN_AVX512 void avx512ScoresTile(const Pass &p, int64_t j0) {
  constexpr int P = 16 / H;
  const T *pool = static_cast<const T *>(p.pool);
  const __m512 scale = _mm512_set1_ps(p.scale);
  const float *q[H];
  SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) q[h] =
      p.q + (j0 + h) * p.qHeadStride;
  for (int64_t i = 0; i < p.n; i += P) {
    // Past the chunk's end: its last row again (read, never stored).
    const T *k[P];
    SITS_PATTN_UNROLL for (int t = 0; t < P; ++t) k[t] =
        pool + p.rows[std::min<int64_t>(i + t, p.n - 1)];
    __m512 acc[16];
    SITS_PATTN_UNROLL for (int a = 0; a < 16; ++a) acc[a] = _mm512_setzero_ps();
    for (int64_t c = 0; c < p.headDim; c += 16) {
      __m512 qv[H];
      SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) qv[h] =
          _mm512_loadu_ps(q[h] + c);
      SITS_PATTN_UNROLL for (int t = 0; t < P; ++t) {
        __m512 kv = load16(k[t] + c);
        SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) acc[h * P + t] =
            _mm512_fmadd_ps(qv[h], kv, acc[h * P + t]);
      }
    }
    __m512 s = _mm512_mul_ps(reduce16(acc), scale);
    int valid = int(std::min<int64_t>(P, p.n - i));
    __mmask16 store = __mmask16((1u << valid) - 1);
    if constexpr (kScaled<T>) {
      // Lane h * P + t: position i + t's K scale.
      const __m512i lane =
          _mm512_and_si512(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                             11, 12, 13, 14, 15),
                           _mm512_set1_epi32(P - 1));
      s = _mm512_mul_ps(
          s, _mm512_maskz_permutexvar_ps(
                 kAll, lane, _mm512_maskz_loadu_ps(store, p.kScale + i)));
    }
    SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) _mm512_mask_storeu_ps(
        p.scores + (j0 + h) * kMaxChunk + i, store,
        _mm512_maskz_compress_ps(__mmask16(((1u << P) - 1) << (h * P)), s));
  }
}

template <typename T> SITS_PATTN_AVX512 void avx512Scores(const Pass &p) {
  int64_t j = 0;
  for (; j + 4 <= p.heads; j += 4)
    avx512ScoresTile<T, 4>(p, j);
  if (j + 2 <= p.heads) {
    avx512ScoresTile<T, 2>(p, j);
    j += 2;
  }
  if (j < p.heads)
    avx512ScoresTile<T, 1>(p, j);
}

SITS_PATTN_AVX512 void avx512Softmax(const Pass &p) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < p.heads; ++j) {
    float *s = p.scores + j * kMaxChunk;
    __m512 mv = lowest;
    for (int64_t i = 0; i < p.n; i += 16) {
      int valid = int(std::min<int64_t>(16, p.n - i));
      __mmask16 mask = __mmask16((1u << valid) - 1);
      mv = _mm512_maskz_max_ps(kAll, mv,
                               _mm512_mask_loadu_ps(lowest, mask, s + i));
    }
    float lanes[16];
    _mm512_storeu_ps(lanes, mv);
    float m = lanes[0];
    for (float v : lanes)
      m = std::max(m, v);
    const __m512 mb = _mm512_set1_ps(m);
    __m512 sum = _mm512_setzero_ps();
    for (int64_t i = 0; i < p.n; i += 16) {
      int valid = int(std::min<int64_t>(16, p.n - i));
      __mmask16 mask = __mmask16((1u << valid) - 1);
      __m512 e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mask, s + i), mb));
      _mm512_mask_storeu_ps(s + i, mask, e);
      sum = _mm512_add_ps(sum, _mm512_maskz_mov_ps(mask, e));
    }
    _mm512_storeu_ps(lanes, sum);
    float total = 0.f;
    for (float v : lanes)
      total += v;
    p.maxes[j] = m;
    p.sums[j] = total;
  }
}

/// dst rows of H heads from j0, d in [c, c + 16 * D): sum over the chunk's
/// positions of p * V in H * D accumulators.
template <typename T, int H, int D>
SITS_PATTN_AVX512 void avx512ValuesTile(const Pass &p, int64_t j0, int64_t c) {
  __m512 acc[H][D];
  SITS_PATTN_UNROLL for (int h = 0; h < H; ++h)
      SITS_PATTN_UNROLL for (int d = 0; d < D; ++d) acc[h][d] =
          _mm512_setzero_ps();
  const T *pool = static_cast<const T *>(p.pool);
  const float *w = p.scores + j0 * kMaxChunk;
  for (int64_t i = 0; i < p.n; ++i) {
    const T *v = pool + (p.rows[i] + p.vDelta + c);
    __m512 pv[H];
    if constexpr (kScaled<T>) {
      const float vs = p.vScale[i];
      SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) pv[h] =
          _mm512_set1_ps(w[h * kMaxChunk + i] * vs);
    } else {
      SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) pv[h] =
          _mm512_set1_ps(w[h * kMaxChunk + i]);
    }
    SITS_PATTN_UNROLL for (int d = 0; d < D; ++d) {
      __m512 vv = load16(v + 16 * d);
      SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) acc[h][d] =
          _mm512_fmadd_ps(pv[h], vv, acc[h][d]);
    }
  }
  SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) {
    __m512 post = _mm512_set1_ps(p.post[j0 + h]);
    float *dst = p.dst + (j0 + h) * p.dstStride + c;
    SITS_PATTN_UNROLL for (int d = 0; d < D; ++d)
        _mm512_storeu_ps(dst + 16 * d, _mm512_mul_ps(acc[h][d], post));
  }
}

template <typename T, int H>
SITS_PATTN_AVX512 void avx512ValuesHeads(const Pass &p, int64_t j0) {
  int64_t c = 0;
  for (; c + 64 <= p.headDim; c += 64)
    avx512ValuesTile<T, H, 4>(p, j0, c);
  switch ((p.headDim - c) / 16) {
  case 3:
    avx512ValuesTile<T, H, 3>(p, j0, c);
    break;
  case 2:
    avx512ValuesTile<T, H, 2>(p, j0, c);
    break;
  case 1:
    avx512ValuesTile<T, H, 1>(p, j0, c);
    break;
  default:
    break;
  }
}

template <typename T> SITS_PATTN_AVX512 void avx512Values(const Pass &p) {
  int64_t j = 0;
  for (; j + 4 <= p.heads; j += 4)
    avx512ValuesHeads<T, 4>(p, j);
  if (j + 2 <= p.heads) {
    avx512ValuesHeads<T, 2>(p, j);
    j += 2;
  }
  if (j < p.heads)
    avx512ValuesHeads<T, 1>(p, j);
}

//===----------------------------------------------------------------------===//
// AVX2
//===----------------------------------------------------------------------===//

/// As reduce16, for 8 sums (sum k in lane map(k)).
SITS_PATTN_AVX2 SITS_PATTN_INLINE __m256 reduce8(const __m256 *acc) {
  constexpr int kMap[8] = {0, 2, 1, 3, 4, 6, 5, 7};
  __m256 x[4], y[2];
  SITS_PATTN_UNROLL for (int i = 0; i < 4; ++i) {
    __m256 a = acc[kMap[i]], b = acc[kMap[i + 4]];
    x[i] = _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20),
                         _mm256_permute2f128_ps(a, b, 0x31));
  }
  SITS_PATTN_UNROLL for (int i = 0; i < 2; ++i) y[i] =
      _mm256_add_ps(_mm256_shuffle_ps(x[i], x[i + 2], 0x44),
                    _mm256_shuffle_ps(x[i], x[i + 2], 0xEE));
  return _mm256_add_ps(_mm256_shuffle_ps(y[0], y[1], 0x88),
                       _mm256_shuffle_ps(y[0], y[1], 0xDD));
}

SITS_PATTN_AVX2 SITS_PATTN_INLINE __m256 exp256(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(kExpMin));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(kLog2e)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Lo), r);
  __m256 poly = _mm256_set1_ps(kExpP[0]);
  SITS_PATTN_UNROLL for (int i = 1; i < 6; ++i) poly =
      _mm256_fmadd_ps(poly, r, _mm256_set1_ps(kExpP[i]));
  poly = _mm256_fmadd_ps(poly, _mm256_mul_ps(r, r),
                         _mm256_add_ps(r, _mm256_set1_ps(1.f)));
  // n >= -126 (x >= -87): 2^n is a normal float.
  __m256i bits = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(poly, _mm256_castsi256_ps(bits));
}

/// Lanes below `valid` (0..8).
SITS_PATTN_AVX2 SITS_PATTN_INLINE __m256i mask8(int valid) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(valid),
                            _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/// Elements [0, 8) of a row as floats.
SITS_PATTN_AVX2 SITS_PATTN_INLINE __m256 load8(const float *x) {
  return _mm256_loadu_ps(x);
}

SITS_PATTN_AVX2 SITS_PATTN_INLINE __m256 load8(const int8_t *x) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i *>(x))));
}

/// The codes as f16 (see toFloat(E4M3)), widened (F16C): values times 2^-8.
SITS_PATTN_AVX2 SITS_PATTN_INLINE __m256 load8(const E4M3 *x) {
  const __m128i codes =
      _mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i *>(x)));
  return _mm256_cvtph_ps(
      _mm_and_si128(_mm_slli_epi16(codes, 7), _mm_set1_epi16(kE4M3AsF16)));
}

template <typename T, int H>
SITS_PATTN_AVX2 void avx2ScoresTile(const Pass &p, int64_t j0) {
  constexpr int P = 8 / H;
  const T *pool = static_cast<const T *>(p.pool);
  const __m256 scale = _mm256_set1_ps(p.scale);
  const float *q[H];
  SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) q[h] =
      p.q + (j0 + h) * p.qHeadStride;
  for (int64_t i = 0; i < p.n; i += P) {
    const T *k[P];
    SITS_PATTN_UNROLL for (int t = 0; t < P; ++t) k[t] =
        pool + p.rows[std::min<int64_t>(i + t, p.n - 1)];
    __m256 acc[8];
    SITS_PATTN_UNROLL for (int a = 0; a < 8; ++a) acc[a] = _mm256_setzero_ps();
    for (int64_t c = 0; c < p.headDim; c += 8) {
      __m256 qv[H];
      SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) qv[h] =
          _mm256_loadu_ps(q[h] + c);
      SITS_PATTN_UNROLL for (int t = 0; t < P; ++t) {
        __m256 kv = load8(k[t] + c);
        SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) acc[h * P + t] =
            _mm256_fmadd_ps(qv[h], kv, acc[h * P + t]);
      }
    }
    __m256 sv = _mm256_mul_ps(reduce8(acc), scale);
    int valid = int(std::min<int64_t>(P, p.n - i));
    if constexpr (kScaled<T>) {
      // Lane h * P + t: position i + t's K scale.
      const __m256i lane = _mm256_and_si256(
          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32(P - 1));
      sv = _mm256_mul_ps(
          sv, _mm256_permutevar8x32_ps(
                  _mm256_maskload_ps(p.kScale + i, mask8(valid)), lane));
    }
    alignas(32) float s[8];
    _mm256_store_ps(s, sv);
    SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) {
      float *dst = p.scores + (j0 + h) * kMaxChunk + i;
      for (int t = 0; t < valid; ++t)
        dst[t] = s[h * P + t];
    }
  }
}

template <typename T> SITS_PATTN_AVX2 void avx2Scores(const Pass &p) {
  int64_t j = 0;
  for (; j + 4 <= p.heads; j += 4)
    avx2ScoresTile<T, 4>(p, j);
  if (j + 2 <= p.heads) {
    avx2ScoresTile<T, 2>(p, j);
    j += 2;
  }
  if (j < p.heads)
    avx2ScoresTile<T, 1>(p, j);
}

SITS_PATTN_AVX2 void avx2Softmax(const Pass &p) {
  const __m256 lowest = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int64_t j = 0; j < p.heads; ++j) {
    float *s = p.scores + j * kMaxChunk;
    __m256 mv = lowest;
    int64_t i = 0;
    for (; i + 8 <= p.n; i += 8)
      mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + i));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mv);
    float m = lanes[0];
    for (float v : lanes)
      m = std::max(m, v);
    for (int64_t t = i; t < p.n; ++t)
      m = std::max(m, s[t]);
    const __m256 mb = _mm256_set1_ps(m);
    __m256 sum = _mm256_setzero_ps();
    for (i = 0; i < p.n; i += 8) {
      int valid = int(std::min<int64_t>(8, p.n - i));
      __m256i mask = mask8(valid);
      __m256 e = exp256(_mm256_sub_ps(_mm256_maskload_ps(s + i, mask), mb));
      e = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
      _mm256_maskstore_ps(s + i, mask, e);
      sum = _mm256_add_ps(sum, e);
    }
    _mm256_store_ps(lanes, sum);
    float total = 0.f;
    for (float v : lanes)
      total += v;
    p.maxes[j] = m;
    p.sums[j] = total;
  }
}

template <typename T, int H, int D>
SITS_PATTN_AVX2 void avx2ValuesTile(const Pass &p, int64_t j0, int64_t c) {
  __m256 acc[H][D];
  SITS_PATTN_UNROLL for (int h = 0; h < H; ++h)
      SITS_PATTN_UNROLL for (int d = 0; d < D; ++d) acc[h][d] =
          _mm256_setzero_ps();
  const T *pool = static_cast<const T *>(p.pool);
  const float *w = p.scores + j0 * kMaxChunk;
  for (int64_t i = 0; i < p.n; ++i) {
    const T *v = pool + (p.rows[i] + p.vDelta + c);
    __m256 pv[H];
    if constexpr (kScaled<T>) {
      const float vs = p.vScale[i];
      SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) pv[h] =
          _mm256_set1_ps(w[h * kMaxChunk + i] * vs);
    } else {
      SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) pv[h] =
          _mm256_broadcast_ss(w + h * kMaxChunk + i);
    }
    SITS_PATTN_UNROLL for (int d = 0; d < D; ++d) {
      __m256 vv = load8(v + 8 * d);
      SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) acc[h][d] =
          _mm256_fmadd_ps(pv[h], vv, acc[h][d]);
    }
  }
  SITS_PATTN_UNROLL for (int h = 0; h < H; ++h) {
    __m256 post = _mm256_set1_ps(p.post[j0 + h]);
    float *dst = p.dst + (j0 + h) * p.dstStride + c;
    SITS_PATTN_UNROLL for (int d = 0; d < D; ++d)
        _mm256_storeu_ps(dst + 8 * d, _mm256_mul_ps(acc[h][d], post));
  }
}

template <typename T, int H>
SITS_PATTN_AVX2 void avx2ValuesHeads(const Pass &p, int64_t j0) {
  int64_t c = 0;
  for (; c + 16 <= p.headDim; c += 16)
    avx2ValuesTile<T, H, 2>(p, j0, c);
  if (c < p.headDim)
    avx2ValuesTile<T, H, 1>(p, j0, c);
}

template <typename T> SITS_PATTN_AVX2 void avx2Values(const Pass &p) {
  int64_t j = 0;
  for (; j + 4 <= p.heads; j += 4)
    avx2ValuesHeads<T, 4>(p, j);
  if (j + 2 <= p.heads) {
    avx2ValuesHeads<T, 2>(p, j);
    j += 2;
  }
  if (j < p.heads)
    avx2ValuesHeads<T, 1>(p, j);
}

constexpr Kernels kAvx2Kernels = {Isa::kAvx2,          8,
                                  &avx2Scores<float>,  &avx2Softmax,
                                  &avx2Values<float>,  &avx2Scores<int8_t>,
                                  &avx2Values<int8_t>, &avx2Scores<E4M3>,
                                  &avx2Values<E4M3>,   &kScalarKernels};
constexpr Kernels kAvx512Kernels = {
    Isa::kAvx512,          16,
    &avx512Scores<float>,  &avx512Softmax,
    &avx512Values<float>,  &avx512Scores<int8_t>,
    &avx512Values<int8_t>, &avx512Scores<E4M3>,
    &avx512Values<E4M3>,   &kAvx2Kernels};

/// decodeF8E4M3 on a path: its loads, 16 or 8 codes at a time, times the
/// 2^8 the row scales carry.
SITS_PATTN_AVX512 void avx512Decode(const E4M3 *codes, int64_t n, float *out) {
  const __m512 unit = _mm512_set1_ps(kE4M3Unit);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(out + i, _mm512_mul_ps(load16(codes + i), unit));
  for (; i < n; ++i)
    out[i] = toFloat(codes[i]) * kE4M3Unit;
}

SITS_PATTN_AVX2 void avx2Decode(const E4M3 *codes, int64_t n, float *out) {
  const __m256 unit = _mm256_set1_ps(kE4M3Unit);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_mul_ps(load8(codes + i), unit));
  for (; i < n; ++i)
    out[i] = toFloat(codes[i]) * kE4M3Unit;
}
#endif // SITS_PATTN_X86

const Kernels *kernelsFor(Isa isa) {
#if SITS_PATTN_X86
  if (isa == Isa::kAvx512)
    return &kAvx512Kernels;
  if (isa == Isa::kAvx2)
    return &kAvx2Kernels;
#endif
  return isa == Isa::kScalar ? &kScalarKernels : nullptr;
}

//===----------------------------------------------------------------------===//
// Argument checks, the split into items, and the combination of chunks
//===----------------------------------------------------------------------===//

/// Below this many multiply-adds (2 * qHeads * headDim * the sum of the
/// queries' visible lengths), waking helpers costs more than it saves.
constexpr double kSerialWork = 32 * 1024;
/// Items enough to spread over the threads: with at least this many
/// (sequence, query, kv head), each is one item; with fewer, every chunk of
/// a query's context is an item of its own, and chunks shrink (to 64
/// positions at least) until there are this many items.
constexpr int64_t kMinItems = 32;

bool mulFits(int64_t a, int64_t b, int64_t *r) {
  return !__builtin_mul_overflow(a, b, r);
}

bool addFits(int64_t a, int64_t b, int64_t *r) {
  return !__builtin_add_overflow(a, b, r);
}

struct Call : Args {
  /// Derived (runAttention): qHeads / kvHeads, and tableWidth * blockSize,
  /// saturated.
  int64_t group, maxLen;
  /// kKivi: the pool's layout (validArgs), and the call's number.
  kivi::Layout kivi;
  uint64_t kiviCall = 0;
};

/// KIVI chunks are dequantized into per-thread scratch ([chunk][headDim]
/// K rows, then as many V rows) before the f32 kernels run: at most this
/// many positions, so that it stays in L2.
constexpr int64_t kKiviChunk = 128;

/// The offset of the last element of a [n0][n1][n2][inner] view with the
/// given strides (the innermost contiguous), if it fits.
bool lastFits(const int64_t (&n)[3], const int64_t (&stride)[3], int64_t inner,
              int64_t *last) {
  int64_t at = inner - 1;
  for (int i = 0; i < 3; ++i) {
    int64_t part;
    if (!mulFits(n[i] - 1, stride[i], &part) || !addFits(at, part, &at))
      return false;
  }
  *last = at;
  return true;
}

/// kKivi: the layout of a valid geometry (into c.kivi), whose pool has
/// an int64 size.
bool validKivi(Call &c) {
  int64_t bytes;
  return c.layer >= 0 && c.layer < c.numLayers &&
         kivi::Layout::make(c.numLayers, c.kvHeads, c.blockSize, c.headDim,
                            c.bits, &c.kivi,
                            static_cast<const uint8_t *>(c.pool)) &&
         mulFits(c.numBlocks, c.kivi.blockStride, &bytes);
}

bool validArgs(Call &c) {
  if (c.batch <= 0 || c.queries <= 0 || c.qHeads <= 0 || c.kvHeads <= 0 ||
      c.headDim <= 0 || c.blockSize <= 0 || c.numBlocks <= 0 ||
      c.tableWidth <= 0)
    return false;
  if (c.qHeads % c.kvHeads != 0)
    return false;
  if (!c.q || !c.pool || !c.tables || !c.contextLens || !c.out)
    return false;
  // A K or V row: headDim elements, or (int8, E4M3) headDim codes and a
  // 4-byte scale, not overlapping the next position's row.
  const bool scaled =
      c.format == Format::kI8Row || c.format == Format::kF8E4M3Row;
  const bool kivi = c.format == Format::kKivi;
  if (!scaled && !kivi && c.format != Format::kF32)
    return false;
  int64_t rowLen = c.headDim;
  if (kivi && !validKivi(c))
    return false;
  if (scaled && (!addFits(c.headDim, 4, &rowLen) ||
                 (c.blockSize > 1 && c.positionStride < rowLen)))
    return false;
  if (c.qBatchStride < 0 || c.qHeadStride < 0 || c.qTokenStride < 0 ||
      c.blockStride < 0 || c.keyOffset < 0 || c.valueOffset < 0 ||
      c.kvHeadStride < 0 || c.positionStride < 0 || c.tableStride < 0 ||
      c.outBatchStride < 0 || c.outHeadStride < 0 || c.outTokenStride < 0)
    return false;
  // Every element of q and out has an int64 offset.
  int64_t last;
  if (!lastFits({c.batch, c.qHeads, c.queries},
                {c.qBatchStride, c.qHeadStride, c.qTokenStride}, c.headDim,
                &last) ||
      !lastFits({c.batch, c.qHeads, c.queries},
                {c.outBatchStride, c.outHeadStride, c.outTokenStride},
                c.headDim, &last))
    return false;
  // Output rows that overlapped would be written by several threads: by
  // increasing stride, each (stride, extent) pair must step over all of
  // the rows inside it.
  {
    struct Dim {
      int64_t stride, extent;
    } dims[3] = {{c.outBatchStride, c.batch},
                 {c.outHeadStride, c.qHeads},
                 {c.outTokenStride, c.queries}};
    std::sort(dims, dims + 3,
              [](const Dim &a, const Dim &b) { return a.stride < b.stride; });
    int64_t inner = c.headDim;
    for (const Dim &d : dims) {
      if (d.extent == 1)
        continue;
      if (d.stride < inner || !mulFits(d.stride, d.extent, &inner))
        return false;
    }
  }
  // Sequence b's table row at b * tableStride, tableWidth entries.
  if (c.batch > 1 && c.tableStride < c.tableWidth)
    return false;
  if (!mulFits(c.batch - 1, c.tableStride, &last) ||
      !addFits(last, c.tableWidth, &last))
    return false;
  if (kivi)
    return true;
  // This layer's K and V rows (kvHeads x blockSize rows of rowLen) lie
  // inside a block, so that every read stays in [0, numBlocks * blockStride).
  int64_t headsSpan, positionsSpan, span;
  if (!mulFits(c.kvHeads - 1, c.kvHeadStride, &headsSpan) ||
      !mulFits(c.blockSize - 1, c.positionStride, &positionsSpan) ||
      !addFits(headsSpan, positionsSpan, &span) ||
      !addFits(span, rowLen, &span))
    return false;
  if (c.blockStride < span || c.keyOffset > c.blockStride - span ||
      c.valueOffset > c.blockStride - span)
    return false;
  int64_t poolLen;
  return mulFits(c.numBlocks, c.blockStride, &poolLen);
}

/// How many positions query s of sequence b sees: the query sits at
/// position contextLens[b] - queries + s and sees it and all before it.
int64_t lengthOf(const Call &c, int64_t b, int64_t s) {
  const int64_t len = c.contextLens[b], back = c.queries - s; // back >= 1
  if (len < back)
    return 0;
  return std::min(len - back + 1, c.maxLen);
}

struct Plan {
  const Call *c;
  const Kernels *kernels;
  /// The kernels' scores and values for the pool's format.
  PassFn scores, values;
  /// Each query's context is cut into chunks of `chunk` positions, and its
  /// chunks into parts of `partChunks` consecutive chunks: one item per
  /// part, `parts` items per (sequence, query, kv head), of which those
  /// past the query's last part do nothing.
  int64_t chunk, parts, partChunks;
  /// For queries cut in several parts: per (b, s, h, part), the
  /// unnormalized sum of p * V ([headDim]) and (max, sum).
  float *partAcc, *partStats;
};

/// How many parts of the plan a query that sees `len` positions has.
int64_t partsOf(const Plan &plan, int64_t len) {
  const int64_t chunks = (len + plan.chunk - 1) / plan.chunk;
  return (chunks + plan.partChunks - 1) / plan.partChunks;
}

/// The element (f32 or byte) offsets in the pool of the K rows of positions
/// [t0, t0 + n) of sequence b, kv head g, block by block through the table.
void chunkRows(const Call &c, int64_t b, int64_t g, int64_t t0, int64_t n,
               int64_t *rows) {
  const int32_t *table = c.tables + b * c.tableStride;
  int64_t m = t0 / c.blockSize, r = t0 % c.blockSize;
  const int64_t headBase = c.keyOffset + g * c.kvHeadStride;
  for (int64_t i = 0; i < n;) {
    int64_t blk = table[m];
    if (blk < 0 || blk >= c.numBlocks)
      blk = 0;
    int64_t base = blk * c.blockStride + headBase;
    int64_t take = std::min(n - i, c.blockSize - r);
    for (int64_t e = 0; e < take; ++e)
      rows[i + e] = base + (r + e) * c.positionStride;
    i += take;
    ++m;
    r = 0;
  }
}

/// Int8 / E4M3 rows: the scales of the n K rows at `rows` and of their V
/// rows (E4M3: times the 2^8 its widened codes are short of).
void chunkScales(const Call &c, const int64_t *rows, int64_t n, float *kScale,
                 float *vScale) {
  const char *pool = static_cast<const char *>(c.pool) + c.headDim;
  const int64_t vDelta = c.valueOffset - c.keyOffset;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(&kScale[i], pool + rows[i], sizeof(float));
    std::memcpy(&vScale[i], pool + rows[i] + vDelta, sizeof(float));
  }
  if (c.format == Format::kF8E4M3Row)
    for (int64_t i = 0; i < n; ++i) {
      kScale[i] *= kE4M3Unit;
      vScale[i] *= kE4M3Unit;
    }
}

/// KIVI: positions [t0, t0 + n) of sequence b, kv head g, as f32 rows: K
/// at k[i * headDim], V at v[i * headDim]; from the quantized slab of a
/// full block, from the tail of the block being filled.
void kiviChunk(const Call &c, int64_t b, int64_t g, int64_t t0, int64_t n,
               float *k, float *v, int lanes) {
  const kivi::Layout &l = c.kivi;
  const int32_t *table = c.tables + b * c.tableStride;
  const int64_t bs = c.blockSize, D = c.headDim, len = c.contextLens[b];
  const auto *pool = static_cast<const uint8_t *>(c.pool);
  for (int64_t i = 0; i < n;) {
    const int64_t t = t0 + i, m = t / bs, r = t % bs;
    const int64_t take = std::min(n - i, bs - r);
    int64_t blk = table[m];
    if (blk < 0 || blk >= c.numBlocks)
      blk = 0;
    // A full block is read from its slab, unless this call filled it:
    // then its tail still holds the rows unquantized (the new tokens of a
    // prefill attend over the K/V they computed).
    const bool full = (m + 1) * bs <= len;
    if (full && ((m + 1) * bs <= len - c.queries ||
                 !kivi::tailRetained(l, pool, blk, c.layer))) {
      kivi::dequantKeys(l, pool, blk, c.layer, g, r, r + take, k + i * D,
                        lanes);
      kivi::dequantValues(l, pool, blk, c.layer, g, r, r + take, v + i * D,
                          lanes);
    } else {
      const float *rows =
          reinterpret_cast<const float *>(pool + l.tail(blk, c.layer));
      std::memcpy(k + i * D, rows + l.tailRow(0, g, r),
                  size_t(take * D) * sizeof(float));
      std::memcpy(v + i * D, rows + l.tailRow(1, g, r),
                  size_t(take * D) * sizeof(float));
    }
    i += take;
  }
}

/// KIVI chunks' rows, per thread.
thread_local std::vector<float> tKivi;

/// What the kernels read of positions [t0, t0 + n) of (b, g): their rows'
/// offsets in the pool (and the scales of int8 / E4M3 rows), or for KIVI
/// the rows dequantized into tKivi (K rows, then V rows kKiviChunk rows
/// on), which `pool` then points at. tKivi must hold 2 * kKiviChunk rows.
void loadChunk(const Call &c, int64_t b, int64_t g, int64_t t0, int64_t n,
               int lanes, int64_t *rows, float *kScale, float *vScale) {
  if (c.format == Format::kKivi) {
    kiviChunk(c, b, g, t0, n, tKivi.data(),
              tKivi.data() + kKiviChunk * c.headDim, lanes);
    for (int64_t i = 0; i < n; ++i)
      rows[i] = i * c.headDim;
    return;
  }
  chunkRows(c, b, g, t0, n, rows);
  if (c.format != Format::kF32)
    chunkScales(c, rows, n, kScale, vScale);
}

/// A KIVI call with several queries per sequence (prefill): the positions
/// [0, rows) of one (sequence, kv head) already dequantized by this thread,
/// K rows then V rows ([capacity][headDim] each), which the same thread's
/// later queries of that sequence and head read instead of dequantizing
/// them again (each query sees the positions before it: a prefill of S
/// tokens would otherwise widen S^2 / 2 rows).
struct KiviContext {
  uint64_t call = 0;
  int64_t b = -1, g = -1, rows = 0, capacity = 0;
  std::vector<float> data;
};
thread_local KiviContext tKiviContext;
/// Contexts cached up to this size (floats); longer ones take the chunks.
constexpr int64_t kKiviContextFloats = int64_t(4) << 20;
/// Numbers the KIVI calls: a cache is for its own call (the pool changes
/// between calls).
std::atomic<uint64_t> gKiviCalls{0};

/// An item that walks several chunks: per pass, one chunk's sum of p * V
/// ([kMaxPassHeads][headDim]), then per head of the group the running max
/// and sum. Kept per thread (nothing an item calls runs other tasks).
thread_local std::vector<float> tWalk;

void runItem(void *context, int64_t item) {
  const Plan &plan = *static_cast<const Plan *>(context);
  const Call &c = *plan.c;
  const int64_t part = item % plan.parts;
  int64_t rest = item / plan.parts;
  int64_t g, s, b;
  // The latest queries (which see the most positions) first, so that the
  // shared counter ends on the shortest. KIVI: the queries of a (sequence,
  // kv head) are consecutive items, so that a thread's dequantized context
  // serves the next ones.
  if (c.format == Format::kKivi) {
    s = c.queries - 1 - rest % c.queries;
    rest /= c.queries;
    g = rest % c.kvHeads;
    b = rest / c.kvHeads;
  } else {
    g = rest % c.kvHeads;
    rest /= c.kvHeads;
    s = c.queries - 1 - rest % c.queries;
    b = rest / c.queries;
  }
  const int64_t len = lengthOf(c, b, s);
  const int64_t head0 = g * c.group;
  float *const outRow =
      c.out + b * c.outBatchStride + s * c.outTokenStride; // + h * head stride
  if (len == 0) {
    if (part == 0)
      for (int64_t j = 0; j < c.group; ++j)
        std::fill_n(outRow + (head0 + j) * c.outHeadStride, c.headDim, 0.f);
    return;
  }
  const int64_t parts = partsOf(plan, len);
  if (part >= parts)
    return;
  const int64_t chunks = (len + plan.chunk - 1) / plan.chunk;
  const int64_t c0 = part * plan.partChunks;
  const int64_t c1 = std::min(chunks, c0 + plan.partChunks);
  // Head j of the group sums p * V at acc + j * accStride: its output row
  // when the query has one part, else the part's slot, with (max, sum) at
  // stats + j * statsStride.
  const bool direct = parts == 1;
  float *acc, *stats = nullptr;
  int64_t accStride, statsStride = 0;
  if (direct) {
    acc = outRow + head0 * c.outHeadStride;
    accStride = c.outHeadStride;
  } else {
    int64_t slot = ((b * c.queries + s) * c.qHeads + head0) * plan.parts + part;
    acc = plan.partAcc + slot * c.headDim;
    accStride = plan.parts * c.headDim;
    stats = plan.partStats + slot * 2;
    statsStride = plan.parts * 2;
  }
  // Several chunks: each after the first is summed into chunkAcc, then
  // folded into acc with the running (max, sum), as combine() does.
  const bool walk = c1 - c0 > 1;
  float *chunkAcc = nullptr, *runMax = nullptr, *runSum = nullptr;
  if (walk) {
    const size_t accLen =
        size_t(std::min(c.group, kMaxPassHeads)) * size_t(c.headDim);
    const size_t need = accLen + 2 * size_t(c.group);
    if (tWalk.size() < need)
      tWalk.resize(need);
    chunkAcc = tWalk.data();
    runMax = chunkAcc + accLen;
    runSum = runMax + c.group;
  }

  int64_t rows[kMaxChunk];
  float kScale[kMaxChunk], vScale[kMaxChunk];
  const bool kiviPool = c.format == Format::kKivi;
  // The pool the passes read (KIVI: the chunk's rows, dequantized).
  const void *poolData = c.pool;
  int64_t vDelta = c.valueOffset - c.keyOffset;
  if (kiviPool) {
    const size_t need = size_t(2 * kKiviChunk * c.headDim);
    if (tKivi.size() < need)
      tKivi.resize(need);
    poolData = tKivi.data();
    vDelta = kKiviChunk * c.headDim;
  }
  alignas(64) float scores[kMaxPassHeads * kMaxChunk];
  float maxes[kMaxPassHeads], sums[kMaxPassHeads], post[kMaxPassHeads];
  const int lanes = plan.kernels->isa == Isa::kAvx512 ? 16
                    : plan.kernels->isa == Isa::kAvx2 ? 8
                                                      : 0;
  KiviContext *cached = nullptr;
  if (kiviPool && c.queries > 1) {
    // The whole context of (b, g) this call reads: cached when small enough.
    const int64_t capacity = std::min<int64_t>(c.contextLens[b], c.maxLen);
    KiviContext &k = tKiviContext;
    if (2 * capacity * c.headDim <= kKiviContextFloats) {
      if (k.call != c.kiviCall || k.b != b || k.g != g ||
          k.capacity < capacity) {
        k.call = c.kiviCall;
        k.b = b;
        k.g = g;
        k.rows = 0;
        k.capacity = capacity;
        if (k.data.size() < size_t(2 * capacity * c.headDim))
          k.data.resize(size_t(2 * capacity * c.headDim));
      }
      cached = &k;
      poolData = k.data.data();
      vDelta = k.capacity * c.headDim;
    }
  }
  for (int64_t ci = c0; ci < c1; ++ci) {
    const int64_t t0 = ci * plan.chunk;
    const int64_t n = std::min(len, t0 + plan.chunk) - t0;
    if (cached) {
      if (cached->rows < t0 + n) {
        float *k = cached->data.data() + cached->rows * c.headDim;
        kiviChunk(c, b, g, cached->rows, t0 + n - cached->rows, k, k + vDelta,
                  lanes);
        cached->rows = t0 + n;
      }
      for (int64_t i = 0; i < n; ++i)
        rows[i] = (t0 + i) * c.headDim;
    } else {
      loadChunk(c, b, g, t0, n, lanes, rows, kScale, vScale);
    }
    const bool first = ci == c0;
    for (int64_t j0 = 0; j0 < c.group; j0 += kMaxPassHeads) {
      const int64_t heads = std::min(kMaxPassHeads, c.group - j0);
      const int64_t h = head0 + j0;
      Pass pass{c.q + b * c.qBatchStride + h * c.qHeadStride +
                    s * c.qTokenStride,
                c.qHeadStride,
                poolData,
                rows,
                vDelta,
                kScale,
                vScale,
                n,
                heads,
                c.headDim,
                c.scale,
                scores,
                maxes,
                sums,
                first ? acc + j0 * accStride : chunkAcc,
                first ? accStride : c.headDim,
                post};
      plan.scores(pass);
      plan.kernels->softmax(pass);
      // One chunk straight to the output: normalized there.
      const bool normalize = direct && !walk;
      for (int64_t j = 0; j < heads; ++j)
        post[j] = normalize ? 1.f / sums[j] : 1.f;
      plan.values(pass);
      if (!walk) {
        if (!direct)
          for (int64_t j = 0; j < heads; ++j) {
            stats[(j0 + j) * statsStride] = maxes[j];
            stats[(j0 + j) * statsStride + 1] = sums[j];
          }
        continue;
      }
      for (int64_t j = 0; j < heads; ++j) {
        float &m = runMax[j0 + j], &l = runSum[j0 + j];
        if (first) {
          m = maxes[j];
          l = sums[j];
          continue;
        }
        // acc e^(m - M) + chunk e^(maxes[j] - M), M the larger max.
        const float top = std::max(m, maxes[j]);
        const float keep = std::exp(m - top), add = std::exp(maxes[j] - top);
        float *a = acc + (j0 + j) * accStride;
        const float *x = chunkAcc + j * c.headDim;
        for (int64_t d = 0; d < c.headDim; ++d)
          a[d] = a[d] * keep + x[d] * add;
        l = l * keep + sums[j] * add;
        m = top;
      }
    }
  }
  if (!walk)
    return;
  for (int64_t j = 0; j < c.group; ++j) {
    if (direct) {
      float *a = acc + j * accStride;
      const float inv = 1.f / runSum[j];
      for (int64_t d = 0; d < c.headDim; ++d)
        a[d] *= inv;
    } else {
      stats[j * statsStride] = runMax[j];
      stats[j * statsStride + 1] = runSum[j];
    }
  }
}

//===----------------------------------------------------------------------===//
// Attention weights into an attached sink (score-based KV eviction)
//===----------------------------------------------------------------------===//

struct SinkEntry {
  const char *begin, *end;
  AttentionScores sink;
};
std::mutex gSinksMutex;
std::vector<SinkEntry> gSinks;
/// gSinks.size(): calls look no further while it is 0.
std::atomic<int64_t> gSinkCount{0};

bool findSink(const void *pool, AttentionScores *out) {
  if (gSinkCount.load(std::memory_order_acquire) == 0)
    return false;
  const char *p = static_cast<const char *>(pool);
  std::lock_guard<std::mutex> lock(gSinksMutex);
  for (const SinkEntry &e : gSinks)
    if (p >= e.begin && p < e.end) {
      *out = e.sink;
      return true;
    }
  return false;
}

struct ScorePlan {
  const Plan *plan;
  AttentionScores sink;
};

/// Per thread: one query's e^(score - chunk max) over its context,
/// [group][len], then per head and chunk the chunk's max and sum.
thread_local std::vector<float> tScoreRows, tScoreStats;

/// Item b * kvHeads + g: the observed queries of sequence b, kv head g.
/// One writer per (b, g) entry of the sink.
void scoreItem(void *context, int64_t item) {
  const ScorePlan &sp = *static_cast<const ScorePlan *>(context);
  const Plan &plan = *sp.plan;
  const Call &c = *plan.c;
  const AttentionScores &sink = sp.sink;
  const int64_t b = item / c.kvHeads, g = item % c.kvHeads;
  if (b >= sink.rows)
    return;
  const bool kiviPool = c.format == Format::kKivi;
  const int64_t chunk = kiviPool ? kKiviChunk : kMaxChunk;
  const int lanes = plan.kernels->isa == Isa::kAvx512 ? 16
                    : plan.kernels->isa == Isa::kAvx2 ? 8
                                                      : 0;
  const void *poolData = c.pool;
  if (kiviPool) {
    const size_t need = size_t(2 * kKiviChunk * c.headDim);
    if (tKivi.size() < need)
      tKivi.resize(need);
    poolData = tKivi.data();
  }
  int64_t rows[kMaxChunk];
  float kScale[kMaxChunk], vScale[kMaxChunk];
  alignas(64) float scores[kMaxPassHeads * kMaxChunk];
  float maxes[kMaxPassHeads], sums[kMaxPassHeads];
  float *out = sink.out + b * sink.positions * sink.kv_heads + g;
  const int64_t observe =
      sink.row_observe
          ? std::clamp<int64_t>(sink.row_observe[b], 0, sink.observe)
          : sink.observe;
  for (int64_t s = std::max<int64_t>(0, c.queries - observe); s < c.queries;
       ++s) {
    const int64_t len = lengthOf(c, b, s);
    if (len == 0)
      continue;
    const int64_t chunks = (len + chunk - 1) / chunk;
    if (tScoreRows.size() < size_t(c.group * len))
      tScoreRows.resize(size_t(c.group * len));
    if (tScoreStats.size() < size_t(2 * c.group * chunks))
      tScoreStats.resize(size_t(2 * c.group * chunks));
    float *weights = tScoreRows.data();
    // [group][chunks] maxes, then sums.
    float *chunkMax = tScoreStats.data(),
          *chunkSum = chunkMax + c.group * chunks;
    for (int64_t t0 = 0; t0 < len; t0 += chunk) {
      const int64_t n = std::min(chunk, len - t0);
      loadChunk(c, b, g, t0, n, lanes, rows, kScale, vScale);
      for (int64_t j0 = 0; j0 < c.group; j0 += kMaxPassHeads) {
        const int64_t heads = std::min(kMaxPassHeads, c.group - j0);
        Pass pass{};
        pass.q = c.q + b * c.qBatchStride + (g * c.group + j0) * c.qHeadStride +
                 s * c.qTokenStride;
        pass.qHeadStride = c.qHeadStride;
        pass.pool = poolData;
        pass.rows = rows;
        pass.kScale = kScale;
        pass.vScale = vScale;
        pass.n = n;
        pass.heads = heads;
        pass.headDim = c.headDim;
        pass.scale = c.scale;
        pass.scores = scores;
        pass.maxes = maxes;
        pass.sums = sums;
        // The attention's own kernels: scores, then e^(score - chunk max).
        plan.scores(pass);
        plan.kernels->softmax(pass);
        const int64_t ci = t0 / chunk;
        for (int64_t j = 0; j < heads; ++j) {
          std::copy_n(scores + j * kMaxChunk, n, weights + (j0 + j) * len + t0);
          chunkMax[(j0 + j) * chunks + ci] = maxes[j];
          chunkSum[(j0 + j) * chunks + ci] = sums[j];
        }
      }
    }
    // Softmax over the whole context: chunk c's entries times
    // e^(max_c - M) / sum_i e^(max_i - M) sum_i, M the largest max; the
    // group's weights summed into the sink.
    const int64_t kept = std::min(len, sink.positions);
    for (int64_t j = 0; j < c.group; ++j) {
      const float *m = chunkMax + j * chunks, *l = chunkSum + j * chunks;
      const float top = *std::max_element(m, m + chunks);
      double total = 0;
      for (int64_t ci = 0; ci < chunks; ++ci)
        total += double(l[ci]) * std::exp(double(m[ci] - top));
      const float *x = weights + j * len;
      for (int64_t ci = 0; ci * chunk < kept; ++ci) {
        const float f = float(std::exp(double(m[ci] - top)) / total);
        const int64_t end = std::min(kept, (ci + 1) * chunk);
        for (int64_t t = ci * chunk; t < end; ++t)
          out[t * sink.kv_heads] += x[t] * f;
      }
    }
  }
}

/// Adds the call's attention weights to the pool's sink, if one is
/// attached and matches the call's kv heads.
void scoreCall(const Plan &plan) {
  const Call &c = *plan.c;
  ScorePlan sp{&plan, {}};
  if (!findSink(c.pool, &sp.sink) || sp.sink.kv_heads != c.kvHeads)
    return;
  int64_t items;
  if (!mulFits(c.batch, c.kvHeads, &items))
    return;
  sitsRuntimeParallelFor(&scoreItem, &sp, items);
}

/// KIVI: empties the tails of this layer's blocks that this call's writes
/// filled (the full blocks that hold a sequence's new positions), once
/// every read of them is done.
void releaseFilledTails(const Call &c) {
  const kivi::Layout &l = c.kivi;
  auto *pool = static_cast<uint8_t *>(const_cast<void *>(c.pool));
  for (int64_t b = 0; b < c.batch; ++b) {
    const int64_t len = std::min<int64_t>(c.contextLens[b], c.maxLen);
    if (len <= 0)
      continue;
    const int32_t *table = c.tables + b * c.tableStride;
    for (int64_t m = std::max<int64_t>(0, len - c.queries) / c.blockSize;
         m < len / c.blockSize; ++m) {
      const int64_t blk = table[m];
      if (blk > 0 && blk < c.numBlocks &&
          kivi::tailRetained(l, pool, blk, c.layer))
        kivi::releaseTail(l, pool, blk, c.layer);
    }
  }
}

/// out = sum_i e^(m_i - M) acc_i / sum_i e^(m_i - M) l_i over the parts i
/// of the queries cut in several.
void combine(const Plan &plan) {
  const Call &c = *plan.c;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < c.queries; ++s) {
      int64_t parts = partsOf(plan, lengthOf(c, b, s));
      if (parts <= 1)
        continue;
      for (int64_t h = 0; h < c.qHeads; ++h) {
        int64_t slot = ((b * c.queries + s) * c.qHeads + h) * plan.parts;
        const float *stats = plan.partStats + slot * 2;
        float m = stats[0];
        for (int64_t i = 1; i < parts; ++i)
          m = std::max(m, stats[i * 2]);
        float total = 0.f;
        for (int64_t i = 0; i < parts; ++i)
          total += std::exp(stats[i * 2] - m) * stats[i * 2 + 1];
        const float inv = 1.f / total;
        float *dst = c.out + b * c.outBatchStride + h * c.outHeadStride +
                     s * c.outTokenStride;
        const float *acc = plan.partAcc + slot * c.headDim;
        for (int64_t i = 0; i < parts; ++i) {
          const float *a = acc + i * c.headDim;
          const float w = std::exp(stats[i * 2] - m) * inv;
          if (i == 0)
            for (int64_t d = 0; d < c.headDim; ++d)
              dst[d] = w * a[d];
          else
            for (int64_t d = 0; d < c.headDim; ++d)
              dst[d] += w * a[d];
        }
      }
    }
}

/// The parts' scratch, kept per thread between calls (a fresh allocation
/// of this size would fault in its pages on every call). A call made while
/// the thread's own is in use (this thread ran another thread's task while
/// waiting for its items) allocates its own.
struct Scratch {
  std::vector<float> data;
  bool busy = false;
};
thread_local Scratch tScratch;
/// Larger scratch is not kept after the call.
constexpr size_t kKeptScratch = size_t(16) << 20; // floats

void runAttention(const Kernels &kernels, const Call &call) {
  // batch == 0 or queries == 0: nothing to do.
  Call c = call;
  if (!validArgs(c))
    return;
  if (c.format == Format::kKivi)
    c.kiviCall = ++gKiviCalls;
  c.group = c.qHeads / c.kvHeads;
  c.maxLen = c.tableWidth > std::numeric_limits<int64_t>::max() / c.blockSize
                 ? std::numeric_limits<int64_t>::max()
                 : c.tableWidth * c.blockSize;
  const Kernels *kern = &kernels;
  while (c.headDim % kern->dimMultiple != 0)
    kern = kern->narrower;

  int64_t longest = 0;
  double total = 0;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < c.queries; ++s) {
      int64_t len = lengthOf(c, b, s);
      longest = std::max(longest, len);
      total += double(len);
    }
  // Depends on the shapes and lengths only: the same bits on any number of
  // threads. (batch * queries * kvHeads fits: batch * queries * qHeads
  // does, the output rows do not overlap and their offsets fit.)
  const int64_t perPart = c.batch * c.queries * c.kvHeads;
  auto chunksOf = [&](int64_t ch) {
    return std::max<int64_t>(1, (longest + ch - 1) / ch);
  };
  const bool i8 = c.format == Format::kI8Row,
             f8 = c.format == Format::kF8E4M3Row;
  Plan plan{&c,
            kern,
            i8   ? kern->scoresI8
            : f8 ? kern->scoresF8
                 : kern->scores,
            i8   ? kern->valuesI8
            : f8 ? kern->valuesF8
                 : kern->values,
            c.format == Format::kKivi ? kKiviChunk : kMaxChunk,
            1,
            1,
            nullptr,
            nullptr};
  if (perPart >= kMinItems) {
    // Enough items uncut (prefill, or a large decode batch): each walks
    // all the chunks of its query, no scratch.
    plan.partChunks = chunksOf(plan.chunk);
  } else {
    // Few (decode with few sequences): every chunk is a part, and chunks
    // shrink (to 64 positions at least) until there are kMinItems items.
    // Scratch: fewer than kMinItems * group rows of parts.
    auto itemsOf = [&](int64_t ch) {
      int64_t items;
      return mulFits(perPart, chunksOf(ch), &items)
                 ? items
                 : std::numeric_limits<int64_t>::max();
    };
    while (plan.chunk > 64 && itemsOf(plan.chunk) < kMinItems)
      plan.chunk /= 2;
    plan.parts = chunksOf(plan.chunk);
  }
  int64_t items = 0, slots = 0, need = 0;
  if (!mulFits(perPart, plan.parts, &items) ||
      (plan.parts > 1 &&
       (!mulFits(c.batch * c.queries * c.qHeads, plan.parts, &slots) ||
        !mulFits(slots, c.headDim + 2, &need))))
    return;

  std::vector<float> own;
  Scratch *kept = nullptr;
  if (plan.parts > 1) {
    std::vector<float> *buf = &own;
    if (!tScratch.busy && size_t(need) <= kKeptScratch) {
      kept = &tScratch;
      kept->busy = true;
      buf = &kept->data;
    }
    if (buf->size() < size_t(need))
      buf->resize(size_t(need));
    plan.partAcc = buf->data();
    plan.partStats = buf->data() + size_t(slots) * size_t(c.headDim);
  }

  if (2.0 * double(c.qHeads) * double(c.headDim) * total < kSerialWork) {
    for (int64_t i = 0; i < items; ++i)
      runItem(&plan, i);
  } else {
    sitsRuntimeParallelFor(&runItem, &plan, items);
  }
  if (plan.parts > 1)
    combine(plan);
  if (kept)
    kept->busy = false;
  scoreCall(plan);
  if (c.format == Format::kKivi)
    releaseFilledTails(c);
}

/// The exported call's arguments on `kernels` (the derived fields of Call
/// are filled in by runAttention).
void attend(const Kernels &kernels, const Args &args) {
  Call c{};
  static_cast<Args &>(c) = args;
  runAttention(kernels, c);
}

} // namespace

const char *isaName(Isa isa) {
  switch (isa) {
  case Isa::kScalar:
    return "scalar";
  case Isa::kAvx2:
    return "avx2";
  case Isa::kAvx512:
    return "avx512";
  }
  return "?";
}

bool isaAvailable(Isa isa) {
  if (!kernelsFor(isa))
    return false;
  if (isa == Isa::kScalar)
    return true;
  const HostCpuInfo &cpu = hostCpuInfo();
  auto has = [&](const char *f) { return cpu.hasFeature(f).value_or(false); };
  // AVX-512 falls back on AVX2 for head sizes that are multiples of 8 only.
  // F16C (every AVX2 CPU has it) widens the E4M3 codes.
  bool avx2 = has("avx2") && has("fma") && has("f16c");
  return isa == Isa::kAvx2 ? avx2 : avx2 && has("avx512f");
}

Isa selectedIsa() {
  static const Isa best = [] {
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2})
      if (isaAvailable(isa))
        return isa;
    return Isa::kScalar;
  }();
  return best;
}

bool run(Isa isa, const Args &args) {
  if (!isaAvailable(isa))
    return false;
  attend(*kernelsFor(isa), args);
  return true;
}

bool decodeF8E4M3(Isa isa, const uint8_t *codes, int64_t n, float *out) {
  if (!isaAvailable(isa))
    return false;
  const E4M3 *x = reinterpret_cast<const E4M3 *>(codes);
#if SITS_PATTN_X86
  if (isa == Isa::kAvx512) {
    avx512Decode(x, n, out);
    return true;
  }
  if (isa == Isa::kAvx2) {
    avx2Decode(x, n, out);
    return true;
  }
#endif
  for (int64_t i = 0; i < n; ++i)
    out[i] = toFloat(x[i]) * kE4M3Unit;
  return true;
}

} // namespace sits::runtime::pattn

namespace sits::runtime {

Status attachAttentionScores(const void *pool, int64_t bytes,
                             const AttentionScores &sink) {
  using namespace pattn;
  if (!pool || bytes <= 0)
    return Status(StatusCode::kInvalidArgument,
                  "attention scores: the pool range is empty");
  if (!sink.out || sink.rows <= 0 || sink.positions <= 0 ||
      sink.kv_heads <= 0 || sink.observe <= 0)
    return Status(StatusCode::kInvalidArgument,
                  "attention scores: the sink needs an array and rows, "
                  "positions, kv_heads and observe >= 1");
  int64_t floats;
  if (!mulFits(sink.rows, sink.positions, &floats) ||
      !mulFits(floats, sink.kv_heads, &floats))
    return Status(StatusCode::kInvalidArgument,
                  "attention scores: the sink's size overflows");
  const char *begin = static_cast<const char *>(pool);
  std::lock_guard<std::mutex> lock(gSinksMutex);
  for (const SinkEntry &e : gSinks)
    if (begin < e.end && e.begin < begin + bytes)
      return Status(StatusCode::kInvalidArgument,
                    "attention scores: the pool already has a sink");
  gSinks.push_back({begin, begin + bytes, sink});
  gSinkCount.store(int64_t(gSinks.size()), std::memory_order_release);
  return Status::OK();
}

void detachAttentionScores(const void *pool) {
  using namespace pattn;
  std::lock_guard<std::mutex> lock(gSinksMutex);
  gSinks.erase(
      std::remove_if(gSinks.begin(), gSinks.end(),
                     [&](const SinkEntry &e) { return e.begin == pool; }),
      gSinks.end());
  gSinkCount.store(int64_t(gSinks.size()), std::memory_order_release);
}

} // namespace sits::runtime

// The exported entries differ only in the pool's element type and format.
#define SITS_PATTN_ENTRY(NAME, POOL_TYPE, FORMAT)                              \
  SITS_PAGED_ATTENTION_SIGNATURE(NAME, POOL_TYPE) {                            \
    using namespace sits::runtime::pattn;                                      \
    static const Kernels *const kernels = kernelsFor(selectedIsa());           \
    attend(*kernels, Args{batch,                                               \
                          queries,                                             \
                          qHeads,                                              \
                          kvHeads,                                             \
                          headDim,                                             \
                          q,                                                   \
                          qBatchStride,                                        \
                          qHeadStride,                                         \
                          qTokenStride,                                        \
                          pool,                                                \
                          numBlocks,                                           \
                          blockStride,                                         \
                          keyOffset,                                           \
                          valueOffset,                                         \
                          kvHeadStride,                                        \
                          blockSize,                                           \
                          positionStride,                                      \
                          tables,                                              \
                          tableWidth,                                          \
                          tableStride,                                         \
                          contextLens,                                         \
                          scale,                                               \
                          out,                                                 \
                          outBatchStride,                                      \
                          outHeadStride,                                       \
                          outTokenStride,                                      \
                          FORMAT});                                            \
  }

SITS_PATTN_ENTRY(sitsRuntimePagedAttention, float,
                 sits::runtime::pattn::Format::kF32)
SITS_PATTN_ENTRY(sitsRuntimePagedAttentionI8, int8_t,
                 sits::runtime::pattn::Format::kI8Row)
SITS_PATTN_ENTRY(sitsRuntimePagedAttentionF8E4M3, uint8_t,
                 sits::runtime::pattn::Format::kF8E4M3Row)

extern "C" void sitsRuntimePagedAttentionKivi(
    int64_t batch, int64_t queries, int64_t qHeads, int64_t kvHeads,
    int64_t headDim, const float *q, int64_t qBatchStride, int64_t qHeadStride,
    int64_t qTokenStride, const uint8_t *pool, int64_t numBlocks,
    int64_t numLayers, int64_t layer, int64_t blockSize, int64_t bits,
    const int32_t *tables, int64_t tableWidth, int64_t tableStride,
    const int32_t *contextLens, float scale, float *out, int64_t outBatchStride,
    int64_t outHeadStride, int64_t outTokenStride) {
  using namespace sits::runtime::pattn;
  static const Kernels *const kernels = kernelsFor(selectedIsa());
  Args args{};
  args.batch = batch;
  args.queries = queries;
  args.qHeads = qHeads;
  args.kvHeads = kvHeads;
  args.headDim = headDim;
  args.q = q;
  args.qBatchStride = qBatchStride;
  args.qHeadStride = qHeadStride;
  args.qTokenStride = qTokenStride;
  args.pool = pool;
  args.numBlocks = numBlocks;
  args.blockSize = blockSize;
  args.tables = tables;
  args.tableWidth = tableWidth;
  args.tableStride = tableStride;
  args.contextLens = contextLens;
  args.scale = scale;
  args.out = out;
  args.outBatchStride = outBatchStride;
  args.outHeadStride = outHeadStride;
  args.outTokenStride = outTokenStride;
  args.format = Format::kKivi;
  args.numLayers = numLayers;
  args.layer = layer;
  args.bits = bits;
  attend(*kernels, args);
}
