//===- MixedPrecision.cpp - Weight-only quantization of contractions ------===//
//
// Constant matmul weights become INT8 / INT4 / FP8 sits.qmatmul weights, one
// format for the whole weight or one per block, chosen from the exact
// quantization residual weighted by the input's statistics. Constant conv
// filters become INT8 sits.qconv filters, one scale per output channel. See
// the pass description in Passes.td for the model of the error.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/ConstantData.h"

#include "dialects/Target/KnownTargets.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <queue>

namespace mlir::sits {
#define GEN_PASS_DEF_SITSMIXEDPRECISION
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

//===----------------------------------------------------------------------===//
// Formats and quantizers
//===----------------------------------------------------------------------===//

StringRef mlir::sits::stringifyWeightFormat(WeightFormat format) {
  switch (format) {
  case WeightFormat::Int4:
    return "int4";
  case WeightFormat::Int8:
    return "int8";
  case WeightFormat::Fp8:
    return "fp8";
  case WeightFormat::Fp32:
    return "fp32";
  }
  llvm_unreachable("unknown weight format");
}

namespace {

/// The non-negative finite FP8 E4M3FN values, indexed by their code (0-126;
/// 127 is NaN). Sorted, since the encoding is monotonic.
const std::array<double, 127> &fp8E4M3Values() {
  static const std::array<double, 127> values = [] {
    std::array<double, 127> v;
    for (unsigned code = 0; code < 127; ++code)
      v[code] = APFloat(APFloat::Float8E4M3FN(), APInt(8, code))
                    .convertToDouble();
    return v;
  }();
  return values;
}

/// Round-to-nearest-even FP8 E4M3FN code of `x`, saturated to +-448.
uint8_t roundToFp8E4M3(double x) {
  const std::array<double, 127> &values = fp8E4M3Values();
  double a = std::min(std::fabs(x), values.back());
  auto it = std::lower_bound(values.begin(), values.end(), a);
  unsigned hi = it - values.begin();
  unsigned code = hi;
  if (hi > 0 && values[hi] != a) {
    unsigned lo = hi - 1;
    double dlo = a - values[lo], dhi = values[hi] - a;
    code = dlo < dhi ? lo : dhi < dlo ? hi : (lo % 2 == 0 ? lo : hi);
  }
  return static_cast<uint8_t>(code | (std::signbit(x) && code ? 0x80 : 0));
}

double fp8E4M3Value(uint8_t code) {
  double v = fp8E4M3Values()[code & 0x7f];
  return code & 0x80 ? -v : v;
}

} // namespace

QuantizedWeight mlir::sits::quantizeWeight(ArrayRef<float> weight, int64_t k,
                                           int64_t n, WeightFormat format,
                                           int64_t group) {
  QuantizedWeight q;
  q.format = format;
  q.group = group;
  int64_t groups = (k + group - 1) / group;
  q.codes.assign(k * n, 0);
  q.scales.assign(groups * n, 1.0f);
  q.dequantized.assign(weight.begin(), weight.end());
  if (format == WeightFormat::Fp32)
    return q;
  // Symmetric: the largest magnitude of each group maps to the format's
  // largest value, so no code is spent on a range the group does not use.
  double qmax = format == WeightFormat::Int4   ? 7.0
                : format == WeightFormat::Int8 ? 127.0
                                               : fp8E4M3Values().back();
  for (int64_t g = 0; g < groups; ++g) {
    int64_t k0 = g * group, k1 = std::min(k, k0 + group);
    for (int64_t c = 0; c < n; ++c) {
      float amax = 0.0f;
      for (int64_t r = k0; r < k1; ++r)
        amax = std::max(amax, std::fabs(weight[r * n + c]));
      float scale = amax > 0.0f ? static_cast<float>(amax / qmax) : 1.0f;
      q.scales[g * n + c] = scale;
      for (int64_t r = k0; r < k1; ++r) {
        double v = weight[r * n + c] / static_cast<double>(scale);
        double real;
        if (format == WeightFormat::Fp8) {
          uint8_t code = roundToFp8E4M3(v);
          q.codes[r * n + c] = static_cast<int8_t>(code);
          real = fp8E4M3Value(code);
        } else {
          double code = std::clamp(std::nearbyint(v), -qmax, qmax);
          q.codes[r * n + c] = static_cast<int8_t>(code);
          real = code;
        }
        q.dequantized[r * n + c] = static_cast<float>(real * scale);
      }
    }
  }
  return q;
}

//===----------------------------------------------------------------------===//
// Input statistics
//===----------------------------------------------------------------------===//

/// The 1-D f32 values of a constant, if `value` is one with `size` elements.
static std::optional<std::vector<float>> constantVector(Value value,
                                                        int64_t size) {
  auto constant = value ? value.getDefiningOp<arith::ConstantOp>() : nullptr;
  auto elements = constant ? dyn_cast<ElementsAttr>(constant.getValue())
                           : ElementsAttr();
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

InputStats mlir::sits::estimateInputStats(MatmulOp matmul, int64_t k) {
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
        constantVector(norm.getScale(), k);
    std::optional<std::vector<float>> beta =
        norm.getBias() ? constantVector(norm.getBias(), k)
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

PrecisionPlan mlir::sits::planWeightPrecision(ArrayRef<float> weight,
                                              int64_t k, int64_t n,
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
    rowWeight[r] = config.biasCorrection ? std::max(variance, 0.0)
                                         : rowSignal[r];
  }
  plan.signal = 0.0;
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c)
      plan.signal += rowSignal[r] * double(weight[r * n + c]) * weight[r * n + c];

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
  std::vector<std::vector<double>> noise(numBlocks,
                                         std::vector<double>(candidates.size()));
  std::vector<std::vector<int64_t>> bytes(numBlocks,
                                          std::vector<int64_t>(candidates.size()));
  auto blockRange = [&](int64_t b) {
    int64_t bk = b / plan.blocksN, bn = b % plan.blocksN;
    return std::array<int64_t, 4>{bk * plan.blockK,
                                  std::min(k, (bk + 1) * plan.blockK),
                                  bn * config.blockN,
                                  std::min(n, (bn + 1) * config.blockN)};
  };
  for (int64_t b = 0; b < numBlocks; ++b) {
    auto [k0, k1, n0, n1] = blockRange(b);
    for (size_t i = 0; i < candidates.size(); ++i) {
      const std::vector<float> &deq = plan.quantized[i].dequantized;
      double sum = 0.0;
      for (int64_t r = k0; r < k1; ++r) {
        double rowSum = 0.0;
        for (int64_t c = n0; c < n1; ++c) {
          double d = double(weight[r * n + c]) - deq[r * n + c];
          rowSum += d * d;
        }
        sum += rowWeight[r] * rowSum;
      }
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

//===----------------------------------------------------------------------===//
// Rewriting a matmul
//===----------------------------------------------------------------------===//

std::string mlir::sits::getLocationName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(inner))
        return name.getName().str();
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}

namespace {

/// Constants the rewrite creates: resources named after the original weight
/// when it is one (so they stay out of the printed IR), else inline data.
struct ConstantMaker {
  ElementsAttr original;
  std::string suffix;

  Value bytes(OpBuilder &b, Location loc, RankedTensorType type,
              ArrayRef<char> data, StringRef what) const {
    AsmResourceBlob blob = HeapAsmResourceBlob::allocateAndCopyWithAlign(
        data, /*align=*/64);
    if (auto resource = dyn_cast<DenseResourceElementsAttr>(original))
      return arith::ConstantOp::create(
          b, loc,
          DenseResourceElementsAttr::get(
              type,
              (resource.getRawHandle().getKey() + suffix + what).str(),
              std::move(blob)));
    return arith::ConstantOp::create(
        b, loc, DenseElementsAttr::getFromRawBuffer(type, blob.getData()));
  }

  Value floats(OpBuilder &b, Location loc, RankedTensorType type,
               ArrayRef<float> values, StringRef what) const {
    return bytes(b, loc, type,
                 ArrayRef<char>(reinterpret_cast<const char *>(values.data()),
                                values.size() * sizeof(float)),
                 what);
  }
};

/// One uniformly quantized piece of a weight: rows [k0, k1), columns
/// [n0, n1), in candidate `candidate` of the plan.
struct Piece {
  int64_t k0, k1, n0, n1;
  size_t candidate;
};

} // namespace

/// The codes (or fp32 values) of a piece as a constant of its logical type.
static Value makePieceWeight(OpBuilder &b, Location loc,
                             const QuantizedWeight &q, ArrayRef<float> weight,
                             int64_t n, const Piece &p,
                             const ConstantMaker &maker, StringRef name) {
  MLIRContext *ctx = b.getContext();
  int64_t rows = p.k1 - p.k0, cols = p.n1 - p.n0;
  switch (q.format) {
  case WeightFormat::Fp32: {
    std::vector<float> values;
    values.reserve(rows * cols);
    for (int64_t r = p.k0; r < p.k1; ++r)
      for (int64_t c = p.n0; c < p.n1; ++c)
        values.push_back(weight[r * n + c]);
    return maker.floats(b, loc, RankedTensorType::get({rows, cols}, b.getF32Type()),
                        values, name);
  }
  case WeightFormat::Int8:
  case WeightFormat::Fp8: {
    std::vector<char> data;
    data.reserve(rows * cols);
    for (int64_t r = p.k0; r < p.k1; ++r)
      for (int64_t c = p.n0; c < p.n1; ++c)
        data.push_back(static_cast<char>(q.codes[r * n + c]));
    Type element = q.format == WeightFormat::Int8
                       ? Type(b.getI8Type())
                       : Type(Float8E4M3FNType::get(ctx));
    return maker.bytes(b, loc, RankedTensorType::get({rows, cols}, element),
                       data, name);
  }
  case WeightFormat::Int4: {
    // Two rows per byte, the even row in the low nibble.
    auto type = RankedTensorType::get(
        {rows, cols}, b.getIntegerType(4),
        PackedEncodingAttr::get(ctx, b.getI8Type(), /*axis=*/0));
    if (isa<DenseResourceElementsAttr>(maker.original)) {
      std::vector<char> data;
      data.reserve(rows / 2 * cols);
      for (int64_t r = p.k0; r < p.k1; r += 2)
        for (int64_t c = p.n0; c < p.n1; ++c)
          data.push_back(static_cast<char>(
              (uint8_t(q.codes[r * n + c]) & 0xf) |
              ((uint8_t(q.codes[(r + 1) * n + c]) & 0xf) << 4)));
      return maker.bytes(b, loc, type, data, name);
    }
    SmallVector<APInt> values;
    values.reserve(rows * cols);
    for (int64_t r = p.k0; r < p.k1; ++r)
      for (int64_t c = p.n0; c < p.n1; ++c)
        values.push_back(APInt(4, q.codes[r * n + c], /*isSigned=*/true));
    return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(type, values));
  }
  }
  llvm_unreachable("unknown weight format");
}

/// `x[..., k0:k1]`, or `x` itself for the whole range.
static Value sliceLastDim(OpBuilder &b, Location loc, Value x, int64_t k0,
                          int64_t k1, int64_t k) {
  if (k0 == 0 && k1 == k)
    return x;
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  SmallVector<OpFoldResult> offsets(rank, b.getIndexAttr(0));
  SmallVector<OpFoldResult> sizes, strides(rank, b.getIndexAttr(1));
  for (int64_t d = 0; d < rank - 1; ++d)
    sizes.push_back(tensor::getMixedSize(b, loc, x, d));
  offsets.back() = b.getIndexAttr(k0);
  sizes.push_back(b.getIndexAttr(k1 - k0));
  return tensor::ExtractSliceOp::create(b, loc, x, offsets, sizes, strides);
}

/// `type` with its last extent `n`.
static RankedTensorType withLastDim(RankedTensorType type, int64_t n) {
  SmallVector<int64_t> shape(type.getShape());
  shape.back() = n;
  return RankedTensorType::get(shape, type.getElementType());
}

FailureOr<PrecisionPlan>
mlir::sits::quantizeMatmulWeight(RewriterBase &rewriter, MatmulOp matmul,
                                 const PrecisionConfig &config) {
  if (matmul.getTransposeLhs())
    return rewriter.notifyMatchFailure(matmul, "lhs is transposed");
  auto constant = matmul.getRhs().getDefiningOp<arith::ConstantOp>();
  if (!constant)
    return rewriter.notifyMatchFailure(matmul, "rhs is not a constant");
  auto value = dyn_cast<ElementsAttr>(constant.getValue());
  auto type = cast<RankedTensorType>(matmul.getRhs().getType());
  auto lhsType = cast<RankedTensorType>(matmul.getLhs().getType());
  if (type.getRank() != 2 || !type.getElementType().isF32() ||
      !lhsType.getElementType().isF32() || type.getEncoding())
    return rewriter.notifyMatchFailure(matmul,
                                       "rhs is not a 2-D f32 weight");
  std::optional<ArrayRef<char>> bytes =
      value ? getConstantBytes(value) : std::nullopt;
  if (!bytes)
    return rewriter.notifyMatchFailure(matmul, "rhs is not plain dense data");

  // W as [K, N] whatever the stored layout.
  bool transposed = matmul.getTransposeRhs();
  int64_t k = type.getDimSize(transposed ? 1 : 0);
  int64_t n = type.getDimSize(transposed ? 0 : 1);
  std::vector<float> weight(k * n);
  const float *raw = reinterpret_cast<const float *>(bytes->data());
  for (int64_t r = 0; r < k; ++r)
    for (int64_t c = 0; c < n; ++c)
      weight[r * n + c] = transposed ? raw[c * k + r] : raw[r * n + c];
  if (config.format == WeightFormat::Int4 && !config.autoSelect && k % 2 != 0)
    return rewriter.notifyMatchFailure(matmul,
                                       "INT4 needs an even K (two per byte)");

  InputStats stats = estimateInputStats(matmul, k);
  PrecisionPlan plan = planWeightPrecision(weight, k, n, stats, config);
  plan.statsSource = stats.source;

  // Bias correction: E[x] . (W - W^) per output channel, with W^ the
  // chosen blocks' dequantized values.
  plan.biasDelta.assign(n, 0.0);
  auto candidateOf = [&](int64_t r, int64_t c) {
    return plan.blockCandidate[(r / plan.blockK) * plan.blocksN +
                               c / plan.blockN];
  };
  if (config.biasCorrection)
    for (int64_t r = 0; r < k; ++r) {
      if (stats.mean[r] == 0.0)
        continue;
      for (int64_t c = 0; c < n; ++c) {
        const QuantizedWeight &q = plan.quantized[candidateOf(r, c)];
        plan.biasDelta[c] +=
            stats.mean[r] * (double(weight[r * n + c]) - q.dequantized[r * n + c]);
      }
    }
  bool correctBias = llvm::any_of(plan.biasDelta, [](double d) { return d != 0.0; });

  // Pieces: strips of block columns with the same formats down K, cut into
  // runs of equal-format blocks along K.
  SmallVector<std::pair<int64_t, int64_t>> strips; // block-column ranges
  for (int64_t bn = 0; bn < plan.blocksN; ++bn) {
    auto samePattern = [&](int64_t a, int64_t c) {
      for (int64_t bk = 0; bk < plan.blocksK; ++bk)
        if (plan.blockCandidate[bk * plan.blocksN + a] !=
            plan.blockCandidate[bk * plan.blocksN + c])
          return false;
      return true;
    };
    if (!strips.empty() && samePattern(strips.back().first, bn))
      strips.back().second = bn + 1;
    else
      strips.push_back({bn, bn + 1});
  }

  Location loc = matmul.getLoc();
  rewriter.setInsertionPoint(matmul);
  ConstantMaker maker{value, ""};
  RankedTensorType resultType = matmul.getType();
  Value x = matmul.getLhs();

  // The bias, corrected: a constant bias gets the correction folded in.
  Value bias = matmul.getBias();
  std::optional<std::vector<float>> biasValues;
  if (correctBias || bias) {
    biasValues = std::vector<float>(n, 0.0f);
    if (bias) {
      auto biasConstant = bias.getDefiningOp<arith::ConstantOp>();
      auto biasAttr = biasConstant
                          ? dyn_cast<ElementsAttr>(biasConstant.getValue())
                          : ElementsAttr();
      auto biasType = cast<RankedTensorType>(bias.getType());
      std::optional<ArrayRef<char>> biasBytes =
          biasAttr ? getConstantBytes(biasAttr) : std::nullopt;
      if (biasBytes && biasType.getElementType().isF32()) {
        std::memcpy(biasValues->data(), biasBytes->data(), n * sizeof(float));
      } else if (auto dense = dyn_cast_or_null<DenseElementsAttr>(biasAttr);
                 dense && dense.getElementType().isF32()) {
        auto values = dense.getValues<float>();
        std::copy(values.begin(), values.end(), biasValues->begin());
      } else {
        biasValues.reset(); // not a constant: corrected with an addition
      }
    }
  }
  std::vector<float> delta(plan.biasDelta.begin(), plan.biasDelta.end());
  auto biasSlice = [&](int64_t n0, int64_t n1) -> Value {
    auto sliceType = RankedTensorType::get({n1 - n0}, rewriter.getF32Type());
    if (!correctBias && n0 == 0 && n1 == n)
      return bias;
    if (biasValues) {
      std::vector<float> values(biasValues->begin() + n0,
                                biasValues->begin() + n1);
      if (correctBias)
        for (int64_t c = n0; c < n1; ++c)
          values[c - n0] += delta[c];
      return maker.floats(rewriter, loc, sliceType, values,
                          ".bias" + std::to_string(n0));
    }
    Value slice = bias;
    if (n0 != 0 || n1 != n)
      slice = tensor::ExtractSliceOp::create(
          rewriter, loc, bias,
          SmallVector<OpFoldResult>{rewriter.getIndexAttr(n0)},
          SmallVector<OpFoldResult>{rewriter.getIndexAttr(n1 - n0)},
          SmallVector<OpFoldResult>{rewriter.getIndexAttr(1)});
    if (!correctBias)
      return slice;
    std::vector<float> values(delta.begin() + n0, delta.begin() + n1);
    Value correction = maker.floats(rewriter, loc, sliceType, values,
                                    ".bias_correction" + std::to_string(n0));
    return arith::AddFOp::create(rewriter, loc, slice, correction);
  };
  bool hasBias = bias || correctBias;

  SmallVector<Value> stripResults;
  for (auto [bn0, bn1] : strips) {
    int64_t n0 = bn0 * plan.blockN, n1 = std::min(n, bn1 * plan.blockN);
    // Runs along K of the strip's (shared) formats.
    SmallVector<Piece> runs;
    for (int64_t bk = 0; bk < plan.blocksK; ++bk) {
      size_t cand = plan.blockCandidate[bk * plan.blocksN + bn0];
      int64_t k0 = bk * plan.blockK, k1 = std::min(k, k0 + plan.blockK);
      if (!runs.empty() && runs.back().candidate == cand)
        runs.back().k1 = k1;
      else
        runs.push_back({k0, k1, n0, n1, cand});
    }
    RankedTensorType pieceType = withLastDim(resultType, n1 - n0);
    bool single = runs.size() == 1;
    Value sum;
    for (auto [i, p] : llvm::enumerate(runs)) {
      const QuantizedWeight &q = plan.quantized[p.candidate];
      std::string name = ".q" + stringifyWeightFormat(q.format).str() + "." +
                         std::to_string(p.k0) + "." + std::to_string(p.n0);
      Value pieceX = sliceLastDim(rewriter, loc, x, p.k0, p.k1, k);
      Value pieceBias = i == 0 && hasBias ? biasSlice(n0, n1) : Value();
      ActivationKind activation =
          single ? matmul.getActivation() : ActivationKind::None;
      Value w = makePieceWeight(rewriter, loc, q, weight, n, p, maker, name);
      Value result;
      if (q.format == WeightFormat::Fp32) {
        result = MatmulOp::create(rewriter, loc, pieceType, pieceX, w,
                                  pieceBias, false, false, activation);
      } else {
        // One scale row per group inside the piece (group rows align with
        // the piece: pieces start at block rows, a multiple of the group).
        int64_t g0 = p.k0 / q.group;
        int64_t g1 = (p.k1 + q.group - 1) / q.group;
        std::vector<float> scales;
        for (int64_t g = g0; g < g1; ++g)
          for (int64_t c = p.n0; c < p.n1; ++c)
            scales.push_back(q.scales[g * n + c]);
        bool perChannel = q.group >= k;
        auto scaleType =
            perChannel
                ? RankedTensorType::get({p.n1 - p.n0}, rewriter.getF32Type())
                : RankedTensorType::get({g1 - g0, p.n1 - p.n0},
                                        rewriter.getF32Type());
        Value scale = maker.floats(rewriter, loc, scaleType, scales,
                                   name + ".scale");
        auto qmatmul = QMatmulOp::create(
            rewriter, loc, pieceType, pieceX, w, scale, /*zero_point=*/Value(),
            pieceBias,
            rewriter.getI64IntegerAttr(perChannel ? 1 : 0),
            perChannel ? IntegerAttr() : rewriter.getI64IntegerAttr(q.group),
            /*transpose_weight=*/false, activation);
        result = qmatmul;
      }
      sum = sum ? arith::AddFOp::create(rewriter, loc, sum, result).getResult()
                : result;
    }
    if (!single && matmul.getActivation() != ActivationKind::None)
      sum = ActivationOp::create(rewriter, loc, matmul.getActivation(), sum);
    stripResults.push_back(sum);
  }
  Value result = stripResults.front();
  if (stripResults.size() > 1)
    result = tensor::ConcatOp::create(rewriter, loc, resultType.getRank() - 1,
                                      stripResults);
  rewriter.replaceOp(matmul, result);
  if (constant->use_empty())
    rewriter.eraseOp(constant);
  if (Operation *biasOp = bias ? bias.getDefiningOp<arith::ConstantOp>() : nullptr;
      biasOp && biasOp->use_empty())
    rewriter.eraseOp(biasOp);
  return plan;
}

//===----------------------------------------------------------------------===//
// Rewriting a convolution
//===----------------------------------------------------------------------===//

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
  InputStats channelStats =
      estimateInputStats(conv, inputType.getDimSize(1));
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
      stats.mean[r] += channelStats.mean[channelOf(r, g * outPerGroup)] / groups;
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
  Value filter = maker.bytes(
      rewriter, loc, RankedTensorType::get(type.getShape(), rewriter.getI8Type()),
      codes, ".qint8");
  auto vectorType = RankedTensorType::get({n}, rewriter.getF32Type());
  Value scale = maker.floats(rewriter, loc, vectorType,
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
  auto qconv = QConvOp::create(
      rewriter, loc, conv.getType(), conv.getInput(), filter, scale, bias,
      conv.getStridesAttr(), conv.getPaddingAttr(), conv.getDilationsAttr(),
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

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

namespace {

struct SitsMixedPrecisionPass
    : sits::impl::SitsMixedPrecisionBase<SitsMixedPrecisionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    PrecisionConfig config;
    if (failed(parseConfig(module, config)))
      return signalPassFailure();
    if (precision == "fp32")
      return;

    // Contractions by constant weights, in IR order.
    SmallVector<Operation *> weighted;
    module.walk([&](Operation *op) {
      if (auto matmul = dyn_cast<MatmulOp>(op);
          matmul && matmul.getRhs().getDefiningOp<arith::ConstantOp>())
        weighted.push_back(op);
      if (auto conv = dyn_cast<ConvOp>(op);
          conv && conv.getFilter().getDefiningOp<arith::ConstantOp>())
        weighted.push_back(op);
    });
    SmallVector<Attribute> report;
    if (auto existing = module->getAttrOfType<ArrayAttr>("sits.report.precision"))
      report.append(existing.begin(), existing.end());
    IRRewriter rewriter(ctx);
    Builder b(ctx);
    for (Operation *op : weighted) {
      std::string name = getLocationName(op->getLoc());
      // Read before the rewrite, which erases `op`: the weight as [K, N]
      // for a matmul, the filter's own shape for a convolution.
      auto matmul = dyn_cast<MatmulOp>(op);
      auto weightType = cast<RankedTensorType>(
          matmul ? matmul.getRhs().getType()
                 : cast<ConvOp>(op).getFilter().getType());
      SmallVector<int64_t> shape(weightType.getShape());
      if (matmul && matmul.getTransposeRhs() && shape.size() == 2)
        std::swap(shape[0], shape[1]);
      // The diagnostic of a failed match is the reason it was skipped.
      std::string reason;
      rewriter.setListener(nullptr);
      FailureOr<PrecisionPlan> plan = [&] {
        struct Reasons : RewriterBase::Listener {
          std::string &reason;
          explicit Reasons(std::string &r) : reason(r) {}
          void notifyMatchFailure(
              Location loc, function_ref<void(Diagnostic &)> fn) override {
            Diagnostic diag(loc, DiagnosticSeverity::Remark);
            fn(diag);
            reason = diag.str();
          }
        } listener(reason);
        rewriter.setListener(&listener);
        FailureOr<PrecisionPlan> result =
            matmul ? quantizeMatmulWeight(rewriter, matmul, config)
                   : quantizeConvWeight(rewriter, cast<ConvOp>(op), config);
        rewriter.setListener(nullptr);
        return result;
      }();
      if (failed(plan)) {
        report.push_back(b.getDictionaryAttr({
            b.getNamedAttr("op", b.getStringAttr(name)),
            b.getNamedAttr("kind", b.getStringAttr("skipped")),
            b.getNamedAttr("reason", b.getStringAttr(reason)),
        }));
        continue;
      }
      SmallVector<Attribute> formats, blockErrors;
      for (size_t i = 0; i < plan->blockCandidate.size(); ++i) {
        formats.push_back(b.getStringAttr(stringifyWeightFormat(
            plan->candidates[plan->blockCandidate[i]])));
        blockErrors.push_back(
            b.getF64FloatAttr(plan->relativeError(plan->blockNoise[i])));
      }
      double correction = 0.0;
      for (double d : plan->biasDelta)
        correction += d * d;
      int64_t fp32Bytes = weightType.getNumElements() * 4;
      report.push_back(b.getDictionaryAttr({
          b.getNamedAttr("op", b.getStringAttr(name)),
          b.getNamedAttr("kind", b.getStringAttr("quantized")),
          b.getNamedAttr("precision", b.getStringAttr(precision)),
          b.getNamedAttr("shape", b.getI64ArrayAttr(shape)),
          b.getNamedAttr("block_shape",
                         b.getI64ArrayAttr({plan->blockK, plan->blockN})),
          b.getNamedAttr("format", b.getArrayAttr(formats)),
          b.getNamedAttr("block_error", b.getArrayAttr(blockErrors)),
          b.getNamedAttr("est_error",
                         b.getF64FloatAttr(plan->relativeError(plan->noise))),
          b.getNamedAttr("bytes", b.getI64IntegerAttr(plan->bytes)),
          b.getNamedAttr("fp32_bytes", b.getI64IntegerAttr(fp32Bytes)),
          b.getNamedAttr("bias_correction",
                         b.getF64FloatAttr(std::sqrt(correction))),
          b.getNamedAttr("input_stats", b.getStringAttr(plan->statsSource)),
      }));
      ++numQuantized;
      numFp32Bytes += fp32Bytes;
      numBytes += plan->bytes;
    }
    if (!report.empty())
      module->setAttr("sits.report.precision", b.getArrayAttr(report));
  }

  LogicalResult parseConfig(ModuleOp module, PrecisionConfig &config) {
    const target::TargetInfo &info = getModuleTargetOrHost(module);
    config.allowFp8 = info.fp8Formats & target::kFp8E4M3;
    config.errorBudget = errorBudget;
    config.groupSize = groupSize;
    config.blockK = blockK;
    config.blockN = blockN;
    config.biasCorrection = biasCorrection;
    if (precision == "int8") {
      config.format = WeightFormat::Int8;
    } else if (precision == "int4") {
      config.format = WeightFormat::Int4;
    } else if (precision == "fp8") {
      config.format = WeightFormat::Fp8;
      if (!config.allowFp8)
        return module.emitError()
               << "precision 'fp8' needs a target with FP8 E4M3 support; '"
               << info.name
               << "' has none (FP8 targets: h100, h200, mi300x)";
    } else if (precision == "auto") {
      config.autoSelect = true;
    } else if (precision != "fp32") {
      return module.emitError()
             << "unknown precision '" << precision
             << "'; expected fp32, int8, int4, fp8 or auto";
    }
    if (groupSize != 32 && groupSize != 64 && groupSize != 128)
      return module.emitError()
             << "group-size must be 32, 64 or 128, got " << int64_t(groupSize);
    if (blockK < 0 || blockN <= 0)
      return module.emitError()
             << "block-k must be non-negative (0: all of K) and block-n "
                "positive, got "
             << int64_t(blockK) << " and " << int64_t(blockN);
    if (config.autoSelect && blockK % groupSize != 0)
      return module.emitError()
             << "block-k (" << int64_t(blockK)
             << ") must be a multiple of group-size (" << int64_t(groupSize)
             << ") so that INT4 blocks hold whole groups";
    if (!(errorBudget >= 0.0))
      return module.emitError()
             << "error-budget must be non-negative, got " << double(errorBudget);
    return success();
  }
};

} // namespace
