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

} // namespace mlir::sits

#endif // SITS_DIALECTS_SITS_IR_SITSOPS_H
