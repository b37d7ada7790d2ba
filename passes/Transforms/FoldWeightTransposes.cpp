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

/// `value` ([..., rows, cols]) with its two innermost dimensions swapped.
static TypedAttr transposeInnermost(ElementsAttr value) {
  auto type = cast<RankedTensorType>(value.getType());
  ArrayRef<char> bytes = *getConstantBytes(value);
  int64_t elementBytes = getElementBytes(type);
  ArrayRef<int64_t> shape = type.getShape();
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  int64_t matrices = type.getNumElements() / (rows * cols);
  AsmResourceBlob blob =
      makeWeightBlob(bytes.size(), [&](MutableArrayRef<char> out) {
        for (int64_t b = 0; b < matrices; ++b) {
          const char *src = bytes.data() + b * rows * cols * elementBytes;
          char *dst = out.data() + b * rows * cols * elementBytes;
          for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < cols; ++c)
              std::memcpy(dst + (c * rows + r) * elementBytes,
                          src + (r * cols + c) * elementBytes, elementBytes);
        }
      });
  SmallVector<int64_t> transposedShape(shape);
  std::swap(transposedShape[shape.size() - 2], transposedShape.back());
  auto transposedType =
      RankedTensorType::get(transposedShape, type.getElementType());
  return makeConstantLike(value, transposedType, std::move(blob), ".t");
}

FailureOr<MatmulOp>
mlir::sits::foldConstantWeightTranspose(RewriterBase &rewriter, MatmulOp matmul,
                                        const CallSites &calls) {
  if (!matmul.getTransposeRhs())
    return rewriter.notifyMatchFailure(matmul, "rhs is not transposed");
  Value rhs = matmul.getRhs();
  SmallVector<ConstantSource> sources = getConstantSources(rhs, calls);
  if (sources.empty() || !rhs.hasOneUse())
    return rewriter.notifyMatchFailure(matmul,
                                       "rhs is not a constant used only here");
  auto type = dyn_cast<RankedTensorType>(rhs.getType());
  if (!type || type.getEncoding() ||
      !llvm::all_of(sources, [](const ConstantSource &source) {
        return getConstantBytes(source.value).has_value();
      }))
    return rewriter.notifyMatchFailure(matmul, "rhs is not plain dense data");

  if (Operation *constant = rhs.getDefiningOp())
    rewriter.setInsertionPoint(constant);
  Value transposed =
      deriveConstant(rewriter, rhs, sources, [](const ConstantSource &source) {
        return transposeInnermost(source.value);
      });
  rewriter.modifyOpInPlace(matmul, [&] {
    matmul.getRhsMutable().assign(transposed);
    matmul.setTransposeRhs(false);
  });
  eraseIfUnused(rewriter, rhs, sources);
  return matmul;
}

namespace {

struct SitsFoldWeightTransposesPass
    : sits::impl::SitsFoldWeightTransposesBase<SitsFoldWeightTransposesPass> {
  void runOnOperation() override {
    CallSites calls(getOperation());
    SmallVector<MatmulOp> matmuls;
    getOperation()->walk([&](MatmulOp op) { matmuls.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (MatmulOp op : matmuls)
      if (succeeded(foldConstantWeightTranspose(rewriter, op, calls)))
        ++numFolded;
  }
};

} // namespace
