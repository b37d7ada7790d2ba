//===- BoolMemory.cpp - Byte-addressed loads and stores of i1 -------------===//
//
// A buffer of i1 holds one byte per element (the layout of NumPy's bool and
// of every i1 memref the runtime passes), but upstream's memref-to-LLVM
// lowering refuses element types narrower than a byte. LLVM itself has no
// such limit: a GEP over i8 steps one element per byte, and an i1 is
// stored as a zero-extended byte. This pass lowers each scalar
// `memref.load`/`memref.store` of i1 to exactly that, on the aligned
// pointer plus the linearized offset, before the memref conversion runs.
// (Vector accesses to i1 buffers are never formed: LLVM packs vectors of i1
// into bits; see sits-cpu-vectorize.)
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/PatternMatch.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUBOOLMEMORY
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;

namespace {

bool isBoolMemRef(Value memref) {
  return cast<MemRefType>(memref.getType()).getElementType().isInteger(1);
}

/// The address of `memref[indices]` as an `!llvm.ptr`: aligned pointer +
/// offset + sum(index * stride), in bytes since every element is one byte.
Value byteAddress(OpBuilder &b, Location loc, Value memref,
                  ValueRange indices) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value linear = meta.getOffset();
  for (auto [index, stride] : llvm::zip(indices, meta.getStrides()))
    linear = arith::AddIOp::create(
        b, loc, linear, arith::MulIOp::create(b, loc, index, stride));
  Value base =
      memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value address = arith::AddIOp::create(b, loc, base, linear);
  Value asInt = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), address);
  return LLVM::IntToPtrOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()),
                                  asInt);
}

struct SitsCpuBoolMemoryPass
    : sits::cpu::impl::SitsCpuBoolMemoryBase<SitsCpuBoolMemoryPass> {
  void runOnOperation() override {
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> accesses;
    getOperation()->walk([&](Operation *op) {
      if (auto load = dyn_cast<memref::LoadOp>(op); load && isBoolMemRef(load.getMemRef()))
        accesses.push_back(op);
      if (auto store = dyn_cast<memref::StoreOp>(op); store && isBoolMemRef(store.getMemRef()))
        accesses.push_back(op);
    });
    Type i8 = rewriter.getI8Type();
    for (Operation *op : accesses) {
      rewriter.setInsertionPoint(op);
      Location loc = op->getLoc();
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        Value ptr = byteAddress(rewriter, loc, load.getMemRef(), load.getIndices());
        Value byte = LLVM::LoadOp::create(rewriter, loc, i8, ptr);
        // Any nonzero byte is true, as NumPy reads it.
        Value zero = arith::ConstantIntOp::create(rewriter, loc, i8, 0);
        rewriter.replaceOpWithNewOp<arith::CmpIOp>(op, arith::CmpIPredicate::ne, byte, zero);
        continue;
      }
      auto store = cast<memref::StoreOp>(op);
      Value ptr = byteAddress(rewriter, loc, store.getMemRef(), store.getIndices());
      Value byte = arith::ExtUIOp::create(rewriter, loc, i8, store.getValueToStore());
      LLVM::StoreOp::create(rewriter, loc, byte, ptr);
      rewriter.eraseOp(op);
    }
  }
};

} // namespace
