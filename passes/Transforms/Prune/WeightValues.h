//===- WeightValues.h - Constant weights as numbers -------------*- C++ -*-===//
//
// Private to the pruning passes: weight magnitudes are read as doubles, and
// pruned weights are gathered or rewritten in their own element type and
// storage (inline data or a resource blob).
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_TRANSFORMS_PRUNE_WEIGHTVALUES_H
#define SITS_PASSES_TRANSFORMS_PRUNE_WEIGHTVALUES_H

#include "mlir/IR/BuiltinAttributeInterfaces.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/PatternMatch.h"

#include <optional>
#include <vector>

namespace mlir::sits::prune {

/// The value of `value`'s defining constant, if it is a tensor constant.
ElementsAttr getConstantElements(Value value);

/// `value` widened to a double.
double toDouble(APFloat value);

/// The elements of a statically shaped float constant as doubles, row-major.
std::optional<std::vector<double>> readFloats(ElementsAttr value);

/// A constant like `original` (a resource when it is one) of `type` holding
/// `values` rounded to the element type.
TypedAttr writeFloats(ElementsAttr original, RankedTensorType type,
                      ArrayRef<double> values, StringRef suffix);

/// Bytes a constant occupies in the weights (splats count one element).
int64_t getStorageBytes(ElementsAttr value);

/// Row-major strides of `shape`.
SmallVector<int64_t> getStrides(ArrayRef<int64_t> shape);

/// max |v| over each index of dimension `dim` (NaN never looks prunable).
SmallVector<double> maxAbsAlong(ArrayRef<double> values,
                                ArrayRef<int64_t> shape, int64_t dim);

/// The constant `value` keeping only `indices` along dimension `dim`.
FailureOr<TypedAttr> gatherConstant(ElementsAttr value, int64_t dim,
                                    ArrayRef<int64_t> indices);

/// Whether `value` is a constant gatherConstant can rewrite that no other op
/// shares (splats are one element: sharing them costs nothing).
bool isOwnedConstant(Value value);

/// An arith.constant of `value` at `loc`.
Value createConstant(RewriterBase &rewriter, Location loc, TypedAttr value);

/// `type` with extent `size` along `dim`.
RankedTensorType withDim(Type type, int64_t dim, int64_t size);

} // namespace mlir::sits::prune

#endif // SITS_PASSES_TRANSFORMS_PRUNE_WEIGHTVALUES_H
