//===- paged_attention_test.cpp - Decode attention over a paged KV pool ---===//
//
// Every path of `sitsRuntimePagedDecodeAttention` this CPU has (portable,
// AVX2, AVX-512) must agree with a plain double-precision reference written
// here from the ABI in ARTIFACT.md, to a relative 1e-5: grouped-query and
// multi-head shapes, head sizes the vectors divide and others, blocks of
// 16 and 1 positions, empty, ragged, clamped and long (split) contexts,
// block numbers outside the pool (read as block 0), and scores that would
// overflow exp without the max subtracted. The pool is allocated to its
// exact size, so that ASan sees any read past it, and the output rows are
// surrounded by sentinels that must stay. Thread counts give the same bits.
// The exported symbol is looked up the way compiled code finds it.
// DISABLED_Bench prints the time per call (run with
// --gtest_also_run_disabled_tests).
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include "paged_attention.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <numeric>
#include <random>

using namespace sits::runtime;
using pattn::Isa;

namespace {

/// One call: the compiler's pool layout
/// [numBlocks][layers][2][kvHeads][blockSize][headDim], attending layer
/// `layer` (the last by default, so that V of the last block ends the pool).
struct Case {
  int64_t batch = 1, qHeads = 8, kvHeads = 2, headDim = 64, blockSize = 16;
  int64_t numBlocks = 8, layers = 2, layer = 1, tableWidth = 4;
  int64_t qPad = 0, outPad = 0;
  float scale = 0.125f;
  std::vector<int32_t> lens, tables;
  std::vector<float> pool, q;

  int64_t layerPart() const { return kvHeads * blockSize * headDim; }
  int64_t blockStride() const { return layers * 2 * layerPart(); }
  int64_t keyOffset() const { return layer * 2 * layerPart(); }
  int64_t valueOffset() const { return keyOffset() + layerPart(); }
  int64_t rowLen() const { return qHeads * headDim; }
  int64_t qStride() const { return rowLen() + qPad; }
  int64_t outStride() const { return rowLen() + outPad; }
};

/// Random pool, queries and tables (each entry a block of the pool; the
/// caller plants bad ones). `integers`: values in [-4, 4], so that dot
/// products are exact in f32.
void fill(Case &c, std::mt19937 &rng, bool integers = false) {
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::uniform_int_distribution<int> small(-4, 4);
  auto value = [&] { return integers ? float(small(rng)) : real(rng); };
  c.pool.resize(size_t(c.numBlocks * c.blockStride()));
  for (float &v : c.pool)
    v = value();
  c.q.assign(size_t(c.batch * c.qStride()), 1e30f);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t i = 0; i < c.rowLen(); ++i)
      c.q[size_t(b * c.qStride() + i)] = value();
  c.tables.resize(size_t(c.batch * c.tableWidth));
  std::uniform_int_distribution<int32_t> block(0, int32_t(c.numBlocks - 1));
  for (int32_t &t : c.tables)
    t = block(rng);
  if (c.lens.empty())
    c.lens.assign(size_t(c.batch), int32_t(c.tableWidth * c.blockSize));
}

/// The definition, in double.
std::vector<double> reference(const Case &c) {
  std::vector<double> out(size_t(c.batch * c.rowLen()), 0.0);
  const int64_t group = c.qHeads / c.kvHeads;
  for (int64_t b = 0; b < c.batch; ++b) {
    int64_t len = std::min<int64_t>(std::max(c.lens[size_t(b)], 0),
                                    c.tableWidth * c.blockSize);
    for (int64_t h = 0; h < c.qHeads; ++h) {
      if (len == 0)
        continue;
      int64_t g = h / group;
      const float *q = c.q.data() + b * c.qStride() + h * c.headDim;
      std::vector<double> s(static_cast<size_t>(len));
      std::vector<const float *> k(static_cast<size_t>(len)),
          v(static_cast<size_t>(len));
      for (int64_t t = 0; t < len; ++t) {
        int64_t blk = c.tables[size_t(b * c.tableWidth + t / c.blockSize)];
        if (blk < 0 || blk >= c.numBlocks)
          blk = 0;
        int64_t row = (g * c.blockSize + t % c.blockSize) * c.headDim;
        k[size_t(t)] =
            c.pool.data() + blk * c.blockStride() + c.keyOffset() + row;
        v[size_t(t)] =
            c.pool.data() + blk * c.blockStride() + c.valueOffset() + row;
        double dot = 0;
        for (int64_t d = 0; d < c.headDim; ++d)
          dot += double(q[d]) * double(k[size_t(t)][d]);
        s[size_t(t)] = double(c.scale) * dot;
      }
      double m = *std::max_element(s.begin(), s.end()), sum = 0;
      for (double &x : s) {
        x = std::exp(x - m);
        sum += x;
      }
      double *o = out.data() + b * c.rowLen() + h * c.headDim;
      for (int64_t t = 0; t < len; ++t)
        for (int64_t d = 0; d < c.headDim; ++d)
          o[d] += s[size_t(t)] / sum * double(v[size_t(t)][d]);
    }
  }
  return out;
}

constexpr float kUntouched = -12345.5f;
/// Sentinels before and after the output rows.
constexpr int64_t kGuard = 37;

/// The output buffer with its guards; the rows start at kGuard.
std::vector<float> runPath(Isa isa, const Case &c) {
  std::vector<float> out(size_t(c.batch * c.outStride() + 2 * kGuard),
                         kUntouched);
  EXPECT_TRUE(pattn::run(
      isa, c.batch, c.qHeads, c.kvHeads, c.headDim, c.blockSize, c.q.data(),
      c.qStride(), c.pool.data(), c.numBlocks, c.blockStride(), c.keyOffset(),
      c.valueOffset(), c.tables.data(), c.tableWidth, c.lens.data(), c.scale,
      out.data() + kGuard, c.outStride()));
  return out;
}

std::string describe(const Case &c) {
  std::ostringstream os;
  os << "batch " << c.batch << " heads " << c.qHeads << "/" << c.kvHeads
     << " headDim " << c.headDim << " blockSize " << c.blockSize
     << " tableWidth " << c.tableWidth << " lens";
  for (int32_t len : c.lens)
    os << " " << len;
  return os.str();
}

/// Within 1e-5 of the reference relative to max(|want|, 1) (outputs are
/// convex combinations of values in [-1, 1], or of small integers), and
/// every element outside the rows untouched.
::testing::AssertionResult matchesReference(const Case &c,
                                            const std::vector<float> &out,
                                            double tolerance = 1e-5) {
  std::vector<double> want = reference(c);
  for (int64_t i = 0; i < int64_t(out.size()); ++i) {
    int64_t pos = i - kGuard;
    int64_t b = pos / c.outStride(), col = pos % c.outStride();
    bool inRow = pos >= 0 && b < c.batch && col < c.rowLen();
    float got = out[size_t(i)];
    if (!inRow) {
      if (got != kUntouched)
        return ::testing::AssertionFailure()
               << describe(c) << ": wrote element " << pos
               << " outside the output rows";
      continue;
    }
    double w = want[size_t(b * c.rowLen() + col)];
    if (!(std::abs(double(got) - w) <= tolerance * std::max(1.0, std::abs(w))))
      return ::testing::AssertionFailure()
             << describe(c) << ": out[" << b << ", head " << col / c.headDim
             << ", " << col % c.headDim << "] = " << got << ", want " << w;
  }
  return ::testing::AssertionSuccess();
}

class PagedAttentionPath : public ::testing::TestWithParam<Isa> {
protected:
  void SetUp() override {
    if (!pattn::isaAvailable(GetParam()))
      GTEST_SKIP() << pattn::isaName(GetParam()) << " not on this CPU";
  }
  void TearDown() override { SITS_ASSERT_OK(setNumThreads(0)); }
};

TEST_P(PagedAttentionPath, MatchesReference) {
  std::mt19937 rng(42);
  struct Heads {
    int64_t q, kv;
  };
  int index = 0;
  // GQA 8/2 and 32/4, MHA, MQA with more heads than one pass takes.
  for (Heads heads : {Heads{8, 2}, Heads{32, 4}, Heads{4, 4}, Heads{40, 1}})
    // Multiples of 16, of 8 only (AVX2 tiles), of neither (portable).
    for (int64_t headDim : {64, 128, 40, 36, 256, 16})
      for (int64_t blockSize : {16, 1}) {
        if (headDim == 256 && heads.q > 8)
          continue;
        Case c;
        c.qHeads = heads.q;
        c.kvHeads = heads.kv;
        c.headDim = headDim;
        c.blockSize = blockSize;
        c.scale = float(1.0 / std::sqrt(double(headDim)));
        c.tableWidth = blockSize == 1 ? 400 : 24;
        c.numBlocks = blockSize == 1 ? 300 : 40;
        c.batch = 6;
        // Empty, one position, ragged, one block exactly, longer than
        // the table holds (clamped), negative (empty).
        int32_t full = int32_t(c.tableWidth * c.blockSize);
        c.lens = {0, 1, 37, int32_t(blockSize * 5), full + 100, -3};
        c.qPad = index % 2 ? 7 : 0;
        c.outPad = index % 3 ? 5 : 0;
        ++index;
        fill(c, rng);
        // Block numbers outside the pool read block 0.
        c.tables[size_t(2 * c.tableWidth + 1)] = -1;
        c.tables[size_t(4 * c.tableWidth + 0)] = int32_t(c.numBlocks);
        c.tables[size_t(4 * c.tableWidth + 3)] = INT32_MAX;
        c.tables[size_t(4 * c.tableWidth + c.tableWidth - 1)] = INT32_MIN;
        ASSERT_TRUE(matchesReference(c, runPath(GetParam(), c)));
      }
}

TEST_P(PagedAttentionPath, SmallAndSingleSequenceCalls) {
  // Below the serial threshold, and one sequence per call.
  std::mt19937 rng(7);
  for (int64_t headDim : {64, 40, 8, 3})
    for (int32_t len : {1, 2, 15, 16, 17, 63, 64, 65, 200}) {
      Case c;
      c.qHeads = 2;
      c.kvHeads = 1;
      c.headDim = headDim;
      c.blockSize = 16;
      c.tableWidth = 16;
      c.numBlocks = 16;
      c.lens = {len};
      fill(c, rng);
      ASSERT_TRUE(matchesReference(c, runPath(GetParam(), c)));
    }
}

TEST_P(PagedAttentionPath, LongContextsSplitWithTheSameBitsOnAnyThreadCount) {
  std::mt19937 rng(3);
  for (int64_t headDim : {64, 128, 40})
    for (int64_t blockSize : {16, 1}) {
      Case c;
      c.batch = 3;
      c.qHeads = 8;
      c.kvHeads = 2;
      c.headDim = headDim;
      c.blockSize = blockSize;
      c.tableWidth = 3072 / blockSize;
      c.numBlocks = blockSize == 1 ? 4000 : 256;
      c.lens = {3000, 7, 2501};
      c.outPad = 3;
      fill(c, rng);
      c.tables[5] = -7;
      SITS_ASSERT_OK(setNumThreads(1));
      std::vector<float> one = runPath(GetParam(), c);
      ASSERT_TRUE(matchesReference(c, one));
      for (int threads : {2, 3}) {
        SITS_ASSERT_OK(setNumThreads(threads));
        std::vector<float> out = runPath(GetParam(), c);
        EXPECT_EQ(
            0, std::memcmp(out.data(), one.data(), out.size() * sizeof(float)))
            << describe(c) << ", threads " << threads;
      }
    }
}

TEST_P(PagedAttentionPath, LargeScoresDoNotOverflow) {
  // Exact integer scores up to about +-1000: e^score overflows f32 unless
  // the max is subtracted first; softmax is then close to the argmax.
  std::mt19937 rng(5);
  for (int64_t headDim : {64, 40})
    for (int32_t len : {100, 700}) {
      Case c;
      c.batch = 2;
      c.qHeads = 4;
      c.kvHeads = 2;
      c.headDim = headDim;
      c.tableWidth = 48;
      c.numBlocks = 50;
      c.scale = 1.f;
      c.lens = {len, len / 3};
      fill(c, rng, /*integers=*/true);
      ASSERT_TRUE(matchesReference(c, runPath(GetParam(), c)));
    }
}

TEST_P(PagedAttentionPath, StridesAndOffsetsAsGiven) {
  // A pool that is not the compiler's layout: V before K, padding between
  // blocks, layer 0 of 1.
  std::mt19937 rng(9);
  Case c;
  c.batch = 2;
  c.qHeads = 6;
  c.kvHeads = 3;
  c.headDim = 32;
  c.blockSize = 4;
  c.tableWidth = 20;
  c.numBlocks = 10;
  c.lens = {77, 30};
  c.layers = 1;
  c.layer = 0;
  fill(c, rng);
  // Same data, rearranged: block = [pad 5][V][K][pad 3].
  const int64_t part = c.layerPart(), stride = 2 * part + 8;
  std::vector<float> pool(size_t(c.numBlocks * stride), 1e30f);
  for (int64_t blk = 0; blk < c.numBlocks; ++blk)
    for (int64_t i = 0; i < part; ++i) {
      pool[size_t(blk * stride + 5 + part + i)] =
          c.pool[size_t(blk * c.blockStride() + c.keyOffset() + i)];
      pool[size_t(blk * stride + 5 + i)] =
          c.pool[size_t(blk * c.blockStride() + c.valueOffset() + i)];
    }
  std::vector<float> out(size_t(c.batch * c.outStride() + 2 * kGuard),
                         kUntouched);
  ASSERT_TRUE(pattn::run(GetParam(), c.batch, c.qHeads, c.kvHeads, c.headDim,
                         c.blockSize, c.q.data(), c.qStride(), pool.data(),
                         c.numBlocks, stride, 5 + part, 5, c.tables.data(),
                         c.tableWidth, c.lens.data(), c.scale,
                         out.data() + kGuard, c.outStride()));
  EXPECT_TRUE(matchesReference(c, out));
}

TEST_P(PagedAttentionPath, BadArgumentsLeaveTheOutputAlone) {
  std::mt19937 rng(11);
  Case c;
  c.batch = 2;
  fill(c, rng);
  struct Bad {
    const char *what;
    int64_t batch, qHeads, kvHeads, headDim, blockSize, numBlocks, blockStride,
        keyOffset, valueOffset, tableWidth, outStride;
  };
  const int64_t bs = c.blockStride(), ko = c.keyOffset(), vo = c.valueOffset(),
                row = c.rowLen();
  const Bad bads[] = {
      {"batch 0", 0, 8, 2, 64, 16, 8, bs, ko, vo, 4, row},
      {"negative batch", -1, 8, 2, 64, 16, 8, bs, ko, vo, 4, row},
      {"qHeads % kvHeads", 2, 8, 3, 64, 16, 8, bs, ko, vo, 4, row},
      {"qHeads 0", 2, 0, 2, 64, 16, 8, bs, ko, vo, 4, row},
      {"kvHeads 0", 2, 8, 0, 64, 16, 8, bs, ko, vo, 4, row},
      {"headDim 0", 2, 8, 2, 0, 16, 8, bs, ko, vo, 4, row},
      {"blockSize 0", 2, 8, 2, 64, 0, 8, bs, ko, vo, 4, row},
      {"numBlocks 0", 2, 8, 2, 64, 16, 0, bs, ko, vo, 4, row},
      {"tableWidth 0", 2, 8, 2, 64, 16, 8, bs, ko, vo, 0, row},
      {"rows overlap", 2, 8, 2, 64, 16, 8, bs, ko, vo, 4, row - 1},
      {"V past the block", 2, 8, 2, 64, 16, 8, bs, ko, vo + 1, 4, row},
      {"K before the block", 2, 8, 2, 64, 16, 8, bs, -1, vo, 4, row},
      {"block too small", 2, 8, 2, 64, 16, 8, 2048 - 1, 0, 0, 4, row},
      {"huge sizes", 2, 8, 2, int64_t(1) << 40, int64_t(1) << 30, 8, bs, ko, vo,
       4, row},
  };
  for (const Bad &b : bads) {
    std::vector<float> out(size_t(2 * row + 64), kUntouched);
    ASSERT_TRUE(pattn::run(GetParam(), b.batch, b.qHeads, b.kvHeads, b.headDim,
                           b.blockSize, c.q.data(), c.qStride(), c.pool.data(),
                           b.numBlocks, b.blockStride, b.keyOffset,
                           b.valueOffset, c.tables.data(), b.tableWidth,
                           c.lens.data(), c.scale, out.data(), b.outStride));
    for (float v : out)
      ASSERT_EQ(v, kUntouched) << b.what;
  }
  std::vector<float> out(size_t(2 * row), kUntouched);
  ASSERT_TRUE(pattn::run(GetParam(), 2, 8, 2, 64, 16, c.q.data(), row,
                         c.pool.data(), 8, bs, ko, vo, nullptr, 4,
                         c.lens.data(), c.scale, out.data(), row));
  for (float v : out)
    ASSERT_EQ(v, kUntouched) << "null tables";
}

INSTANTIATE_TEST_SUITE_P(PagedAttention, PagedAttentionPath,
                         ::testing::Values(Isa::kScalar, Isa::kAvx2,
                                           Isa::kAvx512),
                         [](const ::testing::TestParamInfo<Isa> &info) {
                           return std::string(pattn::isaName(info.param));
                         });

using AttentionFn = void (*)(int64_t, int64_t, int64_t, int64_t, int64_t,
                             const float *, int64_t, const float *, int64_t,
                             int64_t, int64_t, int64_t, const int32_t *,
                             int64_t, const int32_t *, float, float *, int64_t);

TEST(PagedAttention, ExportedSymbolRunsTheSelectedPath) {
  void *self = dlopen(nullptr, RTLD_NOW);
  auto fn = reinterpret_cast<AttentionFn>(
      dlsym(self, "sitsRuntimePagedDecodeAttention"));
  ASSERT_NE(fn, nullptr);
  std::mt19937 rng(13);
  Case c;
  c.batch = 3;
  c.qHeads = 32;
  c.kvHeads = 4;
  c.tableWidth = 40;
  c.numBlocks = 64;
  c.lens = {600, 0, 33};
  c.outPad = 2;
  fill(c, rng);
  std::vector<float> out(size_t(c.batch * c.outStride() + 2 * kGuard),
                         kUntouched);
  fn(c.batch, c.qHeads, c.kvHeads, c.headDim, c.blockSize, c.q.data(),
     c.qStride(), c.pool.data(), c.numBlocks, c.blockStride(), c.keyOffset(),
     c.valueOffset(), c.tables.data(), c.tableWidth, c.lens.data(), c.scale,
     out.data() + kGuard, c.outStride());
  EXPECT_TRUE(matchesReference(c, out)) << pattn::isaName(pattn::selectedIsa());
}

/// Time per call of decode shapes (32 query heads over 4 kv heads, head
/// size 64, blocks of 16 scattered over the pool, 2 threads), and the K/V
/// bytes read per second. The pool holds 4 layers' worth of the largest
/// shape and each call attends the next layer, as a decode step does.
/// $SITS_PATTN_BENCH_PATHS (e.g. "avx512") picks the paths.
TEST(PagedAttention, DISABLED_Bench) {
  const int64_t qHeads = 32, kvHeads = 4, headDim = 64, blockSize = 16;
  const int64_t layers = 4, maxBatch = 8, maxContext = 4096;
  const int64_t part = kvHeads * blockSize * headDim;
  const int64_t blockStride = layers * 2 * part;
  const int64_t tableWidth = maxContext / blockSize;
  const int64_t numBlocks = maxBatch * tableWidth;
  std::mt19937 rng(1);
  std::vector<float> pool(size_t(numBlocks * blockStride));
  for (float &v : pool)
    v = float(int(rng() % 2001) - 1000) * 1e-3f;
  std::vector<int32_t> blocks(static_cast<size_t>(numBlocks));
  std::iota(blocks.begin(), blocks.end(), 0);
  std::shuffle(blocks.begin(), blocks.end(), rng);
  std::vector<float> q(size_t(maxBatch * qHeads * headDim), 0.05f);
  std::vector<float> out(q.size());
  const char *paths = std::getenv("SITS_PATTN_BENCH_PATHS");
  SITS_ASSERT_OK(setNumThreads(2));
  std::printf("%-7s %5s %7s %7s %10s %9s\n", "path", "batch", "context",
              "threads", "us/call", "KV GB/s");
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
    if (!pattn::isaAvailable(isa) ||
        (paths && !std::strstr(paths, pattn::isaName(isa))))
      continue;
    for (int64_t batch : {1, 8})
      for (int32_t context : {128, 1024, 4096}) {
        std::vector<int32_t> lens(size_t(batch), context);
        auto call = [&](size_t i) {
          int64_t layer = int64_t(i % layers);
          pattn::run(isa, batch, qHeads, kvHeads, headDim, blockSize, q.data(),
                     qHeads * headDim, pool.data(), numBlocks, blockStride,
                     layer * 2 * part, layer * 2 * part + part, blocks.data(),
                     tableWidth, lens.data(), 0.125f, out.data(),
                     qHeads * headDim);
        };
        for (size_t i = 0; i < 8; ++i)
          call(i);
        auto start = std::chrono::steady_clock::now();
        size_t calls = 0;
        double elapsed = 0;
        do {
          call(calls++);
          elapsed = std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - start)
                        .count();
        } while (elapsed < 0.3 || calls < 5);
        double seconds = elapsed / double(calls);
        double bytes = double(batch) * context * kvHeads * headDim * 2 * 4;
        std::printf("%-7s %5lld %7d %7d %10.2f %9.1f\n", pattn::isaName(isa),
                    (long long)batch, context, 2, seconds * 1e6,
                    bytes / seconds * 1e-9);
      }
  }
  SITS_ASSERT_OK(setNumThreads(0));
}

} // namespace
