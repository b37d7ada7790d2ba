//===- NumberStrings.cpp - Deterministic names of string constants --------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseSet.h"
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

    // Every string gets its final name at once, and every use is updated
    // in one walk of the module: renaming one symbol at a time walks the
    // module per string, quadratic in a model's size (a string per async
    // await, so per layer).
    SymbolTable table(module);
    llvm::DenseSet<Operation *> renamed;
    for (LLVM::GlobalOp global : strings)
      renamed.insert(global);
    llvm::StringMap<unsigned> next;
    DenseMap<StringAttr, StringAttr> newNames;
    for (LLVM::GlobalOp global : strings) {
      StringRef base = baseName(global.getSymName());
      auto name =
          StringAttr::get(&getContext(), base + "_" + Twine(next[base]++));
      if (Operation *holder = table.lookup(name);
          holder && !renamed.contains(holder)) {
        global.emitError() << "cannot rename to '" << name.getValue()
                           << "': the name is taken";
        return signalPassFailure();
      }
      if (name != global.getSymNameAttr())
        newNames[global.getSymNameAttr()] = name;
    }
    if (newNames.empty())
      return markAllAnalysesPreserved();
    AttrTypeReplacer replacer;
    replacer.addReplacement(
        [&](FlatSymbolRefAttr ref) -> std::optional<Attribute> {
          auto it = newNames.find(ref.getAttr());
          if (it == newNames.end())
            return std::nullopt;
          return FlatSymbolRefAttr::get(it->second);
        });
    for (LLVM::GlobalOp global : strings)
      if (auto it = newNames.find(global.getSymNameAttr());
          it != newNames.end())
        global.setSymNameAttr(it->second);
    replacer.recursivelyReplaceElementsIn(module);
  }
};

} // namespace
