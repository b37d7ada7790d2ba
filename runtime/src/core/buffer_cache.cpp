//===- buffer_cache.cpp - Buffers of compiled code, reused across calls ---===//
//
// Compiled code allocates its intermediate buffers through MLIR's generic
// allocation functions (finalize-memref-to-llvm{use-generic-functions}),
// which the runtime exports. glibc serves large blocks with mmap or returns
// them by trimming the heap, so a decode step that allocates and frees the
// same buffers every call faulted in fresh zeroed pages each time: a third
// of a batch-8 decode step. Here freed blocks of at least kMinCached bytes
// wait in a free list per size class until a later allocation of the same
// class takes them.
//
// Every block starts with a header of kHeaderBytes (which keeps the
// returned pointer 64-byte aligned) recording its size class, so `free`
// needs no lookup; blocks below kMinCached and over-aligned blocks are
// plain heap blocks behind the same header.
//
//===----------------------------------------------------------------------===//
#include "buffer_cache.h"

#include "sits/runtime/buffer.h"
#include "sits/runtime/export.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

namespace sits::runtime {
namespace {

constexpr size_t kHeaderBytes = 64;
constexpr size_t kMinCached = size_t(64) << 10;
constexpr unsigned kMinLog2 = 16; // log2(kMinCached)
constexpr unsigned kStepsPerOctave = 8;
constexpr unsigned kNumClasses = (48 - kMinLog2) * kStepsPerOctave;
constexpr uint32_t kNotCached = ~uint32_t(0);
constexpr uint32_t kMagic = 0x53425546; // "SBUF"
constexpr int64_t kDefaultLimit = int64_t(1024) << 20;

struct Header {
  uint32_t magic;
  uint32_t sizeClass; // kNotCached: a plain block
  size_t offset;      // from the start of the block to the user pointer
};
static_assert(sizeof(Header) <= kHeaderBytes, "header too big");

unsigned log2Floor(size_t v) { return 63 - unsigned(__builtin_clzll(v)); }

/// Bytes of size class `c`: (8 + c % 8) / 8 * 2^(16 + c / 8).
size_t classBytes(unsigned c) {
  return (size_t(kStepsPerOctave + c % kStepsPerOctave)
          << (kMinLog2 + c / kStepsPerOctave)) /
         kStepsPerOctave;
}

/// The smallest class holding `bytes` (>= kMinCached), or kNotCached.
uint32_t classOf(size_t bytes) {
  unsigned e = log2Floor(bytes);
  if (e >= 47)
    return kNotCached;
  size_t step = (size_t(1) << e) / kStepsPerOctave;
  size_t steps = (bytes + step - 1) / step; // 8..16
  unsigned c =
      (e - kMinLog2) * kStepsPerOctave + unsigned(steps) - kStepsPerOctave;
  return c < kNumClasses ? c : kNotCached;
}

int64_t limitFromEnvironment() {
  if (const char *env = std::getenv("SITS_BUFFER_CACHE_MB")) {
    char *end = nullptr;
    long long mb = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && mb >= 0 && mb < (int64_t(1) << 40))
      return int64_t(mb) << 20;
  }
  return kDefaultLimit;
}

struct Cache {
  std::mutex mu;
  std::vector<void *> free[kNumClasses]; // blocks, not user pointers
  int64_t cachedBytes = 0;
  int64_t limit = limitFromEnvironment();
  int64_t hits = 0, misses = 0;

  /// Frees cached blocks, largest classes first, until at most `keep`
  /// bytes remain. Called with `mu` held.
  void shrinkTo(int64_t keep) {
    for (unsigned c = kNumClasses; c-- > 0 && cachedBytes > keep;)
      while (!free[c].empty() && cachedBytes > keep) {
        std::free(free[c].back());
        free[c].pop_back();
        cachedBytes -= int64_t(classBytes(c));
      }
  }
};

Cache &cache() {
  // Leaked on purpose: compiled code may free buffers from static
  // destructors or worker threads at exit.
  static Cache *c = new Cache();
  return *c;
}

void *withHeader(void *block, size_t offset, uint32_t sizeClass) {
  char *user = static_cast<char *>(block) + offset;
  Header h{kMagic, sizeClass, offset};
  std::memcpy(user - sizeof(Header), &h, sizeof(Header));
  return user;
}

} // namespace

void *cachedAllocate(size_t alignment, size_t bytes) {
  if (alignment & (alignment - 1))
    return nullptr;
  if (alignment <= kBufferAlignment && bytes >= kMinCached) {
    uint32_t c = classOf(bytes);
    if (c != kNotCached) {
      Cache &cc = cache();
      {
        std::lock_guard<std::mutex> lock(cc.mu);
        if (!cc.free[c].empty()) {
          void *block = cc.free[c].back();
          cc.free[c].pop_back();
          cc.cachedBytes -= int64_t(classBytes(c));
          ++cc.hits;
          return withHeader(block, kHeaderBytes, c);
        }
        ++cc.misses;
      }
      void *block =
          std::aligned_alloc(kBufferAlignment, kHeaderBytes + classBytes(c));
      return block ? withHeader(block, kHeaderBytes, c) : nullptr;
    }
  }
  // Plain blocks: the header sits in the alignment's worth of bytes before
  // the user pointer.
  size_t align = alignment > kBufferAlignment ? alignment : kBufferAlignment;
  size_t offset = align > kHeaderBytes ? align : kHeaderBytes;
  size_t total = offset + bytes;
  if (total < bytes)
    return nullptr;
  total = (total + align - 1) / align * align;
  void *block = std::aligned_alloc(align, total);
  return block ? withHeader(block, offset, kNotCached) : nullptr;
}

void cachedFree(void *user) {
  if (!user)
    return;
  Header h;
  std::memcpy(&h, static_cast<char *>(user) - sizeof(Header), sizeof(Header));
  if (h.magic != kMagic) {
    // Not from allocate(): nothing sane to do but report it (a compiled
    // code bug, never user input).
    std::abort();
  }
  void *block = static_cast<char *>(user) - h.offset;
  if (h.sizeClass != kNotCached) {
    Cache &cc = cache();
    int64_t bytes = int64_t(classBytes(h.sizeClass));
    std::lock_guard<std::mutex> lock(cc.mu);
    if (cc.cachedBytes + bytes <= cc.limit) {
      cc.free[h.sizeClass].push_back(block);
      cc.cachedBytes += bytes;
      return;
    }
  }
  std::free(block);
}

BufferCacheStats bufferCacheStats() {
  Cache &cc = cache();
  std::lock_guard<std::mutex> lock(cc.mu);
  BufferCacheStats s;
  s.cachedBytes = cc.cachedBytes;
  s.limitBytes = cc.limit;
  s.hits = cc.hits;
  s.misses = cc.misses;
  return s;
}

void setBufferCacheLimit(int64_t bytes) {
  Cache &cc = cache();
  std::lock_guard<std::mutex> lock(cc.mu);
  cc.limit = bytes < 0 ? limitFromEnvironment() : bytes;
  cc.shrinkTo(cc.limit);
}

} // namespace sits::runtime

// The allocation functions finalize-memref-to-llvm{use-generic-functions}
// lowers memref.alloc / memref.dealloc to.
extern "C" SITS_RUNTIME_API void *_mlir_memref_to_llvm_alloc(size_t size) {
  return sits::runtime::cachedAllocate(0, size);
}

extern "C" SITS_RUNTIME_API void *
_mlir_memref_to_llvm_aligned_alloc(size_t alignment, size_t size) {
  return sits::runtime::cachedAllocate(alignment, size);
}

extern "C" SITS_RUNTIME_API void _mlir_memref_to_llvm_free(void *ptr) {
  sits::runtime::cachedFree(ptr);
}
