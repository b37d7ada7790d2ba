//===- SitsDialect.cpp - SITS dialect -------------------------------------===//

#include "dialects/Sits/IR/SitsOps.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::sits;

#include "dialects/Sits/IR/SitsDialect.cpp.inc"

void SitsDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/Sits/IR/SitsOps.cpp.inc"
      >();
  registerAttributes();
}

LogicalResult SitsDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  if (attr.getName() != getTargetAttrName())
    return op->emitError() << "unknown SITS attribute '"
                           << attr.getName().getValue() << "'";
  if (!isa<ModuleOp>(op))
    return op->emitError() << "'" << getTargetAttrName()
                           << "' is only valid on a builtin.module";
  if (!isa<TargetAttr>(attr.getValue()))
    return op->emitError() << "'" << getTargetAttrName()
                           << "' must be a #sits.target attribute, got "
                           << attr.getValue();
  return success();
}

// SITS defines no argument or result attributes yet; reject `sits.*` ones
// there rather than let a misspelt or misplaced attribute pass silently.
LogicalResult SitsDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  return op->emitError() << "unknown SITS argument attribute '"
                         << attr.getName().getValue() << "' on argument "
                         << argIndex;
}

LogicalResult SitsDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  return op->emitError() << "unknown SITS result attribute '"
                         << attr.getName().getValue() << "' on result "
                         << resultIndex;
}
