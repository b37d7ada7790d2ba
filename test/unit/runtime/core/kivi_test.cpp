//===- kivi_test.cpp - 4-/2-bit KV blocks with an f32 tail ----------------===//
//
// The KIVI pool of sits/runtime/kivi_layout.h through the exported C entry
// points, as compiled code calls them: the layout's sizes; the f16
// conversions (every half round-trips; ties go to even); the writer
// (elements of a filled block within half a step of their values with
// tight per-channel / per-group parameters, the tail exact until the block
// fills, one call per token and one call for all giving the same bytes,
// several sequences in one call, a block cut back into and written again,
// pages given back, bad input writing nothing); and attention over it on
// every path this CPU has, decode and prefill, at 4 and 2 bits with keys
// per channel (KIVI) and per token (kKeysPerToken), against a
// double-precision reference over the values the pool holds (decoded here
// from the layout, not with the runtime's dequantizers). DISABLED_Bench prints
// the time of a decode step's attention over f32, 4-bit and 2-bit pools (run
// with
// --gtest_also_run_disabled_tests).
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include "kivi.h"
#include "paged_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

using namespace sits::runtime;
using kivi::Layout;
using pattn::Isa;

namespace {

/// A pool of `blocks` blocks (an anonymous mapping, as kv::Memory makes).
struct Pool {
  Layout l;
  int64_t blocks;
  uint8_t *data = nullptr;
  size_t bytes = 0;

  /// The layout's mode (bits, kKeysPerToken, or kMixedWidths: 2 bits for
  /// every third (layer, head), 4 for the others, the table in block 0).
  int64_t mode;

  Pool(int64_t layers, int64_t heads, int64_t bs, int64_t dim, int64_t bits,
       int64_t blocks)
      : blocks(blocks), mode(bits) {
    std::vector<uint8_t> widths(size_t(layers * heads));
    for (size_t i = 0; i < widths.size(); ++i)
      widths[i] = i % 3 == 1 ? 2 : 4;
    EXPECT_TRUE(Layout::make(layers, heads, bs, dim, bits, &l, widths.data()));
    bytes = size_t(blocks * l.blockStride);
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    data = static_cast<uint8_t *>(p);
    if (bits == kivi::kMixedWidths)
      std::memcpy(data, widths.data(), widths.size());
  }
  ~Pool() { munmap(data, bytes); }
  Pool(const Pool &) = delete;
  Pool &operator=(const Pool &) = delete;

  /// The quantized parts of every block, equal in two pools.
  bool sameBlocks(const Pool &o) const {
    for (int64_t b = 0; b < blocks; ++b)
      if (std::memcmp(data + b * l.blockStride, o.data + b * l.blockStride,
                      size_t(l.blockBytes)) != 0)
        return false;
    return true;
  }
  /// Zero but for a widths table.
  bool allZero() const {
    for (size_t i = l.widths.size(); i < bytes; ++i)
      if (data[i])
        return false;
    return true;
  }

  int32_t tailCount(int64_t block, int64_t layer) const {
    int32_t n;
    std::memcpy(&n, data + l.tail(block, layer), sizeof n);
    return n;
  }
  const float *tailRow(int64_t block, int64_t layer, int64_t kind, int64_t head,
                       int64_t t) const {
    return reinterpret_cast<const float *>(data + l.tail(block, layer)) +
           l.tailRow(kind, head, t);
  }

  /// The value the pool holds for element d of row t of (block, layer,
  /// kind, head) of a full block, decoded from the layout.
  double stored(int64_t block, int64_t layer, int64_t kind, int64_t head,
                int64_t t, int64_t d, double *step = nullptr) const {
    const uint8_t *slab = data + l.slab(block, layer, kind, head);
    const Layout::Slab sl = l.slabShape(layer, head);
    const int64_t per = 8 / sl.bits;
    const int code =
        (slab[t * sl.rowBytes + d / per] >> ((d % per) * sl.bits)) &
        ((1 << sl.bits) - 1);
    int64_t si, mi; // f16 indices of the scale and the min
    if (kind == 0 && !l.keysPerToken) {
      si = d;
      mi = l.headDim + d;
    } else {
      const int64_t groups = l.headDim / l.valueGroup;
      si = t * groups + d / l.valueGroup;
      mi = l.blockSize * groups + si;
    }
    uint16_t s, m;
    std::memcpy(&s, slab + sl.paramsOffset + 2 * si, 2);
    std::memcpy(&m, slab + sl.paramsOffset + 2 * mi, 2);
    if (step)
      *step = halfToFloat(s);
    return double(code) * halfToFloat(s) + halfToFloat(m);
  }
};

/// New rows of `batch` sequences of `tokens`: [B][S][H][D].
struct Rows {
  int64_t batch, tokens, heads, dim;
  std::vector<float> k, v;
  float key(int64_t b, int64_t s, int64_t h, int64_t d) const {
    return k[size_t(((b * tokens + s) * heads + h) * dim + d)];
  }
  float value(int64_t b, int64_t s, int64_t h, int64_t d) const {
    return v[size_t(((b * tokens + s) * heads + h) * dim + d)];
  }
};

/// Random rows; keys have a few channels 10x larger (as real models').
Rows randomRows(int64_t batch, int64_t tokens, int64_t heads, int64_t dim,
                uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  Rows r{batch, tokens, heads, dim, {}, {}};
  const size_t n = size_t(batch * tokens * heads * dim);
  r.k.resize(n);
  r.v.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t d = int64_t(i) % dim;
    r.k[i] = normal(gen) * (d % 13 == 3 ? 10.f : 1.f) + 0.5f;
    r.v[i] = normal(gen);
  }
  return r;
}

void write(Pool &p, const Rows &r, int64_t s0, int64_t count,
           const std::vector<int64_t> &slots, int64_t layer,
           int64_t flags = kivi::kReleaseTail) {
  // slots: [batch][count]
  sitsRuntimeKiviWrite(
      r.batch, count, r.heads, r.dim, r.k.data() + s0 * r.heads * r.dim,
      r.v.data() + s0 * r.heads * r.dim, r.tokens * r.heads * r.dim,
      r.heads * r.dim, r.dim, slots.data(), count, p.data, p.blocks,
      p.l.numLayers, layer, p.l.blockSize, p.mode, flags);
}

/// Slot of position t of a sequence whose table is `table`.
int64_t slotOf(const std::vector<int32_t> &table, int64_t bs, int64_t t) {
  return int64_t(table[size_t(t / bs)]) * bs + t % bs;
}

TEST(KiviLayout, Sizes) {
  Layout l;
  ASSERT_TRUE(Layout::make(3, 2, 32, 64, 4, &l));
  EXPECT_EQ(l.valueGroup, 32);
  EXPECT_EQ(l.rowBytes, 32);
  EXPECT_EQ(l.paramsOffset, 1024);
  EXPECT_EQ(l.keyParams, 256);
  EXPECT_EQ(l.valueParams, 256);
  EXPECT_EQ(l.slabBytes, 1280);
  EXPECT_EQ(l.blockBytes, 3 * 2 * 2 * 1280);
  EXPECT_EQ(l.tailLayerBytes, 36864); // 64 + 32768, in whole pages
  EXPECT_EQ(l.tailBlockBytes, 3 * 36864);
  EXPECT_EQ(l.tailOffset, 16384); // 15360 in whole pages
  EXPECT_EQ(l.blockStride, 16384 + 3 * 36864);
  EXPECT_EQ(l.slab(2, 1, 1, 1),
            2 * l.blockStride + l.layerStride + l.kindStride + l.slabBytes);
  EXPECT_EQ(l.tail(2, 1), 2 * l.blockStride + 16384 + 36864);
  ASSERT_TRUE(Layout::make(1, 1, 32, 64, 2, &l));
  EXPECT_EQ(l.slabBytes, 512 + 256);
  // 80 channels: groups of 20 (the largest divisor up to the block size);
  // V's 4 pairs per row outweigh K's parameters.
  ASSERT_TRUE(Layout::make(1, 1, 32, 80, 4, &l));
  EXPECT_EQ(l.valueGroup, 20);
  EXPECT_EQ(l.valueParams, 4 * 32 * 4);
  EXPECT_EQ(l.slabBytes, 32 * 40 + 512);
  // Bytes per token and head, K and V: 80 at 4 bits (3.2x less than f16),
  // 48 at 2 bits (5.3x).
  ASSERT_TRUE(Layout::make(1, 1, 32, 64, 4, &l));
  EXPECT_EQ(2 * l.slabBytes / 32, 80);
  ASSERT_TRUE(Layout::make(1, 1, 32, 64, 2, &l));
  EXPECT_EQ(2 * l.slabBytes / 32, 48);

  // Keys per token like values: the same slab size at blocks <= head dim.
  ASSERT_TRUE(Layout::make(1, 1, 32, 64, 4 + kivi::kKeysPerToken, &l));
  EXPECT_TRUE(l.keysPerToken);
  EXPECT_EQ(l.bits, 4);
  EXPECT_EQ(l.keyParams, l.valueParams);
  EXPECT_EQ(l.slabBytes, 1280);
  EXPECT_FALSE(Layout::make(1, 1, 32, 64, 3, &l));
  EXPECT_FALSE(Layout::make(1, 1, 32, 64, 8, &l));
  EXPECT_FALSE(Layout::make(1, 1, 32, 3, 4, &l)); // 12 bits
  EXPECT_FALSE(Layout::make(1, 1, 32, 6, 2, &l)); // 12 bits
  EXPECT_FALSE(Layout::make(0, 1, 32, 64, 4, &l));
  EXPECT_FALSE(Layout::make(1, 0, 32, 64, 4, &l));
  EXPECT_FALSE(Layout::make(1, 1, 0, 64, 4, &l));
  EXPECT_FALSE(Layout::make(int64_t(1) << 62, 1, 32, 64, 4, &l));
  EXPECT_FALSE(Layout::make(1, 1, 32, kivi::kMaxHeadDim + 8, 4, &l));
  EXPECT_FALSE(Layout::make(1, 1, kivi::kMaxBlockSize * 2, 64, 4, &l));
  EXPECT_TRUE(
      Layout::make(1, 1, kivi::kMaxBlockSize, kivi::kMaxHeadDim, 2, &l));
}

TEST(KiviLayout, MixedWidths) {
  // Per (layer, head): 4, 2 | 2, 2 | 4, 4. A 4-bit slab of 32 x 64 is 1024
  // bytes of codes and 256 of parameters, a 2-bit one 512 and 256.
  const uint8_t widths[] = {4, 2, 2, 2, 4, 4};
  Layout l, uniform;
  ASSERT_TRUE(Layout::make(3, 2, 32, 64, kivi::kMixedWidths, &l, widths));
  ASSERT_TRUE(Layout::make(3, 2, 32, 64, 4, &uniform));
  EXPECT_TRUE(l.mixed());
  EXPECT_EQ(l.blockBytes,
            2 * (1280 + 768) + 2 * (768 + 768) + 2 * (1280 + 1280));
  EXPECT_EQ(l.slab(0, 0, 0, 1), 1280);
  EXPECT_EQ(l.slab(0, 0, 1, 0), 2048);
  EXPECT_EQ(l.slab(0, 1, 0, 0), 4096);
  EXPECT_EQ(l.slab(2, 2, 1, 1), 2 * l.blockStride + l.blockBytes - 1280);
  const Layout::Slab two = l.slabShape(1, 0), four = l.slabShape(2, 1);
  EXPECT_EQ(two.bits, 2);
  EXPECT_EQ(two.rowBytes, 16);
  EXPECT_EQ(two.paramsOffset, 512);
  EXPECT_EQ(four.bits, 4);
  EXPECT_EQ(four.paramsOffset, 1024);
  // The tail is the uniform layout's, after the smaller quantized part.
  EXPECT_EQ(l.tailLayerBytes, uniform.tailLayerBytes);
  EXPECT_EQ(l.tailOffset % kivi::kTailPageBytes, 0);
  EXPECT_GE(l.tailOffset, l.blockBytes);
  EXPECT_EQ(l.blockStride, l.tailOffset + 3 * l.tailLayerBytes);
  // No table, a width other than 4 or 2, a head size 2 bits cannot pack.
  EXPECT_FALSE(Layout::make(3, 2, 32, 64, kivi::kMixedWidths, &l));
  const uint8_t bad[] = {4, 2, 3, 2, 4, 4};
  EXPECT_FALSE(Layout::make(3, 2, 32, 64, kivi::kMixedWidths, &l, bad));
  EXPECT_FALSE(Layout::make(3, 2, 32, 6, kivi::kMixedWidths, &l, widths));
  EXPECT_FALSE(Layout::make(3, 2, 32, 64, kivi::kMixedWidths + 4, &l, widths));
}

TEST(KiviHalf, Conversions) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    const bool nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
    const bool inf = (h & 0x7fffu) == 0x7c00u;
    if (nan || inf)
      continue;
    ASSERT_EQ(floatToHalf(halfToFloat(uint16_t(h))), h) << h;
  }
  EXPECT_EQ(halfToFloat(0x3c00), 1.f);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(floatToHalf(1.f + std::ldexp(1.f, -11)), 0x3c00); // tie
  EXPECT_EQ(floatToHalf(1.f + 3 * std::ldexp(1.f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(std::ldexp(1.f, -25)), 0x0000); // tie to 0
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(65520.f), 0x7bff); // saturates
  EXPECT_EQ(floatToHalf(-INFINITY), 0xfbff);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
}

/// The largest step a run of values in [lo, hi] may get: the range over
/// the codes, widened by the f16 rounding of the min (down) and of the
/// step (up).
double tightStep(double lo, double hi, double qmax) {
  return (hi - lo + std::abs(lo) * 1e-3) / qmax * (1 + 1e-3) + 1e-6;
}

class KiviBits : public ::testing::TestWithParam<int64_t> {};

TEST_P(KiviBits, WriterQuantizesFullBlocksAndKeepsTheTail) {
  const int64_t bits = GetParam(), bs = 32, H = 2, D = 64, T = 2 * bs + 5;
  const std::vector<int32_t> table = {3, 1, 5};
  const Rows r = randomRows(1, T, H, D, 7);
  Pool decode(2, H, bs, D, bits, 8), prefill(2, H, bs, D, bits, 8);
  for (int64_t t = 0; t < T; ++t)
    write(decode, r, t, 1, {slotOf(table, bs, t)}, 1);
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < T; ++t)
    slots.push_back(slotOf(table, bs, t));
  write(prefill, r, 0, T, slots, 1);
  // A filled block keeps its exact rows in its tail for the attention of
  // the same call, which then releases it: its pages go back to the OS
  // (checked before anything reads them: a read maps the zero page).
  for (Pool *p : {&decode, &prefill})
    for (int64_t m = 0; m < 2; ++m) {
      const int32_t blk = table[size_t(m)];
      ASSERT_TRUE(kivi::tailRetained(p->l, p->data, blk, 1));
      EXPECT_EQ(p->tailCount(blk, 1), bs);
      EXPECT_EQ(std::memcmp(p->tailRow(blk, 1, 0, 1, 7),
                            &r.k[size_t(((m * bs + 7) * H + 1) * D)], D * 4),
                0);
      kivi::releaseTail(p->l, p->data, blk, 1);
    }
  std::vector<unsigned char> resident(
      size_t(prefill.l.tailLayerBytes / sysconf(_SC_PAGESIZE)));
  ASSERT_EQ(mincore(prefill.data + prefill.l.tail(3, 1),
                    size_t(prefill.l.tailLayerBytes), resident.data()),
            0);
  for (unsigned char page : resident)
    EXPECT_EQ(page & 1, 0);
  EXPECT_TRUE(decode.sameBlocks(prefill));

  for (int64_t m = 0; m < 2; ++m) {
    const int64_t blk = table[size_t(m)];
    EXPECT_EQ(decode.tailCount(blk, 1), 0);
    for (int64_t h = 0; h < H; ++h) {
      // Each head's own width (mixed widths differ per head).
      const double qmax = double((1 << decode.l.slabShape(1, h).bits) - 1);
      for (int64_t d = 0; d < D; ++d) {
        double lo = INFINITY, hi = -INFINITY;
        for (int64_t t = 0; t < bs; ++t) {
          lo = std::min<double>(lo, r.key(0, m * bs + t, h, d));
          hi = std::max<double>(hi, r.key(0, m * bs + t, h, d));
        }
        for (int64_t t = 0; t < bs; ++t) {
          double step;
          const double x = r.key(0, m * bs + t, h, d);
          const double got = decode.stored(blk, 1, 0, h, t, d, &step);
          ASSERT_LE(step, tightStep(lo, hi, qmax));
          ASSERT_LE(std::abs(got - x), step / 2 * (1 + 1e-3) + 1e-6)
              << "key block " << m << " head " << h << " row " << t
              << " channel " << d;
        }
      }
      const int64_t G = decode.l.valueGroup;
      for (int64_t t = 0; t < bs; ++t)
        for (int64_t g0 = 0; g0 < D; g0 += G) {
          double lo = INFINITY, hi = -INFINITY;
          for (int64_t d = g0; d < g0 + G; ++d) {
            lo = std::min<double>(lo, r.value(0, m * bs + t, h, d));
            hi = std::max<double>(hi, r.value(0, m * bs + t, h, d));
          }
          for (int64_t d = g0; d < g0 + G; ++d) {
            double step;
            const double x = r.value(0, m * bs + t, h, d);
            const double got = decode.stored(blk, 1, 1, h, t, d, &step);
            ASSERT_LE(step, tightStep(lo, hi, qmax));
            ASSERT_LE(std::abs(got - x), step / 2 * (1 + 1e-3) + 1e-6)
                << "value block " << m << " row " << t << " channel " << d;
          }
        }
    }
  }
  // The filling block: exact rows in its tail; layer 0 untouched.
  EXPECT_EQ(decode.tailCount(5, 1), 5);
  for (int64_t t = 0; t < 5; ++t)
    for (int64_t h = 0; h < H; ++h) {
      EXPECT_EQ(std::memcmp(decode.tailRow(5, 1, 0, h, t),
                            &r.k[size_t(((2 * bs + t) * H + h) * D)], D * 4),
                0);
      EXPECT_EQ(std::memcmp(decode.tailRow(5, 1, 1, h, t),
                            &r.v[size_t(((2 * bs + t) * H + h) * D)], D * 4),
                0);
      EXPECT_EQ(std::memcmp(decode.tailRow(5, 1, 0, h, t),
                            prefill.tailRow(5, 1, 0, h, t), D * 4),
                0);
    }
  for (int64_t blk = 0; blk < 8; ++blk)
    EXPECT_EQ(decode.tailCount(blk, 0), 0);
}

TEST_P(KiviBits, SeveralSequencesInOneCall) {
  // Large enough for the writer's threads; each sequence its own blocks.
  const int64_t bits = GetParam(), bs = 16, H = 4, D = 128, B = 6, T = 40;
  const Rows r = randomRows(B, T, H, D, 11);
  Pool together(1, H, bs, D, bits, 1 + B * 3),
      apart(1, H, bs, D, bits, 1 + B * 3);
  std::vector<int64_t> all;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      all.push_back((1 + b * 3 + t / bs) * bs + t % bs);
  write(together, r, 0, T, all, 0);
  for (int64_t b = 0; b < B; ++b) {
    Rows one{1, T, H, D, {}, {}};
    const size_t n = size_t(T * H * D);
    one.k.assign(r.k.begin() + b * n, r.k.begin() + (b + 1) * n);
    one.v.assign(r.v.begin() + b * n, r.v.begin() + (b + 1) * n);
    write(apart, one, 0, T,
          std::vector<int64_t>(all.begin() + b * T, all.begin() + (b + 1) * T),
          0);
  }
  EXPECT_EQ(std::memcmp(together.data, apart.data, together.bytes), 0);
}

TEST_P(KiviBits, BadInputWritesNothing) {
  const int64_t bits = GetParam(), bs = 16, H = 1, D = 16;
  const Rows r = randomRows(1, 1, H, D, 3);
  Pool p(2, H, bs, D, bits, 4);
  auto call = [&](int64_t slot, int64_t layer, int64_t callBits,
                  int64_t numLayers, const float *k) {
    const int64_t s = slot;
    sitsRuntimeKiviWrite(1, 1, H, D, k, r.v.data(), 0, 0, D, &s, 1, p.data,
                         p.blocks, numLayers, layer, bs, callBits,
                         kivi::kReleaseTail);
  };
  call(-1, 0, bits, 2, r.k.data());     // padding
  call(3, 0, bits, 2, r.k.data());      // the null block
  call(4 * bs, 0, bits, 2, r.k.data()); // past the pool
  call(bs, 2, bits, 2, r.k.data());     // layer out of range
  call(bs, -1, bits, 2, r.k.data());
  call(bs, 0, 3, 2, r.k.data());    // bad width
  call(bs, 0, bits, 2, nullptr);    // no rows
  call(bs, 0, bits, 0, r.k.data()); // no layers
  EXPECT_TRUE(p.allZero());
}

TEST_P(KiviBits, ABlockCutBackIntoIsRefilledFromItsSlab) {
  // 40 positions (blocks 2 and 1), then the sequence is cut to 20 and
  // position 20 written again: rows 0..19 come back from block 2's slab.
  const int64_t bits = GetParam(), bs = 32, H = 2, D = 32;
  const std::vector<int32_t> table = {2, 1};
  const Rows r = randomRows(1, 41, H, D, 5);
  Pool p(1, H, bs, D, bits, 3);
  std::vector<int64_t> slots;
  for (int64_t t = 0; t < 40; ++t)
    slots.push_back(slotOf(table, bs, t));
  write(p, r, 0, 40, slots, 0);
  ASSERT_EQ(p.tailCount(2, 0), bs); // kept for the call's attention
  kivi::releaseTail(p.l, p.data, 2, 0);
  ASSERT_EQ(p.tailCount(2, 0), 0);
  write(p, r, 40, 1, {slotOf(table, bs, 20)}, 0);
  EXPECT_EQ(p.tailCount(2, 0), 21);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t t = 0; t < 20; ++t)
      for (int64_t d = 0; d < D; ++d) {
        EXPECT_FLOAT_EQ(p.tailRow(2, 0, 0, h, t)[d],
                        p.stored(2, 0, 0, h, t, d));
        EXPECT_FLOAT_EQ(p.tailRow(2, 0, 1, h, t)[d],
                        p.stored(2, 0, 1, h, t, d));
      }
    EXPECT_EQ(std::memcmp(p.tailRow(2, 0, 0, h, 20),
                          &r.k[size_t((40 * H + h) * D)], D * 4),
              0);
  }
}

INSTANTIATE_TEST_SUITE_P(Bits, KiviBits,
                         ::testing::Values(4, 2, kivi::kMixedWidths),
                         [](const auto &info) {
                           return info.param == kivi::kMixedWidths
                                      ? std::string("mixed")
                                      : "int" + std::to_string(info.param);
                         });

/// Attention of `queries` query tokens per sequence over a pool written
/// with each sequence's `lens[b]` positions, on path `isa`, against the
/// double reference over what the pool holds.
void checkAttention(Isa isa, int64_t bits, const std::vector<int64_t> &lens,
                    int64_t queries, int64_t qHeads = 8, int64_t kvHeads = 2,
                    int64_t D = 64, int64_t bs = 32) {
  const int64_t B = int64_t(lens.size()), layers = 2, layer = 1;
  int64_t longest = 0;
  for (int64_t n : lens)
    longest = std::max(longest, n);
  const int64_t width = (longest + bs - 1) / bs + 1;
  // Sequence b's block m is 1 + m * B + b: interleaved, as a pool is.
  Pool p(layers, kvHeads, bs, D, bits, 1 + width * B);
  std::vector<int32_t> tables(size_t(B * width), 0);
  std::vector<Rows> rows;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t m = 0; m < width; ++m)
      tables[size_t(b * width + m)] = int32_t(1 + m * B + b);
    rows.push_back(randomRows(1, lens[size_t(b)], kvHeads, D, 100 + b));
    const Rows &r = rows.back();
    std::vector<int32_t> table(tables.begin() + b * width,
                               tables.begin() + (b + 1) * width);
    std::vector<int64_t> slots;
    for (int64_t t = 0; t < lens[size_t(b)]; ++t)
      slots.push_back(slotOf(table, bs, t));
    // Everything but the last `queries` positions, then those in one call
    // (a prefill or decode step after earlier steps).
    const int64_t split = std::max<int64_t>(0, lens[size_t(b)] - queries);
    if (split > 0) {
      write(p, r, 0, split,
            std::vector<int64_t>(slots.begin(), slots.begin() + split), layer);
      // The earlier steps' attention released the tails they filled.
      for (int64_t m = 0; m < split / bs; ++m)
        kivi::releaseTail(p.l, p.data, table[size_t(m)], layer);
    }
    if (lens[size_t(b)] > split)
      write(p, r, split, lens[size_t(b)] - split,
            std::vector<int64_t>(slots.begin() + split, slots.end()), layer);
  }
  std::vector<int32_t> ctx(lens.begin(), lens.end());
  std::mt19937 gen(9);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> q(size_t(B * queries * qHeads * D));
  for (float &x : q)
    x = normal(gen);
  const float scale = 1.f / std::sqrt(float(D));
  // [B][S][Hq][D], with sentinels after.
  std::vector<float> out(q.size() + 16, -7.f);

  pattn::Args a{};
  a.batch = B;
  a.queries = queries;
  a.qHeads = qHeads;
  a.kvHeads = kvHeads;
  a.headDim = D;
  a.q = q.data();
  a.qBatchStride = queries * qHeads * D;
  a.qHeadStride = D;
  a.qTokenStride = qHeads * D;
  a.pool = p.data;
  a.numBlocks = p.blocks;
  a.blockSize = bs;
  a.tables = tables.data();
  a.tableWidth = width;
  a.tableStride = width;
  a.contextLens = ctx.data();
  a.scale = scale;
  a.out = out.data();
  a.outBatchStride = a.qBatchStride;
  a.outHeadStride = D;
  a.outTokenStride = qHeads * D;
  a.format = pattn::Format::kKivi;
  a.numLayers = layers;
  a.layer = layer;
  a.bits = bits;
  ASSERT_TRUE(pattn::run(isa, a));
  for (size_t i = q.size(); i < out.size(); ++i)
    ASSERT_EQ(out[i], -7.f);
  // The call released the tails its writes filled.
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < lens[size_t(b)] / bs; ++m)
      EXPECT_FALSE(kivi::tailRetained(p.l, p.data,
                                      tables[size_t(b * width + m)], layer));

  const int64_t group = qHeads / kvHeads;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = lens[size_t(b)];
    // What the call reads, position by position: a block the call's
    // writes filled, and the block being filled, hold exact rows; earlier
    // full blocks their quantized ones.
    auto held = [&](int64_t kind, int64_t g, int64_t t, int64_t d) -> double {
      const int64_t m = t / bs;
      const int64_t blk = tables[size_t(b * width + m)];
      if ((m + 1) * bs <= len - queries)
        return p.stored(blk, layer, kind, g, t % bs, d);
      const Rows &r = rows[size_t(b)];
      return kind == 0 ? r.key(0, t, g, d) : r.value(0, t, g, d);
    };
    for (int64_t s = 0; s < queries; ++s) {
      const int64_t sees = len - queries + s + 1;
      for (int64_t h = 0; h < qHeads; ++h) {
        const float *qr = q.data() + ((b * queries + s) * qHeads + h) * D;
        const float *o = out.data() + ((b * queries + s) * qHeads + h) * D;
        if (sees <= 0) {
          for (int64_t d = 0; d < D; ++d)
            ASSERT_EQ(o[d], 0.f);
          continue;
        }
        const int64_t g = h / group;
        std::vector<double> w(static_cast<size_t>(sees));
        double top = -INFINITY;
        for (int64_t t = 0; t < sees; ++t) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += double(qr[d]) * held(0, g, t, d);
          w[size_t(t)] = dot * scale;
          top = std::max(top, w[size_t(t)]);
        }
        double sum = 0;
        for (double &x : w)
          sum += (x = std::exp(x - top));
        for (int64_t d = 0; d < D; ++d) {
          double want = 0;
          for (int64_t t = 0; t < sees; ++t)
            want += w[size_t(t)] * held(1, g, t, d);
          want /= sum;
          ASSERT_NEAR(o[d], want, 1e-5 * (1 + std::abs(want)))
              << pattn::isaName(isa) << " b " << b << " s " << s << " h " << h
              << " d " << d;
        }
      }
    }
  }
}

class KiviAttention
    : public ::testing::TestWithParam<std::tuple<Isa, int64_t>> {
protected:
  void SetUp() override {
    if (!pattn::isaAvailable(std::get<0>(GetParam())))
      GTEST_SKIP() << "this CPU lacks the path";
  }
  Isa isa() const { return std::get<0>(GetParam()); }
  int64_t bits() const { return std::get<1>(GetParam()); }
};

TEST_P(KiviAttention, Decode) {
  // Empty tail, partial tails, one and several full blocks, several chunks.
  checkAttention(isa(), bits(), {1}, 1);
  checkAttention(isa(), bits(), {31, 32, 33}, 1);
  checkAttention(isa(), bits(), {64, 7, 300}, 1);
}

TEST_P(KiviAttention, ManySequences) {
  // Enough (sequence, kv head) items that each walks its whole context.
  std::vector<int64_t> lens;
  for (int64_t b = 0; b < 20; ++b)
    lens.push_back(40 + 37 * b);
  checkAttention(isa(), bits(), lens, 1);
}

TEST_P(KiviAttention, Prefill) {
  checkAttention(isa(), bits(), {70, 5}, 5);
  checkAttention(isa(), bits(), {200}, 200, 4, 4, 32, 16);
}

TEST_P(KiviAttention, InvalidGeometryComputesNothing) {
  std::vector<float> q(64, 1.f), out(64, -7.f);
  std::vector<uint8_t> pool(1 << 16);
  int32_t table = 1, len = 1;
  pattn::Args a{};
  a.batch = 1;
  a.queries = 1;
  a.qHeads = 1;
  a.kvHeads = 1;
  a.headDim = 64;
  a.q = q.data();
  a.qHeadStride = 64;
  a.pool = pool.data();
  a.numBlocks = 2;
  a.blockSize = 16;
  a.tables = &table;
  a.tableWidth = 1;
  a.contextLens = &len;
  a.scale = 1.f;
  a.out = out.data();
  a.outHeadStride = 64;
  a.format = pattn::Format::kKivi;
  a.numLayers = 1;
  a.bits = 3; // no such width
  ASSERT_TRUE(pattn::run(isa(), a));
  a.bits = 4;
  a.layer = 1; // past the layers
  ASSERT_TRUE(pattn::run(isa(), a));
  a.layer = 0;
  a.blockSize = int64_t(1) << 11; // past the largest block size
  ASSERT_TRUE(pattn::run(isa(), a));
  for (float x : out)
    ASSERT_EQ(x, -7.f);
}

TEST(KiviAttention, DISABLED_Bench) {
  // A decode step of one layer: batch 8, 8 query / 2 kv heads of 64.
  const int64_t B = 8, Hq = 8, Hkv = 2, D = 64, bs = 32, layers = 2;
  ASSERT_TRUE(setNumThreads(2).ok());
  std::printf("%7s %9s %9s %9s\n", "context", "f32 us", "int4 us", "int2 us");
  for (int64_t ctx : {512, 2048, 8192}) {
    const int64_t width = ctx / bs, blocks = 1 + B * width;
    std::vector<int32_t> tables(size_t(B * width)), lens(size_t(B), ctx);
    for (size_t i = 0; i < tables.size(); ++i)
      tables[i] = int32_t(1 + i);
    std::mt19937 gen(1);
    std::normal_distribution<float> normal(0.f, 1.f);
    std::vector<float> q(size_t(B * Hq * D)), out(q.size());
    for (float &x : q)
      x = normal(gen);
    // f32: [blocks][layers][2][Hkv][bs][D].
    std::vector<float> f32(size_t(blocks * layers * 2 * Hkv * bs * D));
    for (float &x : f32)
      x = normal(gen);
    double us[3];
    us[0] = 1e6 * test::secondsPerCall(
                      [&](size_t) {
                        sitsRuntimePagedAttention(
                            B, 1, Hq, Hkv, D, q.data(), Hq * D, D, Hq * D,
                            f32.data(), blocks, layers * 2 * Hkv * bs * D,
                            Hkv * bs * D, 2 * Hkv * bs * D + Hkv * bs * D,
                            bs * D, bs, D, tables.data(), width, width,
                            lens.data(), 0.125f, out.data(), Hq * D, D, Hq * D);
                      },
                      3, 0.2, 20);
    for (int64_t bits : {4, 2}) {
      Pool p(layers, Hkv, bs, D, bits, blocks);
      const Rows r = randomRows(B, ctx, Hkv, D, 3);
      std::vector<int64_t> slots(size_t(B * ctx));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < ctx; ++t)
          slots[size_t(b * ctx + t)] =
              tables[size_t(b * width + t / bs)] * bs + t % bs;
      write(p, r, 0, ctx, slots, 1);
      us[bits == 4 ? 1 : 2] =
          1e6 * test::secondsPerCall(
                    [&](size_t) {
                      sitsRuntimePagedAttentionKivi(
                          B, 1, Hq, Hkv, D, q.data(), Hq * D, D, Hq * D, p.data,
                          blocks, layers, 1, bs, bits, tables.data(), width,
                          width, lens.data(), 0.125f, out.data(), Hq * D, D,
                          Hq * D);
                    },
                    3, 0.2, 20);
    }
    std::printf("%7lld %9.1f %9.1f %9.1f\n", (long long)ctx, us[0], us[1],
                us[2]);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Paths, KiviAttention,
    ::testing::Combine(
        ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512),
        ::testing::Values(int64_t(4), int64_t(2), 4 + kivi::kKeysPerToken,
                          2 + kivi::kKeysPerToken, kivi::kMixedWidths)),
    [](const auto &info) {
      const int64_t mode = std::get<1>(info.param);
      if (mode == kivi::kMixedWidths)
        return std::string(pattn::isaName(std::get<0>(info.param))) + "_mixed";
      return std::string(pattn::isaName(std::get<0>(info.param))) + "_int" +
             std::to_string(mode % kivi::kKeysPerToken) +
             (mode & kivi::kKeysPerToken ? "_token_keys" : "");
    });

} // namespace
