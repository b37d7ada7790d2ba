//===- Outline.h - Ops into functions, one per distinct body ----*- C++ -*-===//
//
// What `sits-outline-kernels` (loop nests on buffers) and
// `sits-cpu-outline-dispatches` (fusion groups on tensors) share: ops of one
// block move into a private function that reads what they read from
// outside as arguments, and functions equal up to their arguments (and to
// static subview offsets, passed in instead) are one.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_PASSES_TRANSFORMS_OUTLINE_H
#define SITS_PASSES_TRANSFORMS_OUTLINE_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <memory>

namespace mlir::sits {

/// How a value read by outlined ops but defined outside them reaches the
/// function.
struct CapturePolicy {
  /// Whether the value's defining op is cloned into the function (its own
  /// operands then captured by the same rules) rather than passed in.
  llvm::function_ref<bool(Value)> clone;
};

/// A scalar or splat constant: what outlining clones into a function
/// rather than passing in (its value lets the code fold; as an argument it
/// would also make equal functions differ). Other tensor constants are
/// weights.
bool isScalarOrSplatConstant(Value value);

/// What both kernel outlining passes outline from: the module's public
/// functions with a body (entry points) and its outlined layers (the body
/// of an entry point, called once per layer). The functions they create
/// are private and not outlined from again.
SmallVector<func::FuncOp> getOutliningRoots(ModuleOp module);

/// Outlines groups of ops into private functions of a module, reusing a
/// function whenever a group's body equals one outlined before.
class KernelOutliner {
public:
  explicit KernelOutliner(ModuleOp module);
  ~KernelOutliner();

  /// Replaces `ops` (of one block, in block order) by a call, inserted
  /// where the last of them was, to a function named `name` or to an equal
  /// function outlined before. Values the ops read from outside become
  /// arguments in the order they are first read, unless `policy` clones
  /// them; their results used elsewhere become results, marked
  /// `kUpdatesAttr` when written into an argument, and so do those in
  /// `returned` (so that equal groups whose results are read in different
  /// places have one signature). Returns null and changes nothing when such
  /// a use comes before the last op.
  func::CallOp outline(ArrayRef<Operation *> ops, StringRef name,
                       const CapturePolicy &policy,
                       const llvm::DenseSet<Value> &returned = {});

  /// Distinct functions created so far.
  unsigned numFunctions() const { return functions; }

private:
  struct Distinct;
  SymbolTable symbols;
  llvm::DenseMap<llvm::hash_code, SmallVector<std::unique_ptr<Distinct>, 1>>
      distinct;
  unsigned functions = 0;
};

} // namespace mlir::sits

#endif // SITS_PASSES_TRANSFORMS_OUTLINE_H
