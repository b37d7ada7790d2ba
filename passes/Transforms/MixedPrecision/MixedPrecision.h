//===- MixedPrecision.h - Internals of sits-mixed-precision -----*- C++ -*-===//
//
// sits-mixed-precision, by responsibility:
//
//   Quantize.cpp        the weight formats and their quantizers: symmetric
//                       INT8 / INT4 codes per channel or group, FP8 E4M3FN
//   Plan.cpp            the input statistics and the per-block choice of
//                       format within the error budget (the error model)
//   QuantizeMatmul.cpp  a matmul by a constant weight as sits.qmatmul pieces
//   QuantizeConv.cpp    a convolution by a constant filter as sits.qconv
//   MixedPrecision.cpp  the pass: options, the walk, the precision report
//
// The reusable functions are declared in passes/Transforms/Passes.h; this
// header holds only what these files share among themselves.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_TRANSFORMS_MIXEDPRECISION_MIXEDPRECISION_H
#define SITS_PASSES_TRANSFORMS_MIXEDPRECISION_MIXEDPRECISION_H

#include "passes/Transforms/ConstantData.h"
#include "passes/Transforms/Passes.h"

#include "mlir/IR/DialectResourceBlobManager.h"

#include <optional>
#include <string>
#include <vector>

namespace mlir::sits::mixed_precision {

/// The 1-D f32 values of a constant, if `value` is one with `size` elements.
std::optional<std::vector<float>> constantVector(Value value, int64_t size);

/// Constants the rewrite creates from one weight: resources named after it
/// when it is one (so they stay out of the printed IR), else inline data.
struct ConstantMaker {
  ElementsAttr original;

  TypedAttr bytes(RankedTensorType type, ArrayRef<char> data,
                  StringRef what) const {
    return makeConstantLike(
        original, type,
        HeapAsmResourceBlob::allocateAndCopyWithAlign(data, /*align=*/64),
        what);
  }

  TypedAttr floats(RankedTensorType type, ArrayRef<float> values,
                   StringRef what) const {
    return bytes(type,
                 ArrayRef<char>(reinterpret_cast<const char *>(values.data()),
                                values.size() * sizeof(float)),
                 what);
  }
};

/// The sum of f(i) for i in [begin, end), in eight partial sums: one
/// running sum would wait on each addition's latency.
template <typename F> double sumOf(int64_t begin, int64_t end, F f) {
  double partial[8] = {};
  int64_t i = begin;
  for (; i + 8 <= end; i += 8)
    for (int j = 0; j < 8; ++j)
      partial[j] += f(i + j);
  double sum = 0.0;
  for (; i < end; ++i)
    sum += f(i);
  for (double p : partial)
    sum += p;
  return sum;
}

} // namespace mlir::sits::mixed_precision

#endif // SITS_PASSES_TRANSFORMS_MIXEDPRECISION_MIXEDPRECISION_H
