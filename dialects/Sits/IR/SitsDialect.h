//===- SitsDialect.h - SITS dialect, attributes and enums -------*- C++ -*-===//

#ifndef SITS_DIALECTS_SITS_IR_SITSDIALECT_H
#define SITS_DIALECTS_SITS_IR_SITSDIALECT_H

#include "dialects/Target/KnownTargets.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/TensorEncoding.h"

#include "dialects/Sits/IR/SitsDialect.h.inc"
#include "dialects/Sits/IR/SitsEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Sits/IR/SitsAttrs.h.inc"

#endif // SITS_DIALECTS_SITS_IR_SITSDIALECT_H
