//===- DeviceBuffers.cpp - Device memory for the host function ------------===//
//
// After sits-gpu-map-to-launch the host function is a sequence of kernel
// launches over buffers: its arguments (device memory the runtime passes),
// views of them, and intermediate buffers. The intermediates move to device
// memory (gpu.alloc, freed after their last use); constants read by kernels
// move into the kernels (and so into the GPU module); anything else that
// would touch device memory from the CPU is an error.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUDEVICEBUFFERS
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// Ops the host may run: they compute addresses and sizes, never touch
/// device memory. (A reshape reads its shape operand: a constant, which
/// lives in the host code.)
bool isHostSafe(Operation *op) {
  if (auto reshape = dyn_cast<memref::ReshapeOp>(op))
    return reshape.getShape().getDefiningOp<memref::GetGlobalOp>() != nullptr;
  if (isa<mlir::gpu::LaunchOp, func::ReturnOp, memref::AllocOp,
          memref::DeallocOp, memref::GetGlobalOp, ViewLikeOpInterface,
          memref::ExtractStridedMetadataOp, memref::DimOp,
          memref::ExtractAlignedPointerAsIndexOp>(op))
    return true;
  if (op->getNumRegions() == 0 && isMemoryEffectFree(op))
    return llvm::none_of(op->getResultTypes(),
                         [](Type t) { return isa<MemRefType>(t); });
  return false;
}

/// The op of `block` that contains `op` (or `op` itself).
Operation *ancestorIn(Block &block, Operation *op) {
  return block.findAncestorOpInBlock(*op);
}

/// The last op of `block` using `value` or a view of it.
Operation *lastUse(Block &block, Value value) {
  Operation *last = nullptr;
  SmallVector<Value> worklist = {value};
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    for (Operation *user : v.getUsers()) {
      Operation *top = ancestorIn(block, user);
      if (!top)
        continue;
      if (!last || last->isBeforeInBlock(top))
        last = top;
      if (isa<ViewLikeOpInterface>(user) && user->getNumResults() == 1)
        worklist.push_back(user->getResult(0));
    }
  }
  return last;
}

struct SitsGpuDeviceBuffersPass
    : sits::gpu::impl::SitsGpuDeviceBuffersBase<SitsGpuDeviceBuffersPass> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    IRRewriter rewriter(&getContext());
    Block &body = func.getBody().front();
    if (!func.getBody().hasOneBlock()) {
      func.emitError() << "a GPU host function must be one block of kernel "
                          "launches";
      return signalPassFailure();
    }

    // Constants read by kernels live in the GPU module: each kernel reads
    // its own get_global, which outlining copies along with the global.
    SmallVector<memref::GetGlobalOp> globals(
        body.getOps<memref::GetGlobalOp>());
    for (memref::GetGlobalOp get : globals) {
      for (OpOperand &use : llvm::make_early_inc_range(get->getUses())) {
        auto launch = use.getOwner()->getParentOfType<mlir::gpu::LaunchOp>();
        if (!launch)
          continue;
        rewriter.setInsertionPointToStart(&launch.getBody().front());
        auto clone = cast<memref::GetGlobalOp>(rewriter.clone(*get));
        rewriter.modifyOpInPlace(use.getOwner(), [&] { use.set(clone); });
      }
      if (get->use_empty())
        rewriter.eraseOp(get);
    }

    bool failed = false;
    for (Operation &op : body) {
      if (isHostSafe(&op))
        continue;
      op.emitError() << "would access GPU memory from the host: every "
                        "operation on buffers must run in a kernel";
      failed = true;
    }
    // A constant the host still uses (a reshape's shape) stays in the host
    // code; any other use would hand a host address to the device.
    for (memref::GetGlobalOp get : body.getOps<memref::GetGlobalOp>()) {
      bool hostOnly = llvm::all_of(get->getUsers(), [](Operation *user) {
        auto reshape = dyn_cast<memref::ReshapeOp>(user);
        return reshape &&
               reshape.getShape().getDefiningOp<memref::GetGlobalOp>();
      });
      if (!hostOnly) {
        get.emitError() << "a constant used outside GPU kernels";
        failed = true;
      }
    }
    if (failed)
      return signalPassFailure();

    // Frees the model's code allocated: none remain, each buffer is freed
    // after its last use below.
    for (memref::DeallocOp dealloc :
         llvm::make_early_inc_range(body.getOps<memref::DeallocOp>()))
      rewriter.eraseOp(dealloc);

    SmallVector<memref::AllocOp> allocs(body.getOps<memref::AllocOp>());
    for (memref::AllocOp alloc : allocs) {
      Location loc = alloc.getLoc();
      Operation *last = lastUse(body, alloc.getResult());
      if (last && isa<func::ReturnOp>(last)) {
        alloc.emitError() << "a buffer returned by a GPU host function: "
                             "results must be written into out-parameters";
        return signalPassFailure();
      }
      rewriter.setInsertionPoint(alloc);
      auto device = mlir::gpu::AllocOp::create(
          rewriter, loc, alloc.getType(), /*asyncToken=*/Type(),
          /*asyncDependencies=*/ValueRange{}, alloc.getDynamicSizes(),
          alloc.getSymbolOperands(), /*hostShared=*/false);
      rewriter.replaceOp(alloc, device.getMemref());
      if (last)
        rewriter.setInsertionPointAfter(last);
      else
        rewriter.setInsertionPointAfter(device);
      mlir::gpu::DeallocOp::create(rewriter, loc, /*asyncToken=*/Type(),
                                   ValueRange{}, device.getMemref());
    }
  }
};

} // namespace
