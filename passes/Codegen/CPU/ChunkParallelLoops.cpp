//===- ChunkParallelLoops.cpp - A few tasks per parallel loop -------------===//
//
// Distributed tiles become scf.parallel iterations, each a unit of work the
// runtime's fork-join hands to a thread. A decode step runs hundreds of
// such loops over a handful of rows each, so handing out every tile costs
// more than the tiles' work. Here each outermost loop becomes a loop over at
// most N chunks of consecutive iterations, each chunk an scf.for over its
// range.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/ParallelLoops.h"
#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/ValueBoundsOpInterface.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUCHUNKPARALLELLOOPS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;

SmallVector<Value> mlir::sits::cpu::buildTripCounts(OpBuilder &b, Location loc,
                                                    scf::ParallelOp loop,
                                                    Value &total) {
  Value zero = arith::ConstantIndexOp::create(b, loc, 0);
  total = arith::ConstantIndexOp::create(b, loc, 1);
  SmallVector<Value> trips;
  for (auto [lb, ub, step] : llvm::zip_equal(
           loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    Value span = b.createOrFold<arith::SubIOp>(loc, ub, lb);
    Value trip = b.createOrFold<arith::CeilDivSIOp>(loc, span, step);
    trip = b.createOrFold<arith::MaxSIOp>(loc, trip, zero);
    trips.push_back(trip);
    total = b.createOrFold<arith::MulIOp>(loc, total, trip);
  }
  return trips;
}

SmallVector<Value> mlir::sits::cpu::delinearize(OpBuilder &b, Location loc,
                                                Value linear, ValueRange trips,
                                                ValueRange lowerBounds,
                                                ValueRange steps) {
  Value rest = linear;
  SmallVector<Value> ivs(trips.size());
  for (int64_t d = int64_t(trips.size()) - 1; d >= 0; --d) {
    Value index = rest;
    if (d > 0) {
      index = b.createOrFold<arith::RemSIOp>(loc, rest, trips[d]);
      rest = b.createOrFold<arith::DivSIOp>(loc, rest, trips[d]);
    }
    ivs[d] = b.createOrFold<arith::AddIOp>(
        loc, lowerBounds[d],
        b.createOrFold<arith::MulIOp>(loc, index, steps[d]));
  }
  return ivs;
}

namespace {

/// The static iteration count of `loop`, if every bound and step is
/// constant.
std::optional<int64_t> staticTripCount(scf::ParallelOp loop) {
  int64_t total = 1;
  for (auto [lb, ub, step] : llvm::zip_equal(
           loop.getLowerBound(), loop.getUpperBound(), loop.getStep())) {
    std::optional<int64_t> l = getConstantIntValue(lb),
                           u = getConstantIntValue(ub),
                           s = getConstantIntValue(step);
    if (!l || !u || !s || *s <= 0)
      return std::nullopt;
    total *= std::max<int64_t>(0, llvm::divideCeilSigned(*u - *l, *s));
  }
  return total;
}

/// The most iterations `loop` runs: its trip count when constant, else
/// from an upper bound of its span (a tile's `affine.min` of its size and
/// what remains, a peeled remainder) and a constant step.
std::optional<int64_t> maxTripCount(scf::ForOp loop) {
  if (std::optional<APInt> trips = loop.getStaticTripCount())
    return int64_t(trips->getZExtValue());
  std::optional<int64_t> step = getConstantIntValue(loop.getStep());
  if (!step || *step <= 0)
    return std::nullopt;
  MLIRContext *ctx = loop.getContext();
  AffineMap span =
      AffineMap::get(2, 0, getAffineDimExpr(0, ctx) - getAffineDimExpr(1, ctx));
  FailureOr<int64_t> most = ValueBoundsConstraintSet::computeConstantBound(
      presburger::BoundType::UB,
      ValueBoundsConstraintSet::Variable(
          span, ValueRange{loop.getUpperBound(), loop.getLowerBound()}),
      /*stopCondition=*/nullptr, /*closedUB=*/true);
  if (failed(most))
    return std::nullopt;
  return std::max<int64_t>(0, llvm::divideCeilSigned(*most, *step));
}

/// What a copy of a statically shaped buffer costs: a vector operation per
/// cache line it moves, and a call. None for a run-time shape.
std::optional<int64_t> copyWork(memref::CopyOp copy) {
  auto type = dyn_cast<MemRefType>(copy.getSource().getType());
  if (!type || !type.hasStaticShape() || !type.getElementType().isIntOrFloat())
    return std::nullopt;
  int64_t bits = type.getNumElements() * type.getElementTypeBitWidth();
  constexpr int64_t kCall = 8;
  return kCall + llvm::divideCeil(bits, 512);
}

/// An estimate of the operations `block` runs (its terminator aside): one
/// per op, an scf.for's body times its constant trip count, the costlier
/// branch of an scf.if, a copy by the cache lines it moves. None when some
/// part's cost is a run-time value (a loop with dynamic bounds, a copy of
/// a run-time shape, a call, any other op with regions).
std::optional<int64_t> estimateWork(Block &block) {
  // Saturated: what matters is only whether it is small.
  constexpr int64_t kCap = int64_t(1) << 40;
  int64_t work = 0;
  for (Operation &op : block.without_terminator()) {
    int64_t cost = 1;
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      std::optional<int64_t> trips = maxTripCount(loop);
      std::optional<int64_t> body = estimateWork(*loop.getBody());
      if (!trips || !body)
        return std::nullopt;
      cost += std::min<int64_t>(kCap, *trips * *body);
    } else if (auto branch = dyn_cast<scf::IfOp>(op)) {
      std::optional<int64_t> then = estimateWork(*branch.thenBlock());
      std::optional<int64_t> otherwise =
          branch.elseBlock() ? estimateWork(*branch.elseBlock()) : 0;
      if (!then || !otherwise)
        return std::nullopt;
      cost += std::max(*then, *otherwise);
    } else if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      std::optional<int64_t> moved = copyWork(copy);
      if (!moved)
        return std::nullopt;
      cost = *moved;
    } else if (op.getNumRegions() != 0 ||
               isa<func::CallOp, linalg::LinalgOp>(op)) {
      return std::nullopt;
    }
    work = std::min(kCap, work + cost);
  }
  return work;
}

/// Rewrites `loop` as a parallel loop over min(trips, chunks) chunks whose
/// bodies run consecutive linearized iterations in an scf.for. With
/// `work`, an estimate of one iteration's operations, a loop whose
/// iterations add up to less than `serialWork` runs as one chunk: the
/// runtime's fork-join then runs it on the calling thread, where handing
/// out chunks would cost more than it saves.
void chunk(scf::ParallelOp loop, int64_t chunks, std::optional<int64_t> work,
           int64_t serialWork) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value zero = cst(0), one = cst(1);
  Value total;
  SmallVector<Value> trips = sits::cpu::buildTripCounts(b, loc, loop, total);
  Value count = b.createOrFold<arith::MinSIOp>(loc, total, cst(chunks));
  if (work && *work < serialWork) {
    Value small = b.createOrFold<arith::CmpIOp>(
        loc, arith::CmpIPredicate::ult,
        b.createOrFold<arith::MulIOp>(loc, total,
                                      cst(std::max<int64_t>(*work, 1))),
        cst(serialWork));
    count = b.createOrFold<arith::SelectOp>(loc, small, one, count);
  }
  Value size = b.createOrFold<arith::CeilDivSIOp>(
      loc, total, b.createOrFold<arith::MaxSIOp>(loc, count, one));

  auto chunked = scf::ParallelOp::create(b, loc, ValueRange{zero},
                                         ValueRange{count}, ValueRange{one});
  b.setInsertionPointToStart(chunked.getBody());
  Value begin =
      b.createOrFold<arith::MulIOp>(loc, chunked.getInductionVars()[0], size);
  Value end = b.createOrFold<arith::MinSIOp>(
      loc, b.createOrFold<arith::AddIOp>(loc, begin, size), total);
  auto inner = scf::ForOp::create(b, loc, begin, end, one);

  // The original induction variables from the linear index, last fastest.
  b.setInsertionPointToStart(inner.getBody());
  SmallVector<Value> ivs =
      sits::cpu::delinearize(b, loc, inner.getInductionVar(), trips,
                             loop.getLowerBound(), loop.getStep());

  // The body moves into the scf.for, without its scf.reduce terminator.
  Block *body = loop.getBody();
  for (auto [old, iv] : llvm::zip_equal(loop.getInductionVars(), ivs))
    old.replaceAllUsesWith(iv);
  Block *target = inner.getBody();
  target->getOperations().splice(Block::iterator(target->getTerminator()),
                                 body->getOperations(), body->begin(),
                                 std::prev(body->end()));
  loop.erase();
}

struct SitsCpuChunkParallelLoopsPass
    : sits::cpu::impl::SitsCpuChunkParallelLoopsBase<
          SitsCpuChunkParallelLoopsPass> {
  using Base::Base;

  void runOnOperation() override {
    int64_t threads =
        sits::cpu::getCpuTilingConfig(getOperation(), numThreads).threads;
    int64_t chunks = threads * chunksPerThread;
    if (threads <= 1 || chunks <= 0)
      return;
    SmallVector<scf::ParallelOp> loops;
    getOperation().walk([&](scf::ParallelOp loop) {
      if (loop.getNumResults() == 0 &&
          !loop->getParentOfType<scf::ParallelOp>())
        loops.push_back(loop);
    });
    for (scf::ParallelOp loop : loops) {
      std::optional<int64_t> trips = staticTripCount(loop);
      std::optional<int64_t> work = estimateWork(*loop.getBody());
      if (trips && work && *trips * *work < serialWork) {
        // Small whatever runs it: one chunk, which folds into its body.
        chunk(loop, 1, std::nullopt, serialWork);
        ++numSerial;
        continue;
      }
      if (trips && *trips <= chunks)
        continue;
      chunk(loop, chunks, work, serialWork);
      ++numChunked;
    }
  }
};

} // namespace
