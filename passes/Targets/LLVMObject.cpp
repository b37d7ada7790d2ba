//===- LLVMObject.cpp - LLVM dialect to native object code ----------------===//

#include "passes/Targets/LLVMObject.h"

#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/Analysis/LoopInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Dominators.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <thread>

using namespace mlir;

namespace {

/// Initializes the code generators once per process.
void initializeTargets() {
  static bool once = [] {
    llvm::InitializeAllTargetInfos();
    llvm::InitializeAllTargets();
    llvm::InitializeAllTargetMCs();
    llvm::InitializeAllAsmPrinters();
    // Loop strength reduction took 40% of code generation on our kernels
    // (2.8 of 6.4 s for a 55 M decoder) and changed no benchmark model's
    // run time measurably: their addresses are affine maps MLIR already
    // simplified. The code generator reads the switch only from LLVM's
    // command-line option; it is set once, before any code generation.
    if (auto *option = llvm::cl::getRegisteredOptions().lookup("disable-lsr"))
      static_cast<llvm::cl::opt<bool> *>(option)->setValue(true);
    return true;
  }();
  (void)once;
}

/// The triple, CPU and features `options` name (the host's when empty).
struct MachineSpec {
  std::string triple, cpu, features;
  llvm::CodeGenOptLevel optLevel;
};

MachineSpec getMachineSpec(const sits::LLVMObjectOptions &options) {
  MachineSpec spec;
  spec.triple =
      options.triple.empty() ? llvm::sys::getProcessTriple() : options.triple;
  spec.cpu = options.cpu;
  spec.features = options.features;
  if (options.triple.empty() && spec.cpu.empty()) {
    spec.cpu = llvm::sys::getHostCPUName().str();
    llvm::SmallVector<std::string> enabled;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      enabled.push_back((feature.getValue() ? "+" : "-") +
                        feature.getKey().str());
    spec.features = llvm::join(enabled, ",");
  }
  spec.optLevel =
      static_cast<llvm::CodeGenOptLevel>(std::min(options.optLevel, 3u));
  return spec;
}

/// A target machine for `spec`, or an error message. Each thread needs its
/// own: target machines are not shared between threads.
FailureOr<std::unique_ptr<llvm::TargetMachine>>
createMachine(const MachineSpec &spec, std::string &error) {
  initializeTargets();
  llvm::Triple triple(spec.triple);
  const llvm::Target *target =
      llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target) {
    error = "no LLVM target for triple '" + spec.triple + "': " + error;
    return failure();
  }
  llvm::TargetOptions targetOptions;
  std::unique_ptr<llvm::TargetMachine> machine(target->createTargetMachine(
      triple, spec.cpu, spec.features, targetOptions, llvm::Reloc::PIC_,
      std::nullopt, spec.optLevel));
  if (!machine) {
    error = "cannot create a target machine for '" + spec.triple + "' (cpu '" +
            spec.cpu + "')";
    return failure();
  }
  return machine;
}

/// Runs LLVM's optimization pipeline on `module` for `machine`.
LogicalResult optimize(llvm::Module &module, llvm::TargetMachine &machine,
                       unsigned optLevel, std::string &error) {
  module.setTargetTriple(machine.getTargetTriple());
  module.setDataLayout(machine.createDataLayout());
  auto transform =
      makeOptimizingTransformer(optLevel, /*sizeLevel=*/0, &machine);
  if (llvm::Error err = transform(&module)) {
    llvm::raw_string_ostream os(error);
    os << "LLVM optimization failed: " << err;
    return failure();
  }
  return success();
}

/// Emits `module` as an object file.
FailureOr<std::string> emitObject(llvm::Module &module,
                                  llvm::TargetMachine &machine,
                                  std::string &error) {
  llvm::SmallString<0> object;
  llvm::raw_svector_ostream os(object);
  llvm::legacy::PassManager codegen;
  if (machine.addPassesToEmitFile(codegen, os, nullptr,
                                  llvm::CodeGenFileType::ObjectFile)) {
    error = "the target machine cannot emit object files";
    return failure();
  }
  codegen.run(module);
  return std::string(object.str());
}

/// Translates `module` to LLVM IR in `llvmContext`.
std::unique_ptr<llvm::Module> translate(Operation *module,
                                        llvm::LLVMContext &llvmContext) {
  // The module may have been built in a context that never registered the
  // LLVM IR translations (e.g. a bare C++ user); register the two it needs.
  registerBuiltinDialectTranslation(*module->getContext());
  registerLLVMDialectTranslation(*module->getContext());
  return translateModuleToLLVMIR(module, llvmContext);
}

/// Functions this large without a loop are the graph's glue: the entry
/// points and layer functions, calling one kernel after another. Their size
/// grows with the graph, and optimizing them gains a few microseconds a run
/// for seconds of compile time, so they are compiled unoptimized. Kernels
/// all loop; small loop-free functions are optimized as before.
constexpr unsigned kGlueInstructions = 1000;

void markGlue(llvm::Module &module) {
  for (llvm::Function &f : module) {
    if (f.isDeclaration() || f.getInstructionCount() < kGlueInstructions ||
        f.hasFnAttribute(llvm::Attribute::AlwaysInline))
      continue;
    llvm::DominatorTree dominators(f);
    llvm::LoopInfo loops(dominators);
    if (!loops.empty())
      continue;
    f.addFnAttr(llvm::Attribute::OptimizeNone);
    f.addFnAttr(llvm::Attribute::NoInline);
  }
}

/// Translates and optimizes; returns the LLVM module and its target machine.
FailureOr<std::pair<std::unique_ptr<llvm::Module>,
                    std::unique_ptr<llvm::TargetMachine>>>
translateAndOptimize(Operation *module, const sits::LLVMObjectOptions &options,
                     llvm::LLVMContext &llvmContext) {
  MachineSpec spec = getMachineSpec(options);
  std::string error;
  auto machine = createMachine(spec, error);
  if (failed(machine))
    return module->emitError() << error;
  std::unique_ptr<llvm::Module> llvmModule = translate(module, llvmContext);
  if (!llvmModule)
    return module->emitError() << "translation to LLVM IR failed";
  markGlue(*llvmModule);
  if (failed(optimize(*llvmModule, **machine, options.optLevel, error)))
    return module->emitError() << error;
  return std::make_pair(std::move(llvmModule), std::move(*machine));
}

/// How many parts to optimize and emit at once: one per core, at most one
/// per pair of function definitions.
unsigned countPartitions(const llvm::Module &module, unsigned jobs) {
  unsigned definitions = 0;
  for (const llvm::Function &f : module)
    definitions += !f.isDeclaration();
  if (jobs == 0)
    jobs = llvm::hardware_concurrency().compute_thread_count();
  return std::max(1u, std::min(jobs, definitions / 2));
}

/// `module` as `parts` modules, each defining some of its functions and
/// declaring the others: the costliest functions first (instructions, less
/// for unoptimized glue), each to the part with the least cost so far.
/// Functions and variables become hidden external symbols, so that a part
/// calls another's functions and shares its variables; private constants
/// (strings, small tables) are copied into every part, so that each
/// optimizes with their values.
SmallVector<std::unique_ptr<llvm::Module>> splitModule(llvm::Module &module,
                                                       unsigned parts) {
  // A variable is one object: defined in the first part, seen from the
  // others (a GPU module handle set by a constructor, say).
  for (llvm::GlobalVariable &g : module.globals())
    if (g.hasLocalLinkage() && !g.isConstant()) {
      g.setLinkage(llvm::GlobalValue::ExternalLinkage);
      g.setVisibility(llvm::GlobalValue::HiddenVisibility);
    }
  SmallVector<std::pair<size_t, llvm::Function *>> functions;
  for (llvm::Function &f : module) {
    if (f.isDeclaration())
      continue;
    if (f.hasLocalLinkage()) {
      f.setLinkage(llvm::GlobalValue::ExternalLinkage);
      f.setVisibility(llvm::GlobalValue::HiddenVisibility);
    }
    // Unoptimized glue costs a fraction of an optimized kernel's time per
    // instruction: counted in full, it would leave its part idle.
    size_t cost = f.getInstructionCount();
    if (f.hasFnAttribute(llvm::Attribute::OptimizeNone))
      cost /= 16;
    functions.emplace_back(cost, &f);
  }
  llvm::stable_sort(functions, [](const auto &a, const auto &b) {
    return a.first > b.first;
  });
  SmallVector<size_t> load(parts, 0);
  llvm::DenseMap<const llvm::GlobalValue *, unsigned> owner;
  for (auto [size, f] : functions) {
    unsigned least = std::min_element(load.begin(), load.end()) - load.begin();
    owner[f] = least;
    load[least] += size;
  }
  SmallVector<std::unique_ptr<llvm::Module>> result;
  for (unsigned i = 0; i < parts; ++i) {
    llvm::ValueToValueMapTy map;
    result.push_back(
        llvm::CloneModule(module, map, [&](const llvm::GlobalValue *value) {
          if (isa<llvm::Function>(value))
            return owner.lookup(value) == i;
          return value->hasLocalLinkage() || i == 0;
        }));
  }
  return result;
}

} // namespace

FailureOr<SmallVector<std::string>>
sits::emitLLVMObjects(Operation *module, const LLVMObjectOptions &options) {
  MachineSpec spec = getMachineSpec(options);
  std::string error;
  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule = translate(module, llvmContext);
  if (!llvmModule)
    return module->emitError() << "translation to LLVM IR failed";
  markGlue(*llvmModule);
  unsigned parts = countPartitions(*llvmModule, options.jobs);

  // The module in parts, each in bitcode: LLVM contexts are not shared
  // between threads, so each part is read back into a context of its own.
  SmallVector<SmallVector<char, 0>> bitcode;
  if (parts > 1) {
    for (std::unique_ptr<llvm::Module> &part :
         splitModule(*llvmModule, parts)) {
      llvm::raw_svector_ostream os(bitcode.emplace_back());
      llvm::WriteBitcodeToFile(*part, os);
    }
    llvmModule.reset();
  }

  auto emitPart = [&](llvm::Module &part,
                      std::string &partError) -> FailureOr<std::string> {
    auto machine = createMachine(spec, partError);
    if (failed(machine) ||
        failed(optimize(part, **machine, options.optLevel, partError)))
      return failure();
    return emitObject(part, **machine, partError);
  };
  if (parts <= 1) {
    FailureOr<std::string> object = emitPart(*llvmModule, error);
    if (failed(object))
      return module->emitError() << error;
    return SmallVector<std::string>{std::move(*object)};
  }

  SmallVector<std::string> objects(bitcode.size()), errors(bitcode.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < bitcode.size(); ++i)
    threads.emplace_back([&, i] {
      llvm::LLVMContext context;
      llvm::Expected<std::unique_ptr<llvm::Module>> part =
          llvm::parseBitcodeFile(
              llvm::MemoryBufferRef(
                  StringRef(bitcode[i].data(), bitcode[i].size()), "part"),
              context);
      if (!part) {
        errors[i] = "cannot read back a part of the module: " +
                    llvm::toString(part.takeError());
        return;
      }
      FailureOr<std::string> object = emitPart(**part, errors[i]);
      if (succeeded(object))
        objects[i] = std::move(*object);
    });
  for (std::thread &thread : threads)
    thread.join();
  for (const std::string &partError : errors)
    if (!partError.empty())
      return module->emitError() << partError;
  return objects;
}

FailureOr<std::string> sits::emitLLVMObject(Operation *module,
                                            const LLVMObjectOptions &options) {
  LLVMObjectOptions single = options;
  single.jobs = 1;
  FailureOr<SmallVector<std::string>> objects = emitLLVMObjects(module, single);
  if (failed(objects))
    return failure();
  return std::move(objects->front());
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
