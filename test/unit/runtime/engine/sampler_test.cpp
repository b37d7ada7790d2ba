//===- sampler_test.cpp - Greedy, temperature, top-k, top-p, seeding ------===//
#include "sits/runtime/engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace sits::runtime;
using namespace sits::runtime::engine;

namespace {

SamplingParams params(float temperature, int32_t topK = 0, float topP = 1.0f) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_k = topK;
  p.top_p = topP;
  return p;
}

int32_t draw(Sampler &s, const std::vector<float> &logits,
             const SamplingParams &p, uint64_t seed, uint64_t stream,
             uint64_t step) {
  auto r = s.sample(logits.data(), static_cast<int64_t>(logits.size()), p, seed,
                    stream, step);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? *r : -1;
}

std::vector<double> softmax(const std::vector<float> &logits, double t) {
  double m = -1e300;
  for (float l : logits)
    m = std::max(m, static_cast<double>(l));
  std::vector<double> p;
  double z = 0;
  for (float l : logits) {
    p.push_back(std::exp((l - m) / t));
    z += p.back();
  }
  for (double &x : p)
    x /= z;
  return p;
}

std::vector<double> frequencies(Sampler &s, const std::vector<float> &logits,
                                const SamplingParams &p, int draws) {
  std::vector<double> f(logits.size(), 0);
  for (int i = 0; i < draws; ++i)
    f[static_cast<size_t>(
        draw(s, logits, p, 1234, 5, static_cast<uint64_t>(i)))] += 1;
  for (double &x : f)
    x /= draws;
  return f;
}

const std::vector<float> kLogits = {1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 0.0f};

} // namespace

TEST(Sampler, TemperatureZeroIsArgmaxLowestIdOnTies) {
  Sampler s;
  EXPECT_EQ(draw(s, kLogits, params(0), 1, 2, 3), 4);
  const std::vector<float> ties = {0.0f, 2.0f, 2.0f, 1.0f};
  for (uint64_t step = 0; step < 20; ++step)
    EXPECT_EQ(draw(s, ties, params(0), 9, 0, step), 1);
}

TEST(Sampler, TopK1AndTinyTopPAreGreedy) {
  Sampler s;
  std::vector<float> row(50);
  for (uint64_t trial = 0; trial < 50; ++trial) {
    for (size_t v = 0; v < row.size(); ++v)
      row[v] = static_cast<float>(uniformDraw(trial, v, 0) * 4 - 2);
    const int32_t greedy = draw(s, row, params(0), 0, 0, 0);
    for (uint64_t step = 0; step < 10; ++step) {
      EXPECT_EQ(draw(s, row, params(1.0f, 1), trial, 3, step), greedy);
      EXPECT_EQ(draw(s, row, params(1.5f, 0, 1e-6f), trial, 3, step), greedy);
      EXPECT_EQ(draw(s, row, params(0.7f, 5, 1e-6f), trial, 3, step), greedy);
    }
  }
}

TEST(Sampler, BadParamsAreRejectedNamingTheField) {
  Sampler s;
  struct Case {
    SamplingParams p;
    const char *subject;
  } cases[] = {
      {params(-0.5f), "temperature"},
      {params(std::numeric_limits<float>::quiet_NaN()), "temperature"},
      {params(std::numeric_limits<float>::infinity()), "temperature"},
      {params(1.0f, -1), "top_k"},
      {params(1.0f, 0, 0.0f), "top_p"},
      {params(1.0f, 0, -0.1f), "top_p"},
      {params(1.0f, 0, 1.5f), "top_p"},
      {params(1.0f, 0, std::numeric_limits<float>::quiet_NaN()), "top_p"},
  };
  for (const Case &c : cases) {
    Status st = validateSamplingParams(c.p);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.subject;
    EXPECT_EQ(st.info().subject, c.subject);
    EXPECT_FALSE(st.message().empty());
    auto r = s.sample(kLogits.data(), 6, c.p, 0, 0, 0);
    EXPECT_EQ(r.code(), StatusCode::kInvalidArgument);
  }
  EXPECT_TRUE(validateSamplingParams(params(0)).ok());
  EXPECT_TRUE(validateSamplingParams(params(2.0f, 10, 1.0f)).ok());
}

TEST(Sampler, BadLogitsAreRejected) {
  Sampler s;
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> nan = {0.0f, std::numeric_limits<float>::quiet_NaN()};
  auto r = s.sample(nan.data(), 2, params(1.0f), 0, 0, 0);
  ASSERT_EQ(r.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().info().index, 1);
  std::vector<float> posInf = {0.0f, inf};
  EXPECT_EQ(s.sample(posInf.data(), 2, params(0), 0, 0, 0).code(),
            StatusCode::kInvalidArgument);
  std::vector<float> allMasked = {-inf, -inf};
  EXPECT_EQ(s.sample(allMasked.data(), 2, params(1.0f), 0, 0, 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(s.sample(nullptr, 2, params(1.0f), 0, 0, 0).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(s.sample(kLogits.data(), 0, params(1.0f), 0, 0, 0).code(),
            StatusCode::kInvalidArgument);
}

TEST(Sampler, GreedyScansLongRowsInLanesAndTail) {
  // Rows longer than the scan's eight lanes, with a tail: the largest
  // logit (lowest id on ties), NaN / +inf and all -inf rows, wherever
  // they lie.
  Sampler s;
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t vocab : {9, 16, 37, 1000}) {
    for (int64_t at :
         {int64_t(0), int64_t(7), int64_t(8), vocab / 2, vocab - 1}) {
      std::vector<float> row(static_cast<size_t>(vocab));
      for (int64_t i = 0; i < vocab; ++i)
        row[static_cast<size_t>(i)] = -1.0f - float(i % 13) * 0.25f;
      row[static_cast<size_t>(at)] = 2.0f;
      EXPECT_EQ(draw(s, row, params(0), 0, 0, 0), at) << vocab << " " << at;
      // A tie later on keeps the first; -inf elsewhere changes nothing.
      row[static_cast<size_t>(vocab - 1 - (at == vocab - 1))] =
          at == vocab - 1 ? -inf : 2.0f;
      EXPECT_EQ(draw(s, row, params(0), 0, 0, 0), at) << vocab << " " << at;
      for (float bad : {std::numeric_limits<float>::quiet_NaN(), inf}) {
        std::vector<float> b = row;
        b[static_cast<size_t>(at)] = bad;
        auto r = s.sample(b.data(), vocab, params(0), 0, 0, 0);
        ASSERT_EQ(r.code(), StatusCode::kInvalidArgument);
        EXPECT_EQ(r.status().info().index, at);
      }
    }
    std::vector<float> masked(static_cast<size_t>(vocab), -inf);
    EXPECT_EQ(s.sample(masked.data(), vocab, params(0), 0, 0, 0).code(),
              StatusCode::kInvalidArgument);
    masked[static_cast<size_t>(vocab - 1)] = -5.0f;
    EXPECT_EQ(draw(s, masked, params(1.0f), 0, 0, 0), vocab - 1);
  }
  // -0 and +0 are one value: the first of them.
  std::vector<float> zeros(20, -1.0f);
  zeros[11] = -0.0f;
  zeros[17] = 0.0f;
  EXPECT_EQ(draw(s, zeros, params(0), 0, 0, 0), 11);
}

TEST(Sampler, MaskedTokensAreNeverDrawn) {
  Sampler s;
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row = {-inf, 0.0f, -inf, 0.0f, -inf};
  for (uint64_t step = 0; step < 500; ++step) {
    const int32_t t = draw(s, row, params(1.0f), 3, 1, step);
    EXPECT_TRUE(t == 1 || t == 3) << t;
  }
}

TEST(Sampler, DrawsAreKeyedBySeedStreamAndStep) {
  Sampler s;
  const auto p = params(1.0f);
  int diffStream = 0, diffSeed = 0;
  for (uint64_t step = 0; step < 200; ++step) {
    const int32_t a = draw(s, kLogits, p, 42, 0, step);
    EXPECT_EQ(a, draw(s, kLogits, p, 42, 0, step)); // reproducible
    diffStream += a != draw(s, kLogits, p, 42, 1, step);
    diffSeed += a != draw(s, kLogits, p, 43, 0, step);
  }
  EXPECT_GT(diffStream, 50);
  EXPECT_GT(diffSeed, 50);
  for (uint64_t i = 0; i < 1000; ++i) {
    const double u = uniformDraw(7, i, i * 3);
    EXPECT_GE(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(Sampler, TemperatureOneMatchesSoftmax) {
  Sampler s;
  const int draws = 100000;
  const auto f = frequencies(s, kLogits, params(1.0f), draws);
  const auto p = softmax(kLogits, 1.0);
  for (size_t v = 0; v < p.size(); ++v)
    EXPECT_NEAR(f[v], p[v], 0.006) << "token " << v;
}

TEST(Sampler, TemperatureScalesTheDistribution) {
  Sampler s;
  const int draws = 100000;
  for (double t : {0.5, 2.0}) {
    const auto f =
        frequencies(s, kLogits, params(static_cast<float>(t)), draws);
    const auto p = softmax(kLogits, t);
    for (size_t v = 0; v < p.size(); ++v)
      EXPECT_NEAR(f[v], p[v], 0.006) << "T " << t << " token " << v;
  }
}

TEST(Sampler, TopKKeepsTheKMostLikelyRenormalized) {
  Sampler s;
  const auto f = frequencies(s, kLogits, params(1.0f, 2), 50000);
  // Tokens 4 (logit 3) and 1 (logit 2) only: e^3 / (e^3 + e^2).
  const double p4 = std::exp(3.0) / (std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(f[4], p4, 0.01);
  EXPECT_NEAR(f[1], 1 - p4, 0.01);
  EXPECT_EQ(f[0] + f[2] + f[3] + f[5], 0.0);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  Sampler s;
  const auto p = softmax(kLogits, 1.0);
  // p[4] ~ 0.61, p[1] ~ 0.23, p[0] ~ 0.08: top_p 0.8 keeps {4, 1}, 0.9
  // keeps {4, 1, 0}.
  const auto f = frequencies(s, kLogits, params(1.0f, 0, 0.8f), 50000);
  EXPECT_NEAR(f[4], p[4] / (p[4] + p[1]), 0.01);
  EXPECT_NEAR(f[1], p[1] / (p[4] + p[1]), 0.01);
  EXPECT_EQ(f[0] + f[2] + f[3] + f[5], 0.0);
  const auto g = frequencies(s, kLogits, params(1.0f, 0, 0.9f), 50000);
  const double z = p[4] + p[1] + p[0];
  EXPECT_NEAR(g[0], p[0] / z, 0.01);
  EXPECT_EQ(g[2] + g[3] + g[5], 0.0);
  // Combined with top-k: k = 3 then p = 0.8 of the renormalized three.
  const auto h = frequencies(s, kLogits, params(1.0f, 3, 0.8f), 20000);
  EXPECT_EQ(h[0] + h[2] + h[3] + h[5], 0.0);
}
