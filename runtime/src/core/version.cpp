//===- version.cpp - Versions this runtime was built with
//------------------===//
#include "sits/runtime/runtime.h"

#ifndef SITS_VERSION_STRING
#error "SITS_VERSION_STRING must be defined by the build (from pyproject.toml)"
#endif
#ifndef SITS_LLVM_VERSION_STRING
#error                                                                         \
    "SITS_LLVM_VERSION_STRING must be defined by the build (from pyproject.toml)"
#endif

namespace sits::runtime {
const char *sitsVersion() { return SITS_VERSION_STRING; }
const char *llvmVersion() { return SITS_LLVM_VERSION_STRING; }
} // namespace sits::runtime
