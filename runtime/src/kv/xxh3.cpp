//===- xxh3.cpp - XXH3 128-bit hash for the KV allocator
//-------------------===//
//
// Forwards to the runtime's one XXH3-128 (src/support/xxh3_128.cpp, the only
// translation unit that includes the vendored xxhash.h).
//
//===----------------------------------------------------------------------===//
#include "xxh3.h"

#include "xxh3_128.h"

namespace sits::runtime::kv::detail {

void xxh3_128(const void *data, size_t len, uint8_t out[16]) {
  sits::runtime::xxh3_128(data, len, out);
}

} // namespace sits::runtime::kv::detail
