//===- gpu_device.h - GPU devices and the call context of mgpu* (internal)
//-===//
//
// `GpuDevice` is what the cuda and hip drivers open: one device of a vendor
// driver library (libcuda.so.1 / libamdhip64.so, dlopen'ed, never linked)
// with its primary context retained. Its operations are vendor-neutral
// (device pointers are `void *`); `gpu_driver.cpp` implements them once,
// templated over each vendor's small table of driver functions.
//
// Compiled GPU host code calls MLIR's GPU runtime ABI (`mgpuLaunchKernel`,
// `mgpuMemAlloc`, ...; gpu_runtime.cpp). Those signatures carry neither a
// device nor a way to fail, so the runtime binds them to a `GpuCall` on the
// calling thread for the duration of a model call (or of the dlopen that
// loads the code's device image): the device, the call's stream, and the
// first error, which the runtime reports when the entry point returns.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_GPU_DEVICE_H
#define SITS_RUNTIME_CORE_GPU_DEVICE_H

#include "sits/runtime/buffer.h"
#include "sits/runtime/device.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>

namespace sits::runtime {

class GpuDevice : public Device {
public:
  using Stream = void *;
  using ModuleHandle = void *;
  using Function = void *;
  /// An instantiated recording of a stream's work (a CUDA / HIP graph).
  using Recording = void *;

  /// "sm_90" when the driver reports a compute capability, else "".
  virtual const std::string &chip() const = 0;
  /// The device's number in its driver ("cuda:1" is 1).
  virtual int ordinal() const = 0;
  /// The DLPack (device type, id) of its memory: (kDLPackCuda, n) or
  /// (kDLPackRocm, n), what device views carry (BufferView).
  std::pair<int32_t, int32_t> dlpackDevice() const {
    return {kind() == DeviceKind::kHip ? kDLPackRocm : kDLPackCuda, ordinal()};
  }

  /// Makes the device's primary context current on this thread; every other
  /// call assumes it is.
  virtual Status makeCurrent() = 0;

  /// Device memory outside any stream (the weights): at least 256-byte
  /// aligned. 0 bytes gives nullptr.
  virtual StatusOr<void *> allocate(size_t bytes) = 0;
  virtual Status free(void *ptr) = 0;
  /// Page-locked host memory, which copies to and from the device reach by
  /// DMA without staging; an error when the driver has none. 0 bytes gives
  /// nullptr.
  virtual StatusOr<void *> allocateHost(size_t bytes) = 0;
  virtual void freeHost(void *ptr) = 0;
  /// Stream-ordered memory (stream-ordered allocator where the driver and
  /// device support it, else plain allocations). 0 bytes gives nullptr.
  virtual StatusOr<void *> allocateAsync(size_t bytes, Stream stream) = 0;
  virtual Status freeAsync(void *ptr, Stream stream) = 0;

  virtual Status copyToDevice(void *dst, const void *src, size_t bytes,
                              Stream stream) = 0;
  virtual Status copyToHost(void *dst, const void *src, size_t bytes,
                            Stream stream) = 0;
  /// Device to device (KV blocks: copy-on-write).
  virtual Status copyOnDevice(void *dst, const void *src, size_t bytes,
                              Stream stream) = 0;
  /// Zero bytes (a new KV pool).
  virtual Status fillZero(void *dst, size_t bytes, Stream stream) = 0;

  /// A stream of the device's pool, for one call; give it back with
  /// `releaseStream` (streams are reused, not recreated per call).
  virtual StatusOr<Stream> acquireStream() = 0;
  virtual void releaseStream(Stream stream) = 0;
  virtual Status synchronize(Stream stream) = 0;

  /// A fatbin / cubin / code object image.
  virtual StatusOr<ModuleHandle> loadModule(const void *image) = 0;
  /// NUL-terminated PTX, compiled by the driver (CUDA only).
  virtual StatusOr<ModuleHandle> loadModuleJit(const char *ptx,
                                               int optLevel) = 0;
  virtual Status unloadModule(ModuleHandle module) = 0;
  virtual StatusOr<Function> function(ModuleHandle module,
                                      const char *name) = 0;
  virtual Status launch(Function function, const int64_t grid[3],
                        const int64_t block[3], int32_t sharedBytes,
                        Stream stream, void **params, void **extra) = 0;

  /// Whether a stream's launches can be recorded once and replayed: the
  /// driver has graphs, and the stream-ordered allocator is in use (a
  /// recording's temporaries must be allocations it owns).
  virtual bool canRecord() const = 0;
  /// From here until `endRecording`, work queued on `stream` by this thread
  /// is recorded, not run.
  virtual Status beginRecording(Stream stream) = 0;
  /// Ends the recording on `stream` and instantiates it; the recording
  /// frees its own temporaries at each replay. Always ends the capture, even
  /// when the recording failed (then nothing is returned).
  virtual StatusOr<Recording> endRecording(Stream stream) = 0;
  /// Queues the recorded work on `stream`.
  virtual Status replay(Recording recording, Stream stream) = 0;
  virtual void destroyRecording(Recording recording) = 0;
};

/// What the mgpu* functions act on while a model call (or a code load) runs
/// on this thread.
struct GpuCall {
  std::shared_ptr<GpuDevice> device;
  GpuDevice::Stream stream = nullptr;
  /// Whether the stream's work is being recorded: the code's own stream
  /// synchronizations are skipped (the runtime synchronizes after the
  /// replay; a capturing stream cannot be synchronized).
  bool recording = false;
  /// Kernels the code launched (or recorded).
  uint64_t launches = 0;
  /// The first failure; later ones are dropped (they usually follow from
  /// it).
  Status status;

  void fail(Status s) {
    if (status.ok())
      status = std::move(s);
  }
};

/// Binds `call` to this thread for the scope's life (nesting restores the
/// previous binding).
class GpuCallScope {
public:
  explicit GpuCallScope(GpuCall &call);
  ~GpuCallScope();
  GpuCallScope(const GpuCallScope &) = delete;
  GpuCallScope &operator=(const GpuCallScope &) = delete;

private:
  GpuCall *previous_;
};

/// The call bound to this thread, or nullptr.
GpuCall *currentGpuCall();

/// The built-in drivers of the registry ("cuda", "hip"). The library is the
/// first of $SITS_CUDA_DRIVER / $SITS_HIP_DRIVER (a path, for test doubles)
/// or the vendor's usual names that dlopen finds.
std::unique_ptr<Driver> makeCudaDriver();
std::unique_ptr<Driver> makeHipDriver();

} // namespace sits::runtime

#endif // SITS_RUNTIME_CORE_GPU_DEVICE_H
