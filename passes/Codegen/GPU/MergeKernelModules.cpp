//===- MergeKernelModules.cpp - One gpu.module for all kernels ------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUMERGEKERNELMODULES
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

constexpr int64_t kWorkgroupAlignment = 16;

struct SitsGpuMergeKernelModulesPass
    : sits::gpu::impl::SitsGpuMergeKernelModulesBase<
          SitsGpuMergeKernelModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<mlir::gpu::GPUModuleOp> kernels(
        module.getOps<mlir::gpu::GPUModuleOp>());
    if (kernels.empty())
      return;
    MLIRContext *ctx = &getContext();

    // Workgroup buffers are 16-byte aligned: staged copies write them 16
    // bytes at a time (st.shared.v4), and the NVVM lowering would otherwise
    // align them to their element only.
    for (mlir::gpu::GPUModuleOp kernelModule : kernels)
      for (mlir::gpu::GPUFuncOp func :
           kernelModule.getOps<mlir::gpu::GPUFuncOp>())
        for (unsigned i = 0; i < func.getNumWorkgroupAttributions(); ++i)
          func.setWorkgroupAttributionAttr(
              i, LLVM::LLVMDialect::getAlignAttrName(),
              IntegerAttr::get(IntegerType::get(ctx, 64), kWorkgroupAlignment));
    mlir::gpu::GPUModuleOp target = kernels.front();
    SymbolTable targetSymbols(target);

    // Launches, by the module their kernel is in.
    llvm::DenseMap<StringAttr, SmallVector<mlir::gpu::LaunchFuncOp>> launches;
    module.walk([&](mlir::gpu::LaunchFuncOp launch) {
      launches[launch.getKernelModuleName()].push_back(launch);
    });

    auto renameKernels = [&](mlir::gpu::GPUModuleOp from) {
      // Kernels take the name of their module, which is unique.
      SmallVector<mlir::gpu::GPUFuncOp> funcs(
          from.getOps<mlir::gpu::GPUFuncOp>());
      for (mlir::gpu::GPUFuncOp func : funcs) {
        if (!func.isKernel())
          continue;
        StringAttr newName =
            funcs.size() == 1
                ? from.getNameAttr()
                : StringAttr::get(ctx, from.getName() + "_" + func.getName());
        for (mlir::gpu::LaunchFuncOp launch : launches[from.getNameAttr()])
          if (launch.getKernelName() == func.getNameAttr())
            launch.setKernelAttr(SymbolRefAttr::get(
                target.getNameAttr(), {FlatSymbolRefAttr::get(newName)}));
        if (failed(SymbolTable::replaceAllSymbolUses(func, newName, from)))
          return failure();
        SymbolTable::setSymbolName(func, newName);
        ++numKernels;
      }
      return success();
    };
    if (failed(renameKernels(target)))
      return signalPassFailure();

    for (mlir::gpu::GPUModuleOp from : llvm::drop_begin(kernels)) {
      if (failed(renameKernels(from)))
        return signalPassFailure();
      SymbolTable fromSymbols(from);
      for (Operation &op :
           llvm::make_early_inc_range(from.getBody()->getOperations())) {
        auto symbol = dyn_cast<SymbolOpInterface>(&op);
        if (symbol) {
          Operation *existing = targetSymbols.lookup(symbol.getNameAttr());
          // The same constant, copied into several kernels by outlining.
          if (existing &&
              OperationEquivalence::isEquivalentTo(
                  existing, &op, OperationEquivalence::ignoreValueEquivalence,
                  nullptr, OperationEquivalence::IgnoreLocations)) {
            op.erase();
            continue;
          }
          if (existing &&
              failed(fromSymbols.renameToUnique(&op, {&targetSymbols})))
            return signalPassFailure();
        }
        op.remove();
        targetSymbols.insert(&op);
      }
      from.erase();
    }
  }
};

} // namespace
