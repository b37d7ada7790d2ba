//===- ConstantData.cpp - Reading and re-laying out constant data ---------===//

#include "passes/Transforms/ConstantData.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/DialectResourceBlobManager.h"

using namespace mlir;

std::optional<ArrayRef<char>> mlir::sits::getConstantBytes(ElementsAttr value) {
  auto type = dyn_cast<ShapedType>(value.getType());
  if (!type || !type.hasStaticShape() ||
      !type.getElementType().isIntOrFloat() ||
      type.getElementType().getIntOrFloatBitWidth() % 8 != 0)
    return std::nullopt;
  ArrayRef<char> bytes;
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(value)) {
    AsmResourceBlob *blob = resource.getRawHandle().getBlob();
    if (!blob)
      return std::nullopt;
    bytes = blob->getData();
  } else if (auto dense = dyn_cast<DenseElementsAttr>(value);
             dense && !dense.isSplat()) {
    bytes = dense.getRawData();
  } else {
    return std::nullopt;
  }
  if (static_cast<int64_t>(bytes.size()) !=
      type.getNumElements() * getElementBytes(type))
    return std::nullopt;
  return bytes;
}

int64_t mlir::sits::getElementBytes(ShapedType type) {
  return type.getElementType().getIntOrFloatBitWidth() / 8;
}

TypedAttr mlir::sits::makeConstantLike(ElementsAttr original,
                                       RankedTensorType type,
                                       AsmResourceBlob blob, StringRef suffix) {
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(original))
    return DenseResourceElementsAttr::get(
        type, (resource.getRawHandle().getKey() + suffix).str(),
        std::move(blob));
  return DenseElementsAttr::getFromRawBuffer(type, blob.getData());
}
