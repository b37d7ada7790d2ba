//===- device_backend.cpp - A KV tier in a GPU's memory -------------------===//
#include "sits/runtime/kv/device_backend.h"

#include <cstring>
#include <string>

namespace sits::runtime::kv {
namespace {

class DeviceBackend final : public MemoryBackend {
public:
  explicit DeviceBackend(std::shared_ptr<DeviceMemory> memory)
      : memory_(std::move(memory)),
        name_(memory_->uri().substr(0, memory_->uri().find(':'))) {}

  const char *name() const override { return name_.c_str(); }
  bool hostAccessible() const override { return false; }
  int32_t dlpackDeviceType() const override {
    return memory_->dlpackDeviceType();
  }
  int32_t deviceId() const override { return memory_->deviceId(); }
  size_t alignment() const override { return 256; }

  StatusOr<void *> allocate(size_t bytes) override {
    return memory_->allocate(bytes);
  }
  void deallocate(void *ptr, size_t) noexcept override {
    (void)memory_->free(ptr);
  }

  Status copy(const CopyRegion *regions, size_t count) override {
    for (size_t i = 0; i < count; ++i) {
      const CopyRegion &r = regions[i];
      for (int64_t row = 0; row < r.height; ++row) {
        auto *dst = static_cast<char *>(r.dst) + row * r.pitch;
        const auto *src = static_cast<const char *>(r.src) + row * r.pitch;
        if (r.kind == CopyKind::kHostToHost) {
          std::memcpy(dst, src, size_t(r.width));
          continue;
        }
        DeviceMemory::Direction direction =
            r.kind == CopyKind::kHostToDevice
                ? DeviceMemory::Direction::kHostToDevice
            : r.kind == CopyKind::kDeviceToHost
                ? DeviceMemory::Direction::kDeviceToHost
                : DeviceMemory::Direction::kDeviceToDevice;
        SITS_RETURN_IF_ERROR(
            memory_->copy(dst, src, size_t(r.width), direction));
      }
    }
    return Status::OK();
  }

private:
  std::shared_ptr<DeviceMemory> memory_;
  std::string name_;
};

} // namespace

std::shared_ptr<MemoryBackend>
deviceMemoryBackend(std::shared_ptr<DeviceMemory> memory) {
  return std::make_shared<DeviceBackend>(std::move(memory));
}

StatusOr<std::shared_ptr<MemoryBackend>>
deviceMemoryBackend(std::string_view uri) {
  StatusOr<std::shared_ptr<DeviceMemory>> memory = DeviceMemory::open(uri);
  if (!memory.ok())
    return memory.status();
  return deviceMemoryBackend(std::move(*memory));
}

} // namespace sits::runtime::kv
