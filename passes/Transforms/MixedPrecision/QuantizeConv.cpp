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

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::mixed_precision;

FailureOr<PrecisionPlan>
mlir::sits::quantizeConvWeight(RewriterBase &rewriter, ConvOp conv,
                               const PrecisionConfig &config) {
  if (!config.autoSelect && config.format != WeightFormat::Int8)
    return rewriter.notifyMatchFailure(
        conv, "convolution filters are quantized to INT8 only (precision "
              "int8 or auto)");
  auto constant = conv.getFilter().getDefiningOp<arith::ConstantOp>();
  if (!constant)
    return rewriter.notifyMatchFailure(conv, "filter is not a constant");
  auto value = dyn_cast<ElementsAttr>(constant.getValue());
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
  std::optional<ArrayRef<char>> bytes =
      value ? getConstantBytes(value) : std::nullopt;
  if (!bytes)
    return rewriter.notifyMatchFailure(conv, "filter is not plain dense data");

  // The filter [O, C/G, K...] as the [K, N] weight of a matmul: K = C/G x
  // window rows, N = O columns. Output channel o of group o / (O/G) reads
  // input channel (o / (O/G)) * C/G + r / window at row r.
  int64_t n = type.getDimSize(0), channelsPerGroup = type.getDimSize(1);
  int64_t k = type.getNumElements() / n, window = k / channelsPerGroup;
  int64_t groups = conv.getGroups(), outPerGroup = n / groups;
  std::vector<float> weight(k * n);
  const float *raw = reinterpret_cast<const float *>(bytes->data());
  for (int64_t o = 0; o < n; ++o)
    for (int64_t r = 0; r < k; ++r)
      weight[r * n + o] = raw[o * k + r];
  InputStats channelStats = estimateInputStats(conv, inputType.getDimSize(1));
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
  PrecisionPlan plan = planWeightPrecision(weight, k, n, stats, int8);
  plan.statsSource = stats.source;
  if (config.autoSelect && plan.relativeError(plan.noise) > config.errorBudget)
    return rewriter.notifyMatchFailure(conv, [&](Diagnostic &diag) {
      diag << "INT8 estimated error " << plan.relativeError(plan.noise)
           << " exceeds the error budget " << config.errorBudget;
    });
  const QuantizedWeight &q = plan.quantized.front();

  // Bias correction: E[x] . (W - W^) per output channel, with E[x] of the
  // channel each row reads (zero padding at the borders is not modeled).
  plan.biasDelta.assign(n, 0.0);
  if (config.biasCorrection)
    for (int64_t o = 0; o < n; ++o)
      for (int64_t r = 0; r < k; ++r)
        plan.biasDelta[o] +=
            channelStats.mean[channelOf(r, o)] *
            (double(weight[r * n + o]) - q.dequantized[r * n + o]);
  bool correctBias =
      llvm::any_of(plan.biasDelta, [](double d) { return d != 0.0; });

  Location loc = conv.getLoc();
  rewriter.setInsertionPoint(conv);
  ConstantMaker maker{value, ""};
  std::vector<char> codes(n * k);
  for (int64_t o = 0; o < n; ++o)
    for (int64_t r = 0; r < k; ++r)
      codes[o * k + r] = static_cast<char>(q.codes[r * n + o]);
  Value filter =
      maker.bytes(rewriter, loc,
                  RankedTensorType::get(type.getShape(), rewriter.getI8Type()),
                  codes, ".qint8");
  auto vectorType = RankedTensorType::get({n}, rewriter.getF32Type());
  Value scale =
      maker.floats(rewriter, loc, vectorType,
                   ArrayRef<float>(q.scales.data(), n), ".qint8.scale");

  // The bias, corrected: a constant bias gets the correction folded in,
  // any other an addition.
  Value bias = conv.getBias();
  if (correctBias) {
    std::vector<float> delta(plan.biasDelta.begin(), plan.biasDelta.end());
    std::optional<std::vector<float>> biasValues =
        bias ? constantVector(bias, n) : std::vector<float>(n, 0.0f);
    if (biasValues) {
      for (int64_t o = 0; o < n; ++o)
        (*biasValues)[o] += delta[o];
      bias = maker.floats(rewriter, loc, vectorType, *biasValues, ".bias");
    } else {
      Value correction =
          maker.floats(rewriter, loc, vectorType, delta, ".bias_correction");
      bias = arith::AddFOp::create(rewriter, loc, bias, correction);
    }
  }
  auto qconv = QConvOp::create(rewriter, loc, conv.getType(), conv.getInput(),
                               filter, scale, bias, conv.getStridesAttr(),
                               conv.getPaddingAttr(), conv.getDilationsAttr(),
                               conv.getGroupsAttr(), conv.getActivationAttr());
  Value oldBias = conv.getBias();
  rewriter.replaceOp(conv, qconv.getResult());
  if (constant->use_empty())
    rewriter.eraseOp(constant);
  if (Operation *biasOp =
          oldBias ? oldBias.getDefiningOp<arith::ConstantOp>() : nullptr;
      biasOp && biasOp->use_empty())
    rewriter.eraseOp(biasOp);
  return plan;
}
