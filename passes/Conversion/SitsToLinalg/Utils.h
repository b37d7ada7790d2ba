//===- Utils.h - Helpers shared by the SITS lowerings -----------*- C++ -*-===//
//
// Private to passes/Conversion/SitsToLinalg: the builders and quantization
// helpers that several families of lowerings use. Each function is
// documented at its definition in Builders.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CONVERSION_SITSTOLINALG_UTILS_H
#define SITS_PASSES_CONVERSION_SITSTOLINALG_UTILS_H

#include "passes/Conversion/Passes.h"

#include "mlir/Dialect/Utils/StructuredOpsUtils.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/AffineMap.h"

#include <optional>
#include <utility>

namespace mlir::sits::detail {

using utils::IteratorType;

constexpr IteratorType kParallel = IteratorType::parallel;
constexpr IteratorType kReduction = IteratorType::reduction;

//===----------------------------------------------------------------------===//
// Builders shared by the lowerings
//===----------------------------------------------------------------------===//

/// Builds a generic's body from its block arguments (inputs, then the
/// output) and returns the value to yield.
using BodyBuilder = function_ref<Value(OpBuilder &, Location, ValueRange)>;

FloatType getComputeType(Type elementType);
Value floatConst(OpBuilder &b, Location loc, Type type, const APFloat &value);
Value floatConst(OpBuilder &b, Location loc, Type type, double value);
Value lowestConst(OpBuilder &b, Location loc, Type type);
Value negInfConst(OpBuilder &b, Location loc, Type type);
Value castFloat(OpBuilder &b, Location loc, Value value, Type to);
Value indexValue(OpBuilder &b, Location loc, OpFoldResult size);
OpFoldResult mulSizes(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y);
OpFoldResult divSizes(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y);
OpFoldResult addSizes(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y);
OpFoldResult subSizes(OpBuilder &b, Location loc, OpFoldResult x,
                      OpFoldResult y);
OpFoldResult productOf(OpBuilder &b, Location loc,
                       ArrayRef<OpFoldResult> sizes);
OpFoldResult dimOf(OpBuilder &b, Location loc, Value tensor, int64_t dim);
OpFoldResult sizeOr(OpBuilder &b, RankedTensorType type, int64_t dim,
                    function_ref<OpFoldResult()> fallback);
OpFoldResult staticFirst(OpBuilder &b, Location loc,
                         ArrayRef<std::pair<Value, int64_t>> candidates);
Value sizeAsFloat(OpBuilder &b, Location loc, OpFoldResult size, Type type);
Value emptyTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                  Type elementType);
Value filledTensor(OpBuilder &b, Location loc, ArrayRef<OpFoldResult> sizes,
                   Value value);
SmallVector<ReassociationIndices> groupsKeeping(ArrayRef<bool> keep);
SmallVector<ReassociationIndices> groupsMergingLeading(int64_t rank,
                                                       int64_t count);
SmallVector<ReassociationIndices> groupsSplitting(int64_t rank, int64_t dim);
Value castToType(OpBuilder &b, Location loc, Value value,
                 RankedTensorType type);
Value collapse(OpBuilder &b, Location loc, Value source,
               ArrayRef<ReassociationIndices> groups);
Value expand(OpBuilder &b, Location loc, Value source,
             ArrayRef<ReassociationIndices> groups,
             ArrayRef<OpFoldResult> sizes);
AffineMap dimsMap(MLIRContext *ctx, unsigned numDims, ArrayRef<int64_t> dims);
AffineMap withoutDims(MLIRContext *ctx, unsigned numDims, int64_t from,
                      int64_t to);
Value buildGeneric(OpBuilder &b, Location loc, ValueRange inputs,
                   ArrayRef<AffineMap> inputMaps, Value init, AffineMap initMap,
                   ArrayRef<IteratorType> iterators, BodyBuilder body);
Value buildElementwise(OpBuilder &b, Location loc, ValueRange inputs,
                       ArrayRef<AffineMap> inputMaps,
                       ArrayRef<OpFoldResult> sizes, Type elementType,
                       BodyBuilder body);
Value multiplyAccumulate(OpBuilder &b, Location loc, Value x, Value y,
                         Value acc);
std::optional<int64_t> optionalInt(IntegerAttr attr);
Value buildEpilogue(OpBuilder &b, Location loc, Value acc,
                    ArrayRef<OpFoldResult> sizes, Value bias, AffineMap biasMap,
                    ActivationKind activation, Type resultElementType);

/// A contraction's input with its leading dimensions folded into M.
struct QMatmulRows {
  SmallVector<OpFoldResult> leading; // the result's leading extents
  OpFoldResult m;                    // their product
  Value x;                           // the input as [M, K]
};
QMatmulRows foldLeadingRows(OpBuilder &b, Location loc, Value input,
                            RankedTensorType resultType);
Value finishRows(OpBuilder &b, Location loc, Value acc, const QMatmulRows &rows,
                 Value bias, ActivationKind activation,
                 RankedTensorType resultType);

//===----------------------------------------------------------------------===//
// Quantization helpers
//===----------------------------------------------------------------------===//

AffineMap quantParamMap(MLIRContext *ctx, int64_t rank,
                        RankedTensorType paramType, std::optional<int64_t> axis,
                        std::optional<int64_t> blockSize);
AffineMap storageMap(AffineMap logicalMap, RankedTensorType logicalType);
Value readQuantized(OpBuilder &b, Location loc, Value arg,
                    RankedTensorType logicalType, AffineMap logicalMap);
Value quantizedToI32(OpBuilder &b, Location loc, Value value,
                     Type logicalElement);

/// The operands of a dequantization, as a lowering sees them.
struct DequantizeOperands {
  Value input;                // converted
  RankedTensorType inputType; // logical
  Value scale;
  Value zeroPoint; // converted, may be null
  RankedTensorType zeroPointType;
  std::optional<int64_t> axis, blockSize;
};

Value buildDequantize(OpBuilder &b, Location loc, const DequantizeOperands &q,
                      RankedTensorType resultType);

} // namespace mlir::sits::detail

#endif // SITS_PASSES_CONVERSION_SITSTOLINALG_UTILS_H
