//===- LLVMObject.cpp - LLVM dialect to native object code ----------------===//

#include "passes/Targets/LLVMObject.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

using namespace mlir;

namespace {

/// Initializes the code generators once per process.
void initializeTargets() {
  static bool once = [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    return true;
  }();
  (void)once;
}

/// Translates and optimizes; returns the LLVM module and its target machine.
FailureOr<std::pair<std::unique_ptr<llvm::Module>,
                    std::unique_ptr<llvm::TargetMachine>>>
translateAndOptimize(Operation *module, const sits::LLVMObjectOptions &options,
                     llvm::LLVMContext &llvmContext) {
  initializeTargets();
  std::string tripleName =
      options.triple.empty() ? llvm::sys::getProcessTriple() : options.triple;
  std::string cpu = options.cpu;
  std::string features = options.features;
  if (options.triple.empty() && cpu.empty()) {
    cpu = llvm::sys::getHostCPUName().str();
    llvm::SmallVector<std::string> enabled;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      enabled.push_back((feature.getValue() ? "+" : "-") +
                        feature.getKey().str());
    features = llvm::join(enabled, ",");
  }

  llvm::Triple triple(tripleName);
  std::string error;
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return module->emitError()
           << "no LLVM target for triple '" << tripleName << "': " << error;
  llvm::TargetOptions targetOptions;
  auto optLevel =
      static_cast<llvm::CodeGenOptLevel>(std::min(options.optLevel, 3u));
  std::unique_ptr<llvm::TargetMachine> machine(
      target->createTargetMachine(triple, cpu, features, targetOptions,
                                  llvm::Reloc::PIC_, std::nullopt, optLevel));
  if (!machine)
    return module->emitError() << "cannot create a target machine for '"
                               << tripleName << "' (cpu '" << cpu << "')";

  // The module may have been built in a context that never registered the
  // LLVM IR translations (e.g. a bare C++ user); register the two it needs.
  registerBuiltinDialectTranslation(*module->getContext());
  registerLLVMDialectTranslation(*module->getContext());
  std::unique_ptr<llvm::Module> llvmModule =
      translateModuleToLLVMIR(module, llvmContext);
  if (!llvmModule)
    return module->emitError() << "translation to LLVM IR failed";
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(machine->createDataLayout());

  auto optimize = makeOptimizingTransformer(options.optLevel,
                                            /*sizeLevel=*/0, machine.get());
  if (llvm::Error err = optimize(llvmModule.get())) {
    std::string message;
    llvm::raw_string_ostream os(message);
    os << err;
    return module->emitError() << "LLVM optimization failed: " << message;
  }
  return std::make_pair(std::move(llvmModule), std::move(machine));
}

} // namespace

FailureOr<std::string> sits::emitLLVMObject(Operation *module,
                                            const LLVMObjectOptions &options) {
  llvm::LLVMContext llvmContext;
  auto translated = translateAndOptimize(module, options, llvmContext);
  if (failed(translated))
    return failure();
  auto &[llvmModule, machine] = *translated;

  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return module->emitError() << "the target machine cannot emit object files";
  codegen.run(*llvmModule);
  return std::string(object.str());
}

FailureOr<std::string>
sits::emitOptimizedLLVMIR(Operation *module, const LLVMObjectOptions &options) {
  llvm::LLVMContext llvmContext;
  auto translated = translateAndOptimize(module, options, llvmContext);
  if (failed(translated))
    return failure();
  std::string text;
  llvm::raw_string_ostream os(text);
  translated->first->print(os, nullptr);
  return text;
}
