//===- sits-opt.cpp - The SITS optimizer driver ---------------------------===//
//
// Runs any SITS or upstream pass or pipeline on .mlir files, so that
// everything the Python API does can be reproduced and lit-tested.
//
//===----------------------------------------------------------------------===//

#include "dialects/Sits/IR/SitsOps.h"
#include "passes/InitAllPasses.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/InitAllDialects.h"
#include "mlir/InitAllExtensions.h"
#include "mlir/InitAllPasses.h"
#include "mlir/Target/LLVMIR/Dialect/All.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/raw_ostream.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  mlir::registerAllDialects(registry);
  mlir::registerAllExtensions(registry);
  // GPU modules are serialized through LLVM IR (NVVM, ROCDL), so the opt
  // tool must know those translations to run gpu-module-to-binary.
  mlir::registerAllToLLVMIRTranslations(registry);
  registry.insert<mlir::sits::SitsDialect>();

  mlir::registerAllPasses();
  mlir::sits::registerAllSitsPasses();

  llvm::cl::AddExtraVersionPrinter([](llvm::raw_ostream &os) {
    os << "SITS (Scalable Inference Tensor Scheduling) version "
       << SITS_VERSION_STRING << "\n";
  });
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "SITS optimizer driver\n", registry));
}
