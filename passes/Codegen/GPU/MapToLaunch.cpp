//===- MapToLaunch.cpp - Block and thread loops to gpu.launch -------------===//
//
// After bufferization, a block loop (scf.forall mapped to #gpu.block) is a
// kernel: its iterations become the blocks of a one-dimensional grid and
// its body the kernel's code. The thread loops inside it become SPMD code
// over the block's threads (upstream's mapping, which predicates loops
// smaller than the block and puts a barrier after each).
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/GPU/TransformOps/GPUTransformOps.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUMAPTOLAUNCH
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

bool hasMapping(scf::ForallOp forall, bool threads) {
  std::optional<ArrayAttr> mapping = forall.getMapping();
  if (!mapping || mapping->empty())
    return false;
  return threads ? isa<mlir::gpu::GPUThreadMappingAttr>((*mapping)[0])
                 : isa<mlir::gpu::GPUBlockMappingAttr>((*mapping)[0]);
}

bool isWorkgroupMemory(MemRefType type) {
  auto space =
      dyn_cast_if_present<mlir::gpu::AddressSpaceAttr>(type.getMemorySpace());
  return space && space.getValue() == mlir::gpu::AddressSpace::Workgroup;
}

/// Iterations of `forall` (static trip counts only).
std::optional<int64_t> staticIterations(scf::ForallOp forall) {
  int64_t count = 1;
  for (auto [lb, ub, step] :
       llvm::zip_equal(forall.getStaticLowerBound(),
                       forall.getStaticUpperBound(), forall.getStaticStep())) {
    if (ShapedType::isDynamic(lb) || ShapedType::isDynamic(ub) ||
        ShapedType::isDynamic(step))
      return std::nullopt;
    count *= (ub - lb + step - 1) / step;
  }
  return count;
}

/// The ordering of forall dimensions by their linear mapping id: the
/// dimension mapped to linear_dim_0 varies fastest.
SmallVector<unsigned> slowestFirst(scf::ForallOp forall) {
  SmallVector<std::pair<int64_t, unsigned>> ids;
  ArrayAttr mapping = *forall.getMapping();
  for (auto [i, attr] : llvm::enumerate(mapping)) {
    auto device = cast<DeviceMappingAttrInterface>(attr);
    ids.push_back({device.getMappingId(), unsigned(i)});
  }
  llvm::sort(ids, [](auto a, auto b) { return a.first > b.first; });
  return llvm::map_to_vector(ids, [](auto p) { return p.second; });
}

/// Replaces block loop `forall` by a gpu.launch whose grid enumerates its
/// iterations and whose blocks have `threads` threads.
FailureOr<mlir::gpu::LaunchOp>
createLaunch(RewriterBase &rewriter, scf::ForallOp forall, int64_t threads) {
  Location loc = forall.getLoc();
  rewriter.setInsertionPoint(forall);
  SmallVector<OpFoldResult> lbs = forall.getMixedLowerBound();
  SmallVector<OpFoldResult> ubs = forall.getMixedUpperBound();
  SmallVector<OpFoldResult> steps = forall.getMixedStep();
  // Trip counts, and the grid as their product.
  AffineExpr s0, s1, s2;
  bindSymbols(rewriter.getContext(), s0, s1, s2);
  SmallVector<OpFoldResult> counts;
  for (auto [lb, ub, step] : llvm::zip_equal(lbs, ubs, steps))
    counts.push_back(affine::makeComposedFoldedAffineApply(
        rewriter, loc, (s1 - s0).ceilDiv(s2), {lb, ub, step}));
  SmallVector<unsigned> order = slowestFirst(forall);
  OpFoldResult grid = rewriter.getIndexAttr(1);
  for (OpFoldResult count : counts)
    grid = affine::makeComposedFoldedAffineApply(rewriter, loc, s0 * s1,
                                                 {grid, count});
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  Value gridX = getValueOrCreateConstantIndexOp(rewriter, loc, grid);
  Value blockX = arith::ConstantIndexOp::create(rewriter, loc, threads);
  auto launch = mlir::gpu::LaunchOp::create(rewriter, loc, gridX, one, one,
                                            blockX, one, one);
  Block &body = launch.getBody().front();
  rewriter.setInsertionPointToStart(&body);
  // Block id -> forall indices, slowest varying first.
  SmallVector<OpFoldResult> basis =
      llvm::map_to_vector(order, [&](unsigned i) { return counts[i]; });
  auto delinearize = affine::AffineDelinearizeIndexOp::create(
      rewriter, loc, launch.getBlockIds().x, basis, /*hasOuterBound=*/true);
  SmallVector<Value> ivs(counts.size());
  for (auto [pos, i] : llvm::enumerate(order)) {
    ivs[i] = getValueOrCreateConstantIndexOp(
        rewriter, loc,
        affine::makeComposedFoldedAffineApply(
            rewriter, loc, s0 + s1 * s2,
            {lbs[i], delinearize.getResult(pos), steps[i]}));
  }
  auto terminator = mlir::gpu::TerminatorOp::create(rewriter, loc);
  // The forall has no results after bufferization; its body moves in.
  Block *forallBody = forall.getBody();
  rewriter.eraseOp(forallBody->getTerminator());
  rewriter.inlineBlockBefore(forallBody, terminator, ivs);
  rewriter.eraseOp(forall);
  return launch;
}

/// Buffers allocated in a kernel: workgroup buffers (shared by the block)
/// become attributions of the launch, others are private to a thread and
/// become stack allocations.
LogicalResult placeKernelBuffers(RewriterBase &rewriter,
                                 mlir::gpu::LaunchOp launch) {
  SmallVector<memref::AllocOp> allocs;
  launch.walk([&](memref::AllocOp alloc) { allocs.push_back(alloc); });
  for (memref::AllocOp alloc : allocs) {
    MemRefType type = alloc.getType();
    // Frees of kernel buffers go: attributions and allocas live as long as
    // the block or the thread.
    for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
      if (isa<memref::DeallocOp>(user))
        rewriter.eraseOp(user);
    if (!type.hasStaticShape())
      return alloc.emitError()
             << "a dynamically sized buffer inside a GPU kernel is not "
                "supported";
    if (isWorkgroupMemory(type)) {
      BlockArgument buffer =
          launch.addWorkgroupAttribution(type, alloc.getLoc());
      rewriter.replaceOp(alloc, buffer);
      continue;
    }
    auto forall = alloc->getParentOfType<scf::ForallOp>();
    bool inThread = forall && hasMapping(forall, /*threads=*/true);
    if (!inThread) {
      // Outside thread loops every thread runs the code; a buffer there is
      // one per thread too, which is right as long as no thread loop reads
      // it (bufferization only places such copies around single ops).
      bool readInThreadLoop = llvm::any_of(alloc->getUsers(), [](Operation *u) {
        auto f = u->getParentOfType<scf::ForallOp>();
        return f && hasMapping(f, /*threads=*/true);
      });
      if (readInThreadLoop)
        return alloc.emitError()
               << "a buffer shared by the threads of a block is not in "
                  "workgroup memory";
    }
    rewriter.setInsertionPoint(alloc);
    rewriter.replaceOpWithNewOp<memref::AllocaOp>(alloc, type,
                                                  alloc.getAlignmentAttr());
  }
  return success();
}

/// Whether `op` writes memory.
bool writesMemory(Operation *op) {
  if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op))
    return linalgOp.hasPureBufferSemantics();
  auto effects = dyn_cast<MemoryEffectOpInterface>(op);
  if (!effects)
    return op->getNumRegions() != 0 || !isMemoryEffectFree(op);
  return effects.hasEffect<MemoryEffects::Write>();
}

/// Code of a block outside its thread loops runs on every thread. Reads
/// and index arithmetic may, but a write there (an op no thread loop
/// covers: a reduction to a scalar, a copy bufferization added) would be
/// repeated by every thread, racing with itself when it reads what it
/// writes. Such ops run on thread 0, and the block waits for them.
void runBlockWritesOnOneThread(RewriterBase &rewriter,
                               mlir::gpu::LaunchOp launch) {
  Block &body = launch.getBody().front();
  SmallVector<Operation *> writes;
  for (Operation &op : body.without_terminator()) {
    auto forall = dyn_cast<scf::ForallOp>(&op);
    if (forall && hasMapping(forall, /*threads=*/true))
      continue;
    if (isa<memref::AllocaOp, mlir::gpu::BarrierOp>(&op))
      continue;
    // Shared among the block's threads (sits-gpu-distribute-copies).
    if (isa<linalg::CopyOp>(&op) && op.hasAttr(sits::gpu::kCooperativeAttrName))
      continue;
    // Copies of a buffer onto itself (left by bufferization) do nothing.
    if (auto copy = dyn_cast<memref::CopyOp>(&op);
        copy && copy.getSource() == copy.getTarget()) {
      writes.push_back(&op);
      continue;
    }
    if (writesMemory(&op))
      writes.push_back(&op);
  }
  for (Operation *op : writes) {
    Location loc = op->getLoc();
    if (auto copy = dyn_cast<memref::CopyOp>(op);
        copy && copy.getSource() == copy.getTarget()) {
      rewriter.eraseOp(op);
      continue;
    }
    rewriter.setInsertionPoint(op);
    Value tid =
        mlir::gpu::ThreadIdOp::create(rewriter, loc, mlir::gpu::Dimension::x);
    Value zero = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value first = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::eq,
                                        tid, zero);
    auto guard = scf::IfOp::create(rewriter, loc, first);
    rewriter.moveOpBefore(op, guard.thenBlock()->getTerminator());
    rewriter.setInsertionPointAfter(guard);
    mlir::gpu::BarrierOp::create(rewriter, loc);
  }
}

/// The block size a kernel needs: its largest thread loop.
int64_t blockSize(scf::ForallOp block) {
  int64_t threads = 1;
  block.walk([&](scf::ForallOp inner) {
    if (inner != block && hasMapping(inner, /*threads=*/true))
      if (std::optional<int64_t> n = staticIterations(inner))
        threads = std::max(threads, *n);
  });
  return threads;
}

/// Whether `op` reads or writes memory in a way the host must not do.
bool touchesMemory(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return (linalgOp && linalgOp.hasPureBufferSemantics()) ||
         isa<memref::CopyOp>(op);
}

/// A loop or branch of the host function, outside every block loop, whose
/// body reads or writes buffers (a scatter through run-time indices: the
/// paged KV pool's slot writes). Its loads feed its own control flow, so it
/// runs whole in one kernel rather than op by op.
bool isSerialRegion(Operation *op) {
  if (!isa<scf::ForOp, scf::IfOp, scf::WhileOp>(op) || op->getNumResults() ||
      isa<scf::ForallOp, mlir::gpu::LaunchOp>(op->getParentOp()))
    return false;
  // Block loops inside are distributed on their own: none may be there.
  bool accesses = false;
  WalkResult walk = op->walk([&](Operation *inner) {
    if (isa<scf::ForallOp, mlir::gpu::LaunchOp>(inner))
      return WalkResult::interrupt();
    accesses |=
        touchesMemory(inner) ||
        (inner->getNumRegions() == 0 && !isMemoryEffectFree(inner) &&
         llvm::any_of(inner->getOperandTypes(), llvm::IsaPred<MemRefType>));
    return WalkResult::advance();
  });
  return accesses && !walk.wasInterrupted();
}

/// The copies directly in `block`'s body between statically shaped
/// buffers (a gather's whole K/V block), which its threads can share.
SmallVector<memref::CopyOp> staticBlockCopies(Block &block) {
  SmallVector<memref::CopyOp> copies;
  for (auto copy : block.getOps<memref::CopyOp>())
    if (cast<MemRefType>(copy.getSource().getType()).hasStaticShape() &&
        cast<MemRefType>(copy.getTarget().getType()).hasStaticShape() &&
        copy.getSource() != copy.getTarget())
      copies.push_back(copy);
  return copies;
}

/// Moves `op` into a new kernel of one block of one thread.
void runInOneThread(RewriterBase &rewriter, Operation *op) {
  Location loc = op->getLoc();
  rewriter.setInsertionPoint(op);
  Value one = arith::ConstantIndexOp::create(rewriter, loc, 1);
  auto launch =
      mlir::gpu::LaunchOp::create(rewriter, loc, one, one, one, one, one, one);
  rewriter.setInsertionPointToStart(&launch.getBody().front());
  auto terminator = mlir::gpu::TerminatorOp::create(rewriter, loc);
  rewriter.moveOpBefore(op, terminator);
}

struct SitsGpuMapToLaunchPass
    : sits::gpu::impl::SitsGpuMapToLaunchBase<SitsGpuMapToLaunchPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    MLIRContext *ctx = &getContext();
    IRRewriter rewriter(ctx);
    int64_t warpSize = sits::gpu::getGpuTilingConfig(func).warpSize;

    // Ops no block loop covers run in a kernel of one thread: whole host
    // loops that access buffers first, then single ops.
    SmallVector<Operation *> serial;
    func.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (isa<scf::ForallOp, mlir::gpu::LaunchOp>(op))
        return WalkResult::skip();
      if (!isSerialRegion(op))
        return WalkResult::advance();
      serial.push_back(op);
      return WalkResult::skip();
    });
    for (Operation *op : serial) {
      op->emitRemark() << "runs in a GPU kernel of one thread: a host loop "
                          "over buffers";
      runInOneThread(rewriter, op);
      ++numLaunches;
    }
    SmallVector<Operation *> stragglers;
    func.walk([&](Operation *op) {
      if (!touchesMemory(op) || op->getParentOfType<scf::ForallOp>() ||
          op->getParentOfType<mlir::gpu::LaunchOp>())
        return;
      stragglers.push_back(op);
    });
    for (Operation *op : stragglers) {
      op->emitRemark() << "runs in a GPU kernel of one thread: it was not "
                          "distributed over blocks";
      runInOneThread(rewriter, op);
      ++numLaunches;
    }

    // A parallel loop of the host the tiling did not map (the paged KV
    // pool's gather of each sequence's blocks): one block per iteration,
    // the first dimension varying slowest; its static copies are shared
    // by four warps.
    llvm::DenseSet<Operation *> gathers;
    func.walk<WalkOrder::PreOrder>([&](scf::ForallOp forall) {
      if (forall.getMapping() && !forall.getMapping()->empty())
        return WalkResult::skip();
      if (forall->getParentOfType<mlir::gpu::LaunchOp>() ||
          forall->getParentOfType<scf::ForallOp>())
        return WalkResult::skip();
      int64_t rank = forall.getRank();
      SmallVector<Attribute> mapping;
      for (int64_t i = 0; i < rank; ++i)
        mapping.push_back(mlir::gpu::GPUBlockMappingAttr::get(
            ctx,
            mlir::gpu::MappingId(int64_t(mlir::gpu::MappingId::LinearDim0) +
                                 rank - 1 - i)));
      forall.setMappingAttr(ArrayAttr::get(ctx, mapping));
      gathers.insert(forall);
      return WalkResult::skip();
    });

    SmallVector<scf::ForallOp> blocks;
    func.walk<WalkOrder::PreOrder>([&](scf::ForallOp forall) {
      if (hasMapping(forall, /*threads=*/false)) {
        blocks.push_back(forall);
        return WalkResult::skip();
      }
      return WalkResult::advance();
    });
    for (scf::ForallOp block : blocks) {
      if (block.getNumResults() != 0) {
        block.emitError() << "block loop still has tensor results: map to "
                             "blocks after bufferization";
        return signalPassFailure();
      }
      int64_t threads = blockSize(block);
      bool gather = gathers.contains(block.getOperation()) &&
                    !staticBlockCopies(*block.getBody()).empty();
      if (gather)
        threads = std::max<int64_t>(threads, 4 * warpSize);
      // No NVIDIA GPU runs more threads in a block.
      if (threads > 1024) {
        block.emitError() << "a block of " << threads
                          << " threads: more than the 1024 a GPU runs";
        return signalPassFailure();
      }
      FailureOr<mlir::gpu::LaunchOp> launch =
          createLaunch(rewriter, block, threads);
      if (failed(launch))
        return signalPassFailure();
      if (failed(placeKernelBuffers(rewriter, *launch)))
        return signalPassFailure();
      if (gather)
        for (memref::CopyOp copy :
             staticBlockCopies(launch->getBody().front())) {
          rewriter.setInsertionPoint(copy);
          auto shared = linalg::CopyOp::create(
              rewriter, copy.getLoc(), copy.getSource(), copy.getTarget());
          shared->setAttr(sits::gpu::kCooperativeAttrName,
                          rewriter.getUnitAttr());
          rewriter.eraseOp(copy);
        }
      runBlockWritesOnOneThread(rewriter, *launch);
      // Upstream's mapping wants thread loops from 0 by 1.
      SmallVector<scf::ForallOp> threadLoops;
      launch->walk([&](scf::ForallOp inner) { threadLoops.push_back(inner); });
      for (scf::ForallOp inner : threadLoops)
        if (failed(normalizeForallOp(rewriter, inner))) {
          inner.emitError() << "cannot normalize this thread loop";
          return signalPassFailure();
        }
      // The mapping creates values every thread loop uses at the current
      // insertion point.
      rewriter.setInsertionPointToStart(&launch->getBody().front());
      DiagnosedSilenceableFailure mapped =
          transform::gpu::mapNestedForallToThreadsImpl(
              rewriter, std::nullopt, *launch, {threads, 1, 1}, warpSize,
              /*syncAfterDistribute=*/true);
      if (!mapped.succeeded()) {
        (void)mapped.silence();
        launch->emitError() << "cannot map the thread loops of this kernel "
                               "to its "
                            << threads << " threads";
        return signalPassFailure();
      }
      ++numLaunches;
    }
  }
};

} // namespace
