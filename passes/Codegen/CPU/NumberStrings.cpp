//===- NumberStrings.cpp - Deterministic names of string constants --------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUNUMBERSTRINGS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;

namespace {

/// A private constant byte array: a string no one outside the module names.
bool isPrivateString(LLVM::GlobalOp global) {
  auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
  return global.getConstant() &&
         global.getLinkage() == LLVM::Linkage::Private && array &&
         array.getElementType().isInteger(8);
}

/// `name` without a trailing `_<digits>`.
StringRef baseName(StringRef name) {
  StringRef base = name.rtrim("0123456789");
  if (base.size() < name.size() && base.size() > 1 && base.ends_with("_"))
    return base.drop_back();
  return name;
}

struct SitsCpuNumberStringsPass
    : sits::cpu::impl::SitsCpuNumberStringsBase<SitsCpuNumberStringsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<LLVM::GlobalOp> strings;
    for (auto global : module.getOps<LLVM::GlobalOp>())
      if (isPrivateString(global))
        strings.push_back(global);
    if (strings.empty())
      return markAllAnalysesPreserved();

    SymbolTable table(module);
    auto rename = [&](LLVM::GlobalOp global, StringRef name) -> LogicalResult {
      if (table.lookup(name))
        return global.emitError()
               << "cannot rename to '" << name << "': the name is taken";
      return table.rename(global, StringAttr::get(&getContext(), name));
    };
    // Out of the way first, so that no final name is taken by a string
    // still to be renamed.
    SmallVector<std::string> bases;
    for (auto [i, global] : llvm::enumerate(strings)) {
      bases.push_back(baseName(global.getSymName()).str());
      if (failed(rename(global, ("__sits_string_" + Twine(i)).str())))
        return signalPassFailure();
    }
    llvm::StringMap<unsigned> next;
    for (auto [global, base] : llvm::zip_equal(strings, bases))
      if (failed(rename(global, (base + "_" + Twine(next[base]++)).str())))
        return signalPassFailure();
  }
};

} // namespace
