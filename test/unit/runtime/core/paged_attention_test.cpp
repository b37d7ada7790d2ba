//===- paged_attention_test.cpp - Attention over a paged KV pool ----------===//
//
// Every path of `sitsRuntimePagedAttention` this CPU has (portable, AVX2,
// AVX-512) must agree with a plain double-precision reference written here
// from the ABI in ARTIFACT.md, to a relative 1e-5: grouped-query and
// multi-head shapes, head sizes the vectors divide and others, blocks of
// 16 and 1 positions, empty, ragged, clamped and long contexts (cut in
// parts combined afterwards when the call has few sequences, walked chunk
// after chunk by one item per query and kv head when it has many),
// block numbers outside the pool (read as block 0), and scores that would
// overflow exp without the max subtracted; one query per sequence (decode)
// and several (prefill: causal, left-padded, across chunk boundaries);
// [B][S][Hq][D] and [B][Hq][S][D] query and output layouts, padded pool
// and table strides. The pool is allocated to its exact size, with every
// element the call must not read set to 1e30, so that ASan sees any read
// past it and the results any read of padding; the output rows are
// surrounded by sentinels that must stay. Thread counts give the same bits.
// `sitsRuntimePagedAttentionI8` and `sitsRuntimePagedAttentionF8E4M3`
// likewise, over pools of int8 or FP8 E4M3FN rows (codes and an f32
// scale) quantized by the writers' rule, against the reference over the
// exactly dequantized values: PagedAttentionPath runs over every path and
// the f32, int8 and fp8 pools (f32 and rows differ in a few shapes only),
// PagedAttentionRowPath the quantized formats' own tests; also rows of
// zeros (scale 0), the pool and its rows at odd addresses, and the 4 scale
// bytes in the argument checks (bytes it must not read are 0x7F: codes 127
// or NaN, scale 3.4e38). Every non-NaN E4M3FN code reads exactly on every
// path, through the paths' own loads and through the kernels.
// The exported symbols are looked up the way compiled code finds them.
// DISABLED_Bench and DISABLED_BenchPrefill print the time per call, and
// DISABLED_BenchQuantized that of f32, int8 and fp8 pools side by side
// (run with --gtest_also_run_disabled_tests).
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include "paged_attention.h"

#include "sits/runtime/attention_scores.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <tuple>

using namespace sits::runtime;
using pattn::Isa;

namespace {

using pattn::Args;

/// Query / output layouts: [B][S][Hq][D] (decode's [B][Hq][D] for S = 1)
/// and [B][Hq][S][D]; each sequence's rows followed by a pad.
enum class Layout { kBSHD, kBHSD };

struct Strides {
  int64_t batch, head, token;
};

/// One call: the compiler's pool layout
/// [numBlocks][layers][2][kvHeads][blockSize][headDim] (with
/// `positionPad` floats after each position's row and `headPad` after each
/// kv head's rows), attending layer `layer` (the last by default, so that
/// V of the last block ends the pool). A `format` other than kF32: the
/// pool is bytes, each row `headDim` int8 or E4M3FN codes and an f32 scale
/// (pads in bytes too), starting `poolBase` bytes into `poolRows`.
struct Case {
  int64_t batch = 1, queries = 1, qHeads = 8, kvHeads = 2, headDim = 64;
  int64_t blockSize = 16, numBlocks = 8, layers = 2, layer = 1;
  int64_t tableWidth = 4, tablePad = 0;
  int64_t qPad = 0, outPad = 0, positionPad = 0, headPad = 0;
  Layout qLayout = Layout::kBSHD, outLayout = Layout::kBSHD;
  float scale = 0.125f;
  pattn::Format format = pattn::Format::kF32;
  int64_t poolBase = 0;
  std::vector<int32_t> lens, tables;
  std::vector<float> pool, q;
  std::vector<uint8_t> poolRows;

  /// A case of `heads` (query, kv) and `headDim` at block size
  /// `blockSize`, scaled by 1/sqrt(headDim); the caller sets the rest.
  static Case shaped(int64_t qHeads, int64_t kvHeads, int64_t headDim,
                     int64_t blockSize) {
    Case c;
    c.qHeads = qHeads;
    c.kvHeads = kvHeads;
    c.headDim = headDim;
    c.blockSize = blockSize;
    c.scale = float(1.0 / std::sqrt(double(headDim)));
    return c;
  }

  /// Pool elements (floats or bytes) per K or V row.
  /// Rows of codes and a scale (int8 or E4M3FN).
  bool quantized() const { return format != pattn::Format::kF32; }
  int64_t rowLen() const { return quantized() ? headDim + 4 : headDim; }
  int64_t positionStride() const { return rowLen() + positionPad; }
  int64_t poolLen() const { return numBlocks * blockStride(); }
  uint8_t *rowPool() { return poolRows.data() + poolBase; }
  const uint8_t *rowPool() const { return poolRows.data() + poolBase; }
  int64_t kvHeadStride() const {
    return blockSize * positionStride() + headPad;
  }
  int64_t layerPart() const { return kvHeads * kvHeadStride(); }
  int64_t blockStride() const { return layers * 2 * layerPart(); }
  int64_t keyOffset() const { return layer * 2 * layerPart(); }
  int64_t valueOffset() const { return keyOffset() + layerPart(); }
  int64_t tableStride() const { return tableWidth + tablePad; }
  Strides strides(Layout layout, int64_t pad) const {
    int64_t rows = queries * qHeads * headDim + pad;
    return layout == Layout::kBSHD ? Strides{rows, headDim, qHeads * headDim}
                                   : Strides{rows, queries * headDim, headDim};
  }
  Strides qStrides() const { return strides(qLayout, qPad); }
  Strides outStrides() const { return strides(outLayout, outPad); }
  /// Elements from the first row's start to the last row's end.
  int64_t extent(Strides s) const {
    return (batch - 1) * s.batch + (qHeads - 1) * s.head +
           (queries - 1) * s.token + headDim;
  }
  static int64_t at(Strides s, int64_t b, int64_t h, int64_t t) {
    return b * s.batch + h * s.head + t * s.token;
  }
  /// Where the K row of (block, kv head g, position r in the block) is.
  int64_t keyRow(int64_t blk, int64_t g, int64_t r) const {
    return blk * blockStride() + keyOffset() + g * kvHeadStride() +
           r * positionStride();
  }
  Args args(float *out) const {
    Strides qs = qStrides(), os = outStrides();
    return Args{batch,
                queries,
                qHeads,
                kvHeads,
                headDim,
                q.data(),
                qs.batch,
                qs.head,
                qs.token,
                quantized() ? static_cast<const void *>(rowPool())
                            : pool.data(),
                numBlocks,
                blockStride(),
                keyOffset(),
                valueOffset(),
                kvHeadStride(),
                blockSize,
                positionStride(),
                tables.data(),
                tableWidth,
                tableStride(),
                lens.data(),
                scale,
                out,
                os.batch,
                os.head,
                os.token,
                format};
  }
};

/// E4M3FN code `code` exactly: (-1)^s 2^(e - 7) (1 + m / 8), or 2^-6 m / 8
/// for e = 0; NaN for 0x7F and 0xFF.
double decodeE4M3(uint8_t code) {
  const int e = (code >> 3) & 15, m = code & 7;
  if (e == 15 && m == 7)
    return std::numeric_limits<double>::quiet_NaN();
  const double mag = e == 0 ? std::ldexp(m, -9) : std::ldexp(8 + m, e - 10);
  return code & 0x80 ? -mag : mag;
}

/// The E4M3FN code of x rounded to nearest even, saturated to +-448 (never
/// NaN).
uint8_t encodeE4M3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::min(std::abs(double(x)), 448.0);
  if (a < 0x1p-6) // subnormal: multiples of 2^-9 (rint: nearest even)
    return uint8_t(sign | int(std::rint(a * 0x1p9)));
  int e;
  std::frexp(a, &e); // a = f 2^e, f in [0.5, 1): 2^(e - 1) <= a < 2^e
  --e;
  int m = int(std::rint((std::ldexp(a, -e) - 1.0) * 8.0));
  if (m == 8) { // rounded up to the next power of two
    m = 0;
    ++e;
  }
  return uint8_t(sign | (e + 7) << 3 | m);
}

/// The writers' row in `format`: int8, scale = max|x| / 127 and codes
/// rint(x / scale) clamped to [-127, 127]; E4M3FN, scale = max|x| / 448 and
/// codes E4M3FN(x * (448 / max|x|)) rounded to nearest even (all 0, and
/// scale 0, for a zero row).
void quantizeRow(pattn::Format format, const float *x, int64_t n,
                 uint8_t *row) {
  float top = 0.f;
  for (int64_t d = 0; d < n; ++d)
    top = std::max(top, std::abs(x[d]));
  const bool f8 = format == pattn::Format::kF8E4M3Row;
  const float scale = top / (f8 ? 448.f : 127.f);
  const float inverse = f8 && top != 0.f ? 448.f / top : 0.f;
  for (int64_t d = 0; d < n; ++d)
    row[d] = scale == 0.f ? uint8_t(0)
             : f8 ? encodeE4M3(x[d] * inverse)
                  : uint8_t(int8_t(
                        std::clamp(std::rint(x[d] / scale), -127.f, 127.f)));
  std::memcpy(row + n, &scale, sizeof scale);
}

/// A code of `format` as a number.
double decodeCode(pattn::Format format, uint8_t code) {
  return format == pattn::Format::kF8E4M3Row ? decodeE4M3(code)
                                             : double(int8_t(code));
}

/// Every element of the pool as the kernel must read it, in double: the
/// floats, or each quantized row's code * scale at its codes' offsets
/// (bytes the call must not read: NaN).
std::vector<double> poolValues(const Case &c) {
  if (!c.quantized())
    return std::vector<double>(c.pool.begin(), c.pool.end());
  std::vector<double> values(size_t(c.poolLen()),
                             std::numeric_limits<double>::quiet_NaN());
  const uint8_t *pool = c.rowPool();
  for (int64_t blk = 0; blk < c.numBlocks; ++blk)
    for (int64_t g = 0; g < c.kvHeads; ++g)
      for (int64_t r = 0; r < c.blockSize; ++r)
        for (int64_t row :
             {c.keyRow(blk, g, r),
              c.keyRow(blk, g, r) - c.keyOffset() + c.valueOffset()}) {
          float scale;
          std::memcpy(&scale, pool + row + c.headDim, sizeof scale);
          for (int64_t d = 0; d < c.headDim; ++d)
            values[size_t(row + d)] =
                decodeCode(c.format, pool[row + d]) * double(scale);
        }
  return values;
}

/// Random K/V rows of the attended layer (the rest of the pool, padding
/// included, 1e30, or bytes 0x7F: codes 127 or NaN, scales 3.4e38),
/// queries and tables (each entry a block of the pool; the caller plants
/// bad ones). Quantized rows are x quantized by the writers' rule; E4M3FN
/// rows' x are spread over 12 binades (subnormal codes included).
/// `integers`: values in [-4, 4], so that dot products are exact in f32
/// (int8: K/V codes in [-127, 127] with one of +-127 per row, scale 1/32
/// exactly; E4M3FN: K/V values v / 64, v an E4M3FN value of magnitude in
/// [1, 448] with one of +-448 per row, so scale 1/64 and codes v exactly;
/// so that q . K is exact too). A quantized pool is allocated to its exact
/// end (after `poolBase` bytes).
void fill(Case &c, std::mt19937 &rng, bool integers = false) {
  std::uniform_real_distribution<float> real(-1.f, 1.f);
  std::uniform_int_distribution<int> small(-4, 4);
  auto value = [&] { return integers ? float(small(rng)) : real(rng); };
  if (c.quantized()) {
    const bool f8 = c.format == pattn::Format::kF8E4M3Row;
    std::uniform_int_distribution<int> code(-127, 127);
    // E4M3FN codes 1.0 (0x38) to 448 (0x7E), and binades below 1.
    std::uniform_int_distribution<int> f8Code(0x38, 0x7E), binade(0, 11);
    c.poolRows.assign(size_t(c.poolBase + c.poolLen()), uint8_t(0x7F));
    std::vector<float> x(size_t(c.headDim));
    auto row = [&](int64_t at) {
      for (float &v : x)
        if (!integers)
          v = f8 ? std::ldexp(real(rng), -binade(rng)) : real(rng);
        else if (f8)
          v = float(decodeE4M3(uint8_t(f8Code(rng) | (rng() % 2) << 7))) / 64.f;
        else
          v = float(code(rng)) / 32.f;
      if (integers)
        x[rng() % x.size()] =
            (rng() % 2 ? 1.f : -1.f) * (f8 ? 448.f / 64.f : 127.f / 32.f);
      quantizeRow(c.format, x.data(), c.headDim, c.rowPool() + at);
    };
    for (int64_t blk = 0; blk < c.numBlocks; ++blk)
      for (int64_t g = 0; g < c.kvHeads; ++g)
        for (int64_t r = 0; r < c.blockSize; ++r) {
          int64_t k = c.keyRow(blk, g, r);
          row(k);
          row(k - c.keyOffset() + c.valueOffset());
        }
  } else {
    c.pool.assign(size_t(c.poolLen()), 1e30f);
    for (int64_t blk = 0; blk < c.numBlocks; ++blk)
      for (int64_t g = 0; g < c.kvHeads; ++g)
        for (int64_t r = 0; r < c.blockSize; ++r)
          for (int64_t d = 0; d < c.headDim; ++d) {
            int64_t k = c.keyRow(blk, g, r) + d;
            c.pool[size_t(k)] = value();
            c.pool[size_t(k - c.keyOffset() + c.valueOffset())] = value();
          }
  }
  const Strides qs = c.qStrides();
  c.q.assign(size_t(c.extent(qs)), 1e30f);
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.qHeads; ++h)
      for (int64_t t = 0; t < c.queries; ++t)
        for (int64_t d = 0; d < c.headDim; ++d)
          c.q[size_t(Case::at(qs, b, h, t) + d)] = value();
  c.tables.resize(size_t(c.batch * c.tableStride()));
  std::uniform_int_distribution<int32_t> block(0, int32_t(c.numBlocks - 1));
  for (int32_t &t : c.tables)
    t = block(rng);
  if (c.lens.empty())
    c.lens.assign(size_t(c.batch), int32_t(c.tableWidth * c.blockSize));
}

/// fill, with the query rows of every other case `index` and the output
/// rows of two in three padded (strided layouts).
void padAndFill(Case &c, std::mt19937 &rng, int index) {
  c.qPad = index % 2 ? 7 : 0;
  c.outPad = index % 3 ? 5 : 0;
  fill(c, rng);
}

/// The definition, in double: [batch][qHeads][queries][headDim]
/// (quantized: over the exactly dequantized K and V).
std::vector<double> reference(const Case &c) {
  std::vector<double> out(size_t(c.batch * c.qHeads * c.queries * c.headDim),
                          0.0);
  const std::vector<double> pool = poolValues(c);
  const int64_t group = c.qHeads / c.kvHeads;
  const Strides qs = c.qStrides();
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t t = 0; t < c.queries; ++t) {
      // Query t sits at position lens[b] - queries + t and sees it and all
      // positions before it.
      int64_t len =
          std::clamp<int64_t>(int64_t(c.lens[size_t(b)]) - c.queries + t + 1, 0,
                              c.tableWidth * c.blockSize);
      if (len == 0)
        continue;
      for (int64_t h = 0; h < c.qHeads; ++h) {
        int64_t g = h / group;
        const float *q = c.q.data() + Case::at(qs, b, h, t);
        std::vector<double> s(static_cast<size_t>(len));
        std::vector<const double *> v(static_cast<size_t>(len));
        for (int64_t p = 0; p < len; ++p) {
          int64_t blk = c.tables[size_t(b * c.tableStride() + p / c.blockSize)];
          if (blk < 0 || blk >= c.numBlocks)
            blk = 0;
          int64_t row = c.keyRow(blk, g, p % c.blockSize);
          const double *k = pool.data() + row;
          v[size_t(p)] = pool.data() + row - c.keyOffset() + c.valueOffset();
          double dot = 0;
          for (int64_t d = 0; d < c.headDim; ++d)
            dot += double(q[d]) * k[d];
          s[size_t(p)] = double(c.scale) * dot;
        }
        double m = *std::max_element(s.begin(), s.end()), sum = 0;
        for (double &x : s) {
          x = std::exp(x - m);
          sum += x;
        }
        double *o =
            out.data() + ((b * c.qHeads + h) * c.queries + t) * c.headDim;
        for (int64_t p = 0; p < len; ++p)
          for (int64_t d = 0; d < c.headDim; ++d)
            o[d] += s[size_t(p)] / sum * v[size_t(p)][d];
      }
    }
  return out;
}

constexpr float kUntouched = -12345.5f;
/// Sentinels before and after the output rows.
constexpr int64_t kGuard = 37;

/// The output buffer with its guards; the rows start at kGuard. `tweak`
/// may change the arguments (another pool view).
std::vector<float> runPath(Isa isa, const Case &c,
                           const std::function<void(Args &)> &tweak = {}) {
  std::vector<float> out(size_t(c.extent(c.outStrides()) + 2 * kGuard),
                         kUntouched);
  Args a = c.args(out.data() + kGuard);
  if (tweak)
    tweak(a);
  EXPECT_TRUE(pattn::run(isa, a));
  return out;
}

std::string describe(const Case &c) {
  std::ostringstream os;
  os << (c.format == pattn::Format::kI8Row       ? "int8 "
         : c.format == pattn::Format::kF8E4M3Row ? "fp8 "
                                                 : "")
     << "batch " << c.batch << " queries " << c.queries << " heads " << c.qHeads
     << "/" << c.kvHeads << " headDim " << c.headDim << " blockSize "
     << c.blockSize << " tableWidth " << c.tableWidth << " layouts q "
     << (c.qLayout == Layout::kBSHD ? "BSHD" : "BHSD") << " out "
     << (c.outLayout == Layout::kBSHD ? "BSHD" : "BHSD") << " lens";
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
  // Which element of `want` each element of `out` holds (-1: none).
  std::vector<int64_t> slot(out.size(), -1);
  const Strides os = c.outStrides();
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t h = 0; h < c.qHeads; ++h)
      for (int64_t t = 0; t < c.queries; ++t)
        for (int64_t d = 0; d < c.headDim; ++d)
          slot[size_t(kGuard + Case::at(os, b, h, t) + d)] =
              ((b * c.qHeads + h) * c.queries + t) * c.headDim + d;
  for (size_t i = 0; i < out.size(); ++i) {
    float got = out[i];
    if (slot[i] < 0) {
      if (got != kUntouched)
        return ::testing::AssertionFailure()
               << describe(c) << ": wrote element " << int64_t(i) - kGuard
               << " outside the output rows";
      continue;
    }
    double w = want[size_t(slot[i])];
    if (!(std::abs(double(got) - w) <=
          tolerance * std::max(1.0, std::abs(w)))) {
      int64_t e = slot[i];
      int64_t d = e % c.headDim, t = e / c.headDim % c.queries,
              h = e / c.headDim / c.queries % c.qHeads,
              b = e / c.headDim / c.queries / c.qHeads;
      return ::testing::AssertionFailure()
             << describe(c) << ": out[" << b << ", head " << h << ", query "
             << t << ", " << d << "] = " << got << ", want " << w;
    }
  }
  return ::testing::AssertionSuccess();
}

/// Plants block numbers outside the pool (read as block 0) in sequence
/// `b`'s table row (at least 4 entries).
void plantBadBlocks(Case &c, int64_t b) {
  int32_t *row = c.tables.data() + b * c.tableStride();
  row[0] = int32_t(c.numBlocks);
  row[1] = -1;
  row[3] = INT32_MAX;
  row[c.tableWidth - 1] = INT32_MIN;
}

/// The output of `c` on 1 thread, which must match the reference, and the
/// same bits on 2 and 3.
void expectSameBitsOnAnyThreadCount(Isa isa, const Case &c) {
  SITS_ASSERT_OK(setNumThreads(1));
  std::vector<float> one = runPath(isa, c);
  ASSERT_TRUE(matchesReference(c, one));
  for (int threads : {2, 3}) {
    SITS_ASSERT_OK(setNumThreads(threads));
    std::vector<float> out = runPath(isa, c);
    EXPECT_EQ(0,
              std::memcmp(out.data(), one.data(), out.size() * sizeof(float)))
        << describe(c) << ", threads " << threads;
  }
}

/// Every path over every pool format: f32 (sitsRuntimePagedAttention), and
/// int8 and E4M3FN rows (...I8, ...F8E4M3: K/V quantized by the writers'
/// rule, the reference attending over the exactly dequantized values).
class PagedAttentionPath
    : public ::testing::TestWithParam<std::tuple<Isa, pattn::Format>> {
protected:
  void SetUp() override {
    if (!pattn::isaAvailable(isa()))
      GTEST_SKIP() << pattn::isaName(isa()) << " not on this CPU";
  }
  void TearDown() override { SITS_ASSERT_OK(setNumThreads(0)); }
  Isa isa() const { return std::get<0>(GetParam()); }
  pattn::Format format() const { return std::get<1>(GetParam()); }
  bool quantized() const { return format() != pattn::Format::kF32; }
  /// A random generator seeded `f32` for f32 pools, `rows` for quantized.
  std::mt19937 seeded(unsigned f32, unsigned rows) const {
    return std::mt19937(quantized() ? rows : f32);
  }
  /// A default case over a pool of this format.
  Case make() const {
    Case c;
    c.format = format();
    return c;
  }
  /// Case::shaped over a pool of this format.
  Case shaped(int64_t qHeads, int64_t kvHeads, int64_t headDim,
              int64_t blockSize) const {
    Case c = Case::shaped(qHeads, kvHeads, headDim, blockSize);
    c.format = format();
    return c;
  }
  std::vector<float> run(const Case &c,
                         const std::function<void(Args &)> &tweak = {}) const {
    return runPath(isa(), c, tweak);
  }
};

/// The quantized formats only.
class PagedAttentionRowPath : public PagedAttentionPath {};

struct Heads {
  int64_t q, kv;
};

TEST_P(PagedAttentionPath, MatchesReference) {
  // Decode (and, over rows, prefill): GQA 8/2 and 32/4, MHA, MQA with more
  // heads than one pass takes; head sizes of 16s, of 8s only (AVX2 tiles),
  // of neither (portable; rows: scales at odd offsets); blocks of 16 and 1;
  // empty, ragged, clamped and negative lengths; block numbers outside the
  // pool (read as block 0).
  std::mt19937 rng = seeded(42, 101);
  const std::vector<int64_t> headDims =
      quantized() ? std::vector<int64_t>{64, 128, 40, 24, 37}
                  : std::vector<int64_t>{64, 128, 40, 36, 256, 16};
  const std::vector<int64_t> queryCounts =
      quantized() ? std::vector<int64_t>{1, 5} : std::vector<int64_t>{1};
  // The widest head size only with few heads.
  const int64_t widest = quantized() ? 128 : 256;
  int index = 0;
  for (Heads heads : {Heads{8, 2}, Heads{32, 4}, Heads{4, 4}, Heads{40, 1}})
    for (int64_t headDim : headDims)
      for (int64_t blockSize : {16, 1})
        for (int64_t queries : queryCounts) {
          if (headDim == widest && heads.q > 8)
            continue;
          Case c = shaped(heads.q, heads.kv, headDim, blockSize);
          c.queries = queries;
          c.tableWidth = blockSize == 1 ? 400 : 24;
          c.numBlocks = blockSize == 1 ? 300 : 40;
          c.batch = 6;
          // Empty, one position, ragged, one block exactly, longer than
          // the table holds (clamped), negative (empty); several queries:
          // see SeveralQueriesPerSequenceAreCausal.
          int32_t full = int32_t(c.tableWidth * c.blockSize);
          int32_t q = int32_t(queries);
          if (queries == 1)
            c.lens = {0, 1, 37, int32_t(blockSize * 5), full + 100, -3};
          else
            c.lens = {q - 1, 0, 256 + q / 2, 37, full + 3, -3};
          if (quantized() && index % 4 == 3) {
            c.qLayout = Layout::kBHSD;
            c.outLayout = Layout::kBHSD;
          }
          padAndFill(c, rng, index++);
          c.tables[size_t(2 * c.tableStride() + 1)] = -1;
          plantBadBlocks(c, 4);
          ASSERT_TRUE(matchesReference(c, run(c)));
        }
}

TEST_P(PagedAttentionPath, SmallAndSingleSequenceCalls) {
  // Below the serial threshold, and one sequence per call.
  std::mt19937 rng = seeded(7, 103);
  for (int64_t headDim : {64, 40, 8, 3})
    for (int32_t len : {1, 2, 15, 16, 17, 63, 64, 65, 200}) {
      Case c = shaped(2, 1, headDim, 16);
      c.tableWidth = 16;
      c.numBlocks = 16;
      c.lens = {len};
      fill(c, rng);
      ASSERT_TRUE(matchesReference(c, run(c)));
    }
}

TEST_P(PagedAttentionPath, LongContextsSplitWithTheSameBitsOnAnyThreadCount) {
  // Few sequences: each chunk an item, combined afterwards.
  std::mt19937 rng = seeded(3, 107);
  for (int64_t headDim : {64, 128, 40})
    for (int64_t blockSize : {16, 1}) {
      Case c = shaped(8, 2, headDim, blockSize);
      c.batch = 3;
      c.tableWidth = 3072 / blockSize;
      c.numBlocks = blockSize == 1 ? 4000 : 256;
      c.lens = {3000, 7, 2501};
      c.outPad = 3;
      fill(c, rng);
      c.tables[5] = -7;
      expectSameBitsOnAnyThreadCount(isa(), c);
      if (HasFatalFailure())
        return;
    }
}

TEST_P(PagedAttentionPath, LargeScoresDoNotOverflow) {
  // Exact integer scores up to about +-1000 (see fill): e^score overflows
  // f32 unless the max is subtracted first; softmax is then close to the
  // argmax.
  std::mt19937 rng = seeded(5, 151);
  for (int64_t headDim : {64, 40})
    for (int32_t len : {100, 700}) {
      Case c = shaped(4, 2, headDim, 16);
      c.batch = 2;
      c.tableWidth = 48;
      c.numBlocks = 50;
      c.scale = 1.f;
      c.lens = {len, len / 3};
      fill(c, rng, /*integers=*/true);
      ASSERT_TRUE(matchesReference(c, run(c)));
    }
}

TEST_P(PagedAttentionPath, StridesAndOffsetsAsGiven) {
  // A pool that is not the compiler's layout: block = [pad 5][V][K][pad 3]
  // (rows: odd offsets), layer 0 of 1.
  std::mt19937 rng = seeded(9, 139);
  for (int64_t headDim : {32, 37}) {
    Case c = shaped(6, 3, headDim, 4);
    c.batch = 2;
    c.tableWidth = 20;
    c.numBlocks = 10;
    c.lens = {77, 30};
    c.layers = 1;
    c.layer = 0;
    fill(c, rng);
    // Same data, rearranged (what the call must not read: 1e30, or 0x7F).
    const int64_t part = c.layerPart(), stride = 2 * part + 8;
    auto rearrange = [&](auto *from, auto untouched) {
      std::vector<decltype(untouched)> pool(size_t(c.numBlocks * stride),
                                            untouched);
      for (int64_t blk = 0; blk < c.numBlocks; ++blk)
        for (int64_t i = 0; i < part; ++i) {
          pool[size_t(blk * stride + 5 + part + i)] =
              from[blk * c.blockStride() + c.keyOffset() + i];
          pool[size_t(blk * stride + 5 + i)] =
              from[blk * c.blockStride() + c.valueOffset() + i];
        }
      return pool;
    };
    std::vector<float> floats;
    std::vector<uint8_t> rows;
    if (quantized())
      rows = rearrange(c.rowPool(), uint8_t(0x7F));
    else
      floats = rearrange(c.pool.data(), 1e30f);
    EXPECT_TRUE(matchesReference(
        c, run(c, [&](Args &a) {
          a.pool = quantized() ? static_cast<const void *>(rows.data())
                               : floats.data();
          a.blockStride = stride;
          a.keyOffset = 5 + part;
          a.valueOffset = 5;
        })));
  }
}

TEST_P(PagedAttentionPath, SeveralQueriesPerSequenceAreCausal) {
  std::mt19937 rng = seeded(17, 157);
  int index = 0;
  for (Heads heads : {Heads{8, 2}, Heads{4, 4}, Heads{40, 1}})
    for (int64_t headDim : {64, 40, 36, 16})
      for (int64_t blockSize : {16, 1})
        for (int64_t queries : {2, 7}) {
          Case c = shaped(heads.q, heads.kv, headDim, blockSize);
          c.queries = queries;
          c.tableWidth = blockSize == 1 ? 400 : 24;
          c.numBlocks = blockSize == 1 ? 300 : 40;
          c.batch = 6;
          // Left padding (the first query sees nothing), empty, the
          // queries' lengths on both sides of position 256 (a chunk
          // boundary: the last queries are split, the first may not be),
          // ragged, partly clamped (the last queries see the whole table),
          // negative (empty).
          int32_t full = int32_t(c.tableWidth * c.blockSize);
          int32_t q = int32_t(queries);
          c.lens = {q - 1, 0, 256 + q / 2, 37, full + 3, -3};
          padAndFill(c, rng, index++);
          c.tables[size_t(2 * c.tableStride() + 1)] = -1;
          plantBadBlocks(c, 4);
          ASSERT_TRUE(matchesReference(c, run(c)));
        }
}

/// The attention weights of the last `observe` queries of each sequence, in
/// double: [batch][positions][kvHeads], summed over a kv head's query heads.
std::vector<double> referenceWeights(const Case &c, int64_t observe,
                                     int64_t positions) {
  std::vector<double> w(size_t(c.batch * positions * c.kvHeads), 0.0);
  const std::vector<double> pool = poolValues(c);
  const int64_t group = c.qHeads / c.kvHeads;
  const Strides qs = c.qStrides();
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t t = std::max<int64_t>(0, c.queries - observe); t < c.queries;
         ++t) {
      int64_t len =
          std::clamp<int64_t>(int64_t(c.lens[size_t(b)]) - c.queries + t + 1, 0,
                              c.tableWidth * c.blockSize);
      for (int64_t h = 0; h < c.qHeads && len > 0; ++h) {
        const int64_t g = h / group;
        const float *q = c.q.data() + Case::at(qs, b, h, t);
        std::vector<double> s(static_cast<size_t>(len));
        for (int64_t p = 0; p < len; ++p) {
          int64_t blk = c.tables[size_t(b * c.tableStride() + p / c.blockSize)];
          if (blk < 0 || blk >= c.numBlocks)
            blk = 0;
          const double *k = pool.data() + c.keyRow(blk, g, p % c.blockSize);
          double dot = 0;
          for (int64_t d = 0; d < c.headDim; ++d)
            dot += double(q[d]) * k[d];
          s[size_t(p)] = double(c.scale) * dot;
        }
        double m = *std::max_element(s.begin(), s.end()), sum = 0;
        for (double &x : s)
          sum += x = std::exp(x - m);
        for (int64_t p = 0; p < std::min(len, positions); ++p)
          w[size_t((b * positions + p) * c.kvHeads + g)] += s[size_t(p)] / sum;
      }
    }
  return w;
}

TEST_P(PagedAttentionPath, AttachedSinkGetsTheAttentionWeights) {
  // Decode and prefill (the last 3 queries observed), GQA and MHA, a
  // context split in parts and walked chunks: the sink gets each position's
  // softmax weight summed over the group, and the output keeps its bits.
  std::mt19937 rng = seeded(23, 167);
  for (Heads heads : {Heads{8, 2}, Heads{4, 4}})
    for (int64_t queries : {1, 7}) {
      Case c = shaped(heads.q, heads.kv, 64, 16);
      c.queries = queries;
      c.tableWidth = 40;
      c.numBlocks = 48;
      c.batch = queries == 1 ? 2 : 5;
      c.lens.assign(size_t(c.batch), 0);
      for (int64_t b = 0; b < c.batch; ++b)
        c.lens[size_t(b)] = int32_t(b == 0 ? 600 : 37 + 50 * b);
      fill(c, rng);
      const std::vector<float> plain = run(c);
      // One position short of the longest context: not written.
      const int64_t positions = 599, observe = 3;
      std::vector<float> sink(size_t(c.batch * positions * c.kvHeads), 0.5f);
      const void *pool =
          quantized() ? static_cast<const void *>(c.rowPool()) : c.pool.data();
      const int64_t bytes = quantized() ? c.poolLen() : c.poolLen() * 4;
      AttentionScores scores;
      scores.out = sink.data();
      scores.rows = c.batch;
      scores.positions = positions;
      scores.kv_heads = c.kvHeads;
      scores.observe = observe;
      SITS_ASSERT_OK(attachAttentionScores(pool, bytes, scores));
      EXPECT_FALSE(attachAttentionScores(pool, 1, scores).ok());
      const std::vector<float> withSink = run(c);
      detachAttentionScores(pool);
      EXPECT_EQ(0, std::memcmp(plain.data(), withSink.data(),
                               plain.size() * sizeof(float)))
          << describe(c);
      const std::vector<double> want = referenceWeights(c, observe, positions);
      double worst = 0;
      for (size_t i = 0; i < want.size(); ++i)
        worst = std::max(worst, std::abs(double(sink[i]) - 0.5 - want[i]));
      EXPECT_LT(worst, 2e-6) << describe(c);
      // Detached: nothing more is added.
      const std::vector<float> before = sink;
      run(c);
      EXPECT_EQ(sink, before);
    }
}

TEST(PagedAttention, AttachingABadSinkIsRefused) {
  std::vector<float> out(16);
  AttentionScores s;
  s.out = out.data();
  s.rows = 1;
  s.positions = 8;
  s.kv_heads = 2;
  EXPECT_EQ(attachAttentionScores(nullptr, 64, s).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(attachAttentionScores(out.data(), 0, s).code(),
            StatusCode::kInvalidArgument);
  AttentionScores bad = s;
  bad.observe = 0;
  EXPECT_EQ(attachAttentionScores(out.data(), 64, bad).code(),
            StatusCode::kInvalidArgument);
  bad = s;
  bad.positions = INT64_MAX;
  EXPECT_EQ(attachAttentionScores(out.data(), 64, bad).code(),
            StatusCode::kInvalidArgument);
  SITS_ASSERT_OK(attachAttentionScores(out.data(), 64, s));
  EXPECT_EQ(attachAttentionScores(out.data() + 8, 64, s).code(),
            StatusCode::kInvalidArgument);
  detachAttentionScores(out.data());
  SITS_ASSERT_OK(attachAttentionScores(out.data() + 8, 64, s));
  detachAttentionScores(out.data() + 8);
}

TEST_P(PagedAttentionPath, LeftPaddedQueriesGetZeros) {
  // Fewer positions than queries: the leading queries see nothing.
  std::mt19937 rng = seeded(19, 109);
  for (int32_t len : {0, 1, 3, 4, 5, 300}) {
    Case c = shaped(8, 2, 40, 16);
    c.queries = 5;
    c.tableWidth = 24;
    c.numBlocks = 30;
    c.lens = {len};
    fill(c, rng);
    std::vector<float> out = run(c);
    ASSERT_TRUE(matchesReference(c, out));
    const Strides os = c.outStrides();
    for (int64_t t = 0; t < std::max<int64_t>(0, 5 - len); ++t)
      for (int64_t h = 0; h < c.qHeads; ++h)
        for (int64_t d = 0; d < c.headDim; ++d)
          ASSERT_EQ(out[size_t(kGuard + Case::at(os, 0, h, t) + d)], 0.f)
              << "len " << len << " query " << t;
  }
}

TEST_P(PagedAttentionPath, QueryAndOutputLayoutsAsGiven) {
  // [B][S][Hq][D] and [B][Hq][S][D] queries, each written to either.
  std::mt19937 rng = seeded(23, 163);
  int index = 0;
  for (Layout qLayout : {Layout::kBSHD, Layout::kBHSD})
    for (Layout outLayout : {Layout::kBSHD, Layout::kBHSD})
      for (int64_t headDim : {64, 40}) {
        Case c = make();
        c.batch = 3;
        c.queries = 5;
        c.headDim = headDim;
        c.tableWidth = 24;
        c.numBlocks = 40;
        c.lens = {300, 3, 100};
        c.qLayout = qLayout;
        c.outLayout = outLayout;
        c.qPad = index % 2 ? 3 : 0;
        c.outPad = index % 3 ? 5 : 0;
        ++index;
        fill(c, rng);
        ASSERT_TRUE(matchesReference(c, run(c)));
      }
}

TEST_P(PagedAttentionPath, PaddedPoolAndTableStrides) {
  // Padding after every position's row and every kv head's rows, and
  // table rows longer than tableWidth; rows: the pool at an odd address
  // and rows at odd offsets (odd padding), so that the scales are
  // unaligned.
  std::mt19937 rng = seeded(29, 131);
  const std::vector<int64_t> headDims = quantized()
                                            ? std::vector<int64_t>{64, 40, 37}
                                            : std::vector<int64_t>{64, 40};
  int index = 0;
  for (int64_t queries : {1, 4})
    for (int64_t blockSize : {16, 1})
      for (int64_t headDim : headDims) {
        Case c = shaped(8, 2, headDim, blockSize);
        c.batch = 3;
        c.queries = queries;
        c.tableWidth = blockSize == 1 ? 320 : 20;
        c.numBlocks = blockSize == 1 ? 300 : 30;
        if (quantized()) {
          c.poolBase = 1 + index % 3;
          c.positionPad = 1 + 2 * (index % 2);
        } else {
          c.positionPad = headDim == 64 ? 16 : 3;
        }
        c.headPad = 5;
        c.tablePad = 3;
        c.lens = {290, 17, 0};
        ++index;
        fill(c, rng);
        plantBadBlocks(c, 1);
        ASSERT_TRUE(matchesReference(c, run(c)));
      }
}

TEST_P(PagedAttentionPath, ManyQueriesWithTheSameBitsOnAnyThreadCount) {
  std::mt19937 rng = seeded(31, 167);
  for (int64_t headDim : {64, 40}) {
    Case c = make();
    c.batch = 2;
    c.queries = 6;
    c.headDim = headDim;
    c.tableWidth = 80;
    c.numBlocks = 100;
    c.lens = {1000, 3};
    c.outLayout = Layout::kBHSD;
    fill(c, rng);
    expectSameBitsOnAnyThreadCount(isa(), c);
    if (HasFatalFailure())
      return;
  }
}

TEST_P(PagedAttentionPath, PrefillItemsWalkSeveralChunks) {
  // batch * queries * kvHeads >= 32: one item per (sequence, query, kv
  // head) walks every chunk its query sees (up to 5 of 256 positions) and
  // folds them itself. Left padding (the first queries of the third
  // sequence see nothing), a sequence clamped to the table, and 40 query
  // heads over one kv head (two passes per chunk).
  std::mt19937 rng = seeded(37, 173);
  int index = 0;
  for (Heads heads : {Heads{8, 2}, Heads{40, 1}})
    for (int64_t headDim : {64, 128, 40, 36})
      for (int64_t blockSize : {16, 1}) {
        if (heads.q == 40 && (headDim == 128 || blockSize == 1))
          continue;
        Case c = shaped(heads.q, heads.kv, headDim, blockSize);
        c.batch = 4;
        c.queries = heads.kv == 1 ? 8 : 6;
        c.tableWidth = 1200 / blockSize;
        c.numBlocks = blockSize == 1 ? 1300 : 90;
        c.lens = {600, 1100, 3, 1300};
        c.qLayout = index % 2 ? Layout::kBHSD : Layout::kBSHD;
        c.outLayout = index % 3 ? Layout::kBHSD : Layout::kBSHD;
        padAndFill(c, rng, index++);
        plantBadBlocks(c, 1);
        expectSameBitsOnAnyThreadCount(isa(), c);
        if (HasFatalFailure())
          return;
      }
}

TEST_P(PagedAttentionPath, DecodeBatchItemsWalkSeveralChunks) {
  // batch * kvHeads >= 32 at one query per sequence: items walk the
  // chunks too (ragged: 0 to 5 chunks, on and off their boundaries).
  std::mt19937 rng = seeded(41, 179);
  for (int64_t headDim : {64, 128, 40})
    for (int64_t blockSize : {16, 1}) {
      Case c = shaped(32, 4, headDim, blockSize);
      c.batch = 8;
      c.tableWidth = 1200 / blockSize;
      c.numBlocks = blockSize == 1 ? 1300 : 90;
      c.lens = {1100, 600, 0, 257, 1, 256, 512, 1200};
      fill(c, rng);
      c.tables[size_t(3 * c.tableStride() + 16 / blockSize)] = -1;
      expectSameBitsOnAnyThreadCount(isa(), c);
      if (HasFatalFailure())
        return;
    }
}

TEST_P(PagedAttentionPath, WalkedChunksWithLargeScoresDoNotOverflow) {
  // Exact integer scores up to about +-1000 (see LargeScoresDoNotOverflow),
  // in one chunk, split and walked: chunk maxes far apart, so the running
  // sum is rescaled by factors that underflow to 0 or stays as it is.
  std::mt19937 rng = seeded(43, 127);
  for (int64_t headDim : {64, 40})
    for (int64_t queries : {1, 8})
      for (int32_t len : {100, 700}) {
        Case c = shaped(4, 2, headDim, 16);
        c.batch = 2;
        c.queries = queries;
        c.tableWidth = 72;
        c.numBlocks = 80;
        c.scale = 1.f;
        c.lens = {len, 1100};
        fill(c, rng, /*integers=*/true);
        expectSameBitsOnAnyThreadCount(isa(), c);
        if (HasFatalFailure())
          return;
      }
}

TEST_P(PagedAttentionPath, BadArgumentsLeaveTheOutputAlone) {
  std::mt19937 rng = seeded(11, 137);
  Case c = make();
  c.batch = 2;
  c.queries = 3;
  fill(c, rng);
  // The arguments below are valid.
  ASSERT_TRUE(matchesReference(c, run(c)));
  // Dense: 2 layers of K and V, each 2 kv heads of 16 positions (rows of 64
  // floats, or of 68 bytes); the last layer's V rows end the block; out
  // rows [2][3][8][64].
  ASSERT_EQ(c.positionStride(), quantized() ? 68 : 64);
  ASSERT_EQ(c.valueOffset() + c.kvHeads * c.kvHeadStride(), c.blockStride());
  const int64_t bs = c.blockStride(), vo = c.valueOffset(),
                part = c.layerPart();
  struct Bad {
    const char *what;
    std::function<void(Args &)> set;
  };
  std::vector<Bad> bads = {
      {"batch 0", [](Args &a) { a.batch = 0; }},
      {"queries 0", [](Args &a) { a.queries = 0; }},
      {"negative batch", [](Args &a) { a.batch = -1; }},
      {"negative queries", [](Args &a) { a.queries = -1; }},
      {"qHeads % kvHeads", [](Args &a) { a.kvHeads = 3; }},
      {"qHeads 0", [](Args &a) { a.qHeads = 0; }},
      {"kvHeads 0", [](Args &a) { a.kvHeads = 0; }},
      {"headDim 0", [](Args &a) { a.headDim = 0; }},
      {"blockSize 0", [](Args &a) { a.blockSize = 0; }},
      {"numBlocks 0", [](Args &a) { a.numBlocks = 0; }},
      {"tableWidth 0", [](Args &a) { a.tableWidth = 0; }},
      {"null q", [](Args &a) { a.q = nullptr; }},
      {"null pool", [](Args &a) { a.pool = nullptr; }},
      {"null tables", [](Args &a) { a.tables = nullptr; }},
      {"null contextLens", [](Args &a) { a.contextLens = nullptr; }},
      {"null out", [](Args &a) { a.out = nullptr; }},
      {"negative qBatchStride", [](Args &a) { a.qBatchStride = -1; }},
      {"negative qHeadStride", [](Args &a) { a.qHeadStride = -64; }},
      {"negative qTokenStride", [](Args &a) { a.qTokenStride = -1; }},
      {"negative blockStride", [](Args &a) { a.blockStride = -1; }},
      {"negative kvHeadStride", [](Args &a) { a.kvHeadStride = -1; }},
      {"negative positionStride", [](Args &a) { a.positionStride = -1; }},
      {"negative tableStride", [](Args &a) { a.tableStride = -1; }},
      {"negative outBatchStride", [](Args &a) { a.outBatchStride = -1; }},
      {"negative outHeadStride", [](Args &a) { a.outHeadStride = -64; }},
      {"negative outTokenStride", [](Args &a) { a.outTokenStride = -1; }},
      {"batch rows overlap", [](Args &a) { a.outBatchStride -= 1; }},
      {"token rows overlap", [](Args &a) { a.outTokenStride = 511; }},
      {"head rows overlap", [](Args &a) { a.outHeadStride = 63; }},
      {"token rows aliased", [](Args &a) { a.outTokenStride = 0; }},
      {"transposed rows overlap",
       [](Args &a) {
         a.outHeadStride = 192;
         a.outTokenStride = 64;
         a.outBatchStride = 1535;
       }},
      // Rows: the scale's 4 bytes count (V's end the block).
      {"V past the block", [](Args &a) { a.valueOffset += 1; }},
      {"K before the block", [](Args &a) { a.keyOffset = -1; }},
      {"block too small",
       [=](Args &a) {
         a.keyOffset = a.valueOffset = 0;
         a.blockStride = part - 1;
       }},
      {"kv heads past the block", [](Args &a) { a.kvHeadStride += 1; }},
      {"positions past the block", [](Args &a) { a.positionStride += 1; }},
      {"tableStride < tableWidth", [](Args &a) { a.tableStride = 3; }},
      {"huge sizes",
       [](Args &a) {
         a.headDim = int64_t(1) << 40;
         a.blockSize = int64_t(1) << 30;
       }},
      {"out extent overflows",
       [](Args &a) { a.outBatchStride = INT64_MAX - 100; }},
      {"q extent overflows", [](Args &a) { a.qTokenStride = INT64_MAX / 2; }},
      {"out rows overflow", [](Args &a) { a.outTokenStride = INT64_MAX / 2; }},
      {"kv head span overflows", [](Args &a) { a.kvHeadStride = INT64_MAX; }},
      {"position span overflows",
       [](Args &a) { a.positionStride = INT64_MAX / 8; }},
      {"table overflows", [](Args &a) { a.tableStride = INT64_MAX; }},
      {"pool overflows", [=](Args &a) { a.numBlocks = INT64_MAX / bs + 1; }},
      {"offset huge", [](Args &a) { a.keyOffset = INT64_MAX; }},
      {"V offset past the end",
       [=](Args &a) { a.valueOffset = vo + a.kvHeadStride; }},
  };
  if (quantized())
    bads.insert(
        bads.end(),
        {
            {"V row past the block", [](Args &a) { a.valueOffset += 4; }},
            // Rows that overlap the next position's.
            {"positionStride < headDim + 4",
             [](Args &a) { a.positionStride = 67; }},
            {"positionStride headDim", [](Args &a) { a.positionStride = 64; }},
            {"headDim + 4 overflows",
             [](Args &a) { a.headDim = INT64_MAX - 2; }},
            {"unknown format", [](Args &a) { a.format = pattn::Format(7); }},
        });
  for (const Bad &b : bads) {
    std::vector<float> out(size_t(c.extent(c.outStrides()) + 2 * kGuard),
                           kUntouched);
    Args a = c.args(out.data() + kGuard);
    b.set(a);
    ASSERT_TRUE(pattn::run(isa(), a)) << b.what;
    for (float v : out)
      ASSERT_EQ(v, kUntouched) << b.what;
  }
  if (!quantized())
    return;
  // One position per block: positionStride is not used, any value goes.
  Case one = shaped(8, 2, 40, 1);
  one.tableWidth = 50;
  one.numBlocks = 60;
  one.lens = {45};
  fill(one, rng);
  for (int64_t stride : {0, 5, 43})
    EXPECT_TRUE(matchesReference(
        one, run(one, [&](Args &a) { a.positionStride = stride; })))
        << "positionStride " << stride;
}

/// Makes the quantized row at byte `row` of the pool all zeros, scale 0.
void zeroRow(Case &c, int64_t row) {
  std::memset(c.rowPool() + row, 0, size_t(c.rowLen()));
}

TEST_P(PagedAttentionRowPath, ZeroRowsHaveScaleZero) {
  // Rows of zeros (scale 0, codes 0): scattered K and V rows, and every
  // row of the second sequence (all scores 0, every value 0: zeros out).
  std::mt19937 rng(113);
  for (int64_t headDim : {64, 40, 37}) {
    Case c = shaped(8, 2, headDim, 16);
    c.batch = 2;
    c.queries = 3;
    c.tableWidth = 8;
    c.numBlocks = 20;
    c.lens = {120, 100};
    fill(c, rng);
    // Sequence 1 alone reads blocks 10..16; sequence 0 the others.
    for (int64_t m = 0; m < c.tableWidth; ++m) {
      c.tables[size_t(m)] = int32_t(m % 10);
      c.tables[size_t(c.tableStride() + m)] = int32_t(10 + m);
    }
    const int64_t vDelta = c.valueOffset() - c.keyOffset();
    for (int64_t blk = 0; blk < 10; ++blk)
      for (int64_t g = 0; g < c.kvHeads; ++g)
        for (int64_t r = int64_t(rng() % 3); r < c.blockSize; r += 3)
          zeroRow(c, c.keyRow(blk, g, r) + (r % 2 ? vDelta : 0));
    for (int64_t blk = 10; blk < c.numBlocks; ++blk)
      for (int64_t g = 0; g < c.kvHeads; ++g)
        for (int64_t r = 0; r < c.blockSize; ++r) {
          zeroRow(c, c.keyRow(blk, g, r));
          zeroRow(c, c.keyRow(blk, g, r) + vDelta);
        }
    std::vector<float> out = run(c);
    ASSERT_TRUE(matchesReference(c, out));
    const Strides os = c.outStrides();
    for (int64_t t = 0; t < c.queries; ++t)
      for (int64_t h = 0; h < c.qHeads; ++h)
        for (int64_t d = 0; d < c.headDim; ++d)
          ASSERT_EQ(out[size_t(kGuard + Case::at(os, 1, h, t) + d)], 0.f);
  }
}

TEST_P(PagedAttentionRowPath, EveryCodeReadsExactlyThroughTheKernel) {
  // Head size 256: a V row holds every code in order (E4M3FN's NaNs, 0x7F
  // and 0xFF, replaced by 0), another every code backwards. The K rows are
  // zeros (all scores 0, exp(0) = 1 exactly): one position gives its V row
  // exactly (scale 1), two the exact mean of both (scales 1 and 0.5).
  std::mt19937 rng(149);
  for (int32_t len : {1, 2}) {
    Case c = shaped(2, 1, 256, 1);
    c.numBlocks = 4;
    c.tableWidth = 2;
    c.lens = {len};
    fill(c, rng);
    c.tables = {1, 2};
    const int64_t vDelta = c.valueOffset() - c.keyOffset();
    for (int64_t blk : {1, 2}) {
      const int64_t k = c.keyRow(blk, 0, 0);
      zeroRow(c, k);
      uint8_t *v = c.rowPool() + k + vDelta;
      for (int code = 0; code < 256; ++code) {
        const uint8_t bits = uint8_t(blk == 1 ? code : 255 - code);
        v[code] = format() == pattn::Format::kF8E4M3Row && (bits & 0x7F) == 0x7F
                      ? uint8_t(0)
                      : bits;
      }
      const float scale = blk == 1 ? 1.f : 0.5f;
      std::memcpy(v + 256, &scale, sizeof scale);
    }
    ASSERT_TRUE(matchesReference(c, run(c), /*tolerance=*/0.0));
  }
}

const char *formatName(pattn::Format format) {
  return format == pattn::Format::kI8Row       ? "int8"
         : format == pattn::Format::kF8E4M3Row ? "fp8"
                                               : "f32";
}

/// `avx2_f32`, `scalar_int8`, ...
std::string
pathName(const ::testing::TestParamInfo<std::tuple<Isa, pattn::Format>> &info) {
  return std::string(pattn::isaName(std::get<0>(info.param))) + "_" +
         formatName(std::get<1>(info.param));
}

const auto kIsas = ::testing::Values(Isa::kScalar, Isa::kAvx2, Isa::kAvx512);

INSTANTIATE_TEST_SUITE_P(
    PagedAttention, PagedAttentionPath,
    ::testing::Combine(kIsas, ::testing::Values(pattn::Format::kF32,
                                                pattn::Format::kI8Row,
                                                pattn::Format::kF8E4M3Row)),
    pathName);

INSTANTIATE_TEST_SUITE_P(
    PagedAttention, PagedAttentionRowPath,
    ::testing::Combine(kIsas, ::testing::Values(pattn::Format::kI8Row,
                                                pattn::Format::kF8E4M3Row)),
    pathName);

TEST(PagedAttention, EveryE4M3CodeReadsExactlyOnEveryPath) {
  // The paths' own loads (whole vectors of 16 or 8, at every alignment, and
  // the portable tail) against the exact decoding, sign of zero included.
  std::vector<uint8_t> codes;
  for (int rep = 0; rep < 2; ++rep)
    for (int code = 0; code < 256; ++code)
      codes.push_back(uint8_t(rep ? 255 - code : code));
  for (Isa isa : {Isa::kScalar, Isa::kAvx2, Isa::kAvx512}) {
    if (!pattn::isaAvailable(isa))
      continue;
    for (size_t start : {size_t(0), size_t(1), size_t(7), size_t(13)}) {
      const int64_t n = int64_t(codes.size() - start);
      std::vector<float> out(size_t(n) + 1, kUntouched);
      ASSERT_TRUE(
          pattn::decodeF8E4M3(isa, codes.data() + start, n, out.data()));
      EXPECT_EQ(out[size_t(n)], kUntouched);
      int checked = 0;
      for (int64_t i = 0; i < n; ++i) {
        const uint8_t code = codes[start + size_t(i)];
        if ((code & 0x7F) == 0x7F)
          continue; // NaN: not handled specially
        const float want = float(decodeE4M3(code));
        ASSERT_EQ(double(want), decodeE4M3(code)); // f32 holds it exactly
        uint32_t gotBits, wantBits;
        std::memcpy(&gotBits, &out[size_t(i)], 4);
        std::memcpy(&wantBits, &want, 4);
        ASSERT_EQ(gotBits, wantBits)
            << pattn::isaName(isa) << " code 0x" << std::hex << int(code)
            << ": " << out[size_t(i)] << ", want " << want;
        ++checked;
      }
      EXPECT_GE(checked, 254) << pattn::isaName(isa);
    }
  }
  // The test's own decoding and rounding: every non-NaN code round-trips,
  // and ties go to the even code.
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7F) == 0x7F)
      continue;
    EXPECT_EQ(encodeE4M3(float(decodeE4M3(uint8_t(code)))), code) << code;
  }
  EXPECT_EQ(decodeE4M3(0x7E), 448.0);
  EXPECT_EQ(decodeE4M3(0x01), 0x1p-9);
  EXPECT_EQ(decodeE4M3(0x08), 0x1p-6);
  EXPECT_EQ(decodeE4M3(0xB8), -1.0);
  EXPECT_EQ(encodeE4M3(1.0625f), 0x38);  // tie between 1 and 1.125: even
  EXPECT_EQ(encodeE4M3(1.1875f), 0x3A);  // tie between 1.125 and 1.25
  EXPECT_EQ(encodeE4M3(0x1p-10f), 0x00); // half the smallest subnormal
  EXPECT_EQ(encodeE4M3(0x3p-10f), 0x02); // 1.5 subnormal steps: even
  EXPECT_EQ(encodeE4M3(-500.f), 0xFE);   // saturates at -448
  EXPECT_EQ(encodeE4M3(0.0152f), 0x08);  // 7.78 subnormal steps: 2^-6
}

using AttentionFn = void (*)(int64_t, int64_t, int64_t, int64_t, int64_t,
                             const float *, int64_t, int64_t, int64_t,
                             const float *, int64_t, int64_t, int64_t, int64_t,
                             int64_t, int64_t, int64_t, const int32_t *,
                             int64_t, int64_t, const int32_t *, float, float *,
                             int64_t, int64_t, int64_t);

TEST(PagedAttention, ExportedSymbolRunsTheSelectedPath) {
  void *self = dlopen(nullptr, RTLD_NOW);
  auto fn =
      reinterpret_cast<AttentionFn>(dlsym(self, "sitsRuntimePagedAttention"));
  ASSERT_NE(fn, nullptr);
  std::mt19937 rng(13);
  for (int64_t queries : {1, 3}) {
    Case c;
    c.batch = 3;
    c.queries = queries;
    c.qHeads = 32;
    c.kvHeads = 4;
    c.tableWidth = 40;
    c.numBlocks = 64;
    c.lens = {600, 0, 33};
    c.outPad = 2;
    c.outLayout = queries > 1 ? Layout::kBHSD : Layout::kBSHD;
    fill(c, rng);
    std::vector<float> out(size_t(c.extent(c.outStrides()) + 2 * kGuard),
                           kUntouched);
    Args a = c.args(out.data() + kGuard);
    fn(a.batch, a.queries, a.qHeads, a.kvHeads, a.headDim, a.q, a.qBatchStride,
       a.qHeadStride, a.qTokenStride, c.pool.data(), a.numBlocks, a.blockStride,
       a.keyOffset, a.valueOffset, a.kvHeadStride, a.blockSize,
       a.positionStride, a.tables, a.tableWidth, a.tableStride, a.contextLens,
       a.scale, a.out, a.outBatchStride, a.outHeadStride, a.outTokenStride);
    EXPECT_TRUE(matchesReference(c, out))
        << pattn::isaName(pattn::selectedIsa());
  }
}

/// The exported entry point of a quantized format, whose pool argument is
/// a `const Pool *`.
template <typename Pool>
using AttentionRowFn = void (*)(int64_t, int64_t, int64_t, int64_t, int64_t,
                                const float *, int64_t, int64_t, int64_t,
                                const Pool *, int64_t, int64_t, int64_t,
                                int64_t, int64_t, int64_t, int64_t,
                                const int32_t *, int64_t, int64_t,
                                const int32_t *, float, float *, int64_t,
                                int64_t, int64_t);

template <typename Pool>
void expectExportedRowSymbol(const char *name, pattn::Format format,
                             unsigned seed) {
  void *self = dlopen(nullptr, RTLD_NOW);
  auto fn = reinterpret_cast<AttentionRowFn<Pool>>(dlsym(self, name));
  ASSERT_NE(fn, nullptr) << name;
  std::mt19937 rng(seed);
  for (int64_t queries : {1, 3}) {
    Case c = Case::shaped(32, 4, 64, 16);
    c.format = format;
    c.batch = 3;
    c.queries = queries;
    c.tableWidth = 40;
    c.numBlocks = 64;
    c.lens = {600, 0, 33};
    c.outPad = 2;
    c.outLayout = queries > 1 ? Layout::kBHSD : Layout::kBSHD;
    fill(c, rng);
    std::vector<float> out(size_t(c.extent(c.outStrides()) + 2 * kGuard),
                           kUntouched);
    Args a = c.args(out.data() + kGuard);
    fn(a.batch, a.queries, a.qHeads, a.kvHeads, a.headDim, a.q, a.qBatchStride,
       a.qHeadStride, a.qTokenStride,
       reinterpret_cast<const Pool *>(c.rowPool()), a.numBlocks, a.blockStride,
       a.keyOffset, a.valueOffset, a.kvHeadStride, a.blockSize,
       a.positionStride, a.tables, a.tableWidth, a.tableStride, a.contextLens,
       a.scale, a.out, a.outBatchStride, a.outHeadStride, a.outTokenStride);
    EXPECT_TRUE(matchesReference(c, out))
        << name << " " << pattn::isaName(pattn::selectedIsa());
  }
}

TEST(PagedAttention, ExportedI8SymbolRunsTheSelectedPath) {
  expectExportedRowSymbol<int8_t>("sitsRuntimePagedAttentionI8",
                                  pattn::Format::kI8Row, 14);
}

TEST(PagedAttention, ExportedF8E4M3SymbolRunsTheSelectedPath) {
  expectExportedRowSymbol<uint8_t>("sitsRuntimePagedAttentionF8E4M3",
                                   pattn::Format::kF8E4M3Row, 15);
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
          pattn::run(isa, Args{batch,
                               1,
                               qHeads,
                               kvHeads,
                               headDim,
                               q.data(),
                               qHeads * headDim,
                               headDim,
                               0,
                               pool.data(),
                               numBlocks,
                               blockStride,
                               layer * 2 * part,
                               layer * 2 * part + part,
                               blockSize * headDim,
                               blockSize,
                               headDim,
                               blocks.data(),
                               tableWidth,
                               tableWidth,
                               lens.data(),
                               0.125f,
                               out.data(),
                               qHeads * headDim,
                               headDim,
                               0});
        };
        double seconds = test::secondsPerCall(call, 8, 0.3, 5);
        double bytes = double(batch) * context * kvHeads * headDim * 2 * 4;
        std::printf("%-7s %5lld %7d %7d %10.2f %9.1f\n", pattn::isaName(isa),
                    (long long)batch, context, 2, seconds * 1e6,
                    bytes / seconds * 1e-9);
      }
  }
  SITS_ASSERT_OK(setNumThreads(0));
}

/// Time per decode call over an f32, an int8 and an fp8 (E4M3FN) pool of
/// the same shape (head size 64, blocks of 16 scattered over the pool, 2
/// threads, each call the next of 4 layers), and the K/V bytes read per
/// second. $SITS_PATTN_BENCH_PATHS (e.g. "avx512") picks the paths.
TEST(PagedAttention, DISABLED_BenchQuantized) {
  const int64_t headDim = 64, blockSize = 16, layers = 4, maxBatch = 8;
  const int64_t maxContext = 4096, tableWidth = maxContext / blockSize;
  const int64_t numBlocks = maxBatch * tableWidth;
  const char *paths = std::getenv("SITS_PATTN_BENCH_PATHS");
  SITS_ASSERT_OK(setNumThreads(2));
  std::printf("%-7s %5s %5s %7s %9s %9s %9s %8s %8s %8s\n", "path", "heads",
              "batch", "context", "f32 us", "int8 us", "fp8 us", "f32 GB/s",
              "i8 GB/s", "f8 GB/s");
  struct Heads {
    int64_t q, kv;
  };
  const pattn::Format formats[3] = {pattn::Format::kF32, pattn::Format::kI8Row,
                                    pattn::Format::kF8E4M3Row};
  for (Heads heads : {Heads{8, 2}, Heads{32, 4}}) {
    std::mt19937 rng(1);
    // Row lengths in pool elements: floats, or bytes of codes and scale.
    const int64_t rowF32 = headDim, rowQ = headDim + 4;
    auto partOf = [&](int64_t row) { return heads.kv * blockSize * row; };
    std::vector<float> pool(size_t(numBlocks * layers * 2 * partOf(rowF32)));
    for (float &v : pool)
      v = float(int(rng() % 2001) - 1000) * 1e-3f;
    std::vector<uint8_t> poolQ[2];
    for (int f = 0; f < 2; ++f) {
      poolQ[f].resize(size_t(numBlocks * layers * 2 * partOf(rowQ)));
      for (size_t row = 0; row < poolQ[f].size() / size_t(rowQ); ++row)
        quantizeRow(formats[1 + f], pool.data() + row * size_t(rowF32), headDim,
                    poolQ[f].data() + row * size_t(rowQ));
    }
    std::vector<int32_t> blocks(static_cast<size_t>(numBlocks));
    std::iota(blocks.begin(), blocks.end(), 0);
    std::shuffle(blocks.begin(), blocks.end(), rng);
    std::vector<float> q(size_t(maxBatch * heads.q * headDim), 0.05f);
    std::vector<float> out(q.size());
    for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
      if (!pattn::isaAvailable(isa) ||
          (paths && !std::strstr(paths, pattn::isaName(isa))))
        continue;
      for (int64_t batch : {1, 8})
        for (int32_t context : {1024, 4096}) {
          std::vector<int32_t> lens(size_t(batch), context);
          double seconds[3];
          for (int f = 0; f < 3; ++f) {
            const int64_t row = f ? rowQ : rowF32, part = partOf(row);
            auto call = [&](size_t i) {
              int64_t layer = int64_t(i % layers);
              Args a{batch,
                     1,
                     heads.q,
                     heads.kv,
                     headDim,
                     q.data(),
                     heads.q * headDim,
                     headDim,
                     0,
                     f ? static_cast<const void *>(poolQ[f - 1].data())
                       : pool.data(),
                     numBlocks,
                     layers * 2 * part,
                     layer * 2 * part,
                     layer * 2 * part + part,
                     blockSize * row,
                     blockSize,
                     row,
                     blocks.data(),
                     tableWidth,
                     tableWidth,
                     lens.data(),
                     0.125f,
                     out.data(),
                     heads.q * headDim,
                     headDim,
                     0,
                     formats[f]};
              pattn::run(isa, a);
            };
            seconds[f] = test::secondsPerCall(call, 8, 0.3, 5);
          }
          double rows = double(batch) * context * heads.kv * 2;
          std::printf("%-7s %2lld/%-2lld %5lld %7d %9.2f %9.2f %9.2f %8.1f "
                      "%8.1f %8.1f\n",
                      pattn::isaName(isa), (long long)heads.q,
                      (long long)heads.kv, (long long)batch, context,
                      seconds[0] * 1e6, seconds[1] * 1e6, seconds[2] * 1e6,
                      rows * double(rowF32 * 4) / seconds[0] * 1e-9,
                      rows * double(rowQ) / seconds[1] * 1e-9,
                      rows * double(rowQ) / seconds[2] * 1e-9);
        }
    }
  }
  SITS_ASSERT_OK(setNumThreads(0));
}

/// Time per call of a prefill (one sequence, S = context queries, each
/// seeing the positions up to its own) with 32 query heads over 8 kv heads,
/// blocks of 16, 2 threads.
TEST(PagedAttention, DISABLED_BenchPrefill) {
  const int64_t qHeads = 32, kvHeads = 8, blockSize = 16;
  const char *paths = std::getenv("SITS_PATTN_BENCH_PATHS");
  SITS_ASSERT_OK(setNumThreads(2));
  std::printf("%-7s %7s %7s %7s %10s\n", "path", "headDim", "queries",
              "threads", "ms/call");
  for (Isa isa : {Isa::kAvx512, Isa::kAvx2, Isa::kScalar}) {
    if (!pattn::isaAvailable(isa) ||
        (paths && !std::strstr(paths, pattn::isaName(isa))))
      continue;
    for (int64_t headDim : {64, 128})
      for (int32_t queries : {512, 2048}) {
        const int64_t tableWidth = queries / blockSize;
        const int64_t part = kvHeads * blockSize * headDim;
        const int64_t blockStride = 2 * part;
        std::mt19937 rng(1);
        std::vector<float> pool(size_t(tableWidth * blockStride));
        for (float &v : pool)
          v = float(int(rng() % 2001) - 1000) * 1e-3f;
        std::vector<int32_t> blocks(static_cast<size_t>(tableWidth));
        std::iota(blocks.begin(), blocks.end(), 0);
        std::vector<float> q(size_t(queries * qHeads * headDim), 0.05f);
        std::vector<float> out(q.size());
        int32_t lens[1] = {queries};
        auto call = [&] {
          pattn::run(isa, Args{1,
                               queries,
                               qHeads,
                               kvHeads,
                               headDim,
                               q.data(),
                               queries * qHeads * headDim,
                               headDim,
                               qHeads * headDim,
                               pool.data(),
                               tableWidth,
                               blockStride,
                               0,
                               part,
                               blockSize * headDim,
                               blockSize,
                               headDim,
                               blocks.data(),
                               tableWidth,
                               tableWidth,
                               lens,
                               0.125f,
                               out.data(),
                               queries * qHeads * headDim,
                               headDim,
                               qHeads * headDim});
        };
        double seconds =
            test::secondsPerCall([&](size_t) { call(); }, 1, 0.5, 3);
        std::printf("%-7s %7lld %7d %7d %10.2f\n", pattn::isaName(isa),
                    (long long)headDim, queries, 2, seconds * 1e3);
      }
  }
  SITS_ASSERT_OK(setNumThreads(0));
}

} // namespace
