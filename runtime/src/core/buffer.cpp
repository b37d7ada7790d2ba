//===- buffer.cpp - BufferView and AlignedBuffer
//---------------------------===//
#include "sits/runtime/buffer.h"

#include "buffer_cache.h"

#include <cstdio>
#include <cstdlib>
#include <new>

namespace sits::runtime {

namespace {

/// Bytes the system can still hand out (MemAvailable + SwapFree), or
/// SIZE_MAX when /proc/meminfo cannot tell.
size_t availableMemory() {
  std::FILE *f = std::fopen("/proc/meminfo", "r");
  if (!f)
    return SIZE_MAX;
  char line[256];
  unsigned long long kib, available = 0, swap = 0;
  bool found = false;
  while (std::fgets(line, sizeof line, f)) {
    if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
      available = kib;
      found = true;
    } else if (std::sscanf(line, "SwapFree: %llu kB", &kib) == 1) {
      swap = kib;
    }
  }
  std::fclose(f);
  return found ? size_t((available + swap) * 1024) : SIZE_MAX;
}

// Requests from this size on are checked against availableMemory first:
// Linux overcommits, so a buffer larger than the machine can back would be
// granted and the process killed while the code fills it.
constexpr size_t kCheckedAllocation = size_t(1) << 30;

} // namespace

int64_t BufferView::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<int64_t> BufferView::contiguousStrides() const {
  std::vector<int64_t> out(shape.size());
  int64_t s = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    out[i] = s;
    s *= shape[i];
  }
  return out;
}

bool BufferView::isContiguous() const {
  if (strides.empty())
    return true;
  if (strides.size() != shape.size())
    return false;
  if (numElements() == 0)
    return true;
  std::vector<int64_t> want = contiguousStrides();
  for (size_t i = 0; i < shape.size(); ++i)
    if (shape[i] != 1 && strides[i] != want[i])
      return false;
  return true;
}

std::string shapeToString(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      out += ", ";
    out += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  out += "]";
  return out;
}

std::string BufferView::typeString() const {
  return std::string(dtypeName(dtype)) + shapeToString(shape);
}

StatusOr<AlignedBuffer> AlignedBuffer::allocate(size_t bytes) {
  AlignedBuffer buffer;
  // Whole alignment units, never 0 bytes, so the pointer is always valid
  // and aligned.
  size_t rounded =
      (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
  if (rounded == 0)
    rounded = kBufferAlignment;
  if (rounded < bytes)
    return Status(StatusCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(bytes) + " bytes")
        .withValue(static_cast<int64_t>(bytes));
  if (rounded >= kCheckedAllocation) {
    size_t available = availableMemory();
    if (rounded > available)
      return Status(StatusCode::kOutOfMemory,
                    "cannot allocate " + std::to_string(bytes) +
                        " bytes: the system has " + std::to_string(available) +
                        " bytes available")
          .withValue(static_cast<int64_t>(bytes));
  }
  // From the buffer cache: outputs of the same shapes every call reuse
  // their pages instead of faulting fresh ones in.
  void *p = cachedAllocate(kBufferAlignment, rounded);
  if (!p)
    return Status(StatusCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(bytes) + " bytes")
        .withValue(static_cast<int64_t>(bytes));
  buffer.data_ = p;
  buffer.size_ = bytes;
  return buffer;
}

AlignedBuffer::~AlignedBuffer() { cachedFree(data_); }

AlignedBuffer::AlignedBuffer(AlignedBuffer &&other) noexcept
    : data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
  other.size_ = 0;
}

AlignedBuffer &AlignedBuffer::operator=(AlignedBuffer &&other) noexcept {
  if (this != &other) {
    cachedFree(data_);
    data_ = other.data_;
    size_ = other.size_;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void *AlignedBuffer::release() {
  void *p = data_;
  data_ = nullptr;
  size_ = 0;
  return p;
}

void AlignedBuffer::freeReleased(void *data) { cachedFree(data); }

} // namespace sits::runtime
