//===- qdot_test.cpp - The quantized matmul compiled code calls -----------===//
//
// Every path of `sitsRuntimeQDot` this CPU has (portable, AVX2, AVX-512
// VNNI, AMX) must give exactly the bits of a plain reference written here from
// unpacked codes (the weights packed by a packer written from ARTIFACT.md),
// across sizes, tails, strides, both kinds of weight scales, extreme codes
// and thread counts; bad arguments leave the output alone. The exported
// symbol is looked up the way compiled code finds it. DISABLED_Bench prints
// throughput (run with --gtest_also_run_disabled_tests).
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include "qdot.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <random>
#include <tuple>

using namespace sits::runtime;
using qdot::Isa;

namespace {

/// One problem: codes[kk * n + col] in [-8, 7] or [-128, 127], xq in
/// [-127, 127], row strides with padding.
struct Case {
  int bits = 4;
  int64_t m = 1, n = 16, k = 32, group = 32;
  bool perChannel = false;
  int64_t xqStride = 0, sxStride = 0, wsStride = 0, yStride = 0;
  std::vector<int8_t> codes, xq;
  std::vector<float> sx, ws;
  std::vector<uint8_t> packed;

  int64_t groups() const { return k / group; }

  /// A case of this shape, its data not yet filled.
  static Case shaped(int bits, int64_t m, int64_t n, int64_t k, int64_t group,
                     bool perChannel) {
    Case c;
    c.bits = bits;
    c.m = m;
    c.n = n;
    c.k = k;
    c.group = group;
    c.perChannel = perChannel;
    return c;
  }
};

/// The layout of ARTIFACT.md: 16-column blocks, 64 bytes per 4 (8-bit) or
/// 8 (4-bit) k values, unsigned codes.
std::vector<uint8_t> pack(int bits, int64_t n, int64_t k,
                          const std::vector<int8_t> &codes) {
  std::vector<uint8_t> out(size_t(n * k * bits / 8));
  for (int64_t kk = 0; kk < k; ++kk)
    for (int64_t col = 0; col < n; ++col) {
      int64_t nb = col / 16, j = col % 16;
      int code = codes[kk * n + col];
      if (bits == 8) {
        out[((nb * (k / 4) + kk / 4) * 16 + j) * 4 + kk % 4] =
            uint8_t(code + 128);
      } else {
        int64_t o = kk / 8, b = kk % 8;
        uint8_t &byte = out[((nb * (k / 8) + o) * 16 + j) * 4 + b % 4];
        byte |= uint8_t((code + 8) << (b < 4 ? 0 : 4));
      }
    }
  return out;
}

void fill(Case &c, std::mt19937 &rng, int padding) {
  c.xqStride = c.k + padding;
  c.sxStride = c.groups() + padding;
  c.wsStride = c.perChannel ? 0 : c.n + padding;
  c.yStride = c.n + padding;
  int lo = c.bits == 8 ? -128 : -8, hi = c.bits == 8 ? 127 : 7;
  std::uniform_int_distribution<int> code(lo, hi), act(-127, 127);
  // Scales with full mantissas, so that any other rounding shows.
  std::uniform_real_distribution<float> scale(1e-3f, 1.0f);
  c.codes.resize(size_t(c.k * c.n));
  for (int8_t &v : c.codes)
    v = int8_t(code(rng));
  c.xq.assign(size_t(std::max<int64_t>(c.m, 1) * c.xqStride), 99);
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t kk = 0; kk < c.k; ++kk)
      c.xq[r * c.xqStride + kk] = int8_t(act(rng));
  c.sx.assign(size_t(std::max<int64_t>(c.m, 1) * c.sxStride), 0.f);
  for (float &v : c.sx)
    v = scale(rng);
  c.ws.resize(size_t(c.perChannel ? c.n : c.groups() * c.wsStride));
  for (float &v : c.ws)
    v = scale(rng) * (rng() % 2 ? 1.f : -1.f);
  c.packed = pack(c.bits, c.n, c.k, c.codes);
}

/// The definition, from the unpacked codes.
float referenceAt(const Case &c, int64_t r, int64_t col) {
  float y = 0.f;
  for (int64_t g = 0; g < c.groups(); ++g) {
    int32_t acc = 0;
    for (int64_t kk = g * c.group; kk < (g + 1) * c.group; ++kk)
      acc += int32_t(c.xq[r * c.xqStride + kk]) * c.codes[kk * c.n + col];
    float t = float(acc), sx = c.sx[r * c.sxStride + g];
    if (c.perChannel) {
      y = std::fma(t, sx, y);
    } else {
      float scale = sx * c.ws[g * c.wsStride + col];
      y = std::fma(t, scale, y);
    }
  }
  return c.perChannel ? y * c.ws[col] : y;
}

constexpr float kUntouched = -12345.5f;

std::vector<float> runPath(Isa isa, const Case &c) {
  std::vector<float> y(size_t(std::max<int64_t>(c.m, 1) * c.yStride),
                       kUntouched);
  EXPECT_TRUE(qdot::run(isa, c.bits, c.m, c.n, c.k, c.group, c.xq.data(),
                        c.xqStride, c.sx.data(), c.sxStride, c.packed.data(),
                        c.ws.data(), c.wsStride, y.data(), c.yStride));
  return y;
}

std::string describe(const Case &c) {
  std::ostringstream os;
  os << "bits " << c.bits << " m " << c.m << " n " << c.n << " k " << c.k
     << " group " << c.group << (c.perChannel ? " per-channel" : " grouped")
     << " xqStride " << c.xqStride << " yStride " << c.yStride;
  return os.str();
}

/// Exact (bitwise) agreement with the reference, padding left alone.
::testing::AssertionResult matchesReference(const Case &c,
                                            const std::vector<float> &y) {
  for (int64_t r = 0; r < c.m; ++r)
    for (int64_t col = 0; col < c.yStride; ++col) {
      float got = y[r * c.yStride + col];
      float want = col < c.n ? referenceAt(c, r, col) : kUntouched;
      if (std::memcmp(&got, &want, sizeof(float)) != 0)
        return ::testing::AssertionFailure()
               << describe(c) << ": y[" << r << ", " << col << "] = " << got
               << ", want " << want;
    }
  return ::testing::AssertionSuccess();
}

class QDotPath : public ::testing::TestWithParam<Isa> {
protected:
  void SetUp() override {
    if (!qdot::isaAvailable(GetParam()))
      GTEST_SKIP() << qdot::isaName(GetParam()) << " not on this CPU";
  }
  void TearDown() override { SITS_ASSERT_OK(setNumThreads(0)); }
};

TEST_P(QDotPath, MatchesReference) {
  std::mt19937 rng(42);
  int index = 0;
  for (int bits : {4, 8})
    for (int64_t m : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 17})
      for (int64_t n : {16, 48, 64, 80, 256})
        for (auto [k, group] : std::vector<std::pair<int64_t, int64_t>>{
                 {32, 32}, {64, 32}, {256, 64}, {384, 128}, {128, 128}})
          for (bool perChannel : {false, true}) {
            Case c = Case::shaped(bits, m, n, k, group, perChannel);
            // Every other case with padded rows (non-contiguous strides).
            fill(c, rng, index++ % 2 ? 5 : 0);
            ASSERT_TRUE(matchesReference(c, runPath(GetParam(), c)));
          }
}

TEST_P(QDotPath, SmallGroupsAndLongRows) {
  // The smallest groups each width allows, and a whole row as one group.
  std::mt19937 rng(7);
  for (auto [bits, k, group] :
       std::vector<std::tuple<int, int64_t, int64_t>>{{4, 64, 8},
                                                      {8, 64, 4},
                                                      {8, 36, 12},
                                                      {4, 1024, 1024},
                                                      {8, 1024, 1024},
                                                      {4, 0, 8}})
    for (bool perChannel : {false, true}) {
      Case c = Case::shaped(bits, 6, 96, k, group, perChannel);
      fill(c, rng, 3);
      ASSERT_TRUE(matchesReference(c, runPath(GetParam(), c)));
    }
}

TEST_P(QDotPath, ExtremeCodesDoNotSaturate) {
  // |sum| up to 1024 * 127 * 128 (int8) per group (on 17 rows, AMX tiles
  // too): exact as float, and the scales are 1, so y is the exact integer.
  // Then the largest group allowed, whose sums are still exact in int32 and
  // here also as floats.
  for (auto [m, k, group] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {3, 2048, 1024}, {17, 2048, 1024}, {1, 65536, 65536}})
    for (int bits : {4, 8})
      for (int xv : {127, -127})
        for (int cv : bits == 8 ? std::vector<int>{-128, 127, 0}
                                : std::vector<int>{-8, 7}) {
          Case c = Case::shaped(bits, m, 32, k, group, false);
          c.xqStride = c.k;
          c.sxStride = c.groups();
          c.wsStride = c.n;
          c.yStride = c.n;
          c.codes.assign(size_t(c.k * c.n), int8_t(cv));
          // One column alternates between the extremes.
          for (int64_t kk = 0; kk < c.k; ++kk)
            c.codes[kk * c.n + 5] = int8_t(kk % 2 ? (bits == 8 ? 127 : 7)
                                                  : (bits == 8 ? -128 : -8));
          c.xq.assign(size_t(c.m * c.k), int8_t(xv));
          c.sx.assign(size_t(c.m * c.groups()), 1.f);
          c.ws.assign(size_t(c.groups() * c.n), 1.f);
          c.packed = pack(bits, c.n, c.k, c.codes);
          std::vector<float> y = runPath(GetParam(), c);
          ASSERT_TRUE(matchesReference(c, y));
          EXPECT_EQ(y[0], float(c.k) * float(xv) * float(cv))
              << bits << " " << xv << " " << cv;
          int lo = bits == 8 ? -128 : -8, hi = bits == 8 ? 127 : 7;
          EXPECT_EQ(y[5], float(c.k / 2) * float(xv) * float(lo + hi));
        }
}

TEST_P(QDotPath, ThreadCountsGiveTheSameBits) {
  std::mt19937 rng(3);
  for (int bits : {4, 8})
    for (bool perChannel : {false, true}) {
      Case c = Case::shaped(bits, 37, 528, 512, 32, perChannel);
      fill(c, rng, 1);
      SITS_ASSERT_OK(setNumThreads(1));
      std::vector<float> one = runPath(GetParam(), c);
      ASSERT_TRUE(matchesReference(c, one));
      for (int threads : {2, 3, 8}) {
        SITS_ASSERT_OK(setNumThreads(threads));
        for (int64_t m : {int64_t(1), int64_t(37)}) {
          Case sub = c;
          sub.m = m;
          std::vector<float> y = runPath(GetParam(), sub);
          EXPECT_EQ(0, std::memcmp(y.data(), one.data(),
                                   size_t(m * c.yStride) * sizeof(float)))
              << describe(sub) << ", threads " << threads;
        }
      }
    }
}

TEST_P(QDotPath, BadArgumentsLeaveTheOutputAlone) {
  std::mt19937 rng(5);
  Case c;
  c.m = 2;
  c.n = 32;
  c.k = 64;
  c.group = 32;
  fill(c, rng, 0);
  struct Bad {
    const char *what;
    int64_t bits, n, k, group, yStride;
  } bads[] = {
      {"bits 5", 5, 32, 64, 32, 32},
      {"bits 0", 0, 32, 64, 32, 32},
      {"n % 16", 4, 24, 64, 32, 32},
      {"k % group", 4, 32, 64, 24, 32},
      {"group % 8", 4, 32, 64, 4, 32},
      {"group 0", 8, 32, 64, 0, 32},
      {"group % 4", 8, 32, 64, 2, 32},
      {"negative n", 4, -16, 64, 32, 32},
      {"negative k", 4, 32, -64, 32, 32},
      {"rows overlap", 4, 32, 64, 32, 16},
      {"group > 2^16", 8, 32, 1 << 17, 1 << 17, 32},
  };
  for (const Bad &b : bads) {
    std::vector<float> y(64, kUntouched);
    ASSERT_TRUE(qdot::run(GetParam(), b.bits, c.m, b.n, b.k, b.group,
                          c.xq.data(), c.xqStride, c.sx.data(), c.sxStride,
                          c.packed.data(), c.ws.data(), c.wsStride, y.data(),
                          b.yStride));
    for (float v : y)
      ASSERT_EQ(v, kUntouched) << b.what;
  }
  std::vector<float> y(64, kUntouched);
  ASSERT_TRUE(qdot::run(GetParam(), 4, -1, 32, 64, 32, c.xq.data(), 64,
                        c.sx.data(), 2, c.packed.data(), c.ws.data(), 32,
                        y.data(), 32));
  for (float v : y)
    ASSERT_EQ(v, kUntouched) << "negative m";
}

INSTANTIATE_TEST_SUITE_P(QDot, QDotPath,
                         ::testing::Values(Isa::kScalar, Isa::kAvx2,
                                           Isa::kAvx512Vnni, Isa::kAmx),
                         [](const ::testing::TestParamInfo<Isa> &info) {
                           return std::string(qdot::isaName(info.param));
                         });

TEST(QDot, AmxRowBlocksMatchScalar) {
  // Whole 16-row blocks take tile products (in pairs where they can), the
  // rows left the VNNI tiles; groups that are not multiples of 64 take
  // shorter products (colsb < 64), the smallest each width allows too.
  if (!qdot::isaAvailable(Isa::kAmx))
    GTEST_SKIP() << "amx not on this CPU";
  std::mt19937 rng(13);
  int index = 0;
  for (int bits : {4, 8})
    for (int64_t m : {16, 17, 33, 64})
      for (int64_t n : {16, 48, 160})
        for (auto [k, group] :
             std::vector<std::pair<int64_t, int64_t>>{{512, 32},
                                                      {512, 64},
                                                      {512, 128},
                                                      {512, 512},
                                                      {192, 96},
                                                      {80, 40},
                                                      {96, bits == 8 ? 12 : 8}})
          for (bool perChannel : {false, true}) {
            Case c = Case::shaped(bits, m, n, k, group, perChannel);
            fill(c, rng, index++ % 2 ? 3 : 0);
            std::vector<float> y = runPath(Isa::kAmx, c);
            ASSERT_TRUE(matchesReference(c, y));
            std::vector<float> scalar = runPath(Isa::kScalar, c);
            ASSERT_EQ(0, std::memcmp(y.data(), scalar.data(),
                                     y.size() * sizeof(float)))
                << describe(c);
          }
}

using QDotFn = void (*)(int64_t, int64_t, int64_t, int64_t, int64_t,
                        const int8_t *, int64_t, const float *, int64_t,
                        const uint8_t *, const float *, int64_t, float *,
                        int64_t);

TEST(QDot, ExportedSymbolRunsTheSelectedPath) {
  // What compiled code does: resolve it in the global scope.
  void *self = dlopen(nullptr, RTLD_NOW);
  auto fn = reinterpret_cast<QDotFn>(dlsym(self, "sitsRuntimeQDot"));
  ASSERT_NE(fn, nullptr);
  std::mt19937 rng(11);
  for (int bits : {4, 8}) {
    Case c = Case::shaped(bits, 5, 80, 256, 64, false);
    fill(c, rng, 2);
    std::vector<float> y(size_t(c.m * c.yStride), kUntouched);
    fn(c.bits, c.m, c.n, c.k, c.group, c.xq.data(), c.xqStride, c.sx.data(),
       c.sxStride, c.packed.data(), c.ws.data(), c.wsStride, y.data(),
       c.yStride);
    EXPECT_TRUE(matchesReference(c, y)) << qdot::isaName(qdot::selectedIsa());
    std::vector<float> bad(16, kUntouched);
    fn(5, 1, 16, 32, 32, c.xq.data(), 32, c.sx.data(), 1, c.packed.data(),
       c.ws.data(), 0, bad.data(), 16);
    for (float v : bad)
      EXPECT_EQ(v, kUntouched);
  }
}

/// Weight bytes per second of decode (m = 1) and batched shapes, per path
/// and thread count, n = k = 2048, groups of 32 with per-group scales:
/// "hot" reruns one weight matrix (from caches), "cold" cycles through
/// 512 MiB of them and their scales (from DRAM, as a model's layers do).
/// GB/s counts the packed weights only; the f32 scales add 1/4 (4 bits) or
/// 1/8 (8 bits) to what is read. $SITS_QDOT_BENCH_PATHS (e.g. "avx512vnni")
/// picks the paths.
TEST(QDot, DISABLED_Bench) {
  const int64_t n = 2048, k = 2048, group = 32;
  std::mt19937 rng(1);
  std::vector<int8_t> xq(size_t(128 * k));
  for (int8_t &v : xq)
    v = int8_t(int(rng() % 255) - 127);
  std::vector<float> sx(size_t(128 * k / group), 0.01f);
  std::vector<float> y(size_t(128 * n));
  // Compiled code's weights are 64-byte aligned (ARTIFACT.md).
  const size_t poolBytes = size_t(512) << 20;
  std::vector<uint8_t> poolStorage(poolBytes + 64);
  uint8_t *pool = poolStorage.data() +
                  (64 - reinterpret_cast<uintptr_t>(poolStorage.data()) % 64);
  for (size_t i = 0; i < poolBytes; ++i)
    pool[i] = uint8_t(rng());
  const size_t wsFloats = size_t(k / group * n);
  const char *paths = std::getenv("SITS_QDOT_BENCH_PATHS");
  std::printf("%-11s %4s %4s %7s %9s %9s %9s\n", "path", "bits", "m", "threads",
              "hot GB/s", "cold GB/s", "GMAC/s");
  for (Isa isa : {Isa::kAmx, Isa::kAvx512Vnni, Isa::kAvx2, Isa::kScalar}) {
    if (!qdot::isaAvailable(isa) ||
        (paths && !std::strstr(paths, qdot::isaName(isa))))
      continue;
    for (int bits : {4, 8})
      for (int64_t m : {1, 8, 128})
        for (int threads : {1, 2}) {
          if (isa == Isa::kScalar && m > 8)
            continue;
          SITS_ASSERT_OK(setNumThreads(threads));
          const size_t wBytes = size_t(n * k * bits / 8);
          const size_t matrices = poolBytes / wBytes;
          std::vector<float> ws(matrices * wsFloats, 0.02f);
          double seconds[2];
          for (int cold = 0; cold < 2; ++cold) {
            auto call = [&](size_t i) {
              size_t matrix = cold ? i % matrices : 0;
              qdot::run(isa, bits, m, n, k, group, xq.data(), k, sx.data(),
                        k / group, pool + matrix * wBytes,
                        ws.data() + matrix * wsFloats, n, y.data(), n);
            };
            seconds[cold] = test::secondsPerCall(call, 3, 0.3, 5);
          }
          std::printf("%-11s %4d %4lld %7d %9.1f %9.1f %9.1f\n",
                      qdot::isaName(isa), bits, (long long)m, threads,
                      double(wBytes) / seconds[0] * 1e-9,
                      double(wBytes) / seconds[1] * 1e-9,
                      double(m * n * k) / seconds[0] * 1e-9);
        }
  }
  SITS_ASSERT_OK(setNumThreads(0));
}

} // namespace
