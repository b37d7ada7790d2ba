//===- LLVMObject.h - LLVM dialect to native object code -------*- C++ -*-===//
//
// The last step of CPU code generation: translate a module in the LLVM
// dialect to LLVM IR, optimize it for the target machine and emit a
// relocatable object file.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_TARGETS_LLVMOBJECT_H
#define SITS_PASSES_TARGETS_LLVMOBJECT_H

#include "mlir/IR/Operation.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace mlir::sits {

struct LLVMObjectOptions {
  /// LLVM target triple, CPU and feature string; empty means the host.
  std::string triple;
  std::string cpu;
  std::string features;
  /// LLVM optimization level, 0 to 3.
  unsigned optLevel = 3;
  /// Threads optimizing and emitting parts of the module at once; 0 means
  /// one per core.
  unsigned jobs = 0;
};

/// Translates `module` (in the LLVM dialect) to LLVM IR, runs LLVM's
/// optimization pipeline for `options` and returns the object file bytes.
/// Errors are reported as diagnostics on `module`.
FailureOr<std::string> emitLLVMObject(Operation *module,
                                      const LLVMObjectOptions &options);

/// The same as one object per part of the module, the parts optimized and
/// emitted on `options.jobs` threads. Linked together, they are the
/// module's code; a part calls functions of another through hidden symbols.
FailureOr<SmallVector<std::string>>
emitLLVMObjects(Operation *module, const LLVMObjectOptions &options);

/// Same translation and optimization, returning textual LLVM IR (for
/// inspection and tests).
FailureOr<std::string> emitOptimizedLLVMIR(Operation *module,
                                           const LLVMObjectOptions &options);

} // namespace mlir::sits

#endif // SITS_PASSES_TARGETS_LLVMOBJECT_H
