//===- SitsAttrs.cpp - SITS attributes ------------------------------------===//

#include "dialects/Sits/IR/SitsDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectImplementation.h"
#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace mlir::sits;

#include "dialects/Sits/IR/SitsEnums.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "dialects/Sits/IR/SitsAttrs.cpp.inc"

void SitsDialect::registerAttributes() {
  addAttributes<
#define GET_ATTRDEF_LIST
#include "dialects/Sits/IR/SitsAttrs.cpp.inc"
      >();
}

//===----------------------------------------------------------------------===//
// PackedEncodingAttr
//===----------------------------------------------------------------------===//

LogicalResult
PackedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                           IntegerType storage, int64_t axis) {
  unsigned width = storage.getWidth();
  if (!storage.isSignless() || (width != 8 && width != 16 && width != 32))
    return emitError() << "packed storage must be i8, i16 or i32, got "
                       << storage;
  if (axis < 0)
    return emitError() << "packing axis must be non-negative, got " << axis;
  return success();
}

int64_t PackedEncodingAttr::getPackingFactor(Type elementType) const {
  return getStorage().getWidth() / elementType.getIntOrFloatBitWidth();
}

LogicalResult PackedEncodingAttr::verifyEncoding(
    ArrayRef<int64_t> shape, Type elementType,
    function_ref<InFlightDiagnostic()> emitError) const {
  if (!elementType.isIntOrFloat())
    return emitError() << "packed elements must be integers or floats, got "
                       << elementType;
  unsigned elementWidth = elementType.getIntOrFloatBitWidth();
  unsigned storageWidth = getStorage().getWidth();
  if (elementWidth == 0 || elementWidth >= storageWidth ||
      storageWidth % elementWidth != 0)
    return emitError() << "cannot pack " << elementType << " into "
                       << getStorage()
                       << ": the element must be narrower and its width "
                          "must divide the storage width";
  if (getAxis() >= static_cast<int64_t>(shape.size()))
    return emitError() << "packing axis " << getAxis()
                       << " is out of range for a tensor of rank "
                       << shape.size();
  int64_t extent = shape[getAxis()];
  int64_t factor = getPackingFactor(elementType);
  if (!ShapedType::isDynamic(extent) && extent % factor != 0)
    return emitError() << "extent " << extent << " along packing axis "
                       << getAxis() << " is not a multiple of the packing "
                       << "factor " << factor;
  return success();
}

//===----------------------------------------------------------------------===//
// TargetAttr
//===----------------------------------------------------------------------===//

LogicalResult TargetAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                 StringRef name) {
  if (!target::lookupTarget(name))
    return emitError() << "unknown target '" << name
                       << "'; known targets: " << target::getKnownTargetNames();
  return success();
}

const target::TargetInfo *TargetAttr::getInfo() const {
  return target::lookupTarget(getName());
}

const target::TargetInfo *mlir::sits::getModuleTarget(Operation *op) {
  auto module = dyn_cast<ModuleOp>(op);
  if (!module)
    module = op->getParentOfType<ModuleOp>();
  for (; module; module = module->getParentOfType<ModuleOp>())
    if (auto attr =
            module->getAttrOfType<TargetAttr>(SitsDialect::getTargetAttrName()))
      if (const target::TargetInfo *info = attr.getInfo())
        return info;
  return nullptr;
}

const target::TargetInfo &mlir::sits::getModuleTargetOrHost(Operation *op) {
  if (const target::TargetInfo *info = getModuleTarget(op))
    return *info;
  return *target::lookupTarget("cpu");
}

FailureOr<const target::TargetInfo *>
mlir::sits::resolveTarget(Operation *op, StringRef option) {
  if (option.empty())
    return &getModuleTargetOrHost(op);
  if (const target::TargetInfo *info = target::lookupTarget(option))
    return info;
  return op->emitError() << "unknown target '" << option << "'; known targets: "
                         << target::getKnownTargetNames();
}
