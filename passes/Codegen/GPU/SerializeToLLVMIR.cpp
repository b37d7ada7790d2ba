//===- SerializeToLLVMIR.cpp - ROCDL GPU modules to LLVM IR objects -------===//
//
// The LLVM these wheels ship has no AMDGPU back end, and upstream's ROCDL
// serialization needs it for every format. Translation to LLVM IR needs no
// back end: this pass stops there, with what an external AMDGPU llc needs
// in the module (triple, data layout, code object version, the device
// libraries' control constants), and leaves ISA selection to it.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/ROCDLDialect.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/ROCDL/ROCDLToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Export.h"

#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Triple.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUSERIALIZETOLLVMIR
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// The AMDGPU address space of constant memory, where the device libraries
/// expect their control constants.
constexpr unsigned kConstantAddressSpace = 4;

/// `__oclc_ISA_version` for `chip`, as ROCm's oclc_isa_version_*.bc define
/// it: major * 1000 + minor * 100 + stepping, the last two being the chip
/// name's last two (hexadecimal) digits: gfx942 -> 9402, gfx90a -> 9010,
/// gfx1100 -> 11000.
FailureOr<int> isaVersion(StringRef chip) {
  if (!chip.consume_front("gfx") || chip.size() < 3)
    return failure();
  unsigned major, minor, stepping;
  if (chip.drop_back(2).getAsInteger(10, major) ||
      chip.substr(chip.size() - 2, 1).getAsInteger(16, minor) ||
      chip.take_back(1).getAsInteger(16, stepping))
    return failure();
  return int(major * 1000 + minor * 100 + stepping);
}

/// Defines a device-library control constant. weak_odr, not linkonce_odr
/// as in the oclc_*.bc files: nothing in the kernels' module uses them, and
/// a linker that takes this module first (llvm-link) would drop unused
/// linkonce definitions before the libraries that read them come in.
void addControlConstant(llvm::Module &module, StringRef name,
                        llvm::IntegerType *type, uint64_t value) {
  auto *global = new llvm::GlobalVariable(
      module, type, /*isConstant=*/true, llvm::GlobalValue::WeakODRLinkage,
      llvm::ConstantInt::get(type, value), name, nullptr,
      llvm::GlobalValue::NotThreadLocal, kConstantAddressSpace);
  global->setVisibility(llvm::GlobalValue::ProtectedVisibility);
  global->setUnnamedAddr(llvm::GlobalValue::UnnamedAddr::Local);
  global->setAlignment(llvm::Align(type->getBitWidth() / 8));
}

/// The device libraries `module` calls into: ocml (math) and ockl. ocml
/// calls ockl, so both are linked when either is needed.
SmallVector<StringRef> deviceLibraries(const llvm::Module &module) {
  for (const llvm::Function &func : module.functions())
    if (func.isDeclaration() && (func.getName().starts_with("__ocml_") ||
                                 func.getName().starts_with("__ockl_")))
      return {"ocml", "ockl"};
  return {};
}

/// `gpuModule` as LLVM IR for `target` (bitcode, or text when `textual`),
/// and the device libraries it needs.
FailureOr<std::string> serialize(mlir::gpu::GPUModuleOp gpuModule,
                                 ROCDL::ROCDLTargetAttr target, bool textual,
                                 SmallVectorImpl<StringRef> &libraries) {
  // "400", "500" or "600": the attribute's verifier allows nothing else.
  int abi = 500;
  (void)target.getAbi().getAsInteger(10, abi);
  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module =
      translateModuleToLLVMIR(gpuModule, context, gpuModule.getName());
  if (!module)
    return gpuModule.emitError() << "cannot translate to LLVM IR";
  // The data layout is the one convert-gpu-to-rocdl attached to the module,
  // which the translation carried over.
  module->setTargetTriple(llvm::Triple(target.getTriple()));
  module->addModuleFlag(llvm::Module::Error, "amdhsa_code_object_version", abi);

  libraries.assign(deviceLibraries(*module));
  if (!libraries.empty()) {
    FailureOr<int> isa = isaVersion(target.getChip());
    if (failed(isa))
      return gpuModule.emitError()
             << "cannot derive the ISA version of chip '" << target.getChip()
             << "' for the device libraries";
    auto *i8 = llvm::Type::getInt8Ty(context);
    auto *i32 = llvm::Type::getInt32Ty(context);
    bool fast = target.hasFastMath();
    addControlConstant(*module, "__oclc_ISA_version", i32, *isa);
    addControlConstant(*module, "__oclc_ABI_version", i32, abi);
    addControlConstant(*module, "__oclc_wavefrontsize64", i8,
                       target.hasWave64());
    addControlConstant(*module, "__oclc_daz_opt", i8, target.hasDaz() || fast);
    addControlConstant(*module, "__oclc_finite_only_opt", i8,
                       target.hasFiniteOnly() || fast);
    addControlConstant(*module, "__oclc_unsafe_math_opt", i8,
                       target.hasUnsafeMath() || fast);
    addControlConstant(*module, "__oclc_correctly_rounded_sqrt32", i8,
                       target.hasCorrectSqrt() && !fast);
  }

  std::string buffer;
  llvm::raw_string_ostream os(buffer);
  if (textual)
    module->print(os, nullptr);
  else
    llvm::WriteBitcodeToFile(*module, os);
  return buffer;
}

struct SitsGpuSerializeToLLVMIRPass
    : sits::gpu::impl::SitsGpuSerializeToLLVMIRBase<
          SitsGpuSerializeToLLVMIRPass> {
  using Base::Base;

  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    // The translation of the kernels' ops, whatever the tool registered.
    registerBuiltinDialectTranslation(registry);
    registerGPUDialectTranslation(registry);
    registerLLVMDialectTranslation(registry);
    registerROCDLDialectTranslation(registry);
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    Builder builder(&getContext());
    for (auto gpuModule :
         llvm::make_early_inc_range(module.getOps<mlir::gpu::GPUModuleOp>())) {
      ArrayAttr targets = gpuModule.getTargetsAttr();
      if (!targets || targets.empty()) {
        gpuModule.emitError() << "has no target: attach a #rocdl.target "
                                 "first (rocdl-attach-target)";
        return signalPassFailure();
      }
      SmallVector<Attribute> objects;
      for (Attribute attr : targets) {
        auto target = dyn_cast<ROCDL::ROCDLTargetAttr>(attr);
        if (!target) {
          gpuModule.emitError() << "target " << attr
                                << " is not a #rocdl.target: serialize it with "
                                   "gpu-module-to-binary";
          return signalPassFailure();
        }
        SmallVector<StringRef> libraries;
        FailureOr<std::string> ir =
            serialize(gpuModule, target, textual, libraries);
        if (failed(ir))
          return signalPassFailure();
        SmallVector<NamedAttribute> properties;
        if (!libraries.empty())
          properties.push_back(builder.getNamedAttr(
              "device_libraries", builder.getStrArrayAttr(libraries)));
        objects.push_back(mlir::gpu::ObjectAttr::get(
            &getContext(), target, mlir::gpu::CompilationTarget::Offload,
            builder.getStringAttr(*ir),
            properties.empty() ? nullptr
                               : builder.getDictionaryAttr(properties),
            /*kernels=*/nullptr));
      }
      OpBuilder b(gpuModule);
      b.setInsertionPointAfter(gpuModule);
      mlir::gpu::BinaryOp::create(b, gpuModule.getLoc(), gpuModule.getName(),
                                  gpuModule.getOffloadingHandlerAttr(),
                                  b.getArrayAttr(objects));
      gpuModule.erase();
    }
  }
};

} // namespace
