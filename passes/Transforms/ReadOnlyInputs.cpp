//===- ReadOnlyInputs.cpp - Public inputs are not bufferization scratch ---===//
//
// The runtime hands a public function the caller's input arrays without a
// copy when they are aligned; bufferization must not reuse them as output
// buffers. Only arguments a result declares it updates (`sits.updates`)
// stay writable.
//
//===----------------------------------------------------------------------===//

#include "passes/Transforms/Passes.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/BitVector.h"

namespace mlir::sits {
#define GEN_PASS_DEF_SITSREADONLYINPUTS
#include "passes/Transforms/Passes.h.inc"
} // namespace mlir::sits

using namespace mlir;

namespace {

struct SitsReadOnlyInputsPass
    : sits::impl::SitsReadOnlyInputsBase<SitsReadOnlyInputsPass> {
  void runOnOperation() override {
    auto readOnly = BoolAttr::get(&getContext(), false);
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isPrivate() || func.isExternal())
        continue;
      llvm::BitVector updated(func.getNumArguments());
      for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
        if (auto index =
                func.getResultAttrOfType<IntegerAttr>(i, sits::kUpdatesAttr))
          if (index.getInt() >= 0 && index.getInt() < updated.size())
            updated.set(index.getInt());
      for (BlockArgument arg : func.getArguments())
        if (isa<TensorType>(arg.getType()) && !updated[arg.getArgNumber()] &&
            !func.getArgAttr(
                arg.getArgNumber(),
                bufferization::BufferizationDialect::kWritableAttrName))
          func.setArgAttr(
              arg.getArgNumber(),
              bufferization::BufferizationDialect::kWritableAttrName, readOnly);
    }
  }
};

} // namespace
