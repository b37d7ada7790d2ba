//===- ConstantData.h - Reading and re-laying out constant data -*- C++ -*-===//
//
// Passes that re-lay out weights at compile time (transposed, in panels,
// as a GEMM filter) read a constant's raw bytes and write new ones. These
// helpers are the one place that knows how constants hold their data.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_TRANSFORMS_CONSTANTDATA_H
#define SITS_PASSES_TRANSFORMS_CONSTANTDATA_H

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"

#include <optional>
#include <string>

namespace mlir::sits {

/// The row-major bytes of a constant (inline dense data or a resource
/// blob), when it has them: statically shaped, byte-sized elements, not a
/// splat. The view is valid as long as the attribute is.
std::optional<ArrayRef<char>> getConstantBytes(ElementsAttr value);

/// Hints that the data of `value`, just re-laid out into a new constant,
/// is not needed again soon. For imported weights (read-only resource
/// blobs, which the frontend maps from the model's file) this drops their
/// pages from the compiler's resident set, so that the original and the
/// re-laid-out copy of every weight are not resident together; the page
/// cache keeps them for a later read. It never changes the data
/// (madvise(MADV_PAGEOUT)); a no-op for anything else.
void releaseConstantPages(ElementsAttr value);

/// Bytes per element of a constant whose data getConstantBytes can read.
int64_t getElementBytes(ShapedType type);

/// The first `out.size()` elements of raw constant data of float type
/// `type` (f32, f16 or bf16: every value of which f32 holds exactly).
void loadFloats(ArrayRef<char> bytes, FloatType type,
                MutableArrayRef<float> out);

/// A new constant of `type` holding `blob`: a resource named after
/// `original` (with `suffix`) when `original` is one, inline dense data
/// otherwise.
TypedAttr makeConstantLike(ElementsAttr original, RankedTensorType type,
                           AsmResourceBlob blob, StringRef suffix);

} // namespace mlir::sits

#endif // SITS_PASSES_TRANSFORMS_CONSTANTDATA_H
