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

#include "mlir/Dialect/Utils/StaticValueUtils.h"

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

/// Rewrites `loop` as a parallel loop over min(trips, chunks) chunks whose
/// bodies run consecutive linearized iterations in an scf.for.
void chunk(scf::ParallelOp loop, int64_t chunks) {
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  auto cst = [&](int64_t v) -> Value {
    return arith::ConstantIndexOp::create(b, loc, v);
  };
  Value zero = cst(0), one = cst(1);
  Value total;
  SmallVector<Value> trips = sits::cpu::buildTripCounts(b, loc, loop, total);
  Value count = b.createOrFold<arith::MinSIOp>(loc, total, cst(chunks));
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
      if (trips && *trips <= chunks)
        continue;
      chunk(loop, chunks);
      ++numChunked;
    }
  }
};

} // namespace
