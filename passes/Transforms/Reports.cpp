//===- Reports.cpp - Naming ops in the passes' reports -------------------===//
//
// The pruning, precision and schedule reports name ops the way the user
// named them: by the ONNX node name the importer put in a NameLoc.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

using namespace mlir;

std::string mlir::sits::getReportName(Location loc) {
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location inner : fused.getLocations())
      if (auto name = dyn_cast<NameLoc>(inner))
        return name.getName().str();
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
            Twine(file.getColumn()))
        .str();
  std::string text;
  llvm::raw_string_ostream os(text);
  loc.print(os);
  return text;
}
