//===- Quantize.cpp - Weight formats and their quantizers -----------------===//
//
// A [K, N] weight quantized symmetrically per output channel or per group of
// rows: INT8 and INT4 as rounded integers, FP8 as the E4M3FN code nearest to
// the scaled value (round to nearest even, saturated).
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "llvm/ADT/APFloat.h"

#include <algorithm>
#include <array>
#include <cmath>

using namespace mlir;
using namespace mlir::sits;

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
      float *dequantized = q.dequantized.data() + r * n;
      for (int64_t c = 0; c < n; ++c) {
        double v = row[c] / static_cast<double>(scales[c]);
        double real;
        if (format == WeightFormat::Fp8) {
          uint8_t code = roundToFp8E4M3(v);
          codes[c] = static_cast<int8_t>(code);
          real = fp8E4M3Value(code);
        } else {
          double code = std::clamp(std::nearbyint(v), -qmax, qmax);
          codes[c] = static_cast<int8_t>(code);
          real = code;
        }
        dequantized[c] = static_cast<float>(real * scales[c]);
      }
    }
  }
  return q;
}
