//===- BoolMemory.cpp - Byte-addressed loads and stores of sub-byte types -===//
//
// A buffer of i1 holds one byte per element (the layout of NumPy's bool and
// of every i1 memref the runtime passes), and so do buffers of i2, i4 and
// f4E2M1FN (ml_dtypes' layout: the value in the low bits). Upstream's
// memref-to-LLVM lowering refuses element types narrower than a byte. LLVM
// itself has no such limit: a GEP over i8 steps one element per byte. This
// pass lowers each scalar `memref.load`/`memref.store` of such a type to a
// byte access on the aligned pointer plus the linearized offset, before the
// memref conversion runs. (Vector accesses to these buffers are never
// formed: LLVM packs such vectors into bits; see sits-cpu-vectorize.)
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

bool isSubByteMemRef(Value memref) {
  Type element = cast<MemRefType>(memref.getType()).getElementType();
  return element.isIntOrFloat() && element.getIntOrFloatBitWidth() < 8;
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
      if (auto load = dyn_cast<memref::LoadOp>(op); load && isSubByteMemRef(load.getMemRef()))
        accesses.push_back(op);
      if (auto store = dyn_cast<memref::StoreOp>(op); store && isSubByteMemRef(store.getMemRef()))
        accesses.push_back(op);
    });
    Type i8 = rewriter.getI8Type();
    for (Operation *op : accesses) {
      rewriter.setInsertionPoint(op);
      Location loc = op->getLoc();
      if (auto load = dyn_cast<memref::LoadOp>(op)) {
        Value ptr = byteAddress(rewriter, loc, load.getMemRef(), load.getIndices());
        Value byte = LLVM::LoadOp::create(rewriter, loc, i8, ptr);
        Type element = load.getType();
        if (element.isInteger(1)) {
          // Any nonzero byte is true, as NumPy reads it.
          Value zero = arith::ConstantIntOp::create(rewriter, loc, i8, 0);
          rewriter.replaceOpWithNewOp<arith::CmpIOp>(op, arith::CmpIPredicate::ne, byte, zero);
          continue;
        }
        Type bits = rewriter.getIntegerType(element.getIntOrFloatBitWidth());
        Value value = arith::TruncIOp::create(rewriter, loc, bits, byte);
        if (element != bits)
          value = arith::BitcastOp::create(rewriter, loc, element, value);
        rewriter.replaceOp(op, value);
        continue;
      }
      auto store = cast<memref::StoreOp>(op);
      Value ptr = byteAddress(rewriter, loc, store.getMemRef(), store.getIndices());
      Value value = store.getValueToStore();
      Type bits = rewriter.getIntegerType(value.getType().getIntOrFloatBitWidth());
      if (value.getType() != bits)
        value = arith::BitcastOp::create(rewriter, loc, bits, value);
      // Zero-extended: the upper bits of a byte are zero (ml_dtypes' layout).
      Value byte = arith::ExtUIOp::create(rewriter, loc, i8, value);
      LLVM::StoreOp::create(rewriter, loc, byte, ptr);
      rewriter.eraseOp(op);
    }
  }
};

} // namespace
