//===- sampler.cpp - Token sampling
//----------------------------------------===//
#include "sits/runtime/engine/sampler.h"

#include "errors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace sits::runtime::engine {

namespace {

uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

} // namespace

Status validateSamplingParams(const SamplingParams &p) {
  if (!std::isfinite(p.temperature) || p.temperature < 0.0f)
    return invalidArgument("temperature",
                           "temperature = " + std::to_string(p.temperature) +
                               ": must be finite and >= 0 (0 is greedy)");
  if (p.top_k < 0)
    return invalidArgument("top_k", "top_k = " + std::to_string(p.top_k) +
                                        ": must be >= 0 (0 disables top-k)");
  if (!(p.top_p > 0.0f && p.top_p <= 1.0f))
    return invalidArgument("top_p",
                           "top_p = " + std::to_string(p.top_p) +
                               ": must be in (0, 1] (1 disables top-p)");
  return Status::OK();
}

double uniformDraw(uint64_t seed, uint64_t stream, uint64_t step) {
  uint64_t h = mix64(seed);
  h = mix64(h ^ stream);
  h = mix64(h ^ step);
  return static_cast<double>(h >> 11) * 0x1.0p-53;
}

StatusOr<int32_t> Sampler::sample(const float *logits, int64_t vocab,
                                  const SamplingParams &params, uint64_t seed,
                                  uint64_t stream, uint64_t step) {
  SITS_RETURN_IF_ERROR(validateSamplingParams(params));
  if (!logits)
    return invalidArgument("logits", "logits row is null");
  if (vocab <= 0 || vocab > std::numeric_limits<int32_t>::max())
    return invalidArgument("vocab", "vocab = " + std::to_string(vocab) +
                                        ": must be in [1, 2^31)");
  // Reject NaN / +inf and find the largest logit in one branch-free pass,
  // eight independent lanes that the compiler vectorizes (a scalar scan
  // with early exits took ~70 us of a 32,000-token row, 5% of a small
  // model's decode step), then take its first index (the lowest id on
  // ties).
  constexpr float kInf = std::numeric_limits<float>::infinity();
  constexpr int kLanes = 8;
  float lanesMax[kLanes];
  int32_t lanesFinite[kLanes] = {}, lanesBad[kLanes] = {};
  std::fill(lanesMax, lanesMax + kLanes, -kInf);
  int64_t i = 0;
  for (; i + kLanes <= vocab; i += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float l = logits[i + j];
      lanesBad[j] |= !(l <= std::numeric_limits<float>::max()); // NaN, +inf
      lanesFinite[j] += l != -kInf;
      lanesMax[j] = l > lanesMax[j] ? l : lanesMax[j];
    }
  float largest = -kInf;
  int64_t finite = 0;
  bool bad = false;
  for (; i < vocab; ++i) {
    const float l = logits[i];
    bad |= !(l <= std::numeric_limits<float>::max());
    finite += l != -kInf;
    largest = l > largest ? l : largest;
  }
  for (int j = 0; j < kLanes; ++j) {
    bad |= lanesBad[j] != 0;
    finite += lanesFinite[j];
    largest = lanesMax[j] > largest ? lanesMax[j] : largest;
  }
  if (bad)
    for (i = 0; i < vocab; ++i)
      if (std::isnan(logits[i]) || logits[i] == kInf) {
        Status st = invalidArgument(
            "logits", "logits[" + std::to_string(i) + "] is " +
                          (std::isnan(logits[i]) ? "NaN" : "+inf"));
        st.withIndex(i);
        return st;
      }
  if (finite == 0)
    return invalidArgument("logits", "every logit is -inf: nothing to sample");
  int64_t best = 0;
  while (logits[best] != largest)
    ++best;
  if (params.isGreedy() || finite == 1)
    return static_cast<int32_t>(best);

  // Candidates: the finite logits, ranked (logit desc, id asc) where a
  // filter needs the ranking.
  candidates_.clear();
  for (int64_t i = 0; i < vocab; ++i)
    if (logits[i] != -std::numeric_limits<float>::infinity())
      candidates_.push_back(static_cast<int32_t>(i));
  auto ranks = [logits](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  const bool topK = params.top_k > 0 &&
                    static_cast<size_t>(params.top_k) < candidates_.size();
  const bool topP = params.top_p < 1.0f;
  if (topK) {
    std::nth_element(candidates_.begin(), candidates_.begin() + params.top_k,
                     candidates_.end(), ranks);
    candidates_.resize(static_cast<size_t>(params.top_k));
  }
  if (topP)
    std::sort(candidates_.begin(), candidates_.end(), ranks);
  else if (topK) // the draw walks candidates in a canonical order
    std::sort(candidates_.begin(), candidates_.end());

  // Softmax weights in double, relative to the max (no overflow).
  const double maxLogit = logits[best];
  const double invT = 1.0 / static_cast<double>(params.temperature);
  weights_.resize(candidates_.size());
  double total = 0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    weights_[i] = std::exp((logits[candidates_[i]] - maxLogit) * invT);
    total += weights_[i];
  }
  size_t kept = candidates_.size();
  if (topP) {
    const double target = static_cast<double>(params.top_p) * total;
    double cum = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cum += weights_[i];
      if (cum >= target) {
        kept = i + 1;
        break;
      }
    }
    total = 0;
    for (size_t i = 0; i < kept; ++i)
      total += weights_[i];
  }
  const double u = uniformDraw(seed, stream, step) * total;
  double cum = 0;
  for (size_t i = 0; i < kept; ++i) {
    cum += weights_[i];
    if (u < cum)
      return candidates_[i];
  }
  // Rounding left u at the very top: the last candidate with weight.
  for (size_t i = kept; i-- > 0;)
    if (weights_[i] > 0)
      return candidates_[i];
  return static_cast<int32_t>(best);
}

} // namespace sits::runtime::engine
