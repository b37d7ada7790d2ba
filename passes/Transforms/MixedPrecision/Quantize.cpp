//===- Quantize.cpp - Weight formats and their quantizers -----------------===//
//
// A [K, N] weight quantized symmetrically per output channel or per group of
// rows: INT8 and INT4 as rounded integers, FP8 as the E4M3FN code nearest to
// the scaled value (round to nearest even, saturated).
//
//===----------------------------------------------------------------------===//

#include "MixedPrecision.h"

#include "llvm/ADT/APFloat.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>

using namespace mlir;
using namespace mlir::sits;
using mlir::sits::mixed_precision::sumOf;

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
      v[code] =
          APFloat(APFloat::Float8E4M3FN(), APInt(8, code)).convertToDouble();
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

/// What `code` of an 8-bit format stands for, before its scale.
static double codeValue(bool fp8, int8_t code) {
  return fp8 ? fp8E4M3Value(uint8_t(code)) : double(code);
}

/// `w` less the f32 value `real * scale` stands for.
static double residualOf(float w, double real, float scale) {
  return double(w) - double(static_cast<float>(real * scale));
}

double QuantizedWeight::residual(ArrayRef<float> weight, int64_t r, int64_t c,
                                 int64_t n) const {
  if (format == WeightFormat::Fp32)
    return 0.0;
  return residualOf(
      weight[size_t(r * n + c)],
      codeValue(format == WeightFormat::Fp8, codes[size_t(r * n + c)]),
      scales[size_t(r / group * n + c)]);
}

double QuantizedWeight::rowSquaredError(ArrayRef<float> weight, int64_t r,
                                        int64_t n0, int64_t n1,
                                        int64_t n) const {
  if (format == WeightFormat::Fp32)
    return 0.0;
  const float *w = weight.data() + r * n;
  const int8_t *code = codes.data() + r * n;
  const float *scale = scales.data() + r / group * n;
  // One loop per kind of code (a constant in each), so that the integer
  // one vectorizes.
  auto sumSquares = [&](auto fp8) {
    return sumOf(n0, n1, [&](int64_t c) {
      double d = residualOf(w[c], codeValue(fp8, code[c]), scale[c]);
      return d * d;
    });
  };
  return format == WeightFormat::Fp8 ? sumSquares(std::true_type())
                                     : sumSquares(std::false_type());
}

QuantizedWeight mlir::sits::quantizeWeight(ArrayRef<float> weight, int64_t k,
                                           int64_t n, WeightFormat format,
                                           int64_t group) {
  QuantizedWeight q;
  q.format = format;
  q.group = group;
  if (format == WeightFormat::Fp32)
    return q;
  int64_t groups = (k + group - 1) / group;
  q.codes.assign(k * n, 0);
  q.scales.assign(groups * n, 1.0f);
  // Symmetric: the largest magnitude of each group maps to the format's
  // largest value, so no code is spent on a range the group does not use.
  double qmax = format == WeightFormat::Int4   ? 7.0
                : format == WeightFormat::Int8 ? 127.0
                                               : fp8E4M3Values().back();
  // Row by row (the storage order): column-wise walks of a [K, N] weight
  // missed the cache on every element.
  std::vector<float> amax(n);
  for (int64_t g = 0; g < groups; ++g) {
    int64_t k0 = g * group, k1 = std::min(k, k0 + group);
    std::fill(amax.begin(), amax.end(), 0.0f);
    for (int64_t r = k0; r < k1; ++r) {
      const float *row = weight.data() + r * n;
      for (int64_t c = 0; c < n; ++c)
        amax[c] = std::max(amax[c], std::fabs(row[c]));
    }
    float *scales = q.scales.data() + g * n;
    for (int64_t c = 0; c < n; ++c)
      scales[c] = amax[c] > 0.0f ? static_cast<float>(amax[c] / qmax) : 1.0f;
    for (int64_t r = k0; r < k1; ++r) {
      const float *row = weight.data() + r * n;
      int8_t *codes = q.codes.data() + r * n;
      if (format == WeightFormat::Fp8) {
        for (int64_t c = 0; c < n; ++c)
          codes[c] = static_cast<int8_t>(
              roundToFp8E4M3(row[c] / static_cast<double>(scales[c])));
        continue;
      }
      // Integers: clamped, then rounded to nearest even by adding and
      // subtracting 1.5 * 2^52 (exact for |v| < 2^51, and the same as
      // rounding first, qmax being an integer). nearbyint is a library call
      // per element without SSE4.1; this loop vectorizes.
      constexpr double kRound = 6755399441055744.0;
      for (int64_t c = 0; c < n; ++c) {
        double v =
            std::clamp(row[c] / static_cast<double>(scales[c]), -qmax, qmax);
        codes[c] = static_cast<int8_t>((v + kRound) - kRound);
      }
    }
  }
  return q;
}
