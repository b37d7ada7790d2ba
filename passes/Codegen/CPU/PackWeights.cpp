//===- PackWeights.cpp - Constant weights in register-block panels --------===//

#include "passes/Codegen/CPU/Passes.h"
#include "passes/Codegen/Common/Ukernels.h"

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

/// `parts` ([K, N_i], joined side by side into B [K, N]) as panels
/// [ceil(N / nr), K, nr]: P[nb][k][j] = B[k][nb * nr + j], zero past column
/// N, each panel row one register block's slice of a row of B, and a panel
/// contiguous. The parts are read where they are: a joined B is never
/// written.
TypedAttr packPanels(ArrayRef<ElementsAttr> parts, int64_t nr) {
  auto type = cast<RankedTensorType>(parts.front().getType());
  int64_t kSize = type.getDimSize(0), elementBytes = getElementBytes(type);
  // Each part's bytes, columns and first column in B.
  struct Part {
    const char *bytes;
    int64_t columns, first;
  };
  SmallVector<Part> in;
  int64_t nSize = 0;
  for (ElementsAttr part : parts) {
    int64_t columns = cast<RankedTensorType>(part.getType()).getDimSize(1);
    in.push_back({getConstantBytes(part)->data(), columns, nSize});
    nSize += columns;
  }
  int64_t panels = llvm::divideCeil(nSize, nr);
  int64_t rowBytes = nr * elementBytes;
  // Packed row r (panel r / K, row r % K of B) is rowBytes long.
  AsmResourceBlob blob = makeFinalWeightBlob(
      type.getContext(), size_t(panels * kSize * rowBytes), rowBytes,
      [&](size_t begin, MutableArrayRef<char> out) {
        int64_t first = int64_t(begin) / rowBytes;
        int64_t rows = int64_t(out.size()) / rowBytes;
        for (int64_t r = 0; r < rows; ++r) {
          int64_t nb = (first + r) / kSize, kk = (first + r) % kSize;
          char *row = out.data() + r * rowBytes;
          int64_t column = nb * nr, end = std::min(column + nr, nSize);
          // The panel's columns, from each part they lie in.
          for (const Part &part : in) {
            int64_t from = std::max(column, part.first);
            int64_t to = std::min(end, part.first + part.columns);
            if (from < to)
              std::memcpy(row + (from - column) * elementBytes,
                          part.bytes + (kk * part.columns + from - part.first) *
                                           elementBytes,
                          (to - from) * elementBytes);
          }
          std::memset(row + (end - column) * elementBytes, 0,
                      (nr - (end - column)) * elementBytes);
        }
      });
  for (ElementsAttr part : parts)
    releaseConstantPages(part);
  auto packedType =
      RankedTensorType::get({panels, kSize, nr}, type.getElementType());
  return makeConstantLike(parts.front(), packedType, std::move(blob),
                          ".packed");
}

/// Whether packPanels can read data of `type`: a static [K, N] of
/// byte-sized scalars.
bool isPackable(Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  return ranked && ranked.hasStaticShape() && ranked.getRank() == 2 &&
         !ranked.getEncoding() && ranked.getElementType().isIntOrFloat() &&
         ranked.getElementType().getIntOrFloatBitWidth() % 8 == 0;
}

/// The constants of `parts` (getJoinedConstantSources) when every one has
/// plain bytes (empty otherwise): what packPanels can re-lay out.
SmallVector<SmallVector<ConstantSource>>
packableSources(ValueRange parts, const CallSites &calls) {
  if (!llvm::all_of(parts.getTypes(), isPackable))
    return {};
  SmallVector<SmallVector<ConstantSource>> paths =
      getJoinedConstantSources(parts, calls);
  for (ArrayRef<ConstantSource> path : paths)
    for (const ConstantSource &source : path)
      if (!getConstantBytes(source.value))
        return {};
  return paths;
}

/// The constants of `value` alone, as packableSources finds them.
SmallVector<ConstantSource> packableSources(Value value,
                                            const CallSites &calls) {
  return llvm::map_to_vector(
      packableSources(ValueRange(value), calls),
      [](ArrayRef<ConstantSource> path) { return path.front(); });
}

/// The values of `path`'s constants.
SmallVector<ElementsAttr> getValues(ArrayRef<ConstantSource> path) {
  return llvm::map_to_vector(
      path, [](const ConstantSource &source) { return source.value; });
}

/// `value` ([K, N], constants `sources`) in panels of `nr` columns: a new
/// constant, or a new argument each call passes its packed constant for.
Value packedConstant(RewriterBase &rewriter, Value value,
                     ArrayRef<ConstantSource> sources, int64_t nr) {
  return deriveConstant(rewriter, value, sources,
                        [&](const ConstantSource &source) {
                          return packPanels({source.value}, nr);
                        });
}

/// The values a weight joins: the inputs of a `tensor.concat` of [K, N_i]
/// parts along N (sits-fuse-sibling-matmuls' deferred join), or the weight.
SmallVector<Value> getWeightParts(Value weight) {
  auto concat = weight.getDefiningOp<tensor::ConcatOp>();
  if (concat && concat.getDim() == 1)
    return concat.getInputs();
  return {weight};
}

/// Erases `weight` once nothing uses it, and then the constants of its
/// `parts` (getWeightParts) whose `paths` they are.
void eraseWeightIfUnused(RewriterBase &rewriter, Value weight,
                         ArrayRef<Value> parts,
                         ArrayRef<SmallVector<ConstantSource>> paths) {
  auto column = [&](size_t index) {
    return llvm::map_to_vector(
        paths, [&](ArrayRef<ConstantSource> path) { return path[index]; });
  };
  if (!weight.use_empty())
    return;
  if (parts.size() == 1 && parts.front() == weight) {
    eraseIfUnused(rewriter, weight, column(0));
    return;
  }
  rewriter.eraseOp(weight.getDefiningOp());
  llvm::SmallPtrSet<Value, 4> erased;
  for (auto [index, part] : llvm::enumerate(parts))
    if (erased.insert(part).second)
      eraseIfUnused(rewriter, part, column(index));
}

/// Joins `concat`'s inputs, constants on every path (a join that was not
/// packed), into one constant at compile time rather than copying them on
/// every call. Fails, changing nothing, for anything else.
LogicalResult joinConstantParts(RewriterBase &rewriter, tensor::ConcatOp concat,
                                const CallSites &calls) {
  RankedTensorType type = concat.getResultType();
  SmallVector<Value> parts = concat.getInputs();
  if (!type.hasStaticShape() || type.getRank() > 2 || type.getEncoding() ||
      !type.getElementType().isIntOrFloat() ||
      type.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return failure();
  SmallVector<SmallVector<ConstantSource>> paths =
      getJoinedConstantSources(parts, calls);
  if (paths.empty() || !llvm::all_of(paths, [](ArrayRef<ConstantSource> path) {
        return llvm::all_of(path, [](const ConstantSource &source) {
          return getConstantBytes(source.value) ||
                 getSplatElementBytes(source.value);
        });
      }))
    return failure();
  rewriter.setInsertionPoint(concat);
  Value joined = deriveJoinedConstant(
      rewriter, parts, paths, [&](ArrayRef<ConstantSource> path) {
        return joinConstants(getValues(path), concat.getDim(), type);
      });
  Value result = concat.getResult();
  rewriter.replaceAllUsesWith(result, joined);
  eraseWeightIfUnused(rewriter, result, parts, paths);
  return success();
}

/// Replaces `op` (a contraction into C [M, N]) by `inputs` contracted over
/// `maps` / `iterators` into C viewed as [M, ceil(N/nr), nr], with `op`'s
/// scalar body (multiply-add, and any casts), then collapsed back. When nr
/// does not divide N, C is padded to whole panels (whose last columns the
/// zero weights leave unused) and its first N columns are the result.
void replaceWithPanelContraction(RewriterBase &rewriter, linalg::LinalgOp op,
                                 ValueRange inputs, ArrayRef<AffineMap> maps,
                                 ArrayRef<utils::IteratorType> iterators,
                                 int64_t nr) {
  Location loc = op.getLoc();
  rewriter.setInsertionPoint(op);
  Value init = op.getDpsInits()[0];
  auto resultType = cast<RankedTensorType>(init.getType());
  int64_t nSize = resultType.getDimSize(1);
  int64_t panels = llvm::divideCeil(nSize, nr);
  if (nSize % nr != 0) {
    Value zero = arith::ConstantOp::create(
        rewriter, loc, rewriter.getZeroAttr(resultType.getElementType()));
    SmallVector<OpFoldResult> low(2, rewriter.getIndexAttr(0));
    SmallVector<OpFoldResult> high = {
        rewriter.getIndexAttr(0), rewriter.getIndexAttr(panels * nr - nSize)};
    init = tensor::PadOp::create(
        rewriter, loc,
        RankedTensorType::get({resultType.getDimSize(0), panels * nr},
                              resultType.getElementType()),
        init, low, high, zero);
  }
  auto initType = cast<RankedTensorType>(init.getType());
  SmallVector<ReassociationIndices> split = {{0}, {1, 2}};
  auto expandedType = RankedTensorType::get(
      {initType.getDimSize(0), panels, nr}, initType.getElementType());
  Value expanded = tensor::ExpandShapeOp::create(
      rewriter, loc, expandedType, init, split,
      SmallVector<OpFoldResult>{tensor::getMixedSize(rewriter, loc, init, 0),
                                rewriter.getIndexAttr(panels),
                                rewriter.getIndexAttr(nr)});
  Block *body = op.getBlock();
  auto panelOp = linalg::GenericOp::create(
      rewriter, loc, expandedType, inputs, ValueRange{expanded}, maps,
      iterators, [&](OpBuilder &b, Location, ValueRange args) {
        IRMapping mapping;
        mapping.map(body->getArguments(), args);
        for (Operation &inner : *body)
          b.clone(inner, mapping);
      });
  Value result = tensor::CollapseShapeOp::create(rewriter, loc, initType,
                                                 panelOp.getResult(0), split);
  if (initType != resultType)
    result = tensor::ExtractSliceOp::create(
        rewriter, loc, resultType, result,
        SmallVector<OpFoldResult>(2, rewriter.getIndexAttr(0)),
        SmallVector<OpFoldResult>{tensor::getMixedSize(rewriter, loc, init, 0),
                                  rewriter.getIndexAttr(nSize)},
        SmallVector<OpFoldResult>(2, rewriter.getIndexAttr(1)));
  rewriter.replaceOp(op, result);
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
  SmallVector<Value> parts = getWeightParts(weight);
  SmallVector<SmallVector<ConstantSource>> paths =
      packableSources(parts, calls);
  auto initType = dyn_cast<RankedTensorType>(init->get().getType());
  if (paths.empty() || !initType || !isPackable(weight.getType()))
    return failure();
  // A weight of at most one panel is one already.
  int64_t nSize = cast<RankedTensorType>(weight.getType()).getDimSize(1);
  if (nSize <= nr)
    return failure();

  // The new contraction over (m, nb, j, k) on C viewed as [M, N/nr, nr].
  rewriter.setInsertionPoint(op);
  Value packed = deriveJoinedConstant(rewriter, parts, paths,
                                      [&](ArrayRef<ConstantSource> path) {
                                        return packPanels(getValues(path), nr);
                                      });
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  // Loops: 0 = m, 1 = nb, 2 = j, 3 = k.
  replaceWithPanelContraction(
      rewriter, op, {lhs->get(), packed},
      {AffineMap::get(4, 0, {d(0), d(3)}, ctx),
       AffineMap::get(4, 0, {d(1), d(3), d(2)}, ctx),
       AffineMap::get(4, 0, {d(0), d(1), d(2)}, ctx)},
      {utils::IteratorType::parallel, utils::IteratorType::parallel,
       utils::IteratorType::parallel, utils::IteratorType::reduction},
      nr);
  eraseWeightIfUnused(rewriter, weight, parts, paths);
  return success();
}

/// Rewrites the grouped quantized matmul of the SitsToLinalg lowering
///   D[g, w, f, n] = dequant(codes[g, w, n], scale[g, n])   (elementwise)
///   C[m, n] += X[m, g, w, f] * D[g, w, f, n]
/// with constant codes ([G * W, N] expanded) and scales to read both from
/// panels of `nr` columns, as packConstantRhs does for float weights: the
/// dequantization runs over (nb, g, w, f, j) and the contraction over
/// (m, nb, j, g, w, f) on C viewed as [M, N/nr, nr]. A register tile then
/// streams its codes and scales contiguously instead of one cache line per
/// code row at a stride of N bytes. Fails, changing nothing, for any other
/// form (zero points, transposed codes, run-time codes).
LogicalResult packGroupedRhs(RewriterBase &rewriter, linalg::GenericOp op,
                             int64_t nr, const CallSites &calls) {
  MLIRContext *ctx = op.getContext();
  auto d = [&](unsigned i) { return getAffineDimExpr(i, ctx); };
  auto map = [&](unsigned n, ArrayRef<unsigned> dims) {
    return AffineMap::get(
        n, 0, llvm::map_to_vector(dims, [&](unsigned i) { return d(i); }), ctx);
  };
  using utils::IteratorType;
  auto par = IteratorType::parallel, red = IteratorType::reduction;
  if (!op.hasPureTensorSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 ||
      op.getIteratorTypesArray() !=
          SmallVector<IteratorType>{par, par, red, red, red} ||
      op.getIndexingMapsArray() != SmallVector<AffineMap>{map(5, {0, 2, 3, 4}),
                                                          map(5, {2, 3, 4, 1}),
                                                          map(5, {0, 1})} ||
      llvm::any_of(op.getBody()->getOperations(),
                   [](Operation &o) { return isa<linalg::IndexOp>(o); }))
    return failure();
  auto dequant = op.getDpsInputs()[1].getDefiningOp<linalg::GenericOp>();
  if (!dequant || !dequant->hasOneUse() || !dequant.hasPureTensorSemantics() ||
      dequant.getNumDpsInputs() != 2 || dequant.getNumDpsInits() != 1 ||
      dequant.getNumParallelLoops() != 4 || dequant.getNumLoops() != 4 ||
      dequant.getIndexingMapsArray() !=
          SmallVector<AffineMap>{map(4, {0, 1, 3}), map(4, {0, 3}),
                                 AffineMap::getMultiDimIdentityMap(4, ctx)})
    return failure();
  // The field index (f) is the one position the body may read: n would
  // become nb * nr + j.
  bool readsColumn = false;
  dequant.getBody()->walk(
      [&](linalg::IndexOp index) { readsColumn |= index.getDim() == 3; });
  auto expand =
      dequant.getDpsInputs()[0].getDefiningOp<tensor::ExpandShapeOp>();
  if (readsColumn || !expand ||
      expand.getReassociationIndices() !=
          SmallVector<ReassociationIndices>{{0, 1}, {2}})
    return failure();
  Value codes = expand.getSrc(), scale = dequant.getDpsInputs()[1];
  SmallVector<ConstantSource> codeSources = packableSources(codes, calls);
  SmallVector<ConstantSource> scaleSources = packableSources(scale, calls);
  auto initType = dyn_cast<RankedTensorType>(op.getDpsInits()[0].getType());
  auto dequantType = cast<RankedTensorType>(dequant.getResult(0).getType());
  if (codeSources.empty() || scaleSources.empty() || !initType ||
      !dequantType.hasStaticShape())
    return failure();
  int64_t groups = dequantType.getDimSize(0), words = dequantType.getDimSize(1),
          fields = dequantType.getDimSize(2), n = dequantType.getDimSize(3);
  if (n % nr != 0 || n == nr)
    return failure();
  int64_t panels = n / nr;

  Location loc = op.getLoc();
  rewriter.setInsertionPoint(dequant);
  Value packedCodes = packedConstant(rewriter, codes, codeSources, nr);
  Value packedScale = packedConstant(rewriter, scale, scaleSources, nr);
  Type codeType = cast<RankedTensorType>(codes.getType()).getElementType();
  Value storage = tensor::ExpandShapeOp::create(
      rewriter, loc,
      RankedTensorType::get({panels, groups, words, nr}, codeType), packedCodes,
      SmallVector<ReassociationIndices>{{0}, {1, 2}, {3}});

  // Dequantization over (nb, g, w, f, j), the field index moved by one.
  Type element = dequantType.getElementType();
  Value empty = tensor::EmptyOp::create(
      rewriter, loc, SmallVector<int64_t>{panels, groups, words, fields, nr},
      element);
  Block *dequantBody = dequant.getBody();
  auto panelDequant = linalg::GenericOp::create(
      rewriter, loc, empty.getType(), ValueRange{storage, packedScale},
      ValueRange{empty},
      {map(5, {0, 1, 2, 4}), map(5, {0, 1, 4}),
       AffineMap::getMultiDimIdentityMap(5, ctx)},
      SmallVector<IteratorType>(5, par),
      [&](OpBuilder &b, Location, ValueRange args) {
        IRMapping mapping;
        mapping.map(dequantBody->getArguments(), args);
        for (Operation &inner : *dequantBody) {
          if (auto index = dyn_cast<linalg::IndexOp>(inner)) {
            mapping.map(
                index.getResult(),
                linalg::IndexOp::create(b, index.getLoc(), index.getDim() + 1));
            continue;
          }
          b.clone(inner, mapping);
        }
      });

  // The contraction over (m, nb, j, g, w, f) on C as [M, N/nr, nr].
  replaceWithPanelContraction(
      rewriter, op, {op.getDpsInputs()[0], panelDequant.getResult(0)},
      {map(6, {0, 3, 4, 5}), map(6, {1, 3, 4, 5, 2}), map(6, {0, 1, 2})},
      {par, par, par, red, red, red}, nr);
  rewriter.eraseOp(dequant);
  if (expand->use_empty())
    rewriter.eraseOp(expand);
  eraseIfUnused(rewriter, codes, codeSources);
  eraseIfUnused(rewriter, scale, scaleSources);
  return success();
}

/// INT8 codes (`i4`: INT4 codes packed two per byte along K, the even row
/// in the low nibble) `value` [K or K/2, N] in the "qdot_i8" / "qdot_i4"
/// layout of `packedType` (Ukernels.h): each 64-byte unit (nb, o) holds 4
/// (8) consecutive codes of 16 columns, biased to unsigned.
TypedAttr packQDot(ElementsAttr value, bool i4, int64_t n,
                   RankedTensorType packedType) {
  ArrayRef<char> bytes = *getConstantBytes(value);
  int64_t rows = int64_t(bytes.size()) / n;
  // 64-byte units per column block: K/8 (INT4, two codes a byte) or K/4.
  int64_t quads = rows / 4;
  auto byteAt = [&](int64_t row, int64_t column) {
    return static_cast<uint8_t>(bytes[row * n + column]);
  };
  AsmResourceBlob blob = makeFinalWeightBlob(
      packedType.getContext(), bytes.size(), 64,
      [&](size_t begin, MutableArrayRef<char> out) {
        int64_t first = int64_t(begin) / 64;
        for (int64_t u = 0; u < int64_t(out.size()) / 64; ++u) {
          int64_t nb = (first + u) / quads, o = (first + u) % quads;
          char *unit = out.data() + u * 64;
          for (int64_t j = 0; j < 16; ++j)
            for (int64_t b = 0; b < 4; ++b) {
              int64_t column = nb * 16 + j;
              uint8_t code;
              if (i4) {
                // Codes 8o + b and 8o + 4 + b: rows 4o + b/2 and
                // 4o + 2 + b/2, nibble b % 2.
                auto nibble = [&](int64_t row) {
                  return (byteAt(row, column) >> (4 * (b % 2))) & 0xF;
                };
                code = uint8_t((nibble(4 * o + b / 2) ^ 8) |
                               ((nibble(4 * o + 2 + b / 2) ^ 8) << 4));
              } else {
                code = byteAt(4 * o + b, column) ^ 0x80;
              }
              unit[j * 4 + b] = static_cast<char>(code);
            }
        }
      });
  releaseConstantPages(value);
  return makeConstantLike(value, packedType, std::move(blob), ".qdot");
}

/// Computes a re-layout of weight codes for a runtime kernel
/// (kWeightLayoutAttr, built by lowerQMatmulToIntegerDot: its input is the
/// codes [K or K/2, N] viewed with N split last as [..., N/16, 16]) at
/// compile time, when the codes are constant (through reshapes, which keep
/// the bytes in place). Fails, changing nothing, otherwise.
LogicalResult foldWeightLayout(RewriterBase &rewriter, linalg::GenericOp op,
                               const CallSites &calls) {
  auto layout = op->getAttrOfType<StringAttr>(kWeightLayoutAttr);
  if (!layout ||
      (layout.getValue() != kQDotI4 && layout.getValue() != kQDotI8) ||
      !op.hasPureTensorSemantics() || op.getNumDpsInputs() != 1 ||
      op->getNumResults() != 1)
    return failure();
  bool i4 = layout.getValue() == kQDotI4;
  Value view = op.getDpsInputs()[0];
  auto viewType = dyn_cast<RankedTensorType>(view.getType());
  auto packedType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
  if (!viewType || !viewType.hasStaticShape() || viewType.getRank() < 2 ||
      !packedType || !packedType.hasStaticShape() ||
      !viewType.getElementType().isInteger(8) ||
      packedType.getElementType() != viewType.getElementType() ||
      packedType.getNumElements() != viewType.getNumElements())
    return failure();
  int64_t n = viewType.getDimSize(viewType.getRank() - 2) *
              viewType.getDimSize(viewType.getRank() - 1);
  int64_t rows = viewType.getNumElements() / n;
  if (n % 16 != 0 || rows % 4 != 0)
    return failure();
  Value codes = view;
  while (Operation *reshape = codes.getDefiningOp()) {
    if (auto expand = dyn_cast<tensor::ExpandShapeOp>(reshape))
      codes = expand.getSrc();
    else if (auto collapse = dyn_cast<tensor::CollapseShapeOp>(reshape))
      codes = collapse.getSrc();
    else
      break;
  }
  SmallVector<ConstantSource> sources = getConstantSources(codes, calls);
  auto codesType = dyn_cast<RankedTensorType>(codes.getType());
  if (sources.empty() || !codesType || codesType.getEncoding() ||
      !llvm::all_of(sources, [](const ConstantSource &source) {
        return getConstantBytes(source.value).has_value();
      }))
    return failure();
  rewriter.setInsertionPoint(op);
  Value packed = deriveConstant(
      rewriter, codes, sources, [&](const ConstantSource &source) {
        return packQDot(source.value, i4, n, packedType);
      });
  rewriter.replaceOp(op, packed);
  // The reshapes between the codes and the re-layout, then the codes.
  for (Value v = view; v != codes;) {
    Operation *reshape = v.getDefiningOp();
    v = reshape->getOperand(0);
    if (reshape->use_empty())
      rewriter.eraseOp(reshape);
  }
  eraseIfUnused(rewriter, codes, sources);
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
    for (linalg::LinalgOp op : candidates) {
      auto generic = dyn_cast<linalg::GenericOp>(op.getOperation());
      if ((generic && succeeded(foldWeightLayout(rewriter, generic, calls))) ||
          succeeded(packConstantRhs(rewriter, op, config.nr, calls)) ||
          (generic &&
           succeeded(packGroupedRhs(rewriter, generic, config.nr, calls))))
        ++numPacked;
    }
    // Weights joined for packing that were not packed are joined now.
    SmallVector<tensor::ConcatOp> joins;
    getOperation().walk([&](tensor::ConcatOp op) { joins.push_back(op); });
    for (tensor::ConcatOp op : joins)
      if (succeeded(joinConstantParts(rewriter, op, calls)))
        ++numJoined;
  }
};

} // namespace
