//===- SitsOps.h - SITS graph-level operations ------------------*- C++ -*-===//

#ifndef SITS_DIALECTS_SITS_IR_SITSOPS_H
#define SITS_DIALECTS_SITS_IR_SITSOPS_H

#include "dialects/Sits/IR/SitsDialect.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/Dialect/Bufferization/IR/BufferizableOpInterface.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/Sits/IR/SitsInterfaces.h.inc"

#define GET_OP_CLASSES
#include "dialects/Sits/IR/SitsOps.h.inc"

namespace mlir::sits {

/// Bytes of the f32 scale that ends each row of a quantized KV pool.
inline constexpr int64_t kKVScaleBytes = 4;

/// Whether a paged KV pool of element type `element` holds quantized rows
/// (`D` codes, then the 4 bytes of their f32 scale): INT8 (i8) or FP8
/// E4M3 (f8E4M3FN) codes, per token and head.
inline bool isQuantizedKVElement(Type element) {
  return element.isInteger(8) || isa<Float8E4M3FNType>(element);
}

/// A KIVI pool's `kivi = [bits, layers, Hkv, block_size]` attribute.
struct KiviPool {
  int64_t bits, layers, kvHeads, blockSize;
  /// bits = kivi::kMixedWidths: the width of each (layer, kv head).
  ArrayRef<int64_t> widths;
};

/// The `kivi` attribute of a paged-attention op, if it is [bits, layers,
/// kv heads, block size], or with mixed widths (bits 512) those and
/// layers × kv heads widths.
std::optional<KiviPool> getKiviPool(std::optional<ArrayRef<int64_t>> attr);

/// Checks a KIVI pool against its attribute: `pool` is 2-D i8 whose
/// dimension 1 (when static) is the block stride of the layout of
/// (layers, Hkv, block_size, `headDim`, bits), and the geometry is one the
/// runtime takes (`headDim` dynamic skips the layout). Errors on `op`.
LogicalResult verifyKiviPool(Operation *op, ArrayRef<int64_t> attr,
                             ShapedType pool, int64_t headDim);

} // namespace mlir::sits

#endif // SITS_DIALECTS_SITS_IR_SITSOPS_H
