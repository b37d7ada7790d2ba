//===- BoolMemory.cpp - Byte accesses to sub-byte buffers in GPU kernels --===//
//
// As sits-cpu-bool-memory, for kernels (Common/SubByteMemory.h), with the
// pointer in the buffer's address space (3 for workgroup memory on NVVM and
// ROCDL alike), since a shared-memory address is not a generic one.
//
//===----------------------------------------------------------------------===//

#include "passes/Codegen/GPU/Passes.h"

#include "passes/Codegen/Common/SubByteMemory.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace mlir::sits::gpu {
#define GEN_PASS_DEF_SITSGPUBOOLMEMORY
#include "passes/Codegen/GPU/Passes.h.inc"
} // namespace mlir::sits::gpu

using namespace mlir;

namespace {

/// The NVVM address space of `type`'s memory space. AMDGPU numbers global
/// (1), LDS (3) and private (5) memory the same way.
unsigned addressSpace(MemRefType type) {
  auto space =
      dyn_cast_if_present<mlir::gpu::AddressSpaceAttr>(type.getMemorySpace());
  if (!space)
    return 0;
  switch (space.getValue()) {
  case mlir::gpu::AddressSpace::Workgroup:
    return static_cast<unsigned>(NVVM::NVVMMemorySpace::Shared);
  case mlir::gpu::AddressSpace::Private:
    return static_cast<unsigned>(NVVM::NVVMMemorySpace::Local);
  case mlir::gpu::AddressSpace::Global:
    return static_cast<unsigned>(NVVM::NVVMMemorySpace::Global);
  }
  return 0;
}

struct SitsGpuBoolMemoryPass
    : sits::gpu::impl::SitsGpuBoolMemoryBase<SitsGpuBoolMemoryPass> {
  void runOnOperation() override {
    sits::codegen::lowerSubByteMemoryAccesses(getOperation(), addressSpace);
  }
};

} // namespace
