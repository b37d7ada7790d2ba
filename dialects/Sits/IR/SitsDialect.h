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

namespace mlir::sits {

//===----------------------------------------------------------------------===//
// Which target is this module for?
//===----------------------------------------------------------------------===//
// The one answer every pass uses: the `sits.target` of the closest module
// enclosing `op` (`op` itself when it is a module) names it.

/// The target named by the closest enclosing module's `sits.target`, or null
/// when no enclosing module names one.
const target::TargetInfo *getModuleTarget(Operation *op);

/// The module's target, or the host CPU (`cpu`) when none is named: what
/// code is compiled for when nothing says otherwise.
const target::TargetInfo &getModuleTargetOrHost(Operation *op);

/// A pass's `target` option: the entry it names when not empty (an error
/// at `op` and failure when it names no known target), else
/// getModuleTargetOrHost(op).
FailureOr<const target::TargetInfo *> resolveTarget(Operation *op,
                                                    StringRef option);

} // namespace mlir::sits

#endif // SITS_DIALECTS_SITS_IR_SITSDIALECT_H
