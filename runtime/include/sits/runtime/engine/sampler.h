//===- sampler.h - Token sampling: greedy, temperature, top-k, top-p ------===//
//
// `Sampler` turns one row of logits into a token id. Randomness is
// counter-based: the uniform draw of a sample is a hash of (seed, stream,
// step), never a shared generator state, so a request draws the same tokens
// however it is batched, preempted or re-prefilled, and whichever other
// requests run beside it. The engine keys `stream` by the parallel-sample
// index (and the request id when the request has no seed of its own) and
// `step` by the number of tokens the sample has generated so far.
//
// Filters apply in the usual order: temperature scales the logits, top-k
// keeps the k most likely tokens, top-p keeps the smallest most-likely set
// whose probability reaches p (at least one token). Ties rank the lower
// token id first. Temperature 0 (or top_k == 1) is greedy: the argmax,
// lowest id on ties.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_ENGINE_SAMPLER_H
#define SITS_RUNTIME_ENGINE_SAMPLER_H

#include "sits/runtime/status.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace sits::runtime::engine {

struct SamplingParams {
  /// 0: greedy. Otherwise logits are divided by it. Finite, >= 0.
  float temperature = 1.0f;
  /// 0: off. Otherwise only the k most likely tokens are kept. >= 0.
  int32_t top_k = 0;
  /// Nucleus mass, in (0, 1]; 1 is off.
  float top_p = 1.0f;
  /// The request's seed. Without one the engine's seed and the request id
  /// key the draws (reproducible for one engine configuration and
  /// submission order only).
  std::optional<uint64_t> seed;

  bool isGreedy() const { return temperature == 0.0f || top_k == 1; }
};

/// InvalidArgument naming the field (`subject`) when a parameter is out of
/// range: temperature < 0 or not finite, top_k < 0, top_p not in (0, 1].
Status validateSamplingParams(const SamplingParams &params);

/// The uniform draw in [0, 1) for (seed, stream, step): a keyed hash
/// (SplitMix64 finalizers), the same on every platform.
double uniformDraw(uint64_t seed, uint64_t stream, uint64_t step);

/// Samples token ids from logit rows. Holds scratch buffers only (no
/// random state): one instance per thread.
class Sampler {
public:
  /// Picks a token from `logits[0, vocab)`. Errors (InvalidArgument, nothing
  /// else): bad params, a null row, vocab <= 0, a NaN or +inf logit
  /// (`index` names it), or every logit -inf. -inf logits (masked tokens)
  /// are never picked.
  StatusOr<int32_t> sample(const float *logits, int64_t vocab,
                           const SamplingParams &params, uint64_t seed,
                           uint64_t stream, uint64_t step);

private:
  std::vector<int32_t> candidates_;
  std::vector<double> weights_;
};

} // namespace sits::runtime::engine

#endif // SITS_RUNTIME_ENGINE_SAMPLER_H
