//===- SubByteMemory.h - Byte accesses to sub-byte buffers ------*- C++ -*-===//
//
// A buffer of i1 holds one byte per element (the layout of NumPy's bool and
// of every i1 memref the runtime passes), and so do buffers of i2, i4 and
// f4E2M1FN (ml_dtypes' layout: the value in the low bits). Upstream's
// memref-to-LLVM lowering refuses element types narrower than a byte; LLVM
// itself has no such limit (a GEP over i8 steps one element per byte). The
// CPU and GPU backends both lower each scalar access of such a buffer to a
// byte access before the memref conversion runs; they differ only in the
// address space a pointer into a buffer lives in.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_CODEGEN_COMMON_SUBBYTEMEMORY_H
#define SITS_PASSES_CODEGEN_COMMON_SUBBYTEMEMORY_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "llvm/ADT/STLFunctionalExtras.h"

namespace mlir::sits::codegen {

/// Whether `type` is a memref of elements narrower than a byte.
bool isSubByteMemRef(MemRefType type);

/// Rewrites every scalar memref.load / memref.store of a sub-byte buffer
/// under `root` into an llvm.load / llvm.store of one byte at the buffer's
/// aligned pointer plus the linearized offset: an i1 reads as "byte != 0"
/// (any nonzero byte is true, as NumPy reads it), other types as their low
/// bits; stores zero-extend. `addressSpace` gives the LLVM address space of
/// a pointer into a buffer of the given type.
void lowerSubByteMemoryAccesses(
    Operation *root, llvm::function_ref<unsigned(MemRefType)> addressSpace);

} // namespace mlir::sits::codegen

#endif // SITS_PASSES_CODEGEN_COMMON_SUBBYTEMEMORY_H
