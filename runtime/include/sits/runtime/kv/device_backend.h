//===- device_backend.h - A KV tier in a GPU's memory ---------------------===//
//
// The `MemoryBackend` of a pool whose device tier lives in GPU memory
// (`MemoryOptions::device_backend`): blocks are allocated with the GPU
// driver, zero-filled, and every copy the allocator lists (copy-on-write on
// the device, swap and offload to and from the host tier) runs through the
// driver, each complete when `copy` returns. A model compiled for that GPU
// reads and writes the pool in place (`Module::run` passes device views
// through).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KV_DEVICE_BACKEND_H
#define SITS_RUNTIME_KV_DEVICE_BACKEND_H

#include "sits/runtime/device_memory.h"
#include "sits/runtime/kv/memory.h"

#include <memory>
#include <string_view>

namespace sits::runtime::kv {

/// The backend over `memory`.
std::shared_ptr<MemoryBackend>
deviceMemoryBackend(std::shared_ptr<DeviceMemory> memory);

/// The backend of GPU `uri` ("cuda:0"); the errors of DeviceMemory::open.
StatusOr<std::shared_ptr<MemoryBackend>>
deviceMemoryBackend(std::string_view uri);

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_KV_DEVICE_BACKEND_H
