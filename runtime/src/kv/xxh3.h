//===- xxh3.h - XXH3 128-bit hash (internal)
//-------------------------------===//
//
// The KV allocator's fast, non-cryptographic block hash: XXH3_128bits
// (seed 0) of the vendored xxHash (runtime/third_party/xxhash), through the
// runtime's one copy (src/support/xxh3_128.h). Not part of the public API.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_SRC_KV_XXH3_H
#define SITS_RUNTIME_SRC_KV_XXH3_H

#include <cstddef>
#include <cstdint>

namespace sits::runtime::kv::detail {

/// XXH3_128bits of `len` bytes (seed 0); `out[16]` gets the canonical
/// (big-endian) representation of the hash, the bytes whose hex is what
/// `xxhsum -H2` and python-xxhash's `xxh3_128_hexdigest` print.
void xxh3_128(const void *data, size_t len, uint8_t out[16]);

} // namespace sits::runtime::kv::detail

#endif // SITS_RUNTIME_SRC_KV_XXH3_H
