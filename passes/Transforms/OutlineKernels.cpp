//===- OutlineKernels.cpp - One function per distinct loop nest -----------===//
//
// A model repeats itself: every layer of a transformer is the same loop
// nests on other weights and caches. Outlining each loop nest with what it
// reads as arguments makes the repetitions identical functions, and keeping
// one of each makes everything downstream (lowering, LLVM) proportional to
// the distinct kernels rather than to the depth of the model.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Outline.h"
#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSOUTLINEKERNELS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;
using namespace mlir::sits;

namespace {

/// Top-level ops worth a function of their own: the loop nests tiling made,
/// linalg ops left on buffers, and copies between buffers (strided ones
/// become loop nests; a decoder makes several per layer for its caches).
/// Ops yielding buffers stay: returning a buffer from a function would move
/// its ownership.
bool isKernel(Operation *op) {
  if (!isa<scf::ForallOp, scf::ForOp, scf::ParallelOp, scf::WhileOp,
           linalg::LinalgOp, memref::CopyOp>(op))
    return false;
  return llvm::none_of(op->getResultTypes(),
                       [](Type t) { return isa<BaseMemRefType>(t); });
}

/// Values cloned into the kernel instead of passed: constants other than
/// buffers (a loop bound or a vector splat in the body lets LLVM fold it;
/// as an argument it would also make equal kernels differ).
bool isCloned(Value value) {
  Operation *def = value.getDefiningOp();
  if (!def || isa<BaseMemRefType>(value.getType()))
    return false;
  return isa<ub::PoisonOp>(def) || def->hasTrait<OpTrait::ConstantLike>();
}

struct SitsOutlineKernelsPass
    : sits::impl::SitsOutlineKernelsBase<SitsOutlineKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    KernelOutliner outliner(module);
    for (func::FuncOp func : getOutliningRoots(module)) {
      SmallVector<Operation *> kernels;
      for (Operation &op : func.getBody().getOps())
        if (isKernel(&op))
          kernels.push_back(&op);
      unsigned count = 0;
      for (Operation *kernel : kernels) {
        // Globals read inside become arguments like any other buffer: small
        // per-layer constants (norm weights) stay globals of their own.
        SmallVector<memref::GetGlobalOp> globals;
        kernel->walk([&](memref::GetGlobalOp get) { globals.push_back(get); });
        for (memref::GetGlobalOp get : globals)
          get->moveBefore(kernel);
        std::string name =
            (func.getSymName() + "_kernel_" + Twine(count++)).str();
        if (outliner.outline(kernel, name, CapturePolicy{isCloned}))
          ++numKernels;
      }
    }
    numFunctions = outliner.numFunctions();
  }
};

} // namespace
