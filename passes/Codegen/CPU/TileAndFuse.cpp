//===- TileAndFuse.cpp - Distribute and tile linalg fusion groups ---------===//
//
// Each fusion group is the last linalg op of a chain (its "root") plus the
// producers fused into it. The root is tiled along its parallel dimensions
// with scf.forall -- one iteration is one task for the thread pool -- and
// producers are fused into every tile so intermediates stay in cache.
// Inside a tile, contractions are tiled again for the cache (reduction
// dimension) and for registers, and other ops down to vector-sized pieces.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "passes/Codegen/Common/FusionGroups.h"

#include "dialects/Sits/IR/SitsDialect.h"

#include "mlir/Dialect/Linalg/IR/LinalgInterfaces.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/Linalg/Utils/Utils.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/SCF/Transforms/Transforms.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Iterators.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/TilingInterface.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/bit.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUTILEANDFUSE
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits::codegen;
using namespace mlir::sits;
using namespace mlir::sits::cpu;

//===----------------------------------------------------------------------===//
// Target facts
//===----------------------------------------------------------------------===//

CpuTilingConfig mlir::sits::cpu::getCpuTilingConfig(Operation *op,
                                                    int64_t threadsOverride) {
  const target::TargetInfo &info = getModuleTargetOrHost(op);
  CpuTilingConfig config;
  config.threads =
      threadsOverride > 0 ? threadsOverride : target::getComputeUnits(info);
  config.lanes = std::max<int64_t>(4, info.simdWidth);
  // A register block of mr rows x 2 vectors of accumulators, leaving
  // registers for the two rhs vectors and the broadcast lhs element: 8 rows
  // (16 accumulators) with 32 registers (AVX-512, NEON), 4 rows (8) with 16
  // (AVX2, SSE), where 8 rows would spill. Rows stay a power of two so that
  // blocks divide the usual extents and every tile keeps a static shape.
  int64_t registers = std::max<int64_t>(16, info.vectorRegisters);
  config.mr = std::min<int64_t>(
      8, llvm::bit_floor(static_cast<uint64_t>((registers - 3) / 2)));
  config.nr = 2 * config.lanes;
  config.kr = 8;
  // A task's 128 x 128 output tile reads a 128 x kc block of the lhs and a
  // kc x 128 panel of the rhs: 256 KiB at kc = 256, which stays in L2 on
  // every x86-64 and Arm server core. A multiple of every register block.
  // Each task streams its whole K x 128 slice of the rhs (the weights, from
  // L3 or memory), once per 128 rows: with 64-row tasks a GPT-2 block's
  // 128-token prefill ran 15% slower on one thread (10% on two).
  // Convolutions take half as many rows per task (see selectDistributionTiles).
  config.mc = 128;
  config.nc = 128;
  config.kc = 256;
  // A streamed panel's rows are requested 4 KiB ahead of use, so each of
  // its pages is touched (TLB filled, hardware prefetch started) a page
  // before the loop reaches it. Measured on a 2-core Xeon 6 (AVX-512, 300
  // MiB L3), chains of [M, 2048] x [2048, 2048] matmuls (128 MiB of
  // weights): against 1 KiB, M = 1 +6%, M = 8 +21%, M = 16 +14%, M = 64
  // +7%; a 55 M Llama's fp32 decode +10% at batch 1, +14% at batch 8.
  // (An earlier 2-core Xeon had 1 KiB best, +24% over none, 4 KiB +5-18%.)
  config.prefetchBytes = 4096;
  // Into L1 where measured best (the Xeons above). On AMD Zen cores a
  // prefetch into L1 holds one of the core's few L1 miss buffers until its
  // line arrives, and decode steps' own loads queue behind it; into L2 it
  // does not. Measured on a 2-core EPYC (Zen 4), [M, 512] x [512, 2752]
  // chains (90 MiB of weights), against L1: M = 1 +2%, M = 4 +5%, M = 8
  // +13%, M = 16 +15% ([M, 2048] x [2048, 2048]: M = 8 +6%); a 55 M Llama's
  // fp32 decode +7% at batch 1, +26% at batch 8.
  if (info.chip.starts_with("znver"))
    config.prefetchCacheLevel = 2;
  return config;
}

//===----------------------------------------------------------------------===//
// Tile size selection
//===----------------------------------------------------------------------===//

namespace {

/// Marks a loop tileContractionForRegisters peeled itself.
constexpr llvm::StringLiteral kPeeledAttr = "sits.peeled";

/// Number of tiles `sizes` cuts `ranges` into (0 means not tiled).
int64_t countTiles(ArrayRef<int64_t> ranges, ArrayRef<int64_t> sizes) {
  int64_t tiles = 1;
  for (auto [range, size] : llvm::zip_equal(ranges, sizes))
    if (size > 0 && !ShapedType::isDynamic(range))
      tiles *= ceilDiv(range, size);
  return tiles;
}

/// Rounds each tile size down to a divisor of its range when that costs at
/// most half the tile: equal tiles keep every tile's shape static, where a
/// ragged last tile would make all of them dynamic.
void preferDivisors(ArrayRef<int64_t> ranges, MutableArrayRef<int64_t> sizes) {
  for (auto [range, size] : llvm::zip_equal(ranges, sizes)) {
    if (size <= 0 || ShapedType::isDynamic(range) || range % size == 0)
      continue;
    int64_t divisor = size;
    while (range % divisor != 0)
      --divisor;
    if (2 * divisor >= size)
      size = divisor;
  }
}

/// Whether some op of `group` runs a loop of run-time extent that `root`'s
/// tiles keep whole: a dynamic innermost dimension of the root, or a
/// dynamic reduction (attention's scores over the context, their product
/// with V). A tile's work then grows with that extent, whatever the
/// distributed ones are.
bool spansUndistributedDynamicLoop(linalg::LinalgOp root,
                                   const llvm::SetVector<Operation *> &group) {
  SmallVector<int64_t> rootRanges = root.getStaticLoopRanges();
  if (!rootRanges.empty() && ShapedType::isDynamic(rootRanges.back()))
    return true;
  return llvm::any_of(group, [](Operation *op) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
    if (!linalgOp)
      return false;
    for (auto [range, iterator] : llvm::zip_equal(
             linalgOp.getStaticLoopRanges(), linalgOp.getIteratorTypesArray()))
      if (ShapedType::isDynamic(range) &&
          iterator == utils::IteratorType::reduction)
        return true;
    return false;
  });
}

/// Forall tile sizes for the root of a group (`group`, the root included).
/// Every reduction dimension is left whole (size 0), so each tile is
/// independent.
SmallVector<int64_t>
selectDistributionTiles(linalg::LinalgOp root,
                        const llvm::SetVector<Operation *> &group,
                        const CpuTilingConfig &config) {
  SmallVector<int64_t> ranges = root.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = root.getIteratorTypesArray();
  SmallVector<int64_t> sizes(ranges.size(), 0);
  int64_t wanted = 2 * config.threads;

  auto [anchor, rootToOutput] = findAnchorContraction(root);
  if (anchor) {
    FailureOr<linalg::ContractionDimensions> dims =
        linalg::inferContractionDims(anchor);
    if (succeeded(dims)) {
      // Root loop -> the anchor's output dimension it indexes -> the anchor
      // loop producing that dimension.
      AffineMap outMap =
          anchor.getMatchingIndexingMap(anchor.getDpsInitOperand(0));
      auto anchorLoopOf = [&](unsigned rootLoop) -> std::optional<unsigned> {
        if (root == anchor)
          return rootLoop;
        for (auto [dimPos, expr] : llvm::enumerate(rootToOutput.getResults())) {
          if (!expr.isFunctionOfDim(rootLoop) ||
              dimPos >= outMap.getNumResults())
            continue;
          if (auto loop = dyn_cast<AffineDimExpr>(outMap.getResult(dimPos)))
            return loop.getPosition();
        }
        return std::nullopt;
      };
      // Root loops of each kind, outermost first. A tile spans `mc` rows and
      // `nc` columns in total: when the columns are split over several
      // loops (weights packed in panels: nb x nr), the innermost is kept
      // whole and the outer ones take the rest.
      SmallVector<unsigned> mLoops, nLoops;
      for (unsigned i = 0; i < ranges.size(); ++i) {
        std::optional<unsigned> a = anchorLoopOf(i);
        if (!a || iterators[i] != utils::IteratorType::parallel)
          continue;
        if (llvm::is_contained(dims->batch, *a))
          sizes[i] = 1;
        else if (llvm::is_contained(dims->m, *a))
          mLoops.push_back(i);
        else if (llvm::is_contained(dims->n, *a))
          nLoops.push_back(i);
      }
      auto spread = [&](ArrayRef<unsigned> loops, int64_t total) {
        int64_t remaining = total;
        for (unsigned idx = loops.size(); idx-- > 0;) {
          unsigned i = loops[idx];
          bool inner = idx + 1 == loops.size();
          if (!inner || ShapedType::isDynamic(ranges[i])) {
            sizes[i] = std::max<int64_t>(1, remaining);
            remaining = 1;
          } else {
            sizes[i] = std::min(ranges[i], remaining);
            remaining = std::max<int64_t>(1, remaining / ranges[i]);
          }
        }
      };
      // Pixels (several M loops, an im2col GEMM) in tasks of half as many
      // rows: each task also gathers its patches, the filter is small
      // enough to stay in L2 whatever the rows, and twice the tasks balance
      // the threads better (ResNet-18: 3% faster than 128 rows).
      spread(mLoops, mLoops.size() > 1 ? config.mc / 2 : config.mc);
      spread(nLoops, config.nc);
      int mLoop = mLoops.empty() ? -1 : int(mLoops.front());
      int nLoop = nLoops.empty() ? -1 : int(nLoops.front());
      // The smallest step of the outer loop that still cuts whole blocks.
      int64_t nStep = nLoops.size() > 1 ? 1 : config.nr;
      int64_t mStep = mLoops.size() > 1 ? 1 : config.mr;
      // Halve N, then M, down to one register block until every thread has
      // a couple of tiles.
      while (countTiles(ranges, sizes) < wanted) {
        if (nLoop >= 0 && sizes[nLoop] > nStep) {
          sizes[nLoop] = std::max(nStep, sizes[nLoop] / 2);
          continue;
        }
        if (mLoop >= 0 && sizes[mLoop] > mStep) {
          sizes[mLoop] = std::max(mStep, sizes[mLoop] / 2);
          continue;
        }
        break;
      }
      for (unsigned i = 0; i < ranges.size(); ++i)
        if (!ShapedType::isDynamic(ranges[i]) && sizes[i] >= ranges[i])
          sizes[i] = ranges[i];
      preferDivisors(ranges, sizes);
      return sizes;
    }
  }

  // Elementwise and reduction roots: split the outer parallel dimensions,
  // keeping the innermost one whole so vectors run along contiguous memory.
  // The first dynamic one is cut in single rows. Later dynamic ones (a
  // prompt's tokens after the batch) are cut in blocks of rows, which
  // spread a single long sequence over the threads and stay one task for a
  // decode step's single token; static ones after a dynamic one are left
  // whole, as their pieces would be too small to pay for a task each when
  // the dynamic extents are 1 -- unless each piece also spans a run-time
  // extent the tiles keep whole: attention's heads, split so that a decode
  // step's single token still spreads its context over the threads.
  constexpr int64_t kDynamicRowsPerTile = 16;
  int64_t remaining = wanted;
  bool afterDynamic = false;
  bool splitAfterDynamic = spansUndistributedDynamicLoop(root, group);
  for (unsigned i = 0; i < ranges.size(); ++i) {
    bool dynamic = ShapedType::isDynamic(ranges[i]);
    // Enough tiles: only rows after a dynamic dimension are still cut in
    // blocks (a prompt's queries after the split heads).
    if (iterators[i] != utils::IteratorType::parallel ||
        (remaining <= 1 && !(dynamic && afterDynamic)))
      continue;
    bool innermost = i + 1 == ranges.size();
    int64_t range = ranges[i];
    if (dynamic) {
      if (innermost && afterDynamic)
        break;
      sizes[i] = afterDynamic ? kDynamicRowsPerTile : 1;
      afterDynamic = true;
      continue;
    }
    if (range <= 1 || (afterDynamic && (!splitAfterDynamic || innermost)))
      continue;
    if (innermost) {
      // Only split the innermost dimension in whole vectors.
      int64_t size = std::max(4 * config.lanes, ceilDiv(range, remaining));
      if (size < range)
        sizes[i] = size;
      break;
    }
    int64_t size = std::max<int64_t>(1, range / remaining);
    sizes[i] = size;
    remaining = ceilDiv(remaining, ceilDiv(range, size));
  }
  preferDivisors(ranges, sizes);
  return sizes;
}

//===----------------------------------------------------------------------===//
// Tiling inside a distributed tile
//===----------------------------------------------------------------------===//

/// Tiles a contraction for the cache (its reduction dimension by kc) and
/// for registers (mr x nr x kr).
LogicalResult tileContractionForRegisters(RewriterBase &rewriter,
                                          linalg::LinalgOp op,
                                          const CpuTilingConfig &config) {
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(op);
  if (failed(dims))
    return failure();
  unsigned numLoops = op.getNumLoops();
  // Weights dequantized from integer codes are computed tile by tile inside
  // the loops, so the widened values live in cache and then in registers.
  auto tile = [&](linalg::LinalgOp target, ArrayRef<int64_t> sizes,
                  SmallVectorImpl<LoopLikeOpInterface> *loops =
                      nullptr) -> FailureOr<linalg::LinalgOp> {
    if (llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
      return target;
    scf::SCFTileAndFuseOptions options;
    scf::SCFTilingOptions tiling;
    tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForOp);
    tiling.setTileSizes(asFoldResults(rewriter.getContext(), sizes));
    options.setTilingOptions(tiling);
    options.setFusionControlFn(
        [&](tensor::ExtractSliceOp, OpResult producer, bool isDestination)
            -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
          if (isDestination || !isDequantizing(producer.getOwner()))
            return std::nullopt;
          return scf::SCFTileAndFuseOptions::ControlFnResult{};
        });
    rewriter.setInsertionPoint(target);
    FailureOr<scf::SCFTileAndFuseResult> tiled =
        scf::tileConsumerAndFuseProducersUsingSCF(
            rewriter, cast<TilingInterface>(target.getOperation()), options);
    if (failed(tiled))
      return failure();
    for (OpResult res : target->getResults())
      if (Value replacement = tiled->replacements.lookup(res))
        rewriter.replaceAllUsesWith(res, replacement);
    rewriter.eraseOp(target);
    for (Operation *producer : tiled->fusedProducers)
      if (isOpTriviallyDead(producer))
        rewriter.eraseOp(producer);
    if (loops)
      loops->assign(tiled->loops.begin(), tiled->loops.end());
    return cast<linalg::LinalgOp>(tiled->tiledAndFusedOps.front());
  };

  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<int64_t> cache(numLoops, 0), regs(numLoops, 0);
  // Reduction chunks of at most kc whole register steps, equal where some
  // count up to twice the fewest divides K (K = 1152 is cut 6 x 192, not
  // 4 x 256 + 128), else as equal as register steps allow.
  // Several K loops (a K split into groups of packed codes: [groups, words,
  // fields]) are tiled innermost first: inner loops whole while they fit,
  // the next one taking what is left, the outer ones stepping by one.
  auto spreadK = [&](SmallVector<int64_t> &sizes, int64_t total) {
    int64_t remaining = total;
    for (unsigned idx = dims->k.size(); idx-- > 0;) {
      unsigned k = dims->k[idx];
      int64_t range = ranges[k];
      if (ShapedType::isDynamic(range) || range > remaining) {
        sizes[k] = std::max<int64_t>(1, remaining);
        remaining = 1;
      } else {
        sizes[k] = range;
        remaining /= range;
      }
    }
  };
  // A tile of at most one register block of rows (a batch of a few
  // sequences) reuses no weight: each one is read once, so chunking K only
  // breaks every panel's stream into pieces of kc rows, interleaved with
  // the other panels'. The whole K of a panel is then one sequential read.
  // So with two blocks (the 16 pixels of a CNN's last stage): the second
  // reads the panel again from L2, and the first streams it ahead of use.
  // Measured on ResNet-18 at 112 x 112 (2-core Xeon): 8% faster than kc
  // chunks at two blocks, no gain at eight.
  bool dynamicRows = llvm::any_of(
      dims->m, [&](unsigned m) { return ShapedType::isDynamic(ranges[m]); });
  int64_t tileRows = 1;
  for (unsigned m : dims->m)
    tileRows *= dynamicRows ? 1 : ranges[m];
  bool streaming = !dynamicRows && tileRows <= 2 * config.mr;
  if (!streaming && dims->k.size() > 1) {
    spreadK(cache, config.kc);
    // Whole loops are not tiled.
    for (unsigned k : dims->k)
      if (cache[k] == ranges[k])
        cache[k] = 0;
  }
  for (unsigned k : dims->k) {
    if (streaming || dims->k.size() > 1)
      break;
    if (ShapedType::isDynamic(ranges[k])) {
      cache[k] = config.kc;
      continue;
    }
    if (ranges[k] <= config.kc)
      continue;
    int64_t steps = ceilDiv(ranges[k], config.kr);
    int64_t fewest = ceilDiv(ranges[k], config.kc);
    int64_t chunks = fewest;
    for (int64_t c = fewest; c <= 2 * fewest; ++c)
      if (steps % c == 0) {
        chunks = c;
        break;
      }
    cache[k] = ceilDiv(steps, chunks) * config.kr;
  }
  for (unsigned b : dims->batch)
    regs[b] = 1;
  for (unsigned m : dims->m)
    regs[m] = config.mr;
  for (unsigned n : dims->n)
    regs[n] = config.nr;
  if (dims->k.size() > 1) {
    // One K loop per register step: vector.contract lowers to outer
    // products only with a single reduction dimension.
    for (unsigned k : dims->k)
      regs[k] = 1;
    regs[dims->k.back()] = std::min(ranges[dims->k.back()], config.kr);
  } else
    for (unsigned k : dims->k)
      regs[k] = config.kr;
  // K innermost in both operands (attention's scores, a query row against
  // key rows): K steps of up to four whole vectors, each contracted as
  // products of rows and one tree sum per output (ContractAlongContiguousK
  // in LowerVectors), where kr-long steps would each end in a horizontal
  // sum.
  if (dims->k.size() == 1 && !ShapedType::isDynamic(ranges[dims->k[0]])) {
    unsigned k = dims->k[0];
    auto innermostIsK = [&](OpOperand *operand) {
      AffineMap map = op.getMatchingIndexingMap(operand);
      return map.getNumResults() > 0 &&
             map.getResults().back() == getAffineDimExpr(k, op.getContext());
    };
    Type element = getElementTypeOrSelf(op.getDpsInits()[0].getType());
    bool sameFloat = isa<FloatType>(element) &&
                     llvm::all_of(op.getDpsInputs(), [&](Value v) {
                       return getElementTypeOrSelf(v.getType()) == element;
                     });
    if (sameFloat && op.getNumDpsInputs() == 2 &&
        innermostIsK(op.getDpsInputOperand(0)) &&
        innermostIsK(op.getDpsInputOperand(1)))
      for (int64_t vectors = 4; vectors >= 1; --vectors)
        if (ranges[k] % (vectors * config.lanes) == 0) {
          regs[k] = vectors * config.lanes;
          // Columns are rows of the rhs here: as many as a register block
          // has rows keeps the rhs tile in registers.
          if (!dims->n.empty())
            regs[dims->n.back()] = config.mr;
          break;
        }
  }
  // Several m or n dimensions (e.g. after im2col) keep the register block on
  // the innermost of each and step the others one at a time.
  for (ArrayRef<unsigned> group :
       {ArrayRef<unsigned>(dims->m), ArrayRef<unsigned>(dims->n)})
    for (unsigned i = 0; i + 1 < group.size(); ++i)
      regs[group[i]] = 1;

  // The register tiling; its K loops are marked when the tile streams its
  // weights (see kStreamedAttr).
  auto tileRegisters = [&](linalg::LinalgOp target,
                           ArrayRef<int64_t> sizes) -> LogicalResult {
    SmallVector<LoopLikeOpInterface> loops;
    if (failed(tile(target, sizes, &loops)))
      return failure();
    if (!streaming && !dynamicRows)
      return success();
    // Tiling makes one loop per tiled dimension, in dimension order.
    unsigned next = 0;
    for (unsigned d = 0; d < sizes.size() && next < loops.size(); ++d) {
      if (sizes[d] == 0)
        continue;
      Operation *loop = loops[next++].getOperation();
      if (llvm::is_contained(dims->k, d))
        loop->setAttr(kStreamedAttr, UnitAttr::get(loop->getContext()));
      else if (dynamicRows && llvm::is_contained(dims->m, d))
        loop->setAttr(kFirstStreamsAttr, UnitAttr::get(loop->getContext()));
    }
    return success();
  };

  FailureOr<linalg::LinalgOp> cached = tile(op, cache);
  if (failed(cached))
    return failure();
  if (dims->m.empty())
    return tileRegisters(*cached, regs);
  unsigned mInner = dims->m.back();
  if (!ShapedType::isDynamic(cached->getStaticLoopRanges()[mInner]))
    return tileRegisters(*cached, regs);

  // A dynamic row count (a decode step's batch, often below mr): rows go in
  // blocks of mr, then the last M % mr one at a time, so that every
  // register tile keeps a static shape and vectorizes. Left to the generic
  // peeling, the last rows would form one dynamic tile of scalar code.
  SmallVector<int64_t> rows(numLoops, 0), inner(regs);
  for (ArrayRef<unsigned> group :
       {ArrayRef<unsigned>(dims->batch), ArrayRef<unsigned>(dims->m)})
    for (unsigned d : group) {
      rows[d] = regs[d];
      inner[d] = 0;
    }
  SmallVector<LoopLikeOpInterface> loops;
  FailureOr<linalg::LinalgOp> blocked = tile(*cached, rows, &loops);
  if (failed(blocked))
    return failure();
  // Tiling makes one loop per tiled dimension, in dimension order.
  unsigned position = llvm::count_if(ArrayRef(rows).take_front(mInner),
                                     [](int64_t size) { return size != 0; });
  auto mLoop = position < loops.size()
                   ? dyn_cast<scf::ForOp>(loops[position].getOperation())
                   : scf::ForOp();
  if (mLoop)
    mLoop->setAttr(kFirstStreamsAttr, rewriter.getUnitAttr());
  scf::ForOp partial;
  if (!mLoop ||
      failed(scf::peelForLoopAndSimplifyBounds(rewriter, mLoop, partial)))
    return tileRegisters(*blocked, inner);
  mLoop->setAttr(kPeeledAttr, rewriter.getUnitAttr());
  partial->setAttr(kPeeledAttr, rewriter.getUnitAttr());
  if (failed(tileRegisters(*blocked, inner)))
    return failure();
  linalg::LinalgOp rest;
  partial.walk([&](linalg::LinalgOp candidate) {
    if (isContraction(candidate))
      rest = candidate;
  });
  SmallVector<int64_t> single(inner);
  single[mInner] = 1;
  return success(rest && succeeded(tileRegisters(rest, single)));
}

/// For an all-parallel op with static extents that writes its output in
/// loop order and reads some input with another loop innermost (a
/// transpose): (the output's innermost loop, that input's).
std::optional<std::pair<unsigned, unsigned>>
transposedLoops(linalg::LinalgOp op) {
  if (op.getNumReductionLoops() != 0 || op.getNumDpsInits() != 1 ||
      !op.getMatchingIndexingMap(op.getDpsInitOperand(0)).isIdentity() ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic))
    return std::nullopt;
  unsigned innermost = op.getNumLoops() - 1;
  for (OpOperand *input : op.getDpsInputOperands()) {
    AffineMap map = op.getMatchingIndexingMap(input);
    if (!map.isProjectedPermutation() || map.getNumResults() < 2)
      continue;
    unsigned inner = cast<AffineDimExpr>(map.getResults().back()).getPosition();
    if (inner != innermost && map.isFunctionOfDim(innermost))
      return std::make_pair(innermost, inner);
  }
  return std::nullopt;
}

/// Tiles an elementwise or reduction op inside a distributed tile so that
/// each piece is one row of at most a few vectors (or, for a transpose, a
/// square block of one vector each way).
LogicalResult tileForVectors(RewriterBase &rewriter, linalg::LinalgOp op,
                             const CpuTilingConfig &config) {
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> sizes(ranges.size(), 0);
  if (ranges.empty())
    return success();
  // A piece already this small (a register tile of dequantized weights) is
  // one vector operation as it is. Its extents may still be run-time values
  // bounded by the register tile (a contraction's tiles become static only
  // when its loops are peeled): cutting it into rows here would leave a
  // loop writing each row to memory for the contraction to read back.
  int64_t elements = 1;
  for (auto [dim, range] : llvm::enumerate(ranges)) {
    int64_t bound = range;
    Value operand;
    unsigned operandDim;
    if (ShapedType::isDynamic(range) &&
        succeeded(
            op.mapIterationSpaceDimToOperandDim(dim, operand, operandDim))) {
      FailureOr<int64_t> ub = ValueBoundsConstraintSet::computeConstantBound(
          presburger::BoundType::UB, {operand, int64_t(operandDim)},
          /*stopCondition=*/nullptr, /*closedUB=*/true);
      bound = succeeded(ub) ? *ub : ShapedType::kDynamic;
    }
    // Past the bound it stays unknown (kDynamic is negative: multiplying
    // it on would wrap to a small count and keep a large op whole).
    elements = ShapedType::isDynamic(elements) ||
                       ShapedType::isDynamic(bound) ||
                       elements > 4 * config.lanes
                   ? ShapedType::kDynamic
                   : elements * bound;
  }
  if (!ShapedType::isDynamic(elements) && elements <= 4 * config.lanes)
    return success();
  // A transpose (an input whose innermost dimension is another loop than
  // the output's, as in a convolution's accumulator read back as NCHW):
  // square blocks of one vector along both, which read and write whole
  // vectors and transpose in registers, where rows along the output's
  // innermost dimension would read every input element on its own.
  if (std::optional<std::pair<unsigned, unsigned>> swapped =
          transposedLoops(op)) {
    auto [inner, outer] = *swapped;
    for (unsigned i = 0; i < ranges.size(); ++i)
      sizes[i] = ranges[i] == 1 ? 0 : 1;
    for (unsigned i : {inner, outer})
      sizes[i] = ranges[i] > config.lanes ? config.lanes : 0;
  } else {
    // A reduction along the innermost (contiguous) dimension reduces one
    // row at a time; otherwise the innermost dimension is cut into a few
    // vectors and every outer dimension steps by one.
    bool innerReduction = iterators.back() == utils::IteratorType::reduction;
    for (unsigned i = 0; i < ranges.size(); ++i) {
      if (iterators[i] != utils::IteratorType::parallel)
        continue;
      bool innermost = i + 1 == ranges.size();
      if (!innermost || innerReduction)
        sizes[i] = ranges[i] == 1 ? 0 : 1;
      else if (ShapedType::isDynamic(ranges[i]) || ranges[i] > 4 * config.lanes)
        sizes[i] = 4 * config.lanes;
    }
  }
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

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

/// Splits `loop` into whole steps and a last partial step, then does the
/// same for the loops nested in both. Every register tile but the last of
/// each loop is then static, and so is the last when the bounds are: the
/// vectorizer needs static shapes.
void peelNest(RewriterBase &rewriter, scf::ForOp loop) {
  scf::ForOp partial;
  SmallVector<scf::ForOp> parts = {loop};
  // Row loops of contractions are peeled already (whole register blocks /
  // single rows); peeling them again would add a loop that never runs.
  if (loop->hasAttr(kPeeledAttr))
    loop->removeAttr(kPeeledAttr);
  else if (succeeded(
               scf::peelForLoopAndSimplifyBounds(rewriter, loop, partial)))
    parts.push_back(partial);
  for (scf::ForOp part : parts) {
    SmallVector<scf::ForOp> children;
    part.getBody()->walk([&](scf::ForOp child) {
      if (child->getParentOfType<scf::ForOp>() == part)
        children.push_back(child);
    });
    for (scf::ForOp child : children)
      peelNest(rewriter, child);
  }
}

/// The last linalg op of the function body that is not yet inside a tile
/// and has not been given up on.
linalg::LinalgOp findNextRoot(func::FuncOp func,
                              const llvm::DenseSet<Operation *> &skipped) {
  for (Operation &op : llvm::reverse(func.getBody().front())) {
    auto linalgOp = dyn_cast<linalg::LinalgOp>(&op);
    if (linalgOp && linalgOp.hasPureTensorSemantics() && !skipped.contains(&op))
      return linalgOp;
  }
  return nullptr;
}

struct SitsCpuTileAndFusePass
    : cpu::impl::SitsCpuTileAndFuseBase<SitsCpuTileAndFusePass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    CpuTilingConfig config = getCpuTilingConfig(func, numThreads);
    IRRewriter rewriter(&getContext());

    // Convolutions take the contraction path through im2col.
    SmallVector<linalg::Conv2DNchwFchwOp> convs;
    if (im2col)
      func.walk([&](linalg::Conv2DNchwFchwOp conv) { convs.push_back(conv); });
    for (linalg::Conv2DNchwFchwOp conv : convs) {
      rewriter.setInsertionPoint(conv);
      (void)linalg::rewriteInIm2Col(rewriter, conv);
    }

    llvm::DenseSet<Operation *> skipped;
    SmallVector<scf::ForallOp> tiles;
    while (linalg::LinalgOp root = findNextRoot(func, skipped)) {
      skipped.insert(root);
      if (!isSafelyTileable(root))
        continue;
      llvm::SetVector<Operation *> group = computeFusionGroup(root);
      SmallVector<int64_t> sizes = selectDistributionTiles(root, group, config);
      if (!distribute || llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
        continue;

      scf::SCFTileAndFuseOptions options;
      scf::SCFTilingOptions tiling;
      tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
      tiling.setTileSizes(asFoldResults(&getContext(), sizes));
      options.setTilingOptions(tiling);
      options.setFusionControlFn(
          [&](tensor::ExtractSliceOp slice, OpResult producer,
              bool isDestination)
              -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
            Operation *op = producer.getOwner();
            if (!isa<TilingInterface>(op) || !isSafelyTileable(op))
              return std::nullopt;
            // Initial values (fills) are always fused. Other producers fuse
            // when each tile needs a part of them of its own, and then only
            // cheap ones or ones the group owns, so no work is done twice.
            if (isDestination)
              return scf::SCFTileAndFuseOptions::ControlFnResult{};
            // An elementwise producer of a contraction operand from
            // integer codes (dequantized weights) is recomputed per tile even
            // when tiles share it: its cost is a 1 / tile-rows fraction of
            // the contraction's, and its result then stays in cache.
            bool feedsContraction =
                isDequantizing(op) &&
                llvm::any_of(slice->getUsers(), isContraction);
            if (!isDisjointPerTile(slice) && !feedsContraction)
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
        continue;
      for (OpResult res : root->getResults())
        if (Value replacement = result->replacements.lookup(res))
          rewriter.replaceAllUsesWith(res, replacement);
      if (root->use_empty())
        rewriter.eraseOp(root);
      // Fusion leaves the slices it fused through behind, unused; they
      // would keep the original producers alive.
      for (LoopLikeOpInterface loop : result->loops)
        loop->walk<WalkOrder::PostOrder, ReverseIterator>([&](Operation *op) {
          if (isOpTriviallyDead(op))
            rewriter.eraseOp(op);
        });
      // Producers are listed users first, so one pass frees whole chains.
      for (Operation *producer : result->fusedProducers)
        if (isOpTriviallyDead(producer))
          rewriter.eraseOp(producer);
      ++numGroups;
      numFused += result->fusedProducers.size();
      if (!result->loops.empty())
        if (auto forall =
                dyn_cast<scf::ForallOp>(result->loops.front().getOperation()))
          tiles.push_back(forall);
    }

    // Second level: registers and vectors, inside every tile (and for ops
    // that were not distributed).
    // Contractions first: they take their dequantizing producers into
    // their loops.
    auto collect = [&](bool contractions) {
      SmallVector<linalg::LinalgOp> ops;
      func.walk([&](linalg::LinalgOp op) {
        if (op.hasPureTensorSemantics() && isSafelyTileable(op) &&
            isContraction(op) == contractions)
          ops.push_back(op);
      });
      return ops;
    };
    for (linalg::LinalgOp op : collect(/*contractions=*/true))
      (void)tileContractionForRegisters(rewriter, op, config);
    for (linalg::LinalgOp op : collect(/*contractions=*/false))
      if (op.getNumLoops() > 0)
        (void)tileForVectors(rewriter, op, config);

    SmallVector<scf::ForOp> outermost;
    func.walk([&](scf::ForOp loop) {
      if (!loop->getParentOfType<scf::ForOp>())
        outermost.push_back(loop);
    });
    for (scf::ForOp loop : outermost)
      peelNest(rewriter, loop);
    // Tile sizes min(step, ub - iv) in loops that need no peeling are the
    // step: the loop bounds say so.
    RewritePatternSet patterns(&getContext());
    scf::populateSCFForLoopCanonicalizationPatterns(patterns);
    // A fused producer's destination is a slice of a tensor.empty of the
    // whole result; an empty tensor of the slice's shape keeps the
    // buffer the size of the tile.
    tensor::populateFoldTensorEmptyPatterns(patterns);
    if (failed(applyPatternsGreedily(func, std::move(patterns))))
      return signalPassFailure();
  }
};

} // namespace
