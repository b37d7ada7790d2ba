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

#endif // SITS_DIALECTS_SITS_IR_SITSOPS_H
