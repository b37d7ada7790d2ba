//===- EntryPoints.cpp - The runtime's calling convention -----------------===//
//
// The runtime calls compiled code through one C signature per entry point:
//   void sits_entry_<name>(void **args)
// where args[i] points to the memref descriptor of the i-th argument
// (inputs, then outputs written in place), i.e. {allocated, aligned, offset,
// sizes[rank], strides[rank]}.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUMARKENTRYPOINTS
#define GEN_PASS_DEF_SITSCPUPACKENTRYPOINTS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;
using namespace mlir::sits;

namespace {

constexpr llvm::StringLiteral kCInterfacePrefix = "_mlir_ciface_";
// The artifact format's convention (kEntrySymbolPrefix of the runtime's
// artifact.h, which the writer fills symbols in from; the runtime links no
// MLIR, so the two sides of the ABI each spell it once).
constexpr llvm::StringLiteral kEntryPrefix = "sits_entry_";

struct SitsCpuMarkEntryPointsPass
    : cpu::impl::SitsCpuMarkEntryPointsBase<SitsCpuMarkEntryPointsPass> {
  void runOnOperation() override {
    UnitAttr unit = UnitAttr::get(&getContext());
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal())
        func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(), unit);
  }
};

struct SitsCpuPackEntryPointsPass
    : cpu::impl::SitsCpuPackEntryPointsBase<SitsCpuPackEntryPointsPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    auto ptrType = LLVM::LLVMPointerType::get(ctx);
    auto voidType = LLVM::LLVMVoidType::get(ctx);
    OpBuilder builder(ctx);

    SmallVector<LLVM::LLVMFuncOp> interfaces;
    for (auto func : module.getOps<LLVM::LLVMFuncOp>())
      if (func.getName().starts_with(kCInterfacePrefix) && !func.isExternal())
        interfaces.push_back(func);

    for (LLVM::LLVMFuncOp iface : interfaces) {
      LLVM::LLVMFunctionType type = iface.getFunctionType();
      if (!llvm::all_of(type.getParams(),
                        [&](Type t) { return t == ptrType; }) ||
          !isa<LLVM::LLVMVoidType>(type.getReturnType())) {
        iface.emitError("entry point '")
            << iface.getName().drop_front(kCInterfacePrefix.size())
            << "' must take only memrefs and return nothing; run "
               "buffer-results-to-out-params first";
        return signalPassFailure();
      }
      std::string name =
          (kEntryPrefix + iface.getName().drop_front(kCInterfacePrefix.size()))
              .str();
      Location loc = iface.getLoc();
      builder.setInsertionPointAfter(iface);
      auto entry = LLVM::LLVMFuncOp::create(
          builder, loc, name, LLVM::LLVMFunctionType::get(voidType, {ptrType}));
      Block *body = entry.addEntryBlock(builder);
      builder.setInsertionPointToStart(body);
      Value args = body->getArgument(0);
      SmallVector<Value> operands;
      for (unsigned i = 0, e = type.getNumParams(); i < e; ++i) {
        Value slot = LLVM::GEPOp::create(builder, loc, ptrType, ptrType, args,
                                         ArrayRef<LLVM::GEPArg>{int32_t(i)});
        operands.push_back(LLVM::LoadOp::create(builder, loc, ptrType, slot));
      }
      LLVM::CallOp::create(builder, loc, iface, operands);
      LLVM::ReturnOp::create(builder, loc, ValueRange{});
    }
  }
};

} // namespace
