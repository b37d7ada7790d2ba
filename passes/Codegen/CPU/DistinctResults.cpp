//===- DistinctResults.cpp - One buffer per returned result ---------------===//
//
// Results become caller-provided out-params (buffer-results-to-out-params):
// each result is written into its own output buffer. When one value is
// returned twice (two ONNX outputs that CSE found equal), upstream's
// rewrite has no single buffer to forward and crashes. Returning a copy for
// every repeat keeps one buffer per result; the copies are the writes into
// the caller's extra outputs that must happen anyway.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "llvm/ADT/SmallPtrSet.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUDISTINCTRESULTS
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;

namespace {

/// A fresh identity-layout buffer holding a copy of `memref`.
Value copyOf(OpBuilder &b, Location loc, Value memref) {
  auto type = cast<MemRefType>(memref.getType());
  SmallVector<Value> dynamicSizes;
  for (int64_t i = 0, e = type.getRank(); i < e; ++i)
    if (type.isDynamicDim(i))
      dynamicSizes.push_back(memref::DimOp::create(b, loc, memref, i));
  auto fresh =
      MemRefType::get(type.getShape(), type.getElementType(),
                      MemRefLayoutAttrInterface(), type.getMemorySpace());
  Value copy = memref::AllocOp::create(b, loc, fresh, dynamicSizes);
  memref::CopyOp::create(b, loc, memref, copy);
  if (fresh != type)
    copy = memref::CastOp::create(b, loc, type, copy);
  return copy;
}

struct SitsCpuDistinctResultsPass
    : sits::cpu::impl::SitsCpuDistinctResultsBase<SitsCpuDistinctResultsPass> {
  void runOnOperation() override {
    getOperation().walk([](func::ReturnOp ret) {
      llvm::SmallPtrSet<Value, 8> seen;
      OpBuilder b(ret);
      for (OpOperand &operand : ret->getOpOperands()) {
        if (!isa<MemRefType>(operand.get().getType()))
          continue;
        if (!seen.insert(operand.get()).second)
          operand.set(copyOf(b, ret.getLoc(), operand.get()));
      }
    });
  }
};

} // namespace
