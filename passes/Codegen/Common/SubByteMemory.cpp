//===- SubByteMemory.cpp - Byte accesses to sub-byte buffers --------------===//

#include "passes/Codegen/Common/SubByteMemory.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/PatternMatch.h"

using namespace mlir;

bool sits::codegen::isSubByteMemRef(MemRefType type) {
  Type element = type.getElementType();
  return element.isIntOrFloat() && element.getIntOrFloatBitWidth() < 8;
}

/// The address of `memref[indices]`: aligned pointer + offset +
/// sum(index * stride), in bytes since every element is one byte.
static Value byteAddress(OpBuilder &b, Location loc, Value memref,
                         ValueRange indices, unsigned addressSpace) {
  auto meta = memref::ExtractStridedMetadataOp::create(b, loc, memref);
  Value linear = meta.getOffset();
  for (auto [index, stride] : llvm::zip(indices, meta.getStrides()))
    linear = arith::AddIOp::create(
        b, loc, linear, arith::MulIOp::create(b, loc, index, stride));
  Value base = memref::ExtractAlignedPointerAsIndexOp::create(b, loc, memref);
  Value address = arith::AddIOp::create(b, loc, base, linear);
  Value asInt = arith::IndexCastUIOp::create(b, loc, b.getI64Type(), address);
  auto type = LLVM::LLVMPointerType::get(b.getContext(), addressSpace);
  return LLVM::IntToPtrOp::create(b, loc, type, asInt);
}

void sits::codegen::lowerSubByteMemoryAccesses(
    Operation *root, llvm::function_ref<unsigned(MemRefType)> addressSpace) {
  auto subByte = [](Value memref) {
    return isSubByteMemRef(cast<MemRefType>(memref.getType()));
  };
  SmallVector<Operation *> accesses;
  root->walk([&](Operation *op) {
    if (auto load = dyn_cast<memref::LoadOp>(op);
        load && subByte(load.getMemRef()))
      accesses.push_back(op);
    if (auto store = dyn_cast<memref::StoreOp>(op);
        store && subByte(store.getMemRef()))
      accesses.push_back(op);
  });

  IRRewriter rewriter(root->getContext());
  Type i8 = rewriter.getI8Type();
  for (Operation *op : accesses) {
    rewriter.setInsertionPoint(op);
    Location loc = op->getLoc();
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      MemRefType type = load.getMemRefType();
      Value ptr = byteAddress(rewriter, loc, load.getMemRef(),
                              load.getIndices(), addressSpace(type));
      Value byte = LLVM::LoadOp::create(rewriter, loc, i8, ptr);
      Type element = load.getType();
      if (element.isInteger(1)) {
        Value zero = arith::ConstantIntOp::create(rewriter, loc, i8, 0);
        rewriter.replaceOpWithNewOp<arith::CmpIOp>(op, arith::CmpIPredicate::ne,
                                                   byte, zero);
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
    Value ptr =
        byteAddress(rewriter, loc, store.getMemRef(), store.getIndices(),
                    addressSpace(store.getMemRefType()));
    Value value = store.getValueToStore();
    Type bits =
        rewriter.getIntegerType(value.getType().getIntOrFloatBitWidth());
    if (value.getType() != bits)
      value = arith::BitcastOp::create(rewriter, loc, bits, value);
    // Zero-extended: the upper bits of a byte are zero (ml_dtypes' layout).
    Value byte = arith::ExtUIOp::create(rewriter, loc, i8, value);
    LLVM::StoreOp::create(rewriter, loc, byte, ptr);
    rewriter.eraseOp(op);
  }
}
