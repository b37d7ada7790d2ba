//===- buffer.h - Caller-owned tensors passed to compiled code
//-------------===//
//
// A `BufferView` describes memory the caller owns: a pointer, an element
// type, a shape and strides in elements (empty strides = contiguous
// row-major). The runtime never takes ownership. Compiled code assumes
// contiguous, 64-byte-aligned buffers; `Module::run` copies views that are
// not into aligned scratch buffers (and outputs back), so any view works,
// and aligned contiguous ones cost nothing extra.
//
// `AlignedBuffer` is an owning, 64-byte-aligned allocation for callers that
// want the fast path (outputs the runtime allocates are ones); it comes from
// the buffer cache below, like the buffers of compiled code.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_BUFFER_H
#define SITS_RUNTIME_BUFFER_H

#include "sits/runtime/dtype.h"
#include "sits/runtime/status.h"

#include <cstdint>
#include <string>
#include <vector>

namespace sits::runtime {

/// The alignment compiled code assumes for every buffer.
inline constexpr size_t kBufferAlignment = 64;

/// DLPack device types (`DLDeviceType`) a view may live on.
inline constexpr int32_t kDLPackCpu = 1;
inline constexpr int32_t kDLPackCuda = 2;
inline constexpr int32_t kDLPackRocm = 10;

struct SITS_RUNTIME_API BufferView {
  void *data = nullptr;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  /// Strides in elements, one per dimension; empty means contiguous
  /// row-major. Negative strides are allowed (inputs only).
  std::vector<int64_t> strides;
  /// Where `data` points, as a DLPack (device type, id): host memory, or
  /// the memory of a GPU (an input a GPU model reads in place, without a
  /// copy: a KV pool resident on the device).
  int32_t deviceType = kDLPackCpu;
  int32_t deviceId = 0;

  BufferView() = default;
  BufferView(void *data, DType dtype, std::vector<int64_t> shape,
             std::vector<int64_t> strides = {})
      : data(data), dtype(dtype), shape(std::move(shape)),
        strides(std::move(strides)) {}

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// Product of the shape (1 for rank 0).
  int64_t numElements() const;
  /// The row-major strides of `shape`.
  std::vector<int64_t> contiguousStrides() const;
  /// True when the strides are empty or equal the row-major ones (size-1
  /// dimensions may have any stride).
  bool isContiguous() const;
  bool onHost() const { return deviceType == kDLPackCpu; }
  bool isAligned() const {
    return reinterpret_cast<uintptr_t>(data) % kBufferAlignment == 0;
  }
  /// "f32[2, 3]".
  std::string typeString() const;
};

/// "[2, -1, 4]" (-1 prints as "?").
SITS_RUNTIME_API std::string shapeToString(const std::vector<int64_t> &shape);

/// The buffers compiled code allocates for its intermediate values come
/// from the runtime (MLIR's `_mlir_memref_to_llvm_*` allocation functions).
/// A model call allocates and frees the same few sizes every time, so freed
/// buffers of 64 KiB and more are kept, per size class (eight per power of
/// two), and handed out again instead of going back to the system, which
/// would fault in fresh zeroed pages on every call. The cache holds at most
/// `limitBytes`: SITS_BUFFER_CACHE_MB when set to a non-negative integer,
/// else 1024 MiB; 0 turns caching off.
struct BufferCacheStats {
  /// Bytes of freed buffers held for reuse.
  int64_t cachedBytes = 0;
  int64_t limitBytes = 0;
  /// Allocations of cacheable sizes served from the cache / by the system.
  int64_t hits = 0;
  int64_t misses = 0;
};
SITS_RUNTIME_API BufferCacheStats bufferCacheStats();
/// Sets the cache's limit in bytes (< 0 restores the default) and frees
/// cached buffers above it; `setBufferCacheLimit(0)` empties the cache.
SITS_RUNTIME_API void setBufferCacheLimit(int64_t bytes);

/// An owning 64-byte-aligned allocation (contents uninitialised).
class SITS_RUNTIME_API AlignedBuffer {
public:
  AlignedBuffer() = default;
  static StatusOr<AlignedBuffer> allocate(size_t bytes);
  ~AlignedBuffer();
  AlignedBuffer(AlignedBuffer &&other) noexcept;
  AlignedBuffer &operator=(AlignedBuffer &&other) noexcept;
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;

  void *data() const { return data_; }
  size_t size() const { return size_; }
  /// Gives up ownership; free the result with `AlignedBuffer::release`'s
  /// counterpart `AlignedBuffer::freeReleased`.
  void *release();
  static void freeReleased(void *data);

private:
  void *data_ = nullptr;
  size_t size_ = 0;
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_BUFFER_H
