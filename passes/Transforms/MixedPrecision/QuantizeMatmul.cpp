//===- QuantizeMatmul.cpp - A matmul as quantized pieces ------------------===//
//
// A matmul by a constant f32 weight becomes, per the plan, one contraction
// per piece of equally quantized blocks: strips of block columns with the
// same formats down K, each cut into runs along K whose partial products are
// added (the activation after the sum). A sits.qmatmul for a quantized piece,
// a sits.matmul for one kept in f32; strips are concatenated along N.
//
//===----------------------------------------------------------------------===//

#include "MixedPrecision.h"

#include "passes/Transforms/ConstantData.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <algorithm>
#include <cstring>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::mixed_precision;

namespace {

/// One uniformly quantized piece of a weight: rows [k0, k1), columns
/// [n0, n1), in candidate `candidate` of the plan.
struct Piece {
  int64_t k0, k1, n0, n1;
  size_t candidate;
};

} // namespace

/// The codes (or fp32 values) of a piece as a constant of its logical type.
static TypedAttr makePieceWeight(const QuantizedWeight &q,
                                 ArrayRef<float> weight, int64_t n,
                                 const Piece &p, const ConstantMaker &maker,
                                 StringRef name) {
  MLIRContext *ctx = maker.original.getContext();
  Builder b(ctx);
  int64_t rows = p.k1 - p.k0, cols = p.n1 - p.n0;
  switch (q.format) {
  case WeightFormat::Fp32: {
    std::vector<float> values;
    values.reserve(rows * cols);
    for (int64_t r = p.k0; r < p.k1; ++r)
      for (int64_t c = p.n0; c < p.n1; ++c)
        values.push_back(weight[r * n + c]);
    return maker.floats(RankedTensorType::get({rows, cols}, b.getF32Type()),
                        values, name);
  }
  case WeightFormat::Int8:
  case WeightFormat::Fp8: {
    std::vector<char> data(rows * cols);
    for (int64_t r = p.k0; r < p.k1; ++r)
      std::memcpy(data.data() + (r - p.k0) * cols,
                  q.codes.data() + r * n + p.n0, cols);
    Type element = q.format == WeightFormat::Int8
                       ? Type(b.getI8Type())
                       : Type(Float8E4M3FNType::get(ctx));
    return maker.bytes(RankedTensorType::get({rows, cols}, element), data,
                       name);
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
      return maker.bytes(type, data, name);
    }
    SmallVector<APInt> values;
    values.reserve(rows * cols);
    for (int64_t r = p.k0; r < p.k1; ++r)
      for (int64_t c = p.n0; c < p.n1; ++c)
        values.push_back(APInt(4, q.codes[r * n + c], /*isSigned=*/true));
    return DenseElementsAttr::get(type, values);
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

namespace {

/// One constant of a matmul's weight quantized per the plan, before any IR:
/// what the pieces' constants are made of.
struct QuantizedSource {
  ConstantMaker maker;
  /// The weight as [K, N] (kept only when a piece stays f32): the
  /// constant's own data when it is stored so (f32, not transposed), else
  /// a converted copy.
  ArrayRef<float> weight() const {
    return converted.empty() ? view : ArrayRef<float>(converted);
  }
  ArrayRef<float> view;
  std::vector<float> converted;
  PrecisionPlan plan;
  bool correctBias = false;
  /// The values of the bias on this path (zeros without one), for the
  /// constants a corrected or cut bias becomes; none when it is not a
  /// constant.
  std::optional<std::vector<float>> biasValues;
};

} // namespace

/// Quantizes `source`, a constant of `matmul`'s [K, N] (or transposed)
/// weight with element type `weightType`, per `config`. Input statistics
/// and the bias are those on the path of `source`'s call.
static QuantizedSource quantizeSource(MatmulOp matmul,
                                      const ConstantSource &source, int64_t k,
                                      int64_t n, FloatType weightType,
                                      const PrecisionConfig &config) {
  QuantizedSource result;
  result.maker.original = source.value;
  ArrayRef<char> bytes = *getConstantBytes(source.value);
  std::vector<float> &converted = result.converted;
  if (weightType.isF32() && !matmul.getTransposeRhs() &&
      reinterpret_cast<uintptr_t>(bytes.data()) % alignof(float) == 0) {
    // Read where it lies: a float copy of every weight was a fresh [K, N]
    // allocation each.
    result.view = ArrayRef<float>(reinterpret_cast<const float *>(bytes.data()),
                                  size_t(k * n));
  } else {
    converted.resize(k * n);
    loadFloats(bytes, weightType, converted);
    if (matmul.getTransposeRhs()) {
      // Stored [N, K]: transposed in cache-sized tiles.
      std::vector<float> stored = std::move(converted);
      converted.assign(k * n, 0.0f);
      constexpr int64_t kTile = 64;
      for (int64_t c0 = 0; c0 < n; c0 += kTile)
        for (int64_t r0 = 0; r0 < k; r0 += kTile)
          for (int64_t c = c0; c < std::min(n, c0 + kTile); ++c)
            for (int64_t r = r0; r < std::min(k, r0 + kTile); ++r)
              converted[r * n + c] = stored[c * k + r];
    }
  }
  ArrayRef<float> weight = result.weight();

  InputStats stats = estimateInputStats(matmul, k, source.call);
  PrecisionPlan &plan = result.plan;
  plan = planWeightPrecision(weight, k, n, stats, config);
  plan.statsSource = stats.source;

  // Bias correction: E[x] . (W - W^) per output channel, with W^ the
  // chosen blocks' dequantized values.
  plan.biasDelta.assign(n, 0.0);
  auto candidateOf = [&](int64_t r, int64_t c) {
    return plan
        .blockCandidate[(r / plan.blockK) * plan.blocksN + c / plan.blockN];
  };
  if (config.biasCorrection)
    for (int64_t r = 0; r < k; ++r) {
      if (stats.mean[r] == 0.0)
        continue;
      for (int64_t c = 0; c < n; ++c) {
        const QuantizedWeight &q = plan.quantized[candidateOf(r, c)];
        plan.biasDelta[c] += stats.mean[r] * q.residual(weight, r, c, n);
      }
    }
  result.correctBias =
      llvm::any_of(plan.biasDelta, [](double d) { return d != 0.0; });

  Value bias = matmul.getBias();
  if (result.correctBias || bias)
    result.biasValues =
        bias ? constantVector(getPassedValue(bias, source.call), n)
             : std::vector<float>(n, 0.0f);

  // The constants are made of the chosen candidates' codes and scales (and
  // the f32 values of f32 pieces) alone. The rest goes now: a weight that
  // many calls pass holds one quantization per call until the rewrite, and
  // its float copy is 8x the INT4 codes.
  SmallVector<bool> chosen(plan.quantized.size(), false);
  for (size_t c : plan.blockCandidate)
    chosen[c] = true;
  bool keepWeight = false;
  for (auto [i, q] : llvm::enumerate(plan.quantized)) {
    if (!chosen[i]) {
      std::vector<int8_t>().swap(q.codes);
      std::vector<float>().swap(q.scales);
    } else if (q.format == WeightFormat::Fp32) {
      keepWeight = true;
    }
  }
  if (!keepWeight) {
    result.view = {};
    std::vector<float>().swap(converted);
  }
  return result;
}

FailureOr<SmallVector<PrecisionPlan>>
mlir::sits::quantizeMatmulWeight(RewriterBase &rewriter, MatmulOp matmul,
                                 const PrecisionConfig &config,
                                 const CallSites &calls) {
  if (matmul.getTransposeLhs())
    return rewriter.notifyMatchFailure(matmul, "lhs is transposed");
  Value rhs = matmul.getRhs();
  SmallVector<ConstantSource> sources = getConstantSources(rhs, calls);
  if (sources.empty())
    return rewriter.notifyMatchFailure(matmul, "rhs is not a constant");
  auto type = cast<RankedTensorType>(rhs.getType());
  auto lhsType = cast<RankedTensorType>(matmul.getLhs().getType());
  // f32 weights, or f16/bf16 ones an f32 model stores narrow.
  auto weightType = dyn_cast<FloatType>(type.getElementType());
  if (!lhsType.getElementType().isF32())
    return rewriter.notifyMatchFailure(matmul, "activations are not f32");
  if (type.getRank() != 2 || !weightType ||
      !(weightType.isF32() || weightType.isF16() || weightType.isBF16()) ||
      type.getEncoding())
    return rewriter.notifyMatchFailure(matmul,
                                       "rhs is not a 2-D f32/f16/bf16 weight");
  if (type.getNumElements() == 0)
    return rewriter.notifyMatchFailure(matmul, "rhs is empty");
  if (!llvm::all_of(sources, [](const ConstantSource &source) {
        return getConstantBytes(source.value).has_value();
      }))
    return rewriter.notifyMatchFailure(matmul, "rhs is not plain dense data");
  if (sources.front().call && config.autoSelect)
    return rewriter.notifyMatchFailure(
        matmul, "precision auto plans each weight alone, and the calls pass "
                "different ones");

  // W as [K, N] whatever the stored layout.
  bool transposed = matmul.getTransposeRhs();
  int64_t k = type.getDimSize(transposed ? 1 : 0);
  int64_t n = type.getDimSize(transposed ? 0 : 1);
  if (config.format == WeightFormat::Int4 && !config.autoSelect && k % 2 != 0)
    return rewriter.notifyMatchFailure(matmul,
                                       "INT4 needs an even K (two per byte)");

  // INT4 groups tile K whole where they can: a K that the configured group
  // does not divide (an FFN width of 1376 = 21.5 x 64) takes the largest
  // halving of it, down to 32, that does, so the CPU contraction reads
  // whole groups of packed codes instead of a dequantized copy.
  PrecisionConfig local = config;
  while (!config.autoSelect && local.groupSize > 32 && k % local.groupSize != 0)
    local.groupSize /= 2;

  // One quantization per constant, keyed by the call passing it. A fixed
  // format makes the same pieces of every one; the bias must be corrected
  // alike too, for one rewrite to serve all.
  DenseMap<Operation *, QuantizedSource> quantized;
  for (const ConstantSource &source : sources)
    quantized.try_emplace(
        source.call, quantizeSource(matmul, source, k, n, weightType, local));
  const QuantizedSource &first = quantized.find(sources.front().call)->second;
  if (llvm::any_of(quantized, [&](const auto &entry) {
        return entry.second.correctBias != first.correctBias ||
               entry.second.biasValues.has_value() !=
                   first.biasValues.has_value();
      }))
    return rewriter.notifyMatchFailure(
        matmul, "the calls' weights differ in how their bias is corrected");
  const PrecisionPlan &plan = first.plan;
  bool correctBias = first.correctBias;
  // A constant of the rewrite: made from each quantized constant of the
  // weight, an argument through calls.
  auto constant =
      [&](function_ref<TypedAttr(const QuantizedSource &)> make) -> Value {
    return deriveConstant(rewriter, rhs, sources,
                          [&](const ConstantSource &source) {
                            return make(quantized.find(source.call)->second);
                          });
  };

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
  RankedTensorType resultType = matmul.getType();
  Value x = matmul.getLhs();

  // The bias, corrected: a constant bias gets the correction folded in.
  Value bias = matmul.getBias();
  auto biasSlice = [&](int64_t n0, int64_t n1) -> Value {
    auto sliceType = RankedTensorType::get({n1 - n0}, rewriter.getF32Type());
    if (!correctBias && n0 == 0 && n1 == n)
      return bias;
    if (first.biasValues)
      return constant([&](const QuantizedSource &q) {
        std::vector<float> values(q.biasValues->begin() + n0,
                                  q.biasValues->begin() + n1);
        if (correctBias)
          for (int64_t c = n0; c < n1; ++c)
            values[c - n0] += float(q.plan.biasDelta[c]);
        return q.maker.floats(sliceType, values, ".bias" + std::to_string(n0));
      });
    Value slice = bias;
    if (n0 != 0 || n1 != n)
      slice = tensor::ExtractSliceOp::create(
          rewriter, loc, bias,
          SmallVector<OpFoldResult>{rewriter.getIndexAttr(n0)},
          SmallVector<OpFoldResult>{rewriter.getIndexAttr(n1 - n0)},
          SmallVector<OpFoldResult>{rewriter.getIndexAttr(1)});
    if (!correctBias)
      return slice;
    Value correction = constant([&](const QuantizedSource &q) {
      std::vector<float> values(q.plan.biasDelta.begin() + n0,
                                q.plan.biasDelta.begin() + n1);
      return q.maker.floats(sliceType, values,
                            ".bias_correction" + std::to_string(n0));
    });
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
      const QuantizedWeight &quantization = plan.quantized[p.candidate];
      std::string name =
          ".q" + stringifyWeightFormat(quantization.format).str() + "." +
          std::to_string(p.k0) + "." + std::to_string(p.n0);
      Value pieceX = sliceLastDim(rewriter, loc, x, p.k0, p.k1, k);
      Value pieceBias = i == 0 && hasBias ? biasSlice(n0, n1) : Value();
      ActivationKind activation =
          single ? matmul.getActivation() : ActivationKind::None;
      Value w = constant([&](const QuantizedSource &q) {
        return makePieceWeight(q.plan.quantized[p.candidate], q.weight(), n, p,
                               q.maker, name);
      });
      Value result;
      if (quantization.format == WeightFormat::Fp32) {
        result = MatmulOp::create(rewriter, loc, pieceType, pieceX, w,
                                  pieceBias, false, false, activation);
      } else {
        // One scale row per group inside the piece (group rows align with
        // the piece: pieces start at block rows, a multiple of the group).
        int64_t g0 = p.k0 / quantization.group;
        int64_t g1 = (p.k1 + quantization.group - 1) / quantization.group;
        bool perChannel = quantization.group >= k;
        auto scaleType =
            perChannel
                ? RankedTensorType::get({p.n1 - p.n0}, rewriter.getF32Type())
                : RankedTensorType::get({g1 - g0, p.n1 - p.n0},
                                        rewriter.getF32Type());
        Value scale = constant([&](const QuantizedSource &q) {
          const QuantizedWeight &piece = q.plan.quantized[p.candidate];
          std::vector<float> scales;
          for (int64_t g = g0; g < g1; ++g)
            for (int64_t c = p.n0; c < p.n1; ++c)
              scales.push_back(piece.scales[g * n + c]);
          return q.maker.floats(scaleType, scales, name + ".scale");
        });
        auto qmatmul = QMatmulOp::create(
            rewriter, loc, pieceType, pieceX, w, scale, /*zero_point=*/Value(),
            pieceBias, rewriter.getI64IntegerAttr(perChannel ? 1 : 0),
            perChannel ? IntegerAttr()
                       : rewriter.getI64IntegerAttr(quantization.group),
            /*transpose_weight=*/false, activation, /*float_input=*/false);
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
  // The plans report the choice; their quantizations are in the IR now.
  SmallVector<PrecisionPlan> plans;
  for (const ConstantSource &source : sources) {
    PrecisionPlan &done = quantized.find(source.call)->second.plan;
    done.quantized.clear();
    plans.push_back(done);
  }
  rewriter.replaceOp(matmul, result);
  eraseIfUnused(rewriter, rhs, sources);
  if (bias)
    eraseIfUnused(rewriter, bias, getConstantSources(bias, calls));
  return plans;
}
