//===- FoldWeightTransposes.cpp - Pre-transpose constant weights ----------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/ConstantData.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSFOLDWEIGHTTRANSPOSES
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

FailureOr<MatmulOp>
mlir::sits::foldConstantWeightTranspose(RewriterBase &rewriter,
                                        MatmulOp matmul) {
  if (!matmul.getTransposeRhs())
    return rewriter.notifyMatchFailure(matmul, "rhs is not transposed");
  auto constant = matmul.getRhs().getDefiningOp<arith::ConstantOp>();
  if (!constant || !matmul.getRhs().hasOneUse())
    return rewriter.notifyMatchFailure(matmul,
                                       "rhs is not a constant used only here");
  auto value = dyn_cast<ElementsAttr>(constant.getValue());
  auto type = dyn_cast<RankedTensorType>(constant.getType());
  std::optional<ArrayRef<char>> bytes = value && type && !type.getEncoding()
                                            ? getConstantBytes(value)
                                            : std::nullopt;
  if (!bytes)
    return rewriter.notifyMatchFailure(matmul, "rhs is not plain dense data");
  int64_t elementBytes = getElementBytes(type);

  // Transpose the two innermost dimensions of every batch.
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t matrices = type.getNumElements() / (rows * cols);
  AsmResourceBlob blob =
      HeapAsmResourceBlob::allocate(bytes->size(), /*align=*/64);
  MutableArrayRef<char> out = blob.getMutableData();
  for (int64_t b = 0; b < matrices; ++b) {
    const char *src = bytes->data() + b * rows * cols * elementBytes;
    char *dst = out.data() + b * rows * cols * elementBytes;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(dst + (c * rows + r) * elementBytes,
                    src + (r * cols + c) * elementBytes, elementBytes);
  }
  SmallVector<int64_t> transposedShape(shape);
  std::swap(transposedShape[shape.size() - 2], transposedShape.back());
  auto transposedType =
      RankedTensorType::get(transposedShape, type.getElementType());

  TypedAttr transposedValue =
      makeConstantLike(value, transposedType, std::move(blob), ".t");
  rewriter.setInsertionPoint(constant);
  auto transposed =
      arith::ConstantOp::create(rewriter, constant.getLoc(), transposedValue);
  rewriter.modifyOpInPlace(matmul, [&] {
    matmul.getRhsMutable().assign(transposed);
    matmul.setTransposeRhs(false);
  });
  rewriter.eraseOp(constant);
  return matmul;
}

namespace {

struct SitsFoldWeightTransposesPass
    : sits::impl::SitsFoldWeightTransposesBase<SitsFoldWeightTransposesPass> {
  void runOnOperation() override {
    SmallVector<MatmulOp> matmuls;
    getOperation()->walk([&](MatmulOp op) { matmuls.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (MatmulOp op : matmuls)
      if (succeeded(foldConstantWeightTranspose(rewriter, op)))
        ++numFolded;
  }
};

} // namespace
