//===- BoolMemory.cpp - Byte accesses to i1 buffers in GPU kernels --------===//
//
// As sits-cpu-bool-memory, for kernels: an i1 element is a byte, loaded and
// compared with zero, or stored zero-extended, at the buffer's aligned
// pointer plus the linearized offset. The pointer keeps the buffer's
// address space (3 for workgroup memory on NVVM and ROCDL alike), since a
// shared-memory address is not a generic one.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUBOOLMEMORY
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

bool isBoolMemRef(Value memref) {
  return cast<MemRefType>(memref.getType()).getElementType().isInteger(1);
}

/// The NVVM address space of `type`'s memory space. AMDGPU numbers global
/// (1), LDS (3) and private (5) memory the same way.
unsigned addressSpace(MemRefType type) {
  auto space =
      dyn_cast_if_present<mlir::gpu::AddressSpaceAttr>(type.getMemorySpace());
  if (!space)
    return 0;
  switch (space.getValue()) {
  case mlir::gpu::AddressSpace::Workgroup:
    return static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared);
  case mlir::gpu::AddressSpace::Private:
    return static_cast<unsigned>(NVVM::NVVMMemorySpace::Local);
  case mlir::gpu::AddressSpace::Global:
    return static_cast<unsigned>(NVVM::NVVMMemorySpace::Global);
  }
  return 0;
}

/// The address of `memref[indices]`: aligned pointer + offset +
/// sum(index * stride), in bytes since every element is one byte.
Value byteAddress(OpBuilder &b, Location loc, Value memref,
                  ValueRange indices) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value linear = meta.getOffset();
  for (auto [index, stride] : llvm::zip(indices, meta.getStrides()))
    linear = arith::AddIOp::create(
        b, loc, linear, arith::MulIOp::create(b, loc, index, stride));
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value address = arith::AddIOp::create(b, loc, base, linear);
  Value asInt = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), address);
  auto type = LLVM::LLVMPointerType::get(
      b.getContext(), addressSpace(cast<MemRefType>(memref.getType())));
  return LLVM::IntToPtrOp::create(b, loc, type, asInt);
}

struct SitsGpuBoolMemoryPass
    : sits::gpu::impl::SitsGpuBoolMemoryBase<SitsGpuBoolMemoryPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> accesses;
    getOperation()->walk([&](Operation *op) {
      if (auto load = dyn_cast<memref::LoadOp>(op);
          load && isBoolMemRef(load.getMemRef()))
        accesses.push_back(op);
      if (auto store = dyn_cast<memref::StoreOp>(op);
          store && isBoolMemRef(store.getMemRef()))
        accesses.push_back(op);
    });
    Type i8 = rewriter.getI8Type();
    for (Operation *op : accesses) {
      rewriter.setInsertionPoint(op);
      Location loc = op->getLoc();
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        Value ptr =
            byteAddress(rewriter, loc, load.getMemRef(), load.getIndices());
        Value byte = LLVM::LoadOp::create(rewriter, loc, i8, ptr);
        Value zero = arith::ConstantIntOp::create(rewriter, loc, i8, 0);
        rewriter.replaceOpWithNewOp<arith::CmpIOp>(
            op, arith::CmpIPredicate::ne, byte, zero);
        continue;
      }
      auto store = cast<memref::StoreOp>(op);
      Value ptr =
          byteAddress(rewriter, loc, store.getMemRef(), store.getIndices());
      Value byte =
          arith::ExtUIOp::create(rewriter, loc, i8, store.getValueToStore());
      LLVM::StoreOp::create(rewriter, loc, byte, ptr);
      rewriter.eraseOp(op);
    }
  }
};

} // namespace
