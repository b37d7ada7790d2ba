//===- qdot.cpp - Quantized matmul with int8 activations ------------------===//
//
// `sitsRuntimeQDot` computes y = (xq * sx) x (code * ws) for int8 activation
// codes xq (per row and group scales sx) and 4- or 8-bit weight codes (per
// column or per group scales ws), the integer dot products of llama.cpp's
// q4_0 x q8_0. Compiled code calls it (sits-cpu-lower-ukernels) because LLVM
// does not turn the generic loops into VNNI code that runs at memory
// bandwidth, which decode (one row) needs.
//
// Weights come pre-packed (sits-cpu-pack-weights) in 16-column blocks, 64
// bytes per block and 4 (8-bit) or 8 (4-bit) k values, as unsigned codes
// (code + 128, code + 8): one load is one u8 operand of `vpdpbusd` for 16
// columns. The offset is removed exactly with the row's sum of xq per group.
//
// Four paths, picked once per process: AMX-INT8 (tile products for whole
// 16-row blocks, i.e. prefill; VNNI for the other rows), AVX-512 VNNI, AVX2
// (maddubs: on u8 nibbles for 4 bits; for 8 bits with the codes' signs
// moved onto the activations, as u8 * s8 would saturate) and portable C++.
// The integer sums are exact everywhere (groups up to 2^16) and the float
// part is one fixed sequence of roundings (see ARTIFACT.md), so every path
// gives the same bits: results must not depend on the CPU the model runs
// on. This file is compiled with -ffp-contract=off for that.
//
// Work is split into (8-row block, column chunk) items on the worker pool
// (32-row blocks on AMX).
//
//===----------------------------------------------------------------------===//
#include "qdot.h"

#include "worker_pool.h"

#include "sits/runtime/host.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SITS_QDOT_X86 1
#include <immintrin.h>
#define SITS_QDOT_VNNI                                                         \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))
#define SITS_QDOT_AVX2 __attribute__((target("avx2,fma")))
// AMX intrinsics in target attributes: GCC 11, Clang 12. Linux lends tile
// state to processes that ask (other systems: no AMX path).
#if defined(__linux__) &&                                                      \
    (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)
#define SITS_QDOT_AMX_BUILD 1
#define SITS_QDOT_AMX                                                          \
  __attribute__((                                                              \
      target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni")))
#include <sys/syscall.h>
#include <unistd.h>
#else
#define SITS_QDOT_AMX_BUILD 0
#endif
#else
#define SITS_QDOT_X86 0
#define SITS_QDOT_AMX_BUILD 0
#endif

#define SITS_QDOT_UNROLL _Pragma("GCC unroll 16")

extern "C" void sitsRuntimeParallelFor(void (*)(void *, int64_t), void *,
                                       int64_t);

namespace sits::runtime::qdot {
namespace {

struct Problem {
  int bits;
  int64_t m, n, k, group, groups;
  const int8_t *xq;
  int64_t xqStride;
  const float *sx;
  int64_t sxStride;
  const uint8_t *w;
  /// Bytes of one 16-column block: 64 per 4 (8-bit) or 8 (4-bit) k values.
  int64_t blockBytes;
  const float *ws;
  int64_t wsStride;
  float *y;
  int64_t yStride;
  /// For the SIMD tiles, per group and row ([groups][m], so that a tile
  /// finds its rows' values at one address): sx, and -offset * (sum of xq
  /// over the group), where the integer sums start to remove the weights'
  /// offset (nullptr where there is none).
  const float *sxT;
  const int32_t *starts;
  /// AMX: k values per tile product, the largest multiple of 4 (8 bits) or
  /// 8 (4 bits) up to 64 that divides group.
  int64_t tileK;
  /// Whether weights are prefetched into L2 rather than L1 (prefetchAhead).
  bool prefetchIntoL2;
};

/// Computes rows [row, row + R) x 16-column blocks [blk, blk + B) for the
/// R and B it was instantiated for.
using TileFn = void (*)(const Problem &, int64_t row, int64_t blk);
using StartsFn = void (*)(const Problem &, int32_t *starts);

struct Kernels {
  Isa isa;
  int maxRows;
  /// [bits == 8]: largest B for R = 1..maxRows (register budget).
  int maxBlocks[2][8];
  /// [bits == 8][R - 1][B - 1].
  TileFn tiles[2][8][4];
  /// Whether the tiles read Problem::sxT (and starts).
  bool transposed;
  /// [bits == 8]: fills Problem::starts, or nullptr when not needed.
  StartsFn starts[2];
};

/// The block limits cover rows 1..maxRows (the tables below are checked at
/// compile time, as brace elision would let a misplaced brace through; the
/// tiles themselves are not: GCC cannot compare a function's address with
/// null in a constant expression under UBSan; the tests reach each one).
constexpr bool complete(const Kernels &k) {
  if (k.maxRows < 1 || k.maxRows > 8)
    return false;
  for (int bits = 0; bits < 2; ++bits)
    for (int r = 0; r < 8; ++r)
      if ((k.maxBlocks[bits][r] < 1 || k.maxBlocks[bits][r] > 4) ==
          (r < k.maxRows))
        return false;
  return true;
}

inline int32_t load32(const int8_t *p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

//===----------------------------------------------------------------------===//
// Portable C++ (also what the others must equal)
//===----------------------------------------------------------------------===//

template <int Bits>
void scalarTile(const Problem &p, int64_t row, int64_t blk) {
  constexpr int64_t kStepK = Bits == 8 ? 4 : 8;
  const int64_t steps = p.group / kStepK;
  const int8_t *x = p.xq + row * p.xqStride;
  const uint8_t *w = p.w + blk * p.blockBytes;
  const int64_t col = blk * 16;
  const bool perChannel = p.wsStride == 0;
  float yacc[16] = {};
  for (int64_t g = 0; g < p.groups; ++g) {
    // |acc| < 2^31 for group <= kMaxGroup; unsigned all the same.
    uint32_t acc[16] = {};
    for (int64_t s = 0; s < steps; ++s, x += kStepK, w += 64)
      for (int j = 0; j < 16; ++j)
        for (int b = 0; b < 4; ++b) {
          int u = w[j * 4 + b];
          if (Bits == 8)
            acc[j] += uint32_t(x[b] * (u - 128));
          else
            acc[j] +=
                uint32_t(x[b] * ((u & 15) - 8) + x[4 + b] * ((u >> 4) - 8));
        }
    const float sxv = p.sx[row * p.sxStride + g];
    for (int j = 0; j < 16; ++j) {
      float t = float(int32_t(acc[j]));
      float scale = perChannel ? sxv : sxv * p.ws[g * p.wsStride + col + j];
      yacc[j] = std::fma(t, scale, yacc[j]);
    }
  }
  float *y = p.y + row * p.yStride + col;
  for (int j = 0; j < 16; ++j)
    y[j] = perChannel ? yacc[j] * p.ws[col + j] : yacc[j];
}

constexpr Kernels kScalarKernels = {
    Isa::kScalar, 1,
    {{1}, {1}},   {{{&scalarTile<4>}}, {{&scalarTile<8>}}},
    false,        {nullptr, nullptr}};
static_assert(complete(kScalarKernels));

#if SITS_QDOT_X86
//===----------------------------------------------------------------------===//
// AVX-512 VNNI
//===----------------------------------------------------------------------===//

/// The weights' offset: u = code + offset.
constexpr uint32_t offsetOf(int bits) { return bits == 8 ? 128 : 8; }

SITS_QDOT_VNNI void vnniStarts(const Problem &p, int32_t *starts) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t r = 0; r < p.m; ++r) {
    const int8_t *x = p.xq + r * p.xqStride;
    for (int64_t g = 0; g < p.groups; ++g, x += p.group) {
      __m512i acc = _mm512_setzero_si512();
      for (int64_t i = 0; i < p.group; i += 64) {
        int64_t len = std::min<int64_t>(64, p.group - i);
        __mmask64 mask = len == 64 ? ~__mmask64(0) : (__mmask64(1) << len) - 1;
        acc = _mm512_dpbusd_epi32(acc, ones,
                                  _mm512_maskz_loadu_epi8(mask, x + i));
      }
      // Not _mm512_reduce_add_epi32 (nor _mm512_cvtepi32_ps and
      // _mm512_srai_epi32 below, hence their maskz forms): GCC 12 warns
      // about their headers' deliberately undefined operands.
      int32_t lanes[16];
      _mm512_storeu_si512(lanes, acc);
      int32_t sum = 0;
      for (int32_t lane : lanes)
        sum += lane;
      starts[g * p.m + r] = int32_t(0u - offsetOf(p.bits) * uint32_t(sum));
    }
  }
}

/// acc += w (u8) . x (s8) per 4-byte lane. Inline asm, not
/// _mm512_dpbusd_epi32: around the intrinsic GCC 12 copies each accumulator
/// twice per iteration, which doubles the decode inner loop.
SITS_QDOT_VNNI inline __attribute__((always_inline)) void
dpbusd(__m512i &acc, __m512i w, __m512i x) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(w), "v"(x));
}

/// 64 bytes of 4-bit codes as the u8 operands of the low and high
/// nibbles; with High16 the high ones as 16 * u.
template <bool High16>
SITS_QDOT_VNNI inline __attribute__((always_inline)) void
unpack4(const uint8_t *w, __m512i &lo, __m512i &hi) {
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  __m512i v = _mm512_loadu_si512(w);
  lo = _mm512_and_si512(v, low4);
  hi = High16 ? _mm512_and_si512(v, _mm512_set1_epi8(char(0xF0)))
              : _mm512_and_si512(_mm512_srli_epi16(v, 4), low4);
}

/// Groups ahead whose ws rows are prefetched: a block's 16 scales of a
/// group lie a whole row of ws apart, which no hardware prefetcher follows
/// (16: some 200 ns ahead for 8 rows, 4-bit groups of 32).
constexpr int64_t kWsAhead = 16;

/// A block's 16 scales: 64 bytes, two cache lines unless aligned.
inline void prefetchScales(const float *p) {
  _mm_prefetch(reinterpret_cast<const char *>(p), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char *>(p + 15), _MM_HINT_T0);
}

/// Weight bytes read ahead of use in each block's stream: a tile reads
/// several short streams (one per block), on which the hardware prefetchers
/// start late (each 4 KiB page anew). A page ahead touches each page before
/// the tile reaches it: 55 M Llama INT8 decode at batch 8 +7% over 1 KiB
/// (which gained ~8% over none) on a 2-core Xeon 6; INT4 unchanged.
constexpr uintptr_t kWeightsAhead = 4096;

/// Into L1 where that was measured (Xeons). On AMD Zen cores a prefetch
/// into L1 holds one of the core's few L1 miss buffers until its line
/// arrives, and the tile's own loads queue behind it (the CPU codegen's
/// streamed panels make the same choice, see prefetchCacheLevel). On a
/// 2-core EPYC (Zen 4), alternating in one process: 55 M Llama INT8 decode
/// +15-17% at batch 1 and +10-12% at batch 8; INT4 -3% to +6% (noise).
bool prefetchIntoL2() {
  static const bool amd = [] {
    const std::string &vendor = hostCpuInfo().vendor;
    return vendor == "AuthenticAMD" || vendor == "HygonGenuine";
  }();
  return amd;
}

/// A hint only: the address may lie past the weights (never faults).
inline void prefetchAhead(const uint8_t *p, bool intoL2) {
  const char *ahead = reinterpret_cast<const char *>(
      reinterpret_cast<uintptr_t>(p) + kWeightsAhead);
  if (intoL2)
    _mm_prefetch(ahead, _MM_HINT_T1);
  else
    _mm_prefetch(ahead, _MM_HINT_T0);
}

/// Stand-in scales of 1 (x * 1 is x exactly): they keep the loops free of
/// per-channel / per-group branches, which GCC pays for with copies of
/// every accumulator in the inner loop.
alignas(64) const
    float kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/// R rows x B blocks of 16 columns: per group, int32 sums of u * x with
/// `vpdpbusd` (one lane per column), less offset * sum(x), then
/// y = fma(float(acc), sx * ws, y) (per-channel ws: sx * 1, and y * ws at
/// the end).
template <int Bits, int R, int B>
SITS_QDOT_VNNI void vnniTile(const Problem &p, int64_t row, int64_t blk) {
  // 4 bits, one row (decode, which must keep up with memory): the high
  // nibbles stay in place as 16 * u (an AND; a shift would compete with
  // vpdpbusd for its port) in their own sums, shifted back per group
  // (exact: multiples of 16 that do not overflow for group <= 2^16). Two
  // chains per block also keep the vpdpbusd latency hidden. More rows share
  // one shift per load instead, with one sum per block.
  constexpr bool kHigh16 = Bits == 4 && R == 1;
  constexpr int kSums = kHigh16 ? 2 : 1;
  constexpr int64_t kStepK = Bits == 8 ? 4 : 8;
  // Broadcast every row's activations once per step (few rows), or unpack
  // every block's weights once per step (few blocks): whichever holds
  // fewer registers.
  constexpr bool kRowsOuter = R > 2;
  const int64_t steps = p.group / kStepK;
  const bool perChannel = p.wsStride == 0;
  const int64_t wsStep = perChannel ? 0 : p.wsStride;
  const uint8_t *wp[B];
  const float *wsGroup[B], *wsEnd[B];
  SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
    wp[j] = p.w + (blk + j) * p.blockBytes;
    wsGroup[j] = perChannel ? kOnes : p.ws + (blk + j) * 16;
    wsEnd[j] = perChannel ? p.ws + (blk + j) * 16 : kOnes;
  }
  const int8_t *xp[R];
  SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) xp[r] =
      p.xq + (row + r) * p.xqStride;
  __m512 yacc[R][B];
  SITS_QDOT_UNROLL for (int r = 0; r < R; ++r)
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) yacc[r][j] =
          _mm512_setzero_ps();

  for (int64_t g = 0; g < p.groups; ++g) {
    int64_t ahead = std::min(g + kWsAhead, p.groups - 1) * wsStep;
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
        prefetchScales(wsGroup[j] + ahead);
    // Starting at -offset * sum(x) removes the offset.
    __m512i acc[R][B][kSums];
    SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
      __m512i start = _mm512_set1_epi32(p.starts[g * p.m + row + r]);
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
        acc[r][j][0] = start;
        if constexpr (kHigh16)
          acc[r][j][1] = _mm512_setzero_si512();
      }
    }
    // steps >= 1. do-while: with a zero-trip test GCC copies the sums.
    int64_t s = 0;
    do {
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
          prefetchAhead(wp[j] + s * 64, p.prefetchIntoL2);
      if constexpr (Bits == 8) {
        if constexpr (!kRowsOuter) {
          __m512i xb[R];
          SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) xb[r] =
              _mm512_set1_epi32(load32(xp[r] + s * 4));
          SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
            __m512i v = _mm512_loadu_si512(wp[j] + s * 64);
            SITS_QDOT_UNROLL for (int r = 0; r < R; ++r)
                dpbusd(acc[r][j][0], v, xb[r]);
          }
        } else {
          __m512i v[B];
          SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) v[j] =
              _mm512_loadu_si512(wp[j] + s * 64);
          SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
            __m512i xb = _mm512_set1_epi32(load32(xp[r] + s * 4));
            SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
                dpbusd(acc[r][j][0], v[j], xb);
          }
        }
      } else {
        if constexpr (!kRowsOuter) {
          __m512i xlo[R], xhi[R];
          SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
            xlo[r] = _mm512_set1_epi32(load32(xp[r] + s * 8));
            xhi[r] = _mm512_set1_epi32(load32(xp[r] + s * 8 + 4));
          }
          SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
            __m512i lo, hi;
            unpack4<kHigh16>(wp[j] + s * 64, lo, hi);
            SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
              dpbusd(acc[r][j][0], lo, xlo[r]);
              dpbusd(acc[r][j][kSums - 1], hi, xhi[r]);
            }
          }
        } else {
          __m512i lo[B], hi[B];
          SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
              unpack4<kHigh16>(wp[j] + s * 64, lo[j], hi[j]);
          SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
            __m512i xlo = _mm512_set1_epi32(load32(xp[r] + s * 8));
            __m512i xhi = _mm512_set1_epi32(load32(xp[r] + s * 8 + 4));
            SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
              dpbusd(acc[r][j][0], lo[j], xlo);
              dpbusd(acc[r][j][kSums - 1], hi[j], xhi);
            }
          }
        }
      }
    } while (++s < steps);
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) wp[j] += steps * 64;
    SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) xp[r] += steps * kStepK;

    __m512 wsv[B];
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) wsv[j] =
        _mm512_loadu_ps(wsGroup[j] + g * wsStep);
    SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
      __m512 sxv = _mm512_set1_ps(p.sxT[g * p.m + row + r]);
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
        __m512i a = acc[r][j][0];
        if constexpr (kHigh16)
          a = _mm512_add_epi32(
              a, _mm512_maskz_srai_epi32(__mmask16(0xFFFF), acc[r][j][1], 4));
        __m512 t = _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), a);
        yacc[r][j] = _mm512_fmadd_ps(t, _mm512_mul_ps(sxv, wsv[j]), yacc[r][j]);
      }
    }
  }

  SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
    float *y = p.y + (row + r) * p.yStride + blk * 16;
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) _mm512_storeu_ps(
        y + j * 16, _mm512_mul_ps(yacc[r][j], _mm512_loadu_ps(wsEnd[j])));
  }
}

// Tiles per [R - 1][B - 1], up to Kernels::maxBlocks.
#define SITS_QDOT_VNNI_TILES(BITS)                                             \
  {                                                                            \
    {&vnniTile<BITS, 1, 1>, &vnniTile<BITS, 1, 2>, &vnniTile<BITS, 1, 3>,      \
     &vnniTile<BITS, 1, 4>},                                                   \
        {&vnniTile<BITS, 2, 1>, &vnniTile<BITS, 2, 2>},                        \
        {&vnniTile<BITS, 3, 1>, &vnniTile<BITS, 3, 2>},                        \
        {&vnniTile<BITS, 4, 1>, &vnniTile<BITS, 4, 2>},                        \
        {&vnniTile<BITS, 5, 1>}, {&vnniTile<BITS, 6, 1>},                      \
        {&vnniTile<BITS, 7, 1>}, {                                             \
      &vnniTile<BITS, 8, 1>                                                    \
    }                                                                          \
  }

constexpr Kernels kVnniKernels = {
    Isa::kAvx512Vnni,
    8,
    // As many sums and scaled sums as registers hold (2 rows x 4 blocks:
    // GCC 12 spills). Up to 8 rows per load of weights: few-row batches read
    // the weights from memory once, at the pace of the dot products.
    {{4, 2, 2, 2, 1, 1, 1, 1}, {4, 2, 2, 2, 1, 1, 1, 1}},
    {SITS_QDOT_VNNI_TILES(4), SITS_QDOT_VNNI_TILES(8)},
    true,
    {&vnniStarts, &vnniStarts}};
static_assert(complete(kVnniKernels));

#if SITS_QDOT_AMX_BUILD
//===----------------------------------------------------------------------===//
// AMX-INT8
//===----------------------------------------------------------------------===//

/// Linux lends tile data only to a process that asks (once, for all its
/// threads); without it the first tile instruction faults.
bool amxPermitted() {
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  static const bool permitted =
      syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  return permitted;
}

/// GCC's _tile_loadd does not tell the compiler that it reads memory, nor
/// _tile_loadconfig that it reads 64 bytes: stores to what they read must
/// not move across them (nor be dropped).
inline __attribute__((always_inline)) void tileMemoryBarrier() {
  __asm__ volatile("" ::: "memory");
}

/// Where a tile reads a group's activations and weights: rows row..row+15
/// (and the next 16) of xq, blocks blk.. of w.
template <int RB, int B> struct AmxOperands {
  const int8_t *x[RB];
  const uint8_t *w[B];
  /// 4 bits: a product's weights per block in the 8-bit layout, unpacked a
  /// product ahead (into wide[1 - current]) so that the stores have landed
  /// when the tile loads read them (~10% on 4 bits per channel).
  alignas(64) uint8_t wide[2][B][16 * 64];
  int current = 0;
};

/// 4 bits: unpacks the product at k0 into wide[buf]. Each 64 bytes of k
/// 8u..8u+7: the low nibbles are the tile row of k 8u..8u+3, the high ones
/// that of k 8u+4..8u+7.
template <int RB, int B>
SITS_QDOT_AMX inline __attribute__((always_inline)) void
amxUnpack(const Problem &p, AmxOperands<RB, B> &op, int64_t k0, int buf) {
  SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
    const uint8_t *src = op.w[j] + k0 / 8 * 64;
    for (int64_t u = 0; u < p.tileK / 8; ++u) {
      __m512i lo, hi;
      unpack4<false>(src + u * 64, lo, hi);
      _mm512_store_si512(op.wide[buf][j] + u * 128, lo);
      _mm512_store_si512(op.wide[buf][j] + u * 128 + 64, hi);
    }
  }
}

/// C[r][j] = the products of group g (sums C[r][j] in tmm(2r + j),
/// activations A[r] in tmm(4 + r), weights B[j] in tmm(6 + j): GCC's tile
/// intrinsics take the numbers as literals).
template <int Bits, int RB, int B>
SITS_QDOT_AMX inline __attribute__((always_inline)) void
amxProducts(const Problem &p, AmxOperands<RB, B> &op, int64_t g) {
  _tile_zero(0);
  if constexpr (B > 1)
    _tile_zero(1);
  if constexpr (RB > 1)
    _tile_zero(2);
  if constexpr (RB > 1 && B > 1)
    _tile_zero(3);
  for (int64_t k0 = g * p.group; k0 < (g + 1) * p.group; k0 += p.tileK) {
    const uint8_t *wt[B];
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) wt[j] =
        Bits == 8 ? op.w[j] + k0 / 4 * 64 : op.wide[op.current][j];
    if constexpr (Bits == 4) {
      if (k0 + p.tileK < p.k)
        amxUnpack(p, op, k0 + p.tileK, 1 - op.current);
      op.current = 1 - op.current;
      tileMemoryBarrier();
    }
    _tile_loadd(4, op.x[0] + k0, p.xqStride);
    _tile_loadd(6, wt[0], 64);
    _tile_dpbsud(0, 4, 6);
    if constexpr (B > 1) {
      _tile_loadd(7, wt[B - 1], 64);
      _tile_dpbsud(1, 4, 7);
    }
    if constexpr (RB > 1) {
      _tile_loadd(5, op.x[RB - 1] + k0, p.xqStride);
      _tile_dpbsud(2, 5, 6);
      if constexpr (B > 1)
        _tile_dpbsud(3, 5, 7);
    }
    // Later unpacking overwrites what these loads read.
    if constexpr (Bits == 4)
      tileMemoryBarrier();
  }
}

/// 16 * RB rows x B blocks of 16 columns with tile products, p.tileK values
/// of k each: TDPBSUD multiplies the rows' s8 activations by the u8
/// weights, whose 8-bit layout is that of a tile (row i: k 4i..4i+3 for the
/// 16 columns), read in place; 4-bit weights are unpacked to it first. Per
/// group, the sums less offset * sum(x) (added to the exact int32 sums: the
/// same integers as vnniTile's) and the float part as in vnniTile.
template <int Bits, int RB, int B>
SITS_QDOT_AMX void amxTile(const Problem &p, int64_t row, int64_t blk) {
  const bool perChannel = p.wsStride == 0;
  const int64_t wsStep = perChannel ? 0 : p.wsStride;
  AmxOperands<RB, B> op;
  const float *wsGroup[B], *wsEnd[B];
  SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
    op.w[j] = p.w + (blk + j) * p.blockBytes;
    wsGroup[j] = perChannel ? kOnes : p.ws + (blk + j) * 16;
    wsEnd[j] = perChannel ? p.ws + (blk + j) * 16 : kOnes;
  }
  SITS_QDOT_UNROLL for (int r = 0; r < RB; ++r) op.x[r] =
      p.xq + (row + 16 * r) * p.xqStride;
  // Row i of C[r][j] at sums[16r + i][j]: one address per row below.
  alignas(64) int32_t sums[RB * 16][B][16];
  __m512 yacc[RB * 16][B];
  for (int r = 0; r < RB * 16; ++r)
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) yacc[r][j] =
        _mm512_setzero_ps();

  if constexpr (Bits == 4)
    amxUnpack(p, op, 0, 0);
  amxProducts<Bits, RB, B>(p, op, 0);
  for (int64_t g = 0; g < p.groups; ++g) {
    constexpr int64_t kRowBytes = B * 64;
    _tile_stored(0, sums[0][0], kRowBytes);
    if constexpr (B > 1)
      _tile_stored(1, sums[0][B - 1], kRowBytes);
    if constexpr (RB > 1)
      _tile_stored(2, sums[16][0], kRowBytes);
    if constexpr (RB > 1 && B > 1)
      _tile_stored(3, sums[16][B - 1], kRowBytes);
    // The tiles compute the next group while the float part below runs.
    if (g + 1 < p.groups)
      amxProducts<Bits, RB, B>(p, op, g + 1);

    __m512 wsv[B];
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) wsv[j] =
        _mm512_loadu_ps(wsGroup[j] + g * wsStep);
    for (int r = 0; r < RB * 16; ++r) {
      __m512i start = _mm512_set1_epi32(p.starts[g * p.m + row + r]);
      __m512 sxv = _mm512_set1_ps(p.sxT[g * p.m + row + r]);
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
        __m512i a = _mm512_add_epi32(_mm512_load_si512(sums[r][j]), start);
        __m512 t = _mm512_maskz_cvtepi32_ps(__mmask16(0xFFFF), a);
        yacc[r][j] = _mm512_fmadd_ps(t, _mm512_mul_ps(sxv, wsv[j]), yacc[r][j]);
      }
    }
  }

  for (int r = 0; r < RB * 16; ++r) {
    float *y = p.y + (row + r) * p.yStride + blk * 16;
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) _mm512_storeu_ps(
        y + j * 16, _mm512_mul_ps(yacc[r][j], _mm512_loadu_ps(wsEnd[j])));
  }
}

/// [bits == 8][RB - 1][B - 1]: at most the 8 tile registers.
constexpr TileFn kAmxTiles[2][2][2] = {
    {{&amxTile<4, 1, 1>, &amxTile<4, 1, 2>},
     {&amxTile<4, 2, 1>, &amxTile<4, 2, 2>}},
    {{&amxTile<8, 1, 1>, &amxTile<8, 1, 2>},
     {&amxTile<8, 2, 1>, &amxTile<8, 2, 2>}}};

/// The VNNI tiles for the rows AMX leaves (under 16 in a call).
constexpr Kernels withIsa(Kernels k, Isa isa) {
  k.isa = isa;
  return k;
}
constexpr Kernels kAmxKernels = withIsa(kVnniKernels, Isa::kAmx);
#endif // SITS_QDOT_AMX_BUILD

//===----------------------------------------------------------------------===//
// AVX2
//===----------------------------------------------------------------------===//

SITS_QDOT_AVX2 void avx2Starts(const Problem &p, int32_t *starts) {
  const __m256i ones8 = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t r = 0; r < p.m; ++r) {
    const int8_t *x = p.xq + r * p.xqStride;
    for (int64_t g = 0; g < p.groups; ++g, x += p.group) {
      __m256i acc = _mm256_setzero_si256();
      int64_t i = 0;
      for (; i + 32 <= p.group; i += 32) {
        __m256i v =
            _mm256_loadu_si256(reinterpret_cast<const __m256i *>(x + i));
        acc = _mm256_add_epi32(
            acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, v), ones16));
      }
      int32_t lanes[8];
      _mm256_storeu_si256(reinterpret_cast<__m256i *>(lanes), acc);
      int32_t sum = 0;
      for (int l = 0; l < 8; ++l)
        sum += lanes[l];
      for (; i < p.group; ++i)
        sum += x[i];
      starts[g * p.m + r] = int32_t(0u - offsetOf(p.bits) * uint32_t(sum));
    }
  }
}

/// As vnniTile, each 16-column block as two 8-column halves. 4 bits:
/// maddubs(u, x) on the nibbles (at most 2 * 15 * 127 per pair), the offset
/// removed as on VNNI. 8 bits: u * x would saturate int16, so
/// maddubs(|code|, x * sign(code)) (at most 2 * 128 * 127), which is
/// sum(x * code) itself.
template <int Bits, int R, int B>
SITS_QDOT_AVX2 void avx2Tile(const Problem &p, int64_t row, int64_t blk) {
  constexpr int64_t kStepK = Bits == 8 ? 4 : 8;
  const int64_t steps = p.group / kStepK;
  const bool perChannel = p.wsStride == 0;
  const int64_t wsStep = perChannel ? 0 : p.wsStride;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i flip = _mm256_set1_epi8(char(0x80));
  const __m256i ones16 = _mm256_set1_epi16(1);
  const uint8_t *wp[B];
  const float *wsGroup[B], *wsEnd[B];
  SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) {
    wp[j] = p.w + (blk + j) * p.blockBytes;
    wsGroup[j] = perChannel ? kOnes : p.ws + (blk + j) * 16;
    wsEnd[j] = perChannel ? p.ws + (blk + j) * 16 : kOnes;
  }
  const int8_t *xp[R];
  SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) xp[r] =
      p.xq + (row + r) * p.xqStride;
  __m256 yacc[R][B][2];
  SITS_QDOT_UNROLL for (int r = 0; r < R; ++r)
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) yacc[r][j][0] =
          yacc[r][j][1] = _mm256_setzero_ps();

  for (int64_t g = 0; g < p.groups; ++g) {
    int64_t ahead = std::min(g + kWsAhead, p.groups - 1) * wsStep;
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
        prefetchScales(wsGroup[j] + ahead);
    __m256i acc[R][B][2];
    SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
      __m256i start = Bits == 8
                          ? _mm256_setzero_si256()
                          : _mm256_set1_epi32(p.starts[g * p.m + row + r]);
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) acc[r][j][0] = acc[r][j][1] =
          start;
    }
    int64_t s = 0; // steps >= 1 (see vnniTile)
    do {
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
          prefetchAhead(wp[j] + s * 64, p.prefetchIntoL2);
      const int8_t *xs[R];
      SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) xs[r] = xp[r] + s * kStepK;
      if constexpr (Bits == 8) {
        __m256i xb[R];
        SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) xb[r] =
            _mm256_set1_epi32(load32(xs[r]));
        SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
            SITS_QDOT_UNROLL for (int h = 0; h < 2; ++h) {
          __m256i v = _mm256_loadu_si256(
              reinterpret_cast<const __m256i *>(wp[j] + s * 64 + 32 * h));
          __m256i code = _mm256_xor_si256(v, flip);
          __m256i mag = _mm256_abs_epi8(code);
          SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
            __m256i prod =
                _mm256_maddubs_epi16(mag, _mm256_sign_epi8(xb[r], code));
            acc[r][j][h] =
                _mm256_add_epi32(acc[r][j][h], _mm256_madd_epi16(prod, ones16));
          }
        }
      } else {
        __m256i xlo[R], xhi[R];
        SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
          xlo[r] = _mm256_set1_epi32(load32(xs[r]));
          xhi[r] = _mm256_set1_epi32(load32(xs[r] + 4));
        }
        SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
            SITS_QDOT_UNROLL for (int h = 0; h < 2; ++h) {
          __m256i v = _mm256_loadu_si256(
              reinterpret_cast<const __m256i *>(wp[j] + s * 64 + 32 * h));
          __m256i lo = _mm256_and_si256(v, low4);
          __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), low4);
          SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
            // Each at most 2 * 15 * 127: their sum fits int16 too.
            __m256i prod = _mm256_add_epi16(_mm256_maddubs_epi16(lo, xlo[r]),
                                            _mm256_maddubs_epi16(hi, xhi[r]));
            acc[r][j][h] =
                _mm256_add_epi32(acc[r][j][h], _mm256_madd_epi16(prod, ones16));
          }
        }
      }
    } while (++s < steps);
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j) wp[j] += steps * 64;
    SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) xp[r] += steps * kStepK;

    __m256 wsv[B][2];
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
        SITS_QDOT_UNROLL for (int h = 0; h < 2; ++h) wsv[j][h] =
            _mm256_loadu_ps(wsGroup[j] + g * wsStep + 8 * h);
    SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
      __m256 sxv = _mm256_set1_ps(p.sxT[g * p.m + row + r]);
      SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
          SITS_QDOT_UNROLL for (int h = 0; h < 2; ++h) {
        __m256 t = _mm256_cvtepi32_ps(acc[r][j][h]);
        yacc[r][j][h] =
            _mm256_fmadd_ps(t, _mm256_mul_ps(sxv, wsv[j][h]), yacc[r][j][h]);
      }
    }
  }

  SITS_QDOT_UNROLL for (int r = 0; r < R; ++r) {
    float *y = p.y + (row + r) * p.yStride + blk * 16;
    SITS_QDOT_UNROLL for (int j = 0; j < B; ++j)
        SITS_QDOT_UNROLL for (int h = 0; h < 2; ++h) _mm256_storeu_ps(
            y + j * 16 + 8 * h,
            _mm256_mul_ps(yacc[r][j][h], _mm256_loadu_ps(wsEnd[j] + 8 * h)));
  }
}

constexpr Kernels kAvx2Kernels = {
    Isa::kAvx2,
    2,
    {{2, 1}, {2, 1}},
    {{{&avx2Tile<4, 1, 1>, &avx2Tile<4, 1, 2>}, {&avx2Tile<4, 2, 1>}},
     {{&avx2Tile<8, 1, 1>, &avx2Tile<8, 1, 2>}, {&avx2Tile<8, 2, 1>}}},
    true,
    {&avx2Starts, nullptr}};
static_assert(complete(kAvx2Kernels));
#endif // SITS_QDOT_X86

const Kernels *kernelsFor(Isa isa) {
#if SITS_QDOT_AMX_BUILD
  if (isa == Isa::kAmx)
    return &kAmxKernels;
#endif
#if SITS_QDOT_X86
  if (isa == Isa::kAvx512Vnni)
    return &kVnniKernels;
  if (isa == Isa::kAvx2)
    return &kAvx2Kernels;
#endif
  return isa == Isa::kScalar ? &kScalarKernels : nullptr;
}

//===----------------------------------------------------------------------===//
// Argument checks and the split across threads
//===----------------------------------------------------------------------===//

constexpr int64_t kRowBlock = 8;
/// AMX: two tiles' rows, which share each load (and unpacking) of weights.
constexpr int64_t kAmxRowBlock = 32;
constexpr int64_t kMaxGroup = int64_t(1) << 16;
/// Below this many multiply-adds (m * n * k), waking helpers costs more
/// than it saves.
constexpr double kSerialWork = 32 * 1024;

bool validArgs(int64_t bits, int64_t m, int64_t n, int64_t k, int64_t group,
               const int8_t *xq, int64_t xqStride, const float *sx,
               int64_t sxStride, const uint8_t *w, const float *ws,
               int64_t wsStride, const float *y, int64_t yStride) {
  if (bits != 4 && bits != 8)
    return false;
  // Groups up to 2^16 keep every int32 sum (and 16 * the high-nibble sums
  // of vnniTile) from overflowing, so that all paths agree on every input.
  if (m < 0 || n < 0 || k < 0 || group <= 0 || group > kMaxGroup)
    return false;
  if (n % 16 != 0 || k % group != 0 || group % (bits == 4 ? 8 : 4) != 0)
    return false;
  if (xqStride < 0 || sxStride < 0 || wsStride < 0 || yStride < 0)
    return false;
  // Overlapping rows of y would be written by several threads.
  if (m > 1 && yStride < n)
    return false;
  // What is read: ws only for per-column scales when k = 0.
  if (m > 0 && n > 0 &&
      (!y || (k > 0 && (!xq || !sx || !w)) || (!ws && (k > 0 || !wsStride))))
    return false;
  return true;
}

/// AMX: the tile products' shapes for Problem::tileK (palette 1).
struct alignas(64) TileConfig {
  uint8_t palette = 1, startRow = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

struct Plan {
  const Problem *p;
  const Kernels *kernels;
  int64_t rowBlock;
  int64_t rowBlocks;
  int64_t chunkBlocks;
  /// Whether whole 16-row blocks take AMX tile products, shaped by `tiles`.
  bool amx;
  TileConfig tiles;
};

#if SITS_QDOT_AMX_BUILD
/// Rows [r, r1) x blocks [b0, b1) in 32- and 16-row tiles while whole
/// 16-row blocks remain; the first row left. The tile configuration is per
/// thread: set here, released after.
SITS_QDOT_AMX int64_t amxRows(const Plan &plan, int64_t r, int64_t r1,
                              int64_t b0, int64_t b1) {
  const Problem &p = *plan.p;
  tileMemoryBarrier();
  _tile_loadconfig(&plan.tiles);
  while (r1 - r >= 16) {
    int rowTiles = r1 - r >= 32 ? 2 : 1;
    for (int64_t b = b0; b < b1; b += 2)
      kAmxTiles[p.bits == 8][rowTiles - 1][std::min<int64_t>(2, b1 - b) - 1](
          p, r, b);
    r += 16 * rowTiles;
  }
  _tile_release();
  return r;
}
#endif

/// Item i: column chunk i / rowBlocks, row block i % rowBlocks, so that
/// consecutive items (and threads) share a chunk's weights.
void runItem(void *context, int64_t item) {
  const Plan &plan = *static_cast<const Plan *>(context);
  const Problem &p = *plan.p;
  const Kernels &kern = *plan.kernels;
  int64_t r0 = (item % plan.rowBlocks) * plan.rowBlock;
  int64_t r1 = std::min(p.m, r0 + plan.rowBlock);
  int64_t b0 = (item / plan.rowBlocks) * plan.chunkBlocks;
  int64_t b1 = std::min(p.n / 16, b0 + plan.chunkBlocks);
  int64_t r = r0;
#if SITS_QDOT_AMX_BUILD
  if (plan.amx && r1 - r0 >= 16)
    r = amxRows(plan, r0, r1, b0, b1);
#endif
  while (r < r1) {
    int rows = int(std::min<int64_t>(kern.maxRows, r1 - r));
    for (int64_t b = b0; b < b1;) {
      int blocks =
          int(std::min<int64_t>(kern.maxBlocks[p.bits == 8][rows - 1], b1 - b));
      kern.tiles[p.bits == 8][rows - 1][blocks - 1](p, r, b);
      b += blocks;
    }
    r += rows;
  }
}

void runQDot(const Kernels &kern, int64_t bits, int64_t m, int64_t n, int64_t k,
             int64_t group, const int8_t *xq, int64_t xqStride, const float *sx,
             int64_t sxStride, const uint8_t *w, const float *ws,
             int64_t wsStride, float *y, int64_t yStride) {
  if (!validArgs(bits, m, n, k, group, xq, xqStride, sx, sxStride, w, ws,
                 wsStride, y, yStride) ||
      m == 0 || n == 0)
    return;
  Problem p{int(bits), m,         n,  k,
            group,     k / group, xq, xqStride,
            sx,        sxStride,  w,  k * (bits == 8 ? 16 : 8),
            ws,        wsStride,  y,  yStride,
            nullptr,   nullptr,   0,  false};
#if SITS_QDOT_X86
  p.prefetchIntoL2 = prefetchIntoL2();
#endif

  // Once per call, not per column chunk: the rows' sums, and sx in the
  // order the tiles read it.
  constexpr int64_t kLocal = 1024;
  float localSx[kLocal];
  int32_t localStarts[kLocal];
  std::vector<float> heapSx;
  std::vector<int32_t> heapStarts;
  if (kern.transposed) {
    int64_t size = m * p.groups;
    float *sxT = localSx;
    int32_t *starts = localStarts;
    if (size > kLocal) {
      heapSx.resize(size_t(size));
      heapStarts.resize(size_t(size));
      sxT = heapSx.data();
      starts = heapStarts.data();
    }
    for (int64_t r = 0; r < m; ++r)
      for (int64_t g = 0; g < p.groups; ++g)
        sxT[g * m + r] = sx[r * sxStride + g];
    p.sxT = sxT;
    if (StartsFn fill = kern.starts[bits == 8]) {
      fill(p, starts);
      p.starts = starts;
    }
  }

  Plan plan{&p, &kern, kRowBlock, 0, 0, false, {}};
  if (kern.isa == Isa::kAmx && m >= 16) {
    int64_t unit = bits == 8 ? 4 : 8;
    p.tileK = 64;
    while (group % p.tileK != 0)
      p.tileK -= unit;
    plan.rowBlock = kAmxRowBlock;
    plan.amx = true;
    for (int t = 0; t < 8; ++t) {
      // Sums: 16 x 16 int32; activations: 16 rows x tileK bytes; weights:
      // tileK / 4 rows of 16 columns x 4 k.
      plan.tiles.rows[t] = uint8_t(t < 6 ? 16 : p.tileK / 4);
      plan.tiles.colsb[t] = uint16_t(t >= 4 && t < 6 ? p.tileK : 64);
    }
  }

  // Column chunks of 64 (one decode tile on VNNI; 256 on AMX, whose tiles
  // then read a row block's activations from L1 after the first and set
  // up fewer tile configurations), narrower when that leaves fewer than ~4
  // items per thread (decode on many threads).
  int64_t blocks = n / 16;
  int64_t rowBlocks = (m + plan.rowBlock - 1) / plan.rowBlock;
  int64_t threads = std::max(1, pool::sizeHint());
  int64_t chunk = plan.amx ? 16 : 4;
  while (chunk > 1 && rowBlocks * ((blocks + chunk - 1) / chunk) < 4 * threads)
    chunk /= 2;
  plan.rowBlocks = rowBlocks;
  plan.chunkBlocks = chunk;
  int64_t items = rowBlocks * ((blocks + chunk - 1) / chunk);
  if (double(m) * double(n) * double(k) < kSerialWork) {
    for (int64_t i = 0; i < items; ++i)
      runItem(&plan, i);
    return;
  }
  sitsRuntimeParallelFor(&runItem, &plan, items);
}

} // namespace

const char *isaName(Isa isa) {
  switch (isa) {
  case Isa::kScalar:
    return "scalar";
  case Isa::kAvx2:
    return "avx2";
  case Isa::kAvx512Vnni:
    return "avx512vnni";
  case Isa::kAmx:
    return "amx";
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
  if (isa == Isa::kAvx2)
    return has("avx2") && has("fma");
  bool vnni =
      has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512vnni");
#if SITS_QDOT_AMX_BUILD
  if (isa == Isa::kAmx)
    return vnni && has("amx-tile") && has("amx-int8") && amxPermitted();
#endif
  return vnni;
}

Isa selectedIsa() {
  static const Isa best = [] {
    for (Isa isa : {Isa::kAmx, Isa::kAvx512Vnni, Isa::kAvx2})
      if (isaAvailable(isa))
        return isa;
    return Isa::kScalar;
  }();
  return best;
}

bool run(Isa isa, int64_t bits, int64_t m, int64_t n, int64_t k, int64_t group,
         const int8_t *xq, int64_t xqStride, const float *sx, int64_t sxStride,
         const uint8_t *w, const float *ws, int64_t wsStride, float *y,
         int64_t yStride) {
  if (!isaAvailable(isa))
    return false;
  runQDot(*kernelsFor(isa), bits, m, n, k, group, xq, xqStride, sx, sxStride, w,
          ws, wsStride, y, yStride);
  return true;
}

} // namespace sits::runtime::qdot

extern "C" SITS_RUNTIME_API void
sitsRuntimeQDot(int64_t bits, int64_t m, int64_t n, int64_t k, int64_t group,
                const int8_t *xq, int64_t xqStride, const float *sx,
                int64_t sxStride, const uint8_t *w, const float *ws,
                int64_t wsStride, float *y, int64_t yStride) {
  using namespace sits::runtime::qdot;
  static const Kernels *const kernels = kernelsFor(selectedIsa());
  runQDot(*kernels, bits, m, n, k, group, xq, xqStride, sx, sxStride, w, ws,
          wsStride, y, yStride);
}
