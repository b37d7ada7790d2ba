//===- QuantizeConv.cpp - A convolution with an INT8 filter ---------------===//
//
// A convolution by a constant f32 filter becomes a sits.qconv of the
// filter's INT8 codes, one scale per output channel: the filter [O, C/G,
// K...] is planned as the [K, N] weight of a matmul, its rows standing for
// the input channel they read, and the bias is corrected for the expected
// quantization error.
//
//===----------------------------------------------------------------------===//

#include "MixedPrecision.h"

#include "passes/Transforms/ConstantData.h"

#include <cstring>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::mixed_precision;

namespace {

/// One constant of a convolution's filter quantized to INT8, before any IR.
struct QuantizedFilter {
  ConstantMaker maker;
  PrecisionPlan plan;
  bool correctBias = false;
  /// The bias of this path plus the correction, when the bias is a
  /// constant (or absent) and needs it.
  std::optional<std::vector<float>> biasValues;
};

} // namespace

/// Quantizes `source`, a constant of `conv`'s f32 filter, to INT8 per
/// output channel. The bias is the one on the path of `source`'s call.
static QuantizedFilter quantizeSource(ConvOp conv, const ConstantSource &source,
                                      const PrecisionConfig &config) {
  // The filter [O, C/G, K...] as the [K, N] weight of a matmul: K = C/G x
  // window rows, N = O columns. Output channel o of group o / (O/G) reads
  // input channel (o / (O/G)) * C/G + r / window at row r.
  RankedTensorType type = conv.getFilter().getType();
  int64_t n = type.getDimSize(0), channelsPerGroup = type.getDimSize(1);
  int64_t k = type.getNumElements() / n, window = k / channelsPerGroup;
  int64_t groups = conv.getGroups(), outPerGroup = n / groups;
  std::vector<float> weight(k * n);
  // Read bytewise: a mapped weight need not be aligned for floats.
  const char *raw = getConstantBytes(source.value)->data();
  for (int64_t o = 0; o < n; ++o)
    for (int64_t r = 0; r < k; ++r)
      std::memcpy(&weight[r * n + o], raw + (o * k + r) * sizeof(float),
                  sizeof(float));
  InputStats channelStats =
      estimateInputStats(conv, conv.getInput().getType().getDimSize(1));
  auto channelOf = [&](int64_t r, int64_t o) {
    return (o / outPerGroup) * channelsPerGroup + r / window;
  };
  // Rows stand for a channel of every group: estimates average the groups.
  InputStats stats;
  stats.source = channelStats.source;
  stats.mean.assign(k, 0.0);
  stats.meanSquare.assign(k, 0.0);
  for (int64_t r = 0; r < k; ++r)
    for (int64_t g = 0; g < groups; ++g) {
      stats.mean[r] +=
          channelStats.mean[channelOf(r, g * outPerGroup)] / groups;
      stats.meanSquare[r] +=
          channelStats.meanSquare[channelOf(r, g * outPerGroup)] / groups;
    }

  // One block: INT8 with one scale per output channel.
  PrecisionConfig int8 = config;
  int8.autoSelect = false;
  int8.format = WeightFormat::Int8;
  int8.blockK = 0;
  int8.blockN = n;
  QuantizedFilter result;
  result.maker.original = source.value;
  PrecisionPlan &plan = result.plan;
  plan = planWeightPrecision(weight, k, n, stats, int8);
  plan.statsSource = stats.source;
  const QuantizedWeight &q = plan.quantized.front();

  // Bias correction: E[x] . (W - W^) per output channel, with E[x] of the
  // channel each row reads (zero padding at the borders is not modeled).
  plan.biasDelta.assign(n, 0.0);
  if (config.biasCorrection)
    for (int64_t o = 0; o < n; ++o)
      for (int64_t r = 0; r < k; ++r)
        plan.biasDelta[o] +=
            channelStats.mean[channelOf(r, o)] * q.residual(weight, r, o, n);
  result.correctBias =
      llvm::any_of(plan.biasDelta, [](double d) { return d != 0.0; });
  if (result.correctBias) {
    Value bias = conv.getBias();
    result.biasValues =
        bias ? constantVector(getPassedValue(bias, source.call), n)
             : std::vector<float>(n, 0.0f);
    if (result.biasValues)
      for (int64_t o = 0; o < n; ++o)
        (*result.biasValues)[o] += float(plan.biasDelta[o]);
  }
  return result;
}

FailureOr<SmallVector<PrecisionPlan>>
mlir::sits::quantizeConvWeight(RewriterBase &rewriter, ConvOp conv,
                               const PrecisionConfig &config,
                               const CallSites &calls) {
  if (!config.autoSelect && config.format != WeightFormat::Int8)
    return rewriter.notifyMatchFailure(
        conv, "convolution filters are quantized to INT8 only (precision "
              "int8 or auto)");
  Value filter = conv.getFilter();
  SmallVector<ConstantSource> sources = getConstantSources(filter, calls);
  if (sources.empty())
    return rewriter.notifyMatchFailure(conv, "filter is not a constant");
  RankedTensorType type = conv.getFilter().getType();
  RankedTensorType inputType = conv.getInput().getType();
  if (!type.hasStaticShape() || !type.getElementType().isF32() ||
      !inputType.getElementType().isF32() || type.getEncoding() ||
      ShapedType::isDynamic(inputType.getDimSize(1)))
    return rewriter.notifyMatchFailure(
        conv, "filter is not a statically shaped f32 weight of an f32 "
              "convolution");
  if (type.getNumElements() == 0)
    return rewriter.notifyMatchFailure(conv, "filter is empty");
  if (!llvm::all_of(sources, [](const ConstantSource &source) {
        return getConstantBytes(source.value).has_value();
      }))
    return rewriter.notifyMatchFailure(conv, "filter is not plain dense data");

  // One quantization per constant, keyed by the call passing it; with
  // precision auto, each must be within the budget. The bias must be
  // corrected alike in all, for one rewrite to serve all.
  DenseMap<Operation *, QuantizedFilter> quantized;
  for (const ConstantSource &source : sources) {
    QuantizedFilter q = quantizeSource(conv, source, config);
    double error = q.plan.relativeError(q.plan.noise);
    if (config.autoSelect && error > config.errorBudget)
      return rewriter.notifyMatchFailure(conv, [&](Diagnostic &diag) {
        diag << "INT8 estimated error " << error << " exceeds the error budget "
             << config.errorBudget;
      });
    quantized.try_emplace(source.call, std::move(q));
  }
  const QuantizedFilter &first = quantized.find(sources.front().call)->second;
  if (llvm::any_of(quantized, [&](const auto &entry) {
        return entry.second.correctBias != first.correctBias ||
               entry.second.biasValues.has_value() !=
                   first.biasValues.has_value();
      }))
    return rewriter.notifyMatchFailure(
        conv, "the calls' filters differ in how their bias is corrected");
  // A constant of the rewrite: made from each quantized constant of the
  // filter, an argument through calls.
  auto constant =
      [&](function_ref<TypedAttr(const QuantizedFilter &)> make) -> Value {
    return deriveConstant(rewriter, filter, sources,
                          [&](const ConstantSource &source) {
                            return make(quantized.find(source.call)->second);
                          });
  };

  Location loc = conv.getLoc();
  rewriter.setInsertionPoint(conv);
  int64_t n = type.getDimSize(0), k = type.getNumElements() / n;
  Value codes = constant([&](const QuantizedFilter &q) {
    const QuantizedWeight &int8 = q.plan.quantized.front();
    std::vector<char> data(n * k);
    for (int64_t o = 0; o < n; ++o)
      for (int64_t r = 0; r < k; ++r)
        data[o * k + r] = static_cast<char>(int8.codes[r * n + o]);
    return q.maker.bytes(
        RankedTensorType::get(type.getShape(), rewriter.getI8Type()), data,
        ".qint8");
  });
  auto vectorType = RankedTensorType::get({n}, rewriter.getF32Type());
  Value scale = constant([&](const QuantizedFilter &q) {
    return q.maker.floats(
        vectorType, ArrayRef<float>(q.plan.quantized.front().scales.data(), n),
        ".qint8.scale");
  });

  // The bias, corrected: a constant bias gets the correction folded in,
  // any other an addition.
  Value bias = conv.getBias();
  if (first.correctBias && first.biasValues) {
    bias = constant([&](const QuantizedFilter &q) {
      return q.maker.floats(vectorType, *q.biasValues, ".bias");
    });
  } else if (first.correctBias) {
    Value correction = constant([&](const QuantizedFilter &q) {
      std::vector<float> delta(q.plan.biasDelta.begin(),
                               q.plan.biasDelta.end());
      return q.maker.floats(vectorType, delta, ".bias_correction");
    });
    bias = arith::AddFOp::create(rewriter, loc, bias, correction);
  }
  auto qconv = QConvOp::create(rewriter, loc, conv.getType(), conv.getInput(),
                               codes, scale, bias, conv.getStridesAttr(),
                               conv.getPaddingAttr(), conv.getDilationsAttr(),
                               conv.getGroupsAttr(), conv.getActivationAttr());
  Value oldBias = conv.getBias();
  SmallVector<PrecisionPlan> plans;
  for (const ConstantSource &source : sources)
    plans.push_back(quantized.find(source.call)->second.plan);
  rewriter.replaceOp(conv, qconv.getResult());
  eraseIfUnused(rewriter, filter, sources);
  if (oldBias)
    eraseIfUnused(rewriter, oldBias, getConstantSources(oldBias, calls));
  return plans;
}
