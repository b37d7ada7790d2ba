//===- device_memory.h - Memory of a GPU the runtime opened ---------------===//
//
// What code outside the runtime's core needs of a GPU's memory: the KV
// pool's device tier (kv::MemoryBackend) allocates it here and copies
// blocks in and out. Every operation returns when it is complete (it runs
// on a stream of the device's pool, then synchronizes it), so the memory is
// ordered with the model calls that read it, which synchronize too.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_DEVICE_MEMORY_H
#define SITS_RUNTIME_DEVICE_MEMORY_H

#include "sits/runtime/export.h"
#include "sits/runtime/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace sits::runtime {

class SITS_RUNTIME_API DeviceMemory {
public:
  enum class Direction { kHostToDevice, kDeviceToHost, kDeviceToDevice };

  /// The memory of GPU `uri` ("cuda:0", "hip:1"), opened through the device
  /// registry. kInvalidArgument for the CPU ("cpu": host memory needs
  /// none of this), the registry's errors for a device it cannot open.
  static StatusOr<std::shared_ptr<DeviceMemory>> open(std::string_view uri);

  virtual ~DeviceMemory();
  /// "cuda:0".
  virtual const std::string &uri() const = 0;
  /// DLPack (device type, id) of the memory: (2, n) CUDA, (10, n) ROCm.
  virtual int32_t dlpackDeviceType() const = 0;
  virtual int32_t deviceId() const = 0;
  /// `bytes` (> 0) of zero-filled device memory, at least 256-byte aligned;
  /// kOutOfMemory / kDriverError from the driver.
  virtual StatusOr<void *> allocate(size_t bytes) = 0;
  virtual Status free(void *ptr) = 0;
  virtual Status copy(void *dst, const void *src, size_t bytes,
                      Direction direction) = 0;
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_DEVICE_MEMORY_H
