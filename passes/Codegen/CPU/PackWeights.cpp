//===- PackWeights.cpp - Constant weights in register-block panels --------===//

#include "passes/Codegen/CPU/Passes.h"

#include "passes/Transforms/ConstantData.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

#include <cstring>

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUPACKWEIGHTS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

/// `value` ([K, N]) as panels [N / nr, K, nr]: P[nb][k][j] = B[k][nb * nr +
/// j], each panel row one register block's slice of a row of B, and a panel
/// contiguous.
TypedAttr packPanels(ElementsAttr value, int64_t nr) {
  auto type = cast<RankedTensorType>(value.getType());
  ArrayRef<char> bytes = *getConstantBytes(value);
  int64_t kSize = type.getDimSize(0), nSize = type.getDimSize(1);
  int64_t elementBytes = getElementBytes(type);
  int64_t panels = nSize / nr;
  int64_t rowBytes = nr * elementBytes;
  // Packed row r (panel r / K, row r % K of B) is rowBytes long.
  AsmResourceBlob blob = makeFinalWeightBlob(
      type.getContext(), bytes.size(), rowBytes,
      [&](size_t begin, MutableArrayRef<char> out) {
        int64_t first = int64_t(begin) / rowBytes;
        int64_t rows = int64_t(out.size()) / rowBytes;
        for (int64_t r = 0; r < rows; ++r) {
          int64_t nb = (first + r) / kSize, kk = (first + r) % kSize;
          std::memcpy(out.data() + r * rowBytes,
                      bytes.data() + (kk * nSize + nb * nr) * elementBytes,
                      rowBytes);
        }
      });
  releaseConstantPages(value);
  auto packedType =
      RankedTensorType::get({panels, kSize, nr}, type.getElementType());
  return makeConstantLike(value, packedType, std::move(blob), ".packed");
}

/// Rewrites `op` (C[m, n] += A[m, k] * B[k, n], B constant [K, N], or an
/// argument every call passes a constant for) to read B from panels of `nr`
/// columns. Fails, changing nothing, for any other shape.
LogicalResult packConstantRhs(RewriterBase &rewriter, linalg::LinalgOp op,
                              int64_t nr, const CallSites &calls) {
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op.getNumLoops() != 3 ||
      !linalg::isaContractionOpInterface(op))
    return failure();
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || !dims->batch.empty() || dims->m.size() != 1 ||
      dims->n.size() != 1 || dims->k.size() != 1)
    return failure();
  unsigned m = dims->m[0], n = dims->n[0], k = dims->k[0];
  MLIRContext *ctx = op.getContext();
  auto dim = [&](unsigned d) { return getAffineDimExpr(d, ctx); };
  OpOperand *lhs = op.getDpsInputOperand(0), *rhs = op.getDpsInputOperand(1);
  OpOperand *init = op.getDpsInitOperand(0);
  if (op.getMatchingIndexingMap(lhs) !=
          AffineMap::get(3, 0, {dim(m), dim(k)}, ctx) ||
      op.getMatchingIndexingMap(rhs) !=
          AffineMap::get(3, 0, {dim(k), dim(n)}, ctx) ||
      op.getMatchingIndexingMap(init) !=
          AffineMap::get(3, 0, {dim(m), dim(n)}, ctx))
    return failure();

  Value weight = rhs->get();
  SmallVector<ConstantSource> sources = getConstantSources(weight, calls);
  auto type = dyn_cast<RankedTensorType>(weight.getType());
  auto initType = dyn_cast<RankedTensorType>(init->get().getType());
  if (sources.empty() || !type || !initType || !type.hasStaticShape() ||
      type.getEncoding() || !type.getElementType().isIntOrFloat() ||
      type.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return failure();
  int64_t nSize = type.getDimSize(1);
  if (nSize % nr != 0 || nSize == nr ||
      !llvm::all_of(sources, [](const ConstantSource &source) {
        return getConstantBytes(source.value).has_value();
      }))
    return failure();
  int64_t panels = nSize / nr;

  // The new contraction over (m, nb, j, k) on C viewed as [M, N/nr, nr],
  // with the same scalar body (multiply-add, and any casts).
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Value packed = deriveConstant(rewriter, weight, sources,
                                [&](const ConstantSource &source) {
                                  return packPanels(source.value, nr);
                                });
  SmallVector<ReassociationIndices> split = {{0}, {1, 2}};
  auto expandedType = RankedTensorType::get(
      {initType.getDimSize(0), panels, nr}, initType.getElementType());
  SmallVector<OpFoldResult> outputShape = {
      tensor::getMixedSize(rewriter, loc, init->get(), 0),
      rewriter.getIndexAttr(panels), rewriter.getIndexAttr(nr)};
  Value expanded = tensor::ExpandShapeOp::create(
      rewriter, loc, expandedType, init->get(), split, outputShape);
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  // Loops: 0 = m, 1 = nb, 2 = j, 3 = k.
  SmallVector<AffineMap> maps = {AffineMap::get(4, 0, {d(0), d(3)}, ctx),
                                 AffineMap::get(4, 0, {d(1), d(3), d(2)}, ctx),
                                 AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)};
  SmallVector<utils::IteratorType> iterators = {
      utils::IteratorType::parallel, utils::IteratorType::parallel,
      utils::IteratorType::parallel, utils::IteratorType::reduction};
  Block *body = op.getBlock();
  auto panelOp = linalg::GenericOp::create(
      rewriter, loc, expandedType, ValueRange{lhs->get(), packed},
      ValueRange{expanded}, maps, iterators,
      [&](OpBuilder &b, Location, ValueRange args) {
        IRMapping mapping;
        mapping.map(body->getArguments(), args);
        for (Operation &inner : *body)
          b.clone(inner, mapping);
      });
  Value collapsed = tensor::CollapseShapeOp::create(
      rewriter, loc, initType, panelOp.getResult(0), split);
  rewriter.replaceOp(op, collapsed);
  eraseIfUnused(rewriter, weight, sources);
  return success();
}

struct SitsCpuPackWeightsPass
    : cpu::impl::SitsCpuPackWeightsBase<SitsCpuPackWeightsPass> {
  void runOnOperation() override {
    cpu::CpuTilingConfig config = cpu::getCpuTilingConfig(getOperation());
    CallSites calls(getOperation());
    SmallVector<linalg::LinalgOp> candidates;
    getOperation().walk([&](linalg::LinalgOp op) { candidates.push_back(op); });
    IRRewriter rewriter(&getContext());
    for (linalg::LinalgOp op : candidates)
      if (succeeded(packConstantRhs(rewriter, op, config.nr, calls)))
        ++numPacked;
  }
};

} // namespace
