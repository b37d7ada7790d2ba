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

/// Whether `value` is constant plain dense data on every path into it, used
/// once: what transposeConstant can replace.
static bool isTransposableConstant(Value value, const CallSites &calls) {
  SmallVector<ConstantSource> sources = getConstantSources(value, calls);
  auto type = dyn_cast<RankedTensorType>(value.getType());
  return !sources.empty() && value.hasOneUse() && type && !type.getEncoding() &&
         type.getRank() >= 2 &&
         llvm::all_of(sources, [](const ConstantSource &source) {
           return getConstantBytes(source.value).has_value();
         });
}

/// `value` (isTransposableConstant) with its two innermost dimensions
/// swapped, computed at compile time; the original is erased once unused.
static Value transposeConstant(RewriterBase &rewriter, Value value,
                               const CallSites &calls) {
  SmallVector<ConstantSource> sources = getConstantSources(value, calls);
  OpBuilder::InsertionGuard guard(rewriter);
  if (Operation *constant = value.getDefiningOp())
    rewriter.setInsertionPoint(constant);
  return deriveConstant(rewriter, value, sources,
                        [](const ConstantSource &source) {
                          return transposeInnermost(source.value);
                        });
}

FailureOr<MatmulOp>
mlir::sits::foldConstantWeightTranspose(RewriterBase &rewriter, MatmulOp matmul,
                                        const CallSites &calls) {
  if (!matmul.getTransposeRhs())
    return rewriter.notifyMatchFailure(matmul, "rhs is not transposed");
  Value rhs = matmul.getRhs();
  if (!isTransposableConstant(rhs, calls))
    return rewriter.notifyMatchFailure(
        matmul, "rhs is not plain constant data used only here");
  SmallVector<ConstantSource> sources = getConstantSources(rhs, calls);
  Value transposed = transposeConstant(rewriter, rhs, calls);
  rewriter.modifyOpInPlace(matmul, [&] {
    matmul.getRhsMutable().assign(transposed);
    matmul.setTransposeRhs(false);
  });
  eraseIfUnused(rewriter, rhs, sources);
  return matmul;
}

FailureOr<QMatmulOp> mlir::sits::foldConstantWeightTranspose(
    RewriterBase &rewriter, QMatmulOp qmatmul, const CallSites &calls) {
  if (!qmatmul.getTransposeWeight())
    return rewriter.notifyMatchFailure(qmatmul, "weight is not transposed");
  // The weight [N, K] and, per group along K, its scales and zero points
  // [N, K/G] are transposed together; a per-channel scale [N] stays.
  std::optional<int64_t> axis;
  if (IntegerAttr attr = qmatmul.getAxisAttr())
    axis = attr.getInt() < 0 ? attr.getInt() + 2 : attr.getInt();
  SmallVector<Value> operands = {qmatmul.getWeight()};
  for (Value param : {qmatmul.getScale(), qmatmul.getZeroPoint()})
    if (param && cast<RankedTensorType>(param.getType()).getRank() == 2)
      operands.push_back(param);
  if (!axis || !llvm::all_of(operands, [&](Value v) {
        return isTransposableConstant(v, calls);
      }))
    return rewriter.notifyMatchFailure(
        qmatmul, "weight or its parameters are not plain constant data used "
                 "only here");
  SmallVector<SmallVector<ConstantSource>> sources;
  SmallVector<Value> transposed;
  for (Value v : operands) {
    sources.push_back(getConstantSources(v, calls));
    transposed.push_back(transposeConstant(rewriter, v, calls));
  }
  rewriter.modifyOpInPlace(qmatmul, [&] {
    for (auto [old, replacement] : llvm::zip(operands, transposed))
      for (OpOperand &use : qmatmul->getOpOperands())
        if (use.get() == old)
          use.set(replacement);
    qmatmul.setTransposeWeight(false);
    qmatmul.setAxisAttr(rewriter.getI64IntegerAttr(1 - *axis));
  });
  for (auto [old, oldSources] : llvm::zip(operands, sources))
    eraseIfUnused(rewriter, old, oldSources);
  return qmatmul;
}

namespace {

struct SitsFoldWeightTransposesPass
    : sits::impl::SitsFoldWeightTransposesBase<SitsFoldWeightTransposesPass> {
  void runOnOperation() override {
    CallSites calls(getOperation());
    SmallVector<Operation *> contractions;
    getOperation()->walk([&](Operation *op) {
      if (isa<MatmulOp, QMatmulOp>(op))
        contractions.push_back(op);
    });
    IRRewriter rewriter(&getContext());
    for (Operation *op : contractions) {
      bool folded = isa<MatmulOp>(op)
                        ? succeeded(foldConstantWeightTranspose(
                              rewriter, cast<MatmulOp>(op), calls))
                        : succeeded(foldConstantWeightTranspose(
                              rewriter, cast<QMatmulOp>(op), calls));
      if (folded)
        ++numFolded;
    }
  }
};

} // namespace
