//===- Passes.cpp - C API of the SITS passes
//-------------------------------===//

#include "passes/CAPI/Passes.h"

#include "passes/InitAllPasses.h"

void sitsRegisterPasses(void) {
  static bool once = [] {
    mlir::sits::registerAllSitsPasses();
    return true;
  }();
  (void)once;
}
