//===- FoldWeightTransposes.cpp - Pre-transpose constant weights ----------===//

#include "passes/Transforms/Passes.h"

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

/// The raw bytes of a constant, when it has them laid out plainly.
static std::optional<ArrayRef<char>> getRawBytes(ElementsAttr value) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    if (AsmResourceBlob *blob = resource.getRawHandle().getBlob())
      return blob->getData();
    return std::nullopt;
  }
  if (auto dense = dyn_cast<DenseElementsAttr>(value); dense && !dense.isSplat())
    return dense.getRawData();
  return std::nullopt;
}

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
  if (!value || !type || !type.hasStaticShape() || type.getEncoding() ||
      !type.getElementType().isIntOrFloat() ||
      type.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return rewriter.notifyMatchFailure(matmul, "rhs is not plain dense data");
  std::optional<ArrayRef<char>> bytes = getRawBytes(value);
  int64_t elementBytes = type.getElementType().getIntOrFloatBitWidth() / 8;
  if (!bytes ||
      static_cast<int64_t>(bytes->size()) != type.getNumElements() * elementBytes)
    return rewriter.notifyMatchFailure(matmul, "rhs data is not available");

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
  std::string name = "transposed";
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value))
    name = (resource.getRawHandle().getKey() + ".t").str();

  // Inline data stays inline; a resource becomes a new resource.
  TypedAttr transposedValue;
  if (isa<DenseElementsAttr>(value))
    transposedValue =
        DenseElementsAttr::getFromRawBuffer(transposedType, blob.getData());
  else
    transposedValue =
        DenseResourceElementsAttr::get(transposedType, name, std::move(blob));
  rewriter.setInsertionPoint(constant);
  auto transposed = arith::ConstantOp::create(rewriter, constant.getLoc(),
                                              transposedValue);
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
