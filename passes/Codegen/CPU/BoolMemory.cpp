//===- BoolMemory.cpp - Byte-addressed loads and stores of sub-byte types -===//
//
// i1, i2, i4 and f4E2M1FN buffers hold one element per byte; their scalar
// accesses become byte accesses (Common/SubByteMemory.h). On the CPU every
// buffer is in the default address space.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/CPU/Passes.h"

#include "passes/Codegen/Common/SubByteMemory.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace mlir::sits::cpu {
#define GEN_PASS_DEF_SITSCPUBOOLMEMORY
#include "passes/Codegen/CPU/Passes.h.inc"
} // namespace mlir::sits::cpu

using namespace mlir;

namespace {

struct SitsCpuBoolMemoryPass
    : sits::cpu::impl::SitsCpuBoolMemoryBase<SitsCpuBoolMemoryPass> {
  void runOnOperation() override {
    sits::codegen::lowerSubByteMemoryAccesses(getOperation(),
                                              [](MemRefType) { return 0u; });
  }
};

} // namespace
