//===- buffer_cache.h - Reused host buffers (internal) ------------------===//
//
// The allocator behind compiled code's buffers (the _mlir_memref_to_llvm_*
// functions) and AlignedBuffer: freed blocks of 64 KiB and more are kept per
// size class for the next allocation (see buffer_cache.cpp and
// bufferCacheStats in sits/runtime/buffer.h).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_BUFFER_CACHE_H
#define SITS_RUNTIME_CORE_BUFFER_CACHE_H

#include <cstddef>

namespace sits::runtime {

/// `bytes` aligned to `alignment` (a power of two; at least 64 is given),
/// or nullptr. Free with cachedFree only.
void *cachedAllocate(size_t alignment, size_t bytes);
/// Frees (or keeps for reuse) a block from cachedAllocate; nullptr is a
/// no-op.
void cachedFree(void *ptr);

} // namespace sits::runtime

#endif // SITS_RUNTIME_CORE_BUFFER_CACHE_H
