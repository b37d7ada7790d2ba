//===- device_memory.cpp - DeviceMemory over the GPU drivers --------------===//
#include "sits/runtime/device_memory.h"

#include "gpu_device.h"

namespace sits::runtime {
namespace {

class GpuDeviceMemory final : public DeviceMemory {
public:
  explicit GpuDeviceMemory(std::shared_ptr<GpuDevice> gpu)
      : gpu_(std::move(gpu)), uri_(gpu_->uri()) {}

  const std::string &uri() const override { return uri_; }
  int32_t dlpackDeviceType() const override {
    return gpu_->dlpackDevice().first;
  }
  int32_t deviceId() const override { return gpu_->dlpackDevice().second; }

  StatusOr<void *> allocate(size_t bytes) override {
    SITS_RETURN_IF_ERROR(gpu_->makeCurrent());
    StatusOr<void *> p = gpu_->allocate(bytes);
    if (!p.ok())
      return p;
    Status zeroed = onStream(
        [&](GpuDevice::Stream s) { return gpu_->fillZero(*p, bytes, s); });
    if (!zeroed.ok()) {
      (void)gpu_->free(*p);
      return zeroed;
    }
    return p;
  }

  Status free(void *ptr) override {
    SITS_RETURN_IF_ERROR(gpu_->makeCurrent());
    return gpu_->free(ptr);
  }

  Status copy(void *dst, const void *src, size_t bytes,
              Direction direction) override {
    SITS_RETURN_IF_ERROR(gpu_->makeCurrent());
    return onStream([&](GpuDevice::Stream s) {
      switch (direction) {
      case Direction::kHostToDevice:
        return gpu_->copyToDevice(dst, src, bytes, s);
      case Direction::kDeviceToHost:
        return gpu_->copyToHost(dst, src, bytes, s);
      case Direction::kDeviceToDevice:
        return gpu_->copyOnDevice(dst, src, bytes, s);
      }
      return Status(StatusCode::kInvalidArgument, "unknown copy direction");
    });
  }

private:
  /// Runs `op` on a stream of the device's pool and waits for it.
  template <typename Op> Status onStream(Op op) {
    StatusOr<GpuDevice::Stream> stream = gpu_->acquireStream();
    if (!stream.ok())
      return stream.status();
    Status s = op(*stream);
    Status synced = gpu_->synchronize(*stream);
    gpu_->releaseStream(*stream);
    return s.ok() ? synced : s;
  }

  std::shared_ptr<GpuDevice> gpu_;
  std::string uri_;
};

} // namespace

DeviceMemory::~DeviceMemory() = default;

StatusOr<std::shared_ptr<DeviceMemory>>
DeviceMemory::open(std::string_view uri) {
  StatusOr<std::shared_ptr<Device>> device = DeviceRegistry::global().open(uri);
  if (!device.ok())
    return device.status();
  auto gpu = std::dynamic_pointer_cast<GpuDevice>(*device);
  if (!gpu)
    return Status(StatusCode::kInvalidArgument,
                  "device " + (*device)->uri() +
                      " is host memory, not a GPU's: its KV pool needs no "
                      "device memory")
        .withSubject((*device)->uri());
  return std::shared_ptr<DeviceMemory>(
      std::make_shared<GpuDeviceMemory>(std::move(gpu)));
}

} // namespace sits::runtime
