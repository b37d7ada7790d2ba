//===- Heads.cpp - Attention head pruning ---------------------------------===//
//
// Heads of `sits.attention` whose output-projection rows or value columns
// are (near) zero leave the projections, the attention and the output
// projection; grouped-query attention keeps its groups equal.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "passes/Transforms/Prune/WeightValues.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/Sequence.h"

#include <cmath>

using namespace mlir;
using namespace mlir::sits;
using namespace mlir::sits::prune;

//===----------------------------------------------------------------------===//
// Attention heads
//===----------------------------------------------------------------------===//

namespace {

/// `[B, T, H*D]` columns of a projection -> `[B, H, T, D]` heads:
/// (matmul | extract_slice of a matmul's columns) -> expand_shape -> transpose,
/// which the attention reads directly or after a KV cache: `tensor.concat`
/// along the sequence of past heads and these.
struct HeadProjection {
  Value read; // what the attention reads: `heads` or the cache
  Value heads;
  tensor::ConcatOp cache; // null without a KV cache
  Value past;
  linalg::TransposeOp transpose;
  tensor::ExpandShapeOp expand;
  tensor::ExtractSliceOp slice; // null when the matmul's result is used whole
  MatmulOp source;
  ElementsAttr weight, bias;
  int64_t outDim; // weight dimension of the columns
  int64_t offset; // first column in the source
  int64_t numHeads, headDim;
};

} // namespace

static bool isHeadTranspose(linalg::TransposeOp op) {
  return op && op.getPermutation() == ArrayRef<int64_t>{0, 2, 1, 3};
}

static bool isSplitLastDim(ArrayRef<ReassociationIndices> reassociation) {
  return reassociation.size() == 3 &&
         reassociation[0] == ReassociationIndices{0} &&
         reassociation[1] == ReassociationIndices{1} &&
         reassociation[2] == ReassociationIndices{2, 3};
}

static std::optional<HeadProjection> matchHeadProjection(Value read) {
  HeadProjection p;
  p.read = read;
  Value heads = read;
  if ((p.cache = read.getDefiningOp<tensor::ConcatOp>())) {
    if (p.cache.getDim() != 2 || p.cache.getInputs().size() != 2 ||
        !p.cache.getType().hasStaticShape())
      return std::nullopt;
    p.past = p.cache.getInputs()[0];
    heads = p.cache.getInputs()[1];
    if (!heads.hasOneUse())
      return std::nullopt;
  }
  p.heads = heads;
  p.transpose = heads.getDefiningOp<linalg::TransposeOp>();
  if (!isHeadTranspose(p.transpose))
    return std::nullopt;
  p.expand = p.transpose.getInput().getDefiningOp<tensor::ExpandShapeOp>();
  if (!p.expand || !p.expand->hasOneUse() ||
      !p.expand.getResultType().hasStaticShape() ||
      !isSplitLastDim(p.expand.getReassociationIndices()))
    return std::nullopt;
  p.numHeads = p.expand.getResultType().getDimSize(2);
  p.headDim = p.expand.getResultType().getDimSize(3);
  Value columns = p.expand.getSrc();
  p.offset = 0;
  if ((p.slice = columns.getDefiningOp<tensor::ExtractSliceOp>())) {
    ArrayRef<int64_t> offsets = p.slice.getStaticOffsets();
    if (!p.slice->hasOneUse() || p.slice.getSourceType().getRank() != 3 ||
        !p.slice.getSourceType().hasStaticShape() ||
        p.slice.getType().getRank() != 3 || offsets[0] != 0 ||
        offsets[1] != 0 || ShapedType::isDynamic(offsets[2]) ||
        !llvm::all_of(p.slice.getStaticStrides(),
                      [](int64_t s) { return s == 1; }) ||
        p.slice.getStaticSizes().take_front(2) !=
            p.slice.getSourceType().getShape().take_front(2))
      return std::nullopt;
    p.offset = offsets[2];
    columns = p.slice.getSource();
  }
  p.source = columns.getDefiningOp<MatmulOp>();
  if (!p.source || p.source.getTransposeLhs() ||
      p.source.getActivation() != ActivationKind::None)
    return std::nullopt;
  p.weight = getConstantElements(p.source.getRhs());
  p.bias = p.source.getBias() ? getConstantElements(p.source.getBias())
                              : ElementsAttr();
  if (!p.weight || cast<ShapedType>(p.weight.getType()).getRank() != 2 ||
      (p.source.getBias() && !p.bias))
    return std::nullopt;
  p.outDim = p.source.getTransposeRhs() ? 0 : 1;
  return p;
}

/// Max-abs of each head's columns in a projection's weight and bias.
static std::optional<SmallVector<double>>
headMagnitudes(const HeadProjection &p) {
  std::optional<std::vector<double>> w = readFloats(p.weight);
  std::optional<std::vector<double>> b;
  if (p.bias && !(b = readFloats(p.bias)))
    return std::nullopt;
  if (!w)
    return std::nullopt;
  auto type = cast<RankedTensorType>(p.weight.getType());
  SmallVector<double> columns = maxAbsAlong(*w, type.getShape(), p.outDim);
  SmallVector<double> result(p.numHeads, 0.0);
  for (int64_t h = 0; h < p.numHeads; ++h)
    for (int64_t d = 0; d < p.headDim; ++d) {
      int64_t column = p.offset + h * p.headDim + d;
      result[h] = std::max(result[h], columns[column]);
      if (b)
        result[h] = std::max(result[h], std::fabs((*b)[column]));
    }
  return result;
}

/// Runs of consecutive equal values of `keep`: (first, count, value).
static SmallVector<std::tuple<int64_t, int64_t, bool>>
getRuns(ArrayRef<bool> keep) {
  SmallVector<std::tuple<int64_t, int64_t, bool>> runs;
  for (int64_t h = 0, e = keep.size(); h < e; ++h) {
    if (!runs.empty() && std::get<2>(runs.back()) == keep[h])
      ++std::get<1>(runs.back());
    else
      runs.push_back({h, 1, keep[h]});
  }
  return runs;
}

static Value sliceHeads(RewriterBase &rewriter, Location loc, Value heads,
                        int64_t first, int64_t count) {
  auto type = cast<RankedTensorType>(heads.getType());
  if (first == 0 && count == type.getDimSize(1))
    return heads;
  SmallVector<OpFoldResult> offsets(4, rewriter.getIndexAttr(0)),
      strides(4, rewriter.getIndexAttr(1)), sizes;
  offsets[1] = rewriter.getIndexAttr(first);
  for (int64_t d = 0; d < 4; ++d)
    sizes.push_back(rewriter.getIndexAttr(d == 1 ? count : type.getDimSize(d)));
  return tensor::ExtractSliceOp::create(rewriter, loc, heads, offsets, sizes,
                                        strides);
}

static Value concatHeads(RewriterBase &rewriter, Location loc,
                         ValueRange pieces) {
  return pieces.size() == 1
             ? pieces[0]
             : tensor::ConcatOp::create(rewriter, loc, 1, pieces).getResult();
}

/// The heads `live` of `heads` ([B, H, T, D]), in order.
static Value selectHeads(RewriterBase &rewriter, Location loc, Value heads,
                         ArrayRef<bool> live) {
  SmallVector<Value> pieces;
  for (auto [first, count, keep] : getRuns(live))
    if (keep)
      pieces.push_back(sliceHeads(rewriter, loc, heads, first, count));
  return concatHeads(rewriter, loc, pieces);
}

/// All heads, from `liveHeads` (the live ones, in order) and zeros.
static Value reconstructHeads(RewriterBase &rewriter, Location loc,
                              Value liveHeads, ArrayRef<bool> live) {
  auto type = cast<RankedTensorType>(liveHeads.getType());
  SmallVector<Value> pieces;
  int64_t next = 0;
  for (auto [first, count, keep] : getRuns(live)) {
    if (keep) {
      pieces.push_back(sliceHeads(rewriter, loc, liveHeads, next, count));
      next += count;
      continue;
    }
    auto zerosType = withDim(type, 1, count);
    pieces.push_back(createConstant(
        rewriter, loc,
        DenseElementsAttr::get(zerosType,
                               rewriter.getZeroAttr(type.getElementType()))));
  }
  // Whole-tensor slices of the live heads fold away in canonicalization.
  return concatHeads(rewriter, loc, pieces);
}

FailureOr<PrunedStructure>
mlir::sits::pruneAttentionHeads(RewriterBase &rewriter, AttentionOp attention,
                                double threshold) {
  // The output side: [B, H, T, Dv] -> transpose -> [B, T, H*Dv] -> matmul.
  Value result = attention.getResult();
  auto resultType = cast<RankedTensorType>(result.getType());
  if (!resultType.hasStaticShape() || resultType.getRank() != 4)
    return rewriter.notifyMatchFailure(attention, "not static [B, H, T, D]");
  int64_t numHeads = resultType.getDimSize(1),
          valueDim = resultType.getDimSize(3);
  // Grouped-query attention: query head h reads key/value head h / group.
  int64_t numKVHeads =
      cast<ShapedType>(attention.getKey().getType()).getDimSize(1);
  if (ShapedType::isDynamic(numKVHeads) || numKVHeads <= 0 ||
      numHeads % numKVHeads)
    return rewriter.notifyMatchFailure(
        attention, "key/value heads do not divide query heads");
  int64_t group = numHeads / numKVHeads;
  linalg::TransposeOp outTranspose;
  tensor::CollapseShapeOp collapse;
  MatmulOp projection;
  ElementsAttr projectionWeight;
  if (result.hasOneUse() &&
      isHeadTranspose(outTranspose = dyn_cast<linalg::TransposeOp>(
                          *result.getUsers().begin())) &&
      outTranspose->getResult(0).hasOneUse() &&
      (collapse = dyn_cast<tensor::CollapseShapeOp>(
           *outTranspose->getResult(0).getUsers().begin())) &&
      isSplitLastDim(collapse.getReassociationIndices()) &&
      collapse->hasOneUse() &&
      (projection = dyn_cast<MatmulOp>(*collapse->getUsers().begin())) &&
      projection.getLhs() == collapse.getResult() &&
      !projection.getTransposeLhs())
    projectionWeight = getConstantElements(projection.getRhs());
  if (projectionWeight &&
      cast<ShapedType>(projectionWeight.getType()).getRank() != 2)
    projectionWeight = {};

  std::optional<HeadProjection> query =
      matchHeadProjection(attention.getQuery());
  std::optional<HeadProjection> key = matchHeadProjection(attention.getKey());
  std::optional<HeadProjection> value =
      matchHeadProjection(attention.getValue());

  // Heads contributing nothing: zero rows of the output projection, or zero
  // value columns and bias (softmax-weighted averages of zero vectors).
  // `magnitude[h]` bounds what head h contributes (the smaller of its
  // output rows' and its value head's max-abs).
  SmallVector<bool> live(numHeads, true);
  SmallVector<double> magnitude(numHeads,
                                std::numeric_limits<double>::infinity());
  std::optional<std::vector<double>> wo;
  int64_t projectionInDim = projection && projection.getTransposeRhs() ? 1 : 0;
  if (projectionWeight && (wo = readFloats(projectionWeight))) {
    auto type = cast<RankedTensorType>(projectionWeight.getType());
    SmallVector<double> rows =
        maxAbsAlong(*wo, type.getShape(), projectionInDim);
    for (int64_t h = 0; h < numHeads; ++h)
      magnitude[h] = *std::max_element(rows.begin() + h * valueDim,
                                       rows.begin() + (h + 1) * valueDim);
  }
  std::optional<SmallVector<double>> valueMagnitudes;
  if (value && value->numHeads == numKVHeads &&
      (valueMagnitudes = headMagnitudes(*value)))
    for (int64_t h = 0; h < numHeads; ++h)
      magnitude[h] = std::min(magnitude[h], (*valueMagnitudes)[h / group]);
  for (int64_t h = 0; h < numHeads; ++h)
    if (magnitude[h] <= threshold)
      live[h] = false;
  int64_t numLive = llvm::count(live, true);
  int64_t numDead = numHeads - numLive;
  if (numLive == numHeads)
    return rewriter.notifyMatchFailure(attention, "no prunable head");

  auto remark = [&](StringRef why) {
    attention.emitRemark() << numDead << " of " << numHeads
                           << " heads contribute nothing but are not pruned: "
                           << why;
    return failure();
  };
  if (numLive == 0)
    return remark("the attention would have no head left");
  if (!projectionWeight || !wo)
    return remark(
        "the output is not read by a recognised output projection "
        "(transpose, collapse_shape, sits.matmul with constant weights)");
  if (!query || !key || !value)
    return remark("the query, key and value are not recognised head "
                  "projections (sits.matmul, extract_slice, expand_shape, "
                  "transpose)");
  if (query->numHeads != numHeads || key->numHeads != numKVHeads ||
      value->numHeads != numKVHeads)
    return rewriter.notifyMatchFailure(
        attention, "projections disagree with the head counts");
  if (Value mask = attention.getMask()) {
    auto maskType = cast<ShapedType>(mask.getType());
    if (maskType.getRank() >= 3 &&
        maskType.getDimSize(maskType.getRank() - 3) != 1)
      return remark("the mask differs per head");
  }
  SmallVector<HeadProjection *> projections = {&*query, &*key, &*value};
  // A cache that is also returned stays whole; the attention would read a
  // copy of its live heads, and copying the past costs more than the pruned
  // weights save (gpt_decode on a CPU: 18% slower).
  for (HeadProjection *p : projections)
    if (p->cache && !p->read.hasOneUse())
      return remark("the keys or values are read from a KV cache that is also "
                    "returned, and selecting their live heads would copy it");
  if (query->read == key->read || key->read == value->read ||
      query->read == value->read)
    return remark("query, key and value share a tensor");

  // Every key/value head that keeps a query head must keep the same number
  // of them: the new attention maps query head h to key/value head
  // h / (Hq' / Hkv'), which is the old mapping only when the groups stay
  // equal (with MHA, groups of one, this always holds). Groups keep as many
  // heads as the fullest one, putting back the prunable heads contributing
  // the most (exactly zero ones change nothing); groups left without a head
  // go with their key/value head.
  SmallVector<int64_t> groupLive(numKVHeads, 0);
  for (int64_t h = 0; h < numHeads; ++h)
    groupLive[h / group] += live[h];
  int64_t keepPerGroup = *llvm::max_element(groupLive);
  int64_t putBack = 0;
  for (int64_t j = 0; j < numKVHeads; ++j) {
    if (groupLive[j] == 0 || groupLive[j] == keepPerGroup)
      continue;
    SmallVector<int64_t> prunable;
    for (int64_t h = j * group; h < (j + 1) * group; ++h)
      if (!live[h])
        prunable.push_back(h);
    llvm::stable_sort(prunable, [&](int64_t a, int64_t b) {
      return magnitude[a] > magnitude[b];
    });
    for (int64_t h : ArrayRef(prunable).take_front(keepPerGroup - groupLive[j]))
      live[h] = true;
    putBack += keepPerGroup - groupLive[j];
  }
  numLive += putBack;
  if (numLive == numHeads)
    return remark("removing them would leave key/value heads with different "
                  "numbers of query heads (query head h reads key/value head "
                  "h / (Hq / Hkv))");
  SmallVector<bool> kvLive(numKVHeads);
  for (int64_t j = 0; j < numKVHeads; ++j)
    kvLive[j] = groupLive[j] > 0;
  int64_t numKVLive = llvm::count(kvLive, true);
  // The heads kept of projection i (query, key, value).
  auto liveOf = [&](unsigned i) -> ArrayRef<bool> {
    return i == 0 ? live : kvLive;
  };
  auto numLiveOf = [&](unsigned i) { return i == 0 ? numLive : numKVLive; };

  // Per projection: drop the pruned heads' columns ("shrink") unless other
  // users of its per-head tensor need them; they can be rebuilt as zeros
  // when they are exactly zero.
  SmallVector<bool> shrink;
  for (auto [i, p] : llvm::enumerate(projections)) {
    ArrayRef<bool> kept = liveOf(i);
    bool othersUsers = llvm::any_of(p->read.getUsers(), [&](Operation *user) {
      return user != attention.getOperation();
    });
    bool exactZero = false;
    if (othersUsers) {
      std::optional<SmallVector<double>> magnitudes = headMagnitudes(*p);
      exactZero =
          magnitudes &&
          llvm::all_of(llvm::seq<int64_t>(0, p->numHeads), [&](int64_t h) {
            return kept[h] || (*magnitudes)[h] == 0.0;
          });
    }
    shrink.push_back(!othersUsers || exactZero);
  }
  // A source matmul is rebuilt with fewer columns only when all its users
  // are projections of this attention.
  llvm::MapVector<Operation *, SmallVector<unsigned>> sources;
  for (auto [i, p] : llvm::enumerate(projections))
    sources[p->source].push_back(i);
  llvm::DenseSet<Operation *> rebuilt;
  for (auto &[source, members] : sources) {
    bool all = llvm::all_of(source->getUsers(), [&](Operation *user) {
      return llvm::any_of(members, [&](unsigned i) {
        return user == projections[i]->slice.getOperation() ||
               user == projections[i]->expand.getOperation();
      });
    });
    // Rebuilding a source whose weights another op keeps would add bytes.
    auto matmul = cast<MatmulOp>(source);
    if (all && isOwnedConstant(matmul.getRhs()) &&
        (!matmul.getBias() || isOwnedConstant(matmul.getBias())))
      rebuilt.insert(source);
  }

  PrunedStructure pruned;
  pruned.total = numHeads;
  pruned.kvTotal = numKVHeads;
  pruned.keptForGroups = putBack;
  for (int64_t h = 0; h < numHeads; ++h)
    if (!live[h])
      pruned.removed.push_back(h);
  for (int64_t j = 0; j < numKVHeads; ++j)
    if (!kvLive[j])
      pruned.kvRemoved.push_back(j);

  // Everything that can fail comes before the first change to the IR.
  SmallVector<int64_t> rows;
  for (int64_t h = 0; h < numHeads; ++h)
    if (live[h])
      for (int64_t d = 0; d < valueDim; ++d)
        rows.push_back(h * valueDim + d);
  FailureOr<TypedAttr> newWo =
      gatherConstant(projectionWeight, projectionInDim, rows);
  if (failed(newWo))
    return rewriter.notifyMatchFailure(attention,
                                       "weights are not plain dense data");
  pruned.bytesRemoved += getStorageBytes(projectionWeight) -
                         getStorageBytes(cast<ElementsAttr>(*newWo));

  Location loc = attention.getLoc();
  SmallVector<Value> liveInputs(3);
  for (auto &[sourceOp, members] : sources) {
    auto source = cast<MatmulOp>(sourceOp);
    if (!rebuilt.contains(sourceOp)) {
      // Keep the columns; the attention reads the live heads out of them.
      rewriter.setInsertionPoint(attention);
      for (unsigned i : members)
        liveInputs[i] =
            selectHeads(rewriter, loc, projections[i]->read, liveOf(i));
      continue;
    }
    // Columns still needed, projection by projection.
    HeadProjection &first = *projections[members.front()];
    SmallVector<int64_t> columns;
    SmallVector<int64_t> newOffset(3, 0);
    SmallVector<unsigned> byOffset(members);
    llvm::sort(byOffset, [&](unsigned a, unsigned b) {
      return projections[a]->offset < projections[b]->offset;
    });
    for (unsigned i : byOffset) {
      HeadProjection &p = *projections[i];
      newOffset[i] = columns.size();
      for (int64_t h = 0; h < p.numHeads; ++h)
        if (liveOf(i)[h] || !shrink[i])
          for (int64_t d = 0; d < p.headDim; ++d)
            columns.push_back(p.offset + h * p.headDim + d);
    }
    FailureOr<TypedAttr> weight =
        gatherConstant(first.weight, first.outDim, columns);
    FailureOr<TypedAttr> bias = first.bias
                                    ? gatherConstant(first.bias, 0, columns)
                                    : FailureOr<TypedAttr>(TypedAttr());
    if (failed(weight) || failed(bias))
      return rewriter.notifyMatchFailure(attention,
                                         "weights are not plain dense data");
    pruned.bytesRemoved += getStorageBytes(first.weight) -
                           getStorageBytes(cast<ElementsAttr>(*weight));
    if (first.bias)
      pruned.bytesRemoved += getStorageBytes(first.bias) -
                             getStorageBytes(cast<ElementsAttr>(*bias));

    rewriter.setInsertionPoint(source);
    Location sourceLoc = source.getLoc();
    Value weightConstant = createConstant(rewriter, sourceLoc, *weight);
    Value biasConstant =
        *bias ? createConstant(rewriter, sourceLoc, *bias) : Value();
    auto newSource = cast<MatmulOp>(rewriter.clone(*source));
    newSource.getRhsMutable().assign(weightConstant);
    if (biasConstant)
      newSource.getBiasMutable().assign(biasConstant);
    auto columnsType = withDim(source.getType(), 2, columns.size());
    newSource->getResult(0).setType(columnsType);
    for (unsigned i : members) {
      HeadProjection &p = *projections[i];
      int64_t count = shrink[i] ? numLiveOf(i) : p.numHeads;
      Value slice = newSource.getResult();
      if (count * p.headDim != int64_t(columns.size())) {
        SmallVector<OpFoldResult> offsets = {
            rewriter.getIndexAttr(0), rewriter.getIndexAttr(0),
            rewriter.getIndexAttr(newOffset[i])};
        SmallVector<OpFoldResult> sizes = {
            rewriter.getIndexAttr(columnsType.getDimSize(0)),
            rewriter.getIndexAttr(columnsType.getDimSize(1)),
            rewriter.getIndexAttr(count * p.headDim)};
        SmallVector<OpFoldResult> strides(3, rewriter.getIndexAttr(1));
        slice = tensor::ExtractSliceOp::create(rewriter, p.expand.getLoc(),
                                               slice, offsets, sizes, strides);
      }
      auto expandedType = withDim(p.expand.getResultType(), 2, count);
      Value expanded = tensor::ExpandShapeOp::create(
          rewriter, p.expand.getLoc(), expandedType, slice,
          p.expand.getReassociationIndices());
      auto headsType = withDim(p.heads.getType(), 1, count);
      Value init = tensor::EmptyOp::create(rewriter, p.transpose.getLoc(),
                                           headsType.getShape(),
                                           headsType.getElementType());
      Value heads =
          linalg::TransposeOp::create(rewriter, p.transpose.getLoc(), expanded,
                                      init, ArrayRef<int64_t>{0, 2, 1, 3})
              ->getResult(0);
      bool otherUsers = llvm::any_of(p.read.getUsers(), [&](Operation *user) {
        return user != attention.getOperation();
      });
      Value all = heads;
      if (shrink[i] && otherUsers)
        all =
            reconstructHeads(rewriter, p.transpose.getLoc(), heads, liveOf(i));
      {
        // The attention reads the live heads, after the live heads of the
        // cache when there is one.
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPoint(attention);
        Value liveHeads =
            shrink[i] ? heads : selectHeads(rewriter, loc, heads, liveOf(i));
        liveInputs[i] = liveHeads;
        if (p.cache)
          liveInputs[i] = tensor::ConcatOp::create(
              rewriter, p.cache.getLoc(), 2,
              ValueRange{selectHeads(rewriter, loc, p.past, liveOf(i)),
                         liveHeads});
      }
      // Everyone else (returned keys and values) sees every head, as before.
      // (A cache with other users was refused above.)
      if (otherUsers)
        rewriter.replaceUsesWithIf(p.read, all, [&](OpOperand &use) {
          return use.getOwner() != attention.getOperation();
        });
    }
  }

  // The attention over the live heads, and the output projection without
  // the pruned heads' rows.
  rewriter.setInsertionPoint(attention);
  auto newAttention = cast<AttentionOp>(rewriter.clone(*attention));
  newAttention.getQueryMutable().assign(liveInputs[0]);
  newAttention.getKeyMutable().assign(liveInputs[1]);
  newAttention.getValueMutable().assign(liveInputs[2]);
  newAttention->getResult(0).setType(withDim(resultType, 1, numLive));
  auto transposedType =
      withDim(outTranspose->getResult(0).getType(), 2, numLive);
  Value init = tensor::EmptyOp::create(rewriter, outTranspose.getLoc(),
                                       transposedType.getShape(),
                                       transposedType.getElementType());
  Value transposed =
      linalg::TransposeOp::create(rewriter, outTranspose.getLoc(),
                                  newAttention.getResult(), init,
                                  ArrayRef<int64_t>{0, 2, 1, 3})
          ->getResult(0);
  Value collapsed =
      tensor::CollapseShapeOp::create(rewriter, collapse.getLoc(), transposed,
                                      collapse.getReassociationIndices());
  rewriter.setInsertionPoint(projection);
  Value woConstant = createConstant(rewriter, projection.getLoc(), *newWo);
  rewriter.modifyOpInPlace(projection, [&] {
    projection.getLhsMutable().assign(collapsed);
    projection.getRhsMutable().assign(woConstant);
  });
  return pruned;
}
