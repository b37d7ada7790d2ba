//===- Plan.cpp - The choice of formats within an error budget ------------===//
//
// What quantizing a weight costs in output error: the exact residual of each
// candidate quantization, weighted per row by the statistics of the input
// that row multiplies (calibration data, a layer norm's parameters, or unit
// variance). With precision auto, blocks of the weight start at the cheapest
// format and are upgraded greedily, largest error reduction per extra byte
// first, until the estimated relative error is within the budget; a fixed
// precision is one format everywhere. See the pass description in Passes.td
// for the model of the error.
//
//===----------------------------------------------------------------------===//

#include "MixedPrecision.h"

#include "passes/Transforms/ConstantData.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <queue>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::mixed_precision;

//===----------------------------------------------------------------------===//
// Input statistics
//===----------------------------------------------------------------------===//

std::optional<std::vector<float>>
mixed_precision::constantVector(Value value, int64_t size) {
  auto constant = value ? value.getDefiningOp<arith::ConstantOp>() : nullptr;
  auto elements =
      constant ? dyn_cast<ElementsAttr>(constant.getValue()) : ElementsAttr();
  if (!elements || !elements.getElementType().isF32() ||
      elements.getNumElements() != size)
    return std::nullopt;
  // Dense data (a resource blob included), or a splat.
  if (std::optional<ArrayRef<char>> bytes = getConstantBytes(elements)) {
    std::vector<float> values(size);
    std::memcpy(values.data(), bytes->data(), size * sizeof(float));
    return values;
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(elements)) {
    auto values = dense.getValues<float>();
    return std::vector<float>(values.begin(), values.end());
  }
  return std::nullopt;
}

/// `sits.input_stats` of `op` with `size` entries per vector, if valid.
static std::optional<InputStats> attachedInputStats(Operation *op,
                                                    int64_t size) {
  auto attr = op->getAttrOfType<DictionaryAttr>("sits.input_stats");
  if (!attr)
    return std::nullopt;
  auto mean = attr.getAs<DenseElementsAttr>("mean");
  auto meanSquare = attr.getAs<DenseElementsAttr>("mean_square");
  if (!mean || !meanSquare || mean.getNumElements() != size ||
      meanSquare.getNumElements() != size ||
      !isa<FloatType>(mean.getElementType()) ||
      !isa<FloatType>(meanSquare.getElementType()))
    return std::nullopt;
  InputStats stats;
  for (const APFloat &v : mean.getValues<APFloat>())
    stats.mean.push_back(v.convertToDouble());
  for (const APFloat &v : meanSquare.getValues<APFloat>())
    stats.meanSquare.push_back(v.convertToDouble());
  stats.source = "calibration";
  return stats;
}

/// The statistics attached to `op` (a calibration set), else zero mean and
/// unit mean square per channel.
static InputStats attachedOrDefaultStats(Operation *op, int64_t channels) {
  if (std::optional<InputStats> stats = attachedInputStats(op, channels))
    return *stats;
  InputStats stats;
  stats.mean.assign(channels, 0.0);
  stats.meanSquare.assign(channels, 1.0);
  stats.source = "default";
  return stats;
}

InputStats mlir::sits::estimateInputStats(MatmulOp matmul, int64_t k,
                                          func::CallOp call) {
  InputStats stats = attachedOrDefaultStats(matmul, k);
  if (stats.source != "default")
    return stats;
  // A layer norm's output row is normalized, so over rows each channel has
  // roughly mean beta and second moment gamma^2 + beta^2.
  if (auto norm = matmul.getLhs().getDefiningOp<LayerNormOp>()) {
    auto inputType = cast<RankedTensorType>(norm.getInput().getType());
    int64_t axis = norm.getAxisAttr().getInt();
    if (axis < 0)
      axis += inputType.getRank();
    std::optional<std::vector<float>> gamma =
        constantVector(getPassedValue(norm.getScale(), call), k);
    std::optional<std::vector<float>> beta =
        norm.getBias() ? constantVector(getPassedValue(norm.getBias(), call), k)
                       : std::vector<float>(k, 0.0f);
    if (axis == inputType.getRank() - 1 && gamma && beta) {
      for (int64_t i = 0; i < k; ++i) {
        stats.mean[i] = (*beta)[i];
        stats.meanSquare[i] =
            double((*gamma)[i]) * (*gamma)[i] + double((*beta)[i]) * (*beta)[i];
      }
      stats.source = "layer_norm";
    }
  }
  return stats;
}

InputStats mlir::sits::estimateInputStats(ConvOp conv, int64_t channels) {
  return attachedOrDefaultStats(conv, channels);
}

//===----------------------------------------------------------------------===//
// Per-block choice
//===----------------------------------------------------------------------===//

namespace {

/// Storage bytes of a `rows` x `cols` block of a weight with `k` rows in
/// `format`, quantized per `group` rows (a per-channel scale, group >= k,
/// is shared by the block rows of its column: each pays its share).
int64_t pieceBytes(WeightFormat format, int64_t rows, int64_t cols,
                   int64_t group, int64_t k) {
  int64_t scaleBytes = group >= k ? (rows * cols * 4 + k - 1) / k
                                  : ((rows + group - 1) / group) * cols * 4;
  switch (format) {
  case WeightFormat::Int4:
    return (rows * cols + 1) / 2 + scaleBytes;
  case WeightFormat::Int8:
  case WeightFormat::Fp8:
    return rows * cols + scaleBytes;
  case WeightFormat::Fp32:
    return rows * cols * 4;
  }
  llvm_unreachable("unknown weight format");
}

} // namespace

PrecisionPlan mlir::sits::planWeightPrecision(ArrayRef<float> weight, int64_t k,
                                              int64_t n,
                                              const InputStats &stats,
                                              const PrecisionConfig &config) {
  PrecisionPlan plan;
  // block-k = 0: blocks span all of K (column strips), so pieces never cut
  // K and a strip of equal formats is one contraction.
  plan.blockK = config.blockK > 0 ? std::min(config.blockK, k) : k;
  plan.blockN = config.blockN;
  plan.blocksK = (k + plan.blockK - 1) / plan.blockK;
  plan.blocksN = (n + config.blockN - 1) / config.blockN;
  int64_t numBlocks = plan.blocksK * plan.blocksN;

  // Per-row weight of a squared residual: the input's second moment, or
  // its variance when bias correction takes the mean part out.
  std::vector<double> rowWeight(k), rowSignal(k);
  for (int64_t r = 0; r < k; ++r) {
    rowSignal[r] = std::max(stats.meanSquare[r], 0.0);
    double variance = stats.meanSquare[r] - stats.mean[r] * stats.mean[r];
    rowWeight[r] =
        config.biasCorrection ? std::max(variance, 0.0) : rowSignal[r];
  }
  plan.signal = 0.0;
  for (int64_t r = 0; r < k; ++r) {
    const float *row = weight.data() + r * n;
    plan.signal += rowSignal[r] * sumOf(0, n, [&](int64_t c) {
                     return double(row[c]) * row[c];
                   });
  }

  // The quantizations the blocks can take, each over the whole weight: 8-bit
  // formats per output channel, INT4 per group. A piece cut from a block
  // run keeps these codes and scales, so a block's estimate is exactly
  // what executes, and 8-bit pieces stay per channel (the fast GEMM path).
  SmallVector<WeightFormat> candidates;
  if (config.autoSelect) {
    candidates.push_back(WeightFormat::Int4);
    candidates.push_back(WeightFormat::Int8);
    if (config.allowFp8)
      candidates.push_back(WeightFormat::Fp8);
    candidates.push_back(WeightFormat::Fp32);
  } else {
    candidates.push_back(config.format);
  }
  auto groupOf = [&](WeightFormat f) -> int64_t {
    return f == WeightFormat::Int4 ? config.groupSize : k;
  };
  for (WeightFormat f : candidates)
    plan.quantized.push_back(quantizeWeight(weight, k, n, f, groupOf(f)));

  // noise[b][i]: estimated squared output error of block b in candidate i.
  std::vector<std::vector<double>> noise(
      numBlocks, std::vector<double>(candidates.size()));
  std::vector<std::vector<int64_t>> bytes(
      numBlocks, std::vector<int64_t>(candidates.size()));
  auto blockRange = [&](int64_t b) {
    int64_t bk = b / plan.blocksN, bn = b % plan.blocksN;
    return std::array<int64_t, 4>{
        bk * plan.blockK, std::min(k, (bk + 1) * plan.blockK),
        bn * config.blockN, std::min(n, (bn + 1) * config.blockN)};
  };
  for (int64_t b = 0; b < numBlocks; ++b) {
    auto [k0, k1, n0, n1] = blockRange(b);
    for (size_t i = 0; i < candidates.size(); ++i) {
      const QuantizedWeight &q = plan.quantized[i];
      double sum = 0.0;
      for (int64_t r = k0; r < k1; ++r)
        sum += rowWeight[r] * q.rowSquaredError(weight, r, n0, n1, n);
      noise[b][i] = sum;
      bytes[b][i] = pieceBytes(candidates[i], k1 - k0, n1 - n0,
                               groupOf(candidates[i]), k);
    }
  }

  // Each block starts at the cheapest candidate; INT4 needs an even number
  // of rows per piece (two per byte), so odd edge blocks start above it.
  std::vector<size_t> choice(numBlocks, 0);
  for (int64_t b = 0; b < numBlocks; ++b) {
    auto [k0, k1, n0, n1] = blockRange(b);
    if (candidates[0] == WeightFormat::Int4 && (k1 - k0) % 2 != 0 &&
        candidates.size() > 1)
      choice[b] = 1;
  }
  auto total = [&] {
    double sum = 0.0;
    for (int64_t b = 0; b < numBlocks; ++b)
      sum += noise[b][choice[b]];
    return sum;
  };
  double totalNoise = total();

  if (config.autoSelect) {
    // Greedy upgrades, largest error reduction per extra byte first. A
    // block's next step is the cheapest candidate above its current one
    // that lowers its error (of two equally sized formats, the better).
    double limit = config.errorBudget * config.errorBudget * plan.signal;
    auto nextStep = [&](int64_t b) -> std::optional<size_t> {
      size_t cur = choice[b];
      std::optional<size_t> best;
      for (size_t i = cur + 1; i < candidates.size(); ++i) {
        if (bytes[b][i] <= bytes[b][cur] || noise[b][i] >= noise[b][cur])
          continue;
        if (!best || bytes[b][i] < bytes[b][*best] ||
            (bytes[b][i] == bytes[b][*best] && noise[b][i] < noise[b][*best]))
          best = i;
      }
      return best;
    };
    using Entry = std::pair<double, std::pair<int64_t, size_t>>;
    std::priority_queue<Entry> queue;
    auto push = [&](int64_t b) {
      if (std::optional<size_t> next = nextStep(b))
        queue.push({(noise[b][choice[b]] - noise[b][*next]) /
                        double(bytes[b][*next] - bytes[b][choice[b]]),
                    {b, choice[b]}});
    };
    for (int64_t b = 0; b < numBlocks; ++b)
      push(b);
    while (totalNoise > limit && !queue.empty()) {
      auto [ratio, key] = queue.top();
      queue.pop();
      auto [b, from] = key;
      if (choice[b] != from)
        continue;
      size_t next = *nextStep(b);
      totalNoise += noise[b][next] - noise[b][choice[b]];
      choice[b] = next;
      push(b);
    }
    totalNoise = total();
  }

  plan.blockCandidate.assign(choice.begin(), choice.end());
  plan.candidates.assign(candidates.begin(), candidates.end());
  plan.noise = totalNoise;
  plan.blockNoise.resize(numBlocks);
  plan.bytes = 0;
  for (int64_t b = 0; b < numBlocks; ++b) {
    plan.blockNoise[b] = noise[b][choice[b]];
    plan.bytes += bytes[b][choice[b]];
  }
  // Fixed modes store one scale row per channel (or group) for the whole
  // weight, not one per block row.
  if (!config.autoSelect)
    plan.bytes = pieceBytes(config.format, k, n, groupOf(config.format), k);
  return plan;
}

double PrecisionPlan::relativeError(double squared) const {
  return signal > 0.0 ? std::sqrt(squared / signal) : 0.0;
}
