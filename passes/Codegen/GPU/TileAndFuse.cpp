//===- TileAndFuse.cpp - Distribute fusion groups over blocks and threads -===//
//
// Level 1: each fusion group's root is tiled with scf.forall over thread
// blocks and the group is fused into every block. Level 2: inside a block,
// ops are tiled again with scf.forall over threads, last op first, each
// thread loop taking the producers only its threads read. Level 3: inside a
// thread, a contraction steps its reduction BK at a time and a reduction
// steps a vector at a time.
//
// Every tile size divides its loop's range, so every tile has a static
// shape: thread loops then have static trip counts (the block size), and
// shared-memory staging and vectorization need static shapes. A dynamic
// parallel loop (the tokens of a decoder's batch) is tiled by one: a block
// per index, each block's tile as static as the rest of the op. A dynamic
// reduction (attention over the context) is not tiled: each thread runs it
// whole.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "passes/Codegen/Common/FusionGroups.h"

#include "dialects/Sits/IR/SitsDialect.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Iterators.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUTILEANDFUSE
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;
using namespace mlir::sits::codegen;
using mlir::sits::gpu::GpuTilingConfig;

//===----------------------------------------------------------------------===//
// Target facts
//===----------------------------------------------------------------------===//

const sits::target::TargetInfo *sits::gpu::getGpuTarget(Operation *op) {
  const target::TargetInfo *info = sits::getModuleTarget(op);
  return info && info->vendor != target::Vendor::Cpu ? info : nullptr;
}

GpuTilingConfig sits::gpu::getGpuTilingConfig(Operation *op,
                                              int64_t maxThreads) {
  GpuTilingConfig config;
  // Without a target (a bare lit test), an H100-like default.
  const target::TargetInfo *info = getGpuTarget(op);
  int64_t units = info ? info->computeUnits : 132;
  config.warpSize = info ? info->simdWidth : 32;
  if (maxThreads > 0)
    config.maxThreads = maxThreads;
  // Two blocks per SM: one can wait on memory while the other computes.
  config.wantedBlocks = 2 * units;
  // 64x64 outputs per block and 4x4 per thread: 256 threads, 16
  // accumulators each, and a 64x16 + 16x64 fp32 staging tile (8 KiB).
  config.bm = 64;
  config.bn = 64;
  config.tm = 4;
  config.tn = 4;
  config.bk = 16;
  config.vector = 4;
  // Static shared memory is limited to 48 KiB per block on every NVIDIA
  // GPU; more needs an opt-in at launch that the runtime ABI does not have.
  // An AMD workgroup may allocate the whole LDS of its CU.
  double perUnitKB = info ? info->sharedMemoryPerUnitKB : 228;
  int64_t perUnitBytes = int64_t(perUnitKB * 1024);
  config.sharedMemoryBytes = info && info->vendor == target::Vendor::Amd
                                 ? perUnitBytes
                                 : std::min<int64_t>(48 * 1024, perUnitBytes);
  config.mmaSync = !info || sits::gpu::hasMmaSync(*info);
  return config;
}

bool sits::gpu::hasMmaSync(const target::TargetInfo &info) {
  // mma.sync m16n8k16 for f16/bf16 exists from sm_80 (Ampere) on.
  unsigned arch = 0;
  return info.vendor == target::Vendor::Nvidia &&
         info.chip.starts_with("sm_") &&
         !info.chip.drop_front(3).getAsInteger(10, arch) && arch >= 80;
}

int64_t sits::gpu::largestDivisorAtMost(int64_t n, int64_t bound) {
  if (n <= 0 || bound <= 0)
    return 1;
  for (int64_t d = std::min(n, bound); d > 1; --d)
    if (n % d == 0)
      return d;
  return 1;
}

namespace {

using sits::gpu::largestDivisorAtMost;

//===----------------------------------------------------------------------===//
// Tensor cores
//===----------------------------------------------------------------------===//

/// The k of the tensor core operation for contraction `op`, or 0 when the
/// tensor cores do not compute it: one m, n and k loop (and batch loops), f16
/// operands accumulating in f32 (k = 16), or f32 ones when TF32 is allowed
/// (k = 8), with a body that multiplies and adds (extending the operands).
/// (bf16 has mma.sync too, but upstream's vector-to-nvgpu conversion has no
/// bf16 fragments.)
int64_t mmaK(linalg::LinalgOp op, const GpuTilingConfig &config) {
  if (!config.mmaSync || !isContraction(op) || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || !linalg::isaContractionOpInterface(op))
    return 0;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims) || dims->m.size() != 1 || dims->n.size() != 1 ||
      dims->k.size() != 1)
    return 0;
  Type lhs = getElementTypeOrSelf(op.getDpsInputOperand(0)->get().getType());
  Type rhs = getElementTypeOrSelf(op.getDpsInputOperand(1)->get().getType());
  Type acc = getElementTypeOrSelf(op.getDpsInitOperand(0)->get().getType());
  if (!acc.isF32())
    return 0;
  if (lhs.isF16() && rhs.isF16())
    return sits::gpu::kMmaK;
  if (config.tf32 && lhs.isF32() && rhs.isF32())
    return sits::gpu::kMmaKTf32;
  return 0;
}

/// The warps a block of `op` (loop ranges `ranges`) runs with one m16n8
/// output tile each, or 0 when its ranges are not whole MMA tiles.
int64_t mmaWarps(linalg::LinalgOp op, ArrayRef<int64_t> ranges,
                 const GpuTilingConfig &config) {
  int64_t mmaStep = mmaK(op, config);
  if (mmaStep == 0)
    return 0;
  linalg::ContractionDimensions dims = *linalg::inferContractionDims(op);
  int64_t m = ranges[dims.m[0]], n = ranges[dims.n[0]], k = ranges[dims.k[0]];
  if (llvm::any_of(ranges, ShapedType::isDynamic) || m % sits::gpu::kMmaM ||
      n % sits::gpu::kMmaN || k % mmaStep)
    return 0;
  return (m / sits::gpu::kMmaM) * (n / sits::gpu::kMmaN);
}

//===----------------------------------------------------------------------===//
// Tile size selection
//===----------------------------------------------------------------------===//

/// Which loops of `root` index the m, n and batch dimensions of the
/// contraction it is anchored on (itself, or the contraction whose result it
/// consumes elementwise). Empty when there is no such contraction.
struct ContractionLoops {
  SmallVector<unsigned> batch, m, n;
  bool valid = false;
};

ContractionLoops classifyContractionLoops(linalg::LinalgOp root) {
  ContractionLoops result;
  auto [anchor, rootToOutput] = findAnchorContraction(root);
  if (!anchor)
    return result;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(anchor);
  if (failed(dims))
    return result;
  AffineMap outMap = anchor.getMatchingIndexingMap(anchor.getDpsInitOperand(0));
  auto anchorLoopOf = [&](unsigned rootLoop) -> std::optional<unsigned> {
    if (root == anchor)
      return rootLoop;
    for (auto [dimPos, expr] : llvm::enumerate(rootToOutput.getResults())) {
      if (!expr.isFunctionOfDim(rootLoop) || dimPos >= outMap.getNumResults())
        continue;
      if (auto loop = dyn_cast<AffineDimExpr>(outMap.getResult(dimPos)))
        return loop.getPosition();
    }
    return std::nullopt;
  };
  SmallVector<utils::IteratorType> iterators = root.getIteratorTypesArray();
  for (unsigned i = 0; i < root.getNumLoops(); ++i) {
    std::optional<unsigned> a = anchorLoopOf(i);
    if (!a || iterators[i] != utils::IteratorType::parallel)
      continue;
    if (llvm::is_contained(dims->batch, *a))
      result.batch.push_back(i);
    else if (llvm::is_contained(dims->m, *a))
      result.m.push_back(i);
    else if (llvm::is_contained(dims->n, *a))
      result.n.push_back(i);
  }
  result.valid = true;
  return result;
}

/// Spreads a tile of `total` elements over `loops` (outermost first): the
/// innermost takes the largest divisor of its range up to `total`, the next
/// one what is left, and so on.
void spread(ArrayRef<int64_t> ranges, ArrayRef<unsigned> loops, int64_t total,
            MutableArrayRef<int64_t> sizes) {
  int64_t remaining = total;
  for (unsigned idx = loops.size(); idx-- > 0;) {
    unsigned i = loops[idx];
    sizes[i] = largestDivisorAtMost(ranges[i], std::max<int64_t>(1, remaining));
    remaining = std::max<int64_t>(1, remaining / sizes[i]);
  }
}

/// `op`'s loop ranges with every dynamic one taken as 1: the extent a
/// block sees of a dynamic parallel loop, which is tiled by one.
SmallVector<int64_t> blockRanges(linalg::LinalgOp op) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  for (int64_t &r : ranges)
    if (ShapedType::isDynamic(r))
      r = 1;
  return ranges;
}

/// Whether every dynamic loop of `op` is a reduction, which each thread
/// runs whole: its parallel loops can be spread over threads.
bool onlyReductionsAreDynamic(linalg::LinalgOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  for (auto [range, iterator] :
       llvm::zip_equal(op.getStaticLoopRanges(), iterators))
    if (ShapedType::isDynamic(range) &&
        iterator != utils::IteratorType::reduction)
      return false;
  return true;
}

/// Product of range / size over the tiled loops.
int64_t countTiles(ArrayRef<int64_t> ranges, ArrayRef<int64_t> sizes) {
  int64_t tiles = 1;
  for (auto [range, size] : llvm::zip_equal(ranges, sizes))
    if (size > 0)
      tiles *= range / size;
  return tiles;
}

/// Marks the partial reductions of split rows while the pass runs.
constexpr llvm::StringLiteral kLanesAttrName = "sits_lanes";

/// The threads a row of reduction `op` is split across (a warp, or the
/// largest divisor of the row up to it), or 0 when its reduction stays in
/// one thread: it must reduce one innermost dimension of at least two warps'
/// worth of elements into a single result.
int64_t reductionLanes(linalg::LinalgOp op, ArrayRef<int64_t> ranges,
                       const GpuTilingConfig &config) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  if (op.getNumReductionLoops() != 1 || op.getNumDpsInits() != 1 ||
      ranges.empty() || iterators.back() != utils::IteratorType::reduction ||
      isContraction(op))
    return 0;
  int64_t k = ranges.back();
  if (ShapedType::isDynamic(k) || k < 2 * config.warpSize)
    return 0;
  int64_t lanes = largestDivisorAtMost(k, config.warpSize);
  return lanes >= 8 ? lanes : 0;
}

/// The threads the reduction of a skinny contraction (at most 8 rows: a
/// batch of a few inputs, a decoded token) is split across, or 0. Such a
/// contraction is a matrix-vector product bound by reading the weights:
/// spreading its reduction over a warp gives it 32 times the threads (and
/// loads in flight) that one thread per output column would. `ranges` are
/// the loop ranges of `op`, a contraction whose innermost loop is its one
/// reduction.
int64_t contractionLanes(linalg::LinalgOp op, ArrayRef<int64_t> ranges,
                         const GpuTilingConfig &config) {
  if (!isContraction(op) || op.getNumReductionLoops() != 1 || ranges.empty() ||
      op.getIteratorTypesArray().back() != utils::IteratorType::reduction)
    return 0;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims))
    return 0;
  int64_t rows = 1;
  for (unsigned m : dims->m)
    rows *= ranges[m];
  int64_t k = ranges.back();
  if (ShapedType::isDynamic(rows) || ShapedType::isDynamic(k) || rows > 8 ||
      k < 2 * config.warpSize)
    return 0;
  int64_t lanes = largestDivisorAtMost(k, config.warpSize);
  return lanes >= 8 ? lanes : 0;
}

/// The per-thread tile of an op whose (block-tiled) loop ranges are
/// `ranges`: a TM x TN register tile of a contraction (or of the
/// elementwise op consuming it), a vector of an elementwise op's innermost
/// dimension, one row of a reduction. Reduction loops are not tiled.
SmallVector<int64_t> selectThreadTiles(linalg::LinalgOp op,
                                       ArrayRef<int64_t> ranges,
                                       const GpuTilingConfig &config,
                                       bool wholeRows = false) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> sizes(ranges.size(), 0);
  for (unsigned i = 0; i < ranges.size(); ++i)
    if (iterators[i] == utils::IteratorType::parallel)
      sizes[i] = 1;
  ContractionLoops loops = classifyContractionLoops(op);
  if (loops.valid) {
    spread(ranges, loops.m, config.tm, sizes);
    spread(ranges, loops.n, config.tn, sizes);
    // A contraction with few rows (a batch of 8, one decoded token) keeps
    // one row per thread, so that the block still has threads to spare;
    // one whose reduction is split across lanes (which give it the threads)
    // keeps all its rows in each thread, reusing each weight it reads.
    if (wholeRows)
      spread(ranges, loops.m, 8, sizes);
    else if (!loops.m.empty() && ranges[loops.m.back()] <= 2 * config.tm)
      spread(ranges, loops.m, 1, sizes);
    return sizes;
  }
  bool hasReduction = op.getNumReductionLoops() > 0;
  if (!hasReduction && !ranges.empty() &&
      iterators.back() == utils::IteratorType::parallel)
    sizes.back() = largestDivisorAtMost(ranges.back(), config.vector);
  return sizes;
}

/// The block tile of a group's root: BM x BN outputs of a contraction, or
/// as many elements as `maxThreads` threads handle with their thread tiles,
/// the innermost dimension first. Shrunk while there are fewer blocks than
/// the GPU wants and each block keeps at least a warp of threads.
SmallVector<int64_t> selectBlockTiles(linalg::LinalgOp root,
                                      const GpuTilingConfig &config) {
  SmallVector<int64_t> ranges = blockRanges(root);
  SmallVector<utils::IteratorType> iterators = root.getIteratorTypesArray();
  SmallVector<int64_t> sizes(ranges.size(), 0);
  // A reduction root split across lanes has that many threads per row.
  int64_t lanes = std::max<int64_t>(1, reductionLanes(root, ranges, config));
  bool anchored = classifyContractionLoops(root).valid;
  // A contraction on tensor cores takes a warp per m16n8 output tile, in
  // its own thread loop: the block needs as many threads as the larger of
  // that loop and the root's.
  linalg::LinalgOp mmaAnchor = findAnchorContraction(root).first;
  ContractionLoops rootLoops = classifyContractionLoops(root);
  bool mma = mmaAnchor && mmaK(mmaAnchor, config) > 0 &&
             rootLoops.m.size() == 1 && rootLoops.n.size() == 1;
  auto threadsOf = [&](ArrayRef<int64_t> block) {
    SmallVector<int64_t> thread = selectThreadTiles(
        root, block, config, /*wholeRows=*/lanes > 1 && anchored);
    int64_t threads = lanes;
    for (auto [b, t] : llvm::zip_equal(block, thread))
      if (t > 0)
        threads *= b / t;
    if (!mma)
      return threads;
    int64_t m = block[rootLoops.m[0]], n = block[rootLoops.n[0]];
    if (m % sits::gpu::kMmaM == 0 && n % sits::gpu::kMmaN == 0)
      threads = std::max(threads, (m / sits::gpu::kMmaM) *
                                      (n / sits::gpu::kMmaN) * config.warpSize);
    return threads;
  };
  // Candidate loops to shrink, most preferred first.
  SmallVector<unsigned> shrinkOrder;

  ContractionLoops loops = classifyContractionLoops(root);
  if (loops.valid) {
    // A skinny contraction's reduction is split across a warp.
    auto [anchor, rootToOutput] = findAnchorContraction(root);
    if (anchor)
      lanes = std::max<int64_t>(
          1, contractionLanes(anchor, blockRanges(anchor), config));
    for (unsigned b : loops.batch)
      sizes[b] = 1;
    spread(ranges, loops.m, config.bm, sizes);
    spread(ranges, loops.n, config.bn, sizes);
    for (unsigned i = 0; i < ranges.size(); ++i)
      if (iterators[i] == utils::IteratorType::parallel && sizes[i] == 0)
        sizes[i] = 1;
    // N first (the weights' columns), then M.
    shrinkOrder.append(loops.n.begin(), loops.n.end());
    shrinkOrder.append(loops.m.begin(), loops.m.end());
    // At most maxThreads threads: halve N, then M.
    bool changed = true;
    while (threadsOf(sizes) > config.maxThreads && changed) {
      changed = false;
      for (unsigned i : shrinkOrder) {
        int64_t smaller = largestDivisorAtMost(ranges[i], sizes[i] / 2);
        if (sizes[i] > 1 && smaller < sizes[i]) {
          sizes[i] = smaller;
          changed = true;
          break;
        }
      }
    }
  } else {
    SmallVector<unsigned> parallel;
    for (unsigned i = 0; i < ranges.size(); ++i)
      if (iterators[i] == utils::IteratorType::parallel)
        parallel.push_back(i);
    // Whole vectors of the innermost dimension per thread, then rows.
    SmallVector<int64_t> unit(ranges.size(), 1);
    SmallVector<int64_t> thread = selectThreadTiles(root, ranges, config);
    int64_t budget = config.maxThreads / lanes;
    for (unsigned idx = parallel.size(); idx-- > 0;) {
      unsigned i = parallel[idx];
      int64_t perThread = std::max<int64_t>(1, thread[i]);
      int64_t threads = largestDivisorAtMost(ranges[i] / perThread,
                                             std::max<int64_t>(1, budget));
      sizes[i] = threads * perThread;
      budget = std::max<int64_t>(1, budget / threads);
    }
    shrinkOrder.assign(parallel.begin(), parallel.end());
  }

  // More blocks while there are too few and each keeps two warps: halve
  // the largest tile dimension that still has room (the first in
  // `shrinkOrder` on ties), so tiles stay square-ish and reuse operands.
  while (countTiles(ranges, sizes) < config.wantedBlocks) {
    std::optional<SmallVector<int64_t>> best;
    int64_t bestSize = 0;
    for (unsigned i : shrinkOrder) {
      if (sizes[i] <= 1 || sizes[i] <= bestSize)
        continue;
      SmallVector<int64_t> candidate(sizes);
      candidate[i] = largestDivisorAtMost(ranges[i], sizes[i] / 2);
      if (candidate[i] == sizes[i] ||
          threadsOf(candidate) < 2 * config.warpSize)
        continue;
      best = candidate;
      bestSize = sizes[i];
    }
    if (!best)
      break;
    sizes = *best;
  }
  SmallVector<int64_t> extents = root.getStaticLoopRanges();
  for (unsigned i = 0; i < extents.size(); ++i)
    if (ShapedType::isDynamic(extents[i]))
      sizes[i] = iterators[i] == utils::IteratorType::parallel ? 1 : 0;
  return sizes;
}

//===----------------------------------------------------------------------===//
// Tiling
//===----------------------------------------------------------------------===//

/// Mapping attributes for a forall over `n` loops: the innermost loop is
/// linear dimension 0, so consecutive threads (and blocks) take
/// consecutive elements of the innermost dimension.
SmallVector<Attribute> linearMapping(MLIRContext *ctx, unsigned n,
                                     bool threads) {
  SmallVector<Attribute> mapping;
  for (unsigned i = 0; i < n; ++i) {
    auto id = static_cast<mlir::gpu::MappingId>(
        static_cast<uint64_t>(mlir::gpu::MappingId::LinearDim0) + (n - 1 - i));
    if (threads)
      mapping.push_back(mlir::gpu::GPUThreadMappingAttr::get(ctx, id));
    else
      mapping.push_back(mlir::gpu::GPUBlockMappingAttr::get(ctx, id));
  }
  return mapping;
}

bool isStaticallyShaped(linalg::LinalgOp op) {
  return !llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic);
}

/// Tiles `root` with a forall of `sizes` (mapped to blocks or threads) and
/// fuses the producers `group` owns, or that are cheap, when each tile
/// needs its own part of them. Nothing fuses into a contraction's operands:
/// a contraction's operand tiles are read by many output tiles.
FailureOr<scf::SCFTileAndFuseResult>
tileAndFuse(RewriterBase &rewriter, linalg::LinalgOp root,
            ArrayRef<int64_t> sizes, bool threads,
            const GpuTilingConfig &config) {
  llvm::SetVector<Operation *> group = computeFusionGroup(root);
  MLIRContext *ctx = root.getContext();
  unsigned numLoops = llvm::count_if(sizes, [](int64_t s) { return s > 0; });
  scf::SCFTileAndFuseOptions options;
  scf::SCFTilingOptions tiling;
  tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
  tiling.setTileSizes(asFoldResults(ctx, sizes));
  tiling.setMapping(linearMapping(ctx, numLoops, threads));
  options.setTilingOptions(tiling);
  options.setFusionControlFn(
      [&](tensor::ExtractSliceOp slice, OpResult producer, bool isDestination)
          -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
        Operation *op = producer.getOwner();
        if (!isa<TilingInterface>(op) || !isSafelyTileable(op) ||
            op->hasAttr(kLanesAttrName))
          return std::nullopt;
        if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
            linalgOp && !isStaticallyShaped(linalgOp))
          return std::nullopt;
        // A contraction on tensor cores is spread over warps, not over its
        // consumer's threads: it gets a thread loop of its own.
        if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
            threads && linalgOp &&
            mmaWarps(linalgOp, linalgOp.getStaticLoopRanges(), config) > 0)
          return std::nullopt;
        if (isDestination)
          return scf::SCFTileAndFuseOptions::ControlFnResult{};
        bool feedsContraction =
            llvm::any_of(slice->getUses(), [](OpOperand &use) {
              auto user = dyn_cast<linalg::LinalgOp>(use.getOwner());
              return user && isContraction(user) && user.isDpsInput(&use);
            });
        if (feedsContraction || !isDisjointPerTile(slice))
          return std::nullopt;
        if (isCheapToRecompute(op) || group.contains(op))
          return scf::SCFTileAndFuseOptions::ControlFnResult{};
        return std::nullopt;
      });

  rewriter.setInsertionPoint(root);
  FailureOr<scf::SCFTileAndFuseResult> result =
      scf::tileConsumerAndFuseProducersUsingSCF(
          rewriter, cast<TilingInterface>(root.getOperation()), options);
  if (failed(result))
    return failure();
  for (OpResult res : root->getResults())
    if (Value replacement = result->replacements.lookup(res))
      rewriter.replaceAllUsesWith(res, replacement);
  if (root->use_empty())
    rewriter.eraseOp(root);
  // Fusion leaves the slices it fused through behind, unused; they would
  // keep the original producers alive.
  for (LoopLikeOpInterface loop : result->loops)
    loop->walk<WalkOrder::PostOrder, ReverseIterator>([&](Operation *op) {
      if (isOpTriviallyDead(op))
        rewriter.eraseOp(op);
    });
  for (Operation *producer : result->fusedProducers)
    if (isOpTriviallyDead(producer))
      rewriter.eraseOp(producer);
  return result;
}

/// Tiles tensor-core contraction `op` (in a block) over warps: a thread loop
/// over its m16n8 output tiles with an innermost loop over a warp's lanes
/// (linear dimension 0, so that a warp's threads are consecutive). Nothing
/// in the body depends on the lane: as sequential code each lane computes
/// its warp's whole tile, and sits-gpu-mma-sync later divides the tile
/// among the lanes in the MMA fragment layout.
LogicalResult tileOverWarps(RewriterBase &rewriter, linalg::LinalgOp op,
                            const GpuTilingConfig &config) {
  linalg::ContractionDimensions dims = *linalg::inferContractionDims(op);
  SmallVector<int64_t> sizes(op.getNumLoops(), 0);
  for (unsigned b : dims.batch)
    sizes[b] = 1;
  sizes[dims.m[0]] = sits::gpu::kMmaM;
  sizes[dims.n[0]] = sits::gpu::kMmaN;
  FailureOr<scf::SCFTileAndFuseResult> tiled =
      tileAndFuse(rewriter, op, sizes, /*threads=*/true, config);
  if (failed(tiled) || tiled->loops.empty())
    return failure();
  auto forall = cast<scf::ForallOp>(tiled->loops.front().getOperation());

  MLIRContext *ctx = rewriter.getContext();
  Location loc = forall.getLoc();
  SmallVector<OpFoldResult> lbs = forall.getMixedLowerBound();
  SmallVector<OpFoldResult> ubs = forall.getMixedUpperBound();
  SmallVector<OpFoldResult> steps = forall.getMixedStep();
  lbs.push_back(rewriter.getIndexAttr(0));
  ubs.push_back(rewriter.getIndexAttr(config.warpSize));
  steps.push_back(rewriter.getIndexAttr(1));
  SmallVector<Attribute> mapping = linearMapping(ctx, lbs.size(), true);
  rewriter.setInsertionPoint(forall);
  auto warps =
      scf::ForallOp::create(rewriter, loc, lbs, ubs, steps, forall.getOutputs(),
                            rewriter.getArrayAttr(mapping));
  Block *body = warps.getBody();
  rewriter.eraseOp(body->getTerminator());
  SmallVector<Value> args(warps.getInductionVars());
  args.pop_back();
  llvm::append_range(args, warps.getRegionIterArgs());
  rewriter.mergeBlocks(forall.getBody(), body, args);
  rewriter.replaceOp(forall, warps.getResults());
  return success();
}

/// Tiles the loops of `op` given by `sizes` with scf.for.
LogicalResult tileWithFor(RewriterBase &rewriter, linalg::LinalgOp op,
                          ArrayRef<int64_t> sizes) {
  if (llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
    return success();
  scf::SCFTilingOptions options;
  options.setLoopType(scf::SCFTilingOptions::LoopType::ForOp);
  options.setTileSizes(asFoldResults(rewriter.getContext(), sizes));
  rewriter.setInsertionPoint(op);
  FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
      rewriter, cast<TilingInterface>(op.getOperation()), options);
  if (failed(tiled))
    return failure();
  rewriter.replaceOp(op, tiled->replacements);
  return success();
}

/// Inside a thread: a contraction steps its reduction BK at a time (the
/// step sits-gpu-promote-operands stages in shared memory); another
/// reduction steps its innermost reduction loop a vector at a time.
LogicalResult tileInsideThread(RewriterBase &rewriter, linalg::LinalgOp op,
                               const GpuTilingConfig &config) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> sizes(ranges.size(), 0);
  if (isContraction(op)) {
    FailureOr<linalg::ContractionDimensions> dims =
        linalg::inferContractionDims(op);
    if (failed(dims))
      return failure();
    // The innermost reduction loop steps by BK (or the largest divisor of
    // its range up to it; a warp's m16n8 tile by the tensor core
    // operation's k), outer ones one at a time.
    int64_t step = config.bk;
    if (mmaWarps(op, ranges, config) == 1)
      step = mmaK(op, config);
    for (auto [idx, k] : llvm::enumerate(dims->k))
      sizes[k] =
          idx + 1 == dims->k.size() ? largestDivisorAtMost(ranges[k], step) : 1;
    // A reduction shorter than a step needs no loop.
    for (unsigned k : dims->k)
      if (sizes[k] == ranges[k])
        sizes[k] = 0;
    return tileWithFor(rewriter, op, sizes);
  }
  if (op.getNumReductionLoops() == 0)
    return success();
  for (unsigned i = ranges.size(); i-- > 0;) {
    if (iterators[i] != utils::IteratorType::reduction)
      continue;
    int64_t step = largestDivisorAtMost(ranges[i], config.vector);
    sizes[i] = step == ranges[i] ? 0 : step;
    break;
  }
  // Outer reduction loops step one at a time.
  bool seenInner = false;
  for (unsigned i = ranges.size(); i-- > 0;) {
    if (iterators[i] != utils::IteratorType::reduction)
      continue;
    if (seenInner && ranges[i] > 1)
      sizes[i] = 1;
    seenInner = true;
  }
  if (llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
    return success();
  // Elementwise producers of the reduced values (the exponentials of a
  // softmax, a residual add before a norm) are computed a step at a time
  // inside the loop rather than whole, in the thread's private memory.
  scf::SCFTileAndFuseOptions options;
  scf::SCFTilingOptions tiling;
  tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForOp);
  tiling.setTileSizes(asFoldResults(rewriter.getContext(), sizes));
  options.setTilingOptions(tiling);
  options.setFusionControlFn(
      [](tensor::ExtractSliceOp slice, OpResult producer, bool isDestination)
          -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
        auto loop = slice->getParentOfType<scf::ForOp>();
        if (isDestination || !loop ||
            !isCheapToRecompute(producer.getOwner()) ||
            !isSafelyTileable(producer.getOwner()))
          return std::nullopt;
        bool steps = llvm::any_of(slice.getOffsets(), [&](Value offset) {
          return dependsOn(offset, loop.getInductionVar());
        });
        if (!steps)
          return std::nullopt;
        return scf::SCFTileAndFuseOptions::ControlFnResult{};
      });
  rewriter.setInsertionPoint(op);
  FailureOr<scf::SCFTileAndFuseResult> result =
      scf::tileConsumerAndFuseProducersUsingSCF(
          rewriter, cast<TilingInterface>(op.getOperation()), options);
  if (failed(result))
    return failure();
  for (OpResult res : op->getResults())
    if (Value replacement = result->replacements.lookup(res))
      rewriter.replaceAllUsesWith(res, replacement);
  if (op->use_empty())
    rewriter.eraseOp(op);
  for (Operation *producer : result->fusedProducers)
    if (isOpTriviallyDead(producer))
      rewriter.eraseOp(producer);
  return success();
}

/// Splits the row reduction `op` (in a block) across lanes: a partial
/// reduction in which lane `l` of a row reduces elements `l, l + L, l + 2L,
/// ...` (consecutive lanes read consecutive addresses), into a block-shared
/// [rows, L] tensor, and a reduction of those L partial results. Elementwise
/// producers of the reduced values in the block are fused into the partial
/// reduction first, so they are computed by the lanes too.
LogicalResult splitAcrossLanes(RewriterBase &rewriter, linalg::LinalgOp op,
                               const GpuTilingConfig &config) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  // Splitting renumbers the reduction loop, which linalg.index would see.
  if (llvm::any_of(ranges, ShapedType::isDynamic) || op.hasIndexSemantics())
    return failure();
  bool contraction = isContraction(op);
  int64_t lanes = contraction ? contractionLanes(op, ranges, config)
                              : reductionLanes(op, ranges, config);
  if (lanes == 0)
    return failure();
  // The threads of the lanes' part: its thread tiles (a contraction's
  // threads take all rows and 4 columns), times the lanes.
  SmallVector<int64_t> thread =
      selectThreadTiles(op, ranges, config, /*wholeRows=*/contraction);
  int64_t threads = lanes;
  for (auto [range, t] : llvm::zip_equal(ranges, thread))
    if (t > 0)
      threads *= ceilDiv(range, t);
  if (threads > config.maxThreads)
    return failure();

  // Elementwise producers in the same block become part of the reduction
  // (not of a contraction: its operands are read by many outputs).
  bool fused = !contraction;
  while (fused) {
    fused = false;
    for (OpOperand *input : op.getDpsInputOperands()) {
      auto producer = input->get().getDefiningOp<linalg::GenericOp>();
      if (!producer || producer->getBlock() != op->getBlock() ||
          !linalg::isElementwise(producer) || producer.hasIndexSemantics() ||
          !linalg::areElementwiseOpsFusable(input))
        continue;
      rewriter.setInsertionPoint(op);
      FailureOr<linalg::ElementwiseOpFusionResult> result =
          linalg::fuseElementwiseOps(rewriter, input);
      if (failed(result))
        continue;
      for (auto [oldValue, newValue] : result->replacements)
        rewriter.replaceUsesWithIf(oldValue, newValue, [&](OpOperand &use) {
          return use.getOwner() != result->fusedOp;
        });
      Operation *old = op;
      op = cast<linalg::LinalgOp>(result->fusedOp);
      if (old->use_empty())
        rewriter.eraseOp(old);
      if (isOpTriviallyDead(producer))
        rewriter.eraseOp(producer);
      fused = true;
      break;
    }
  }

  unsigned index = op.getNumLoops() - 1;
  rewriter.setInsertionPoint(op);
  FailureOr<linalg::SplitReductionResult> split =
      linalg::splitReduction(rewriter, op, [&](linalg::LinalgOp) {
        return linalg::SplitReductionOptions{lanes, index,
                                             /*innerParallel=*/true};
      });
  if (failed(split))
    return failure();
  // The lanes' part gets a thread loop of its own: fused into the final
  // reduction's thread (one per row) it would run on one lane.
  split->splitLinalgOp->setAttr(kLanesAttrName, rewriter.getUnitAttr());
  return success();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

bool isThreadForall(scf::ForallOp forall) {
  std::optional<ArrayAttr> mapping = forall.getMapping();
  return mapping && !mapping->empty() &&
         isa<mlir::gpu::GPUThreadMappingAttr>((*mapping)[0]);
}

/// The last op of `block` to tile: a statically shaped linalg op on tensors
/// that has not been given up on.
linalg::LinalgOp findNextRoot(Block &block,
                              const llvm::DenseSet<Operation *> &skipped) {
  for (Operation &op : llvm::reverse(block)) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(&op);
    if (linalgOp && linalgOp.hasPureTensorSemantics() && !skipped.contains(&op))
      return linalgOp;
  }
  return nullptr;
}

struct SitsGpuTileAndFusePass
    : sits::gpu::impl::SitsGpuTileAndFuseBase<SitsGpuTileAndFusePass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    GpuTilingConfig config = sits::gpu::getGpuTilingConfig(func, maxThreads);
    config.mmaSync &= tensorCores;
    config.tf32 = tf32;
    IRRewriter rewriter(&getContext());

    // Level 1: fusion groups over blocks, last group first.
    SmallVector<scf::ForallOp> blocks;
    llvm::DenseSet<Operation *> skipped;
    while (linalg::LinalgOp root =
               findNextRoot(func.getBody().front(), skipped)) {
      skipped.insert(root);
      if (!isSafelyTileable(root))
        continue;
      SmallVector<int64_t> sizes = selectBlockTiles(root, config);
      if (llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
        continue;
      FailureOr<scf::SCFTileAndFuseResult> result =
          tileAndFuse(rewriter, root, sizes, /*threads=*/false, config);
      if (failed(result) || result->loops.empty())
        continue;
      ++numGroups;
      numFused += result->fusedProducers.size();
      blocks.push_back(
          cast<scf::ForallOp>(result->loops.front().getOperation()));
    }

    // Level 2: inside each block, thread loops, last op first. (Blocks are
    // collected anew: fusing a later group may have replaced an earlier
    // group's loop.)
    blocks.clear();
    for (Operation &op : func.getBody().front())
      if (auto forall = dyn_cast<scf::ForallOp>(&op))
        if (std::optional<ArrayAttr> mapping = forall.getMapping();
            mapping && !mapping->empty() &&
            isa<mlir::gpu::GPUBlockMappingAttr>((*mapping)[0]))
          blocks.push_back(forall);
    for (scf::ForallOp block : blocks) {
      llvm::DenseSet<Operation *> done;
      Block &body = *block.getBody();
      // Row reductions of the block are spread across a warp per row.
      SmallVector<linalg::LinalgOp> reductions;
      for (Operation &op : body)
        if (auto linalgOp = dyn_cast<linalg::LinalgOp>(&op))
          if (linalgOp.hasPureTensorSemantics() &&
              linalgOp.getNumReductionLoops() > 0)
            reductions.push_back(linalgOp);
      for (linalg::LinalgOp op : reductions)
        if (succeeded(splitAcrossLanes(rewriter, op, config)))
          ++numSplit;
      while (linalg::LinalgOp op = findNextRoot(body, done)) {
        done.insert(op);
        if (!isSafelyTileable(op) || !onlyReductionsAreDynamic(op))
          continue;
        SmallVector<int64_t> sizes = selectThreadTiles(
            op, op.getStaticLoopRanges(), config,
            /*wholeRows=*/op->hasAttr(kLanesAttrName) && isContraction(op));
        if (llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
          continue;
        if (mmaWarps(op, op.getStaticLoopRanges(), config) > 0) {
          if (succeeded(tileOverWarps(rewriter, op, config)))
            ++numThreadLoops;
          continue;
        }
        if (succeeded(
                tileAndFuse(rewriter, op, sizes, /*threads=*/true, config)))
          ++numThreadLoops;
      }
    }

    // Level 3: reduction steps inside each thread.
    SmallVector<linalg::LinalgOp> inner;
    func.walk([&](linalg::LinalgOp op) {
      auto forall = op->getParentOfType<scf::ForallOp>();
      if (forall && isThreadForall(forall) && op.hasPureTensorSemantics() &&
          isStaticallyShaped(op))
        inner.push_back(op);
    });
    for (linalg::LinalgOp op : inner)
      (void)tileInsideThread(rewriter, op, config);
    func.walk([](Operation *op) { op->removeAttr(kLanesAttrName); });
  }
};

} // namespace
