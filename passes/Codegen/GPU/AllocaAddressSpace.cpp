//===- AllocaAddressSpace.cpp - Allocas in the target's private memory ----===//
//
// The memref lowering puts a thread's private buffers (memref.alloca) in the
// buffer's memory space, the default one for SITS's private buffers. That is
// right for NVPTX, whose allocas live in the generic address space, but
// AMDGPU allocates private memory in address space 5 only (the data layout's
// "A5") and its verifier rejects anything else. As clang does for AMDGPU,
// each such alloca moves to the alloca address space and its users get an
// addrspacecast of it; LLVM's address space inference then turns the generic
// accesses back into private ones.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/PatternMatch.h"

#include "llvm/IR/DataLayout.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUALLOCAADDRESSSPACE
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// The data layout string nearest to `op` (`llvm.data_layout`, which
/// convert-gpu-to-rocdl attaches to the GPU module), or null.
StringAttr findDataLayout(Operation *op) {
  for (; op; op = op->getParentOp())
    if (auto layout = op->getAttrOfType<StringAttr>(
            LLVM::LLVMDialect::getDataLayoutAttrName()))
      return layout;
  return nullptr;
}

struct SitsGpuAllocaAddressSpacePass
    : sits::gpu::impl::SitsGpuAllocaAddressSpaceBase<
          SitsGpuAllocaAddressSpacePass> {
  void runOnOperation() override {
    StringAttr layout = findDataLayout(getOperation());
    if (!layout)
      return;
    // The LLVM dialect's verifier has checked the string already.
    unsigned allocaSpace =
        llvm::DataLayout(layout.getValue()).getAllocaAddrSpace();

    SmallVector<LLVM::AllocaOp> allocas;
    getOperation()->walk([&](LLVM::AllocaOp alloca) {
      if (alloca.getType().getAddressSpace() != allocaSpace)
        allocas.push_back(alloca);
    });
    IRRewriter rewriter(&getContext());
    for (LLVM::AllocaOp alloca : allocas) {
      rewriter.setInsertionPoint(alloca);
      auto privateType = LLVM::LLVMPointerType::get(&getContext(), allocaSpace);
      auto moved = LLVM::AllocaOp::create(
          rewriter, alloca.getLoc(), privateType, alloca.getArraySize(),
          alloca.getAlignmentAttr(), alloca.getElemType(),
          alloca.getInalloca());
      rewriter.replaceOpWithNewOp<LLVM::AddrSpaceCastOp>(
          alloca, alloca.getType(), moved.getResult());
      ++numMoved;
    }
  }
};

} // namespace
