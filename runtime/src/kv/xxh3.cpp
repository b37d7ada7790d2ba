//===- xxh3.cpp - XXH3 128-bit hash from the vendored xxHash
//---------------===//
//
// The one translation unit that includes runtime/third_party/xxhash/xxhash.h.
// XXH_INLINE_ALL makes every xxHash function static to this file: the
// library exports nothing of it and cannot clash with another xxHash linked
// into the same process.
//
//===----------------------------------------------------------------------===//
#include "xxh3.h"

#define XXH_INLINE_ALL
#include "xxhash.h"

namespace sits::runtime::kv::detail {

void xxh3_128(const void *data, size_t len, uint8_t out[16]) {
  const XXH128_hash_t h = XXH3_128bits(data, len);
  XXH128_canonical_t canonical;
  XXH128_canonicalFromHash(&canonical, h);
  static_assert(sizeof(canonical.digest) == 16, "XXH128 digest is 16 bytes");
  for (int i = 0; i < 16; ++i)
    out[i] = canonical.digest[i];
}

} // namespace sits::runtime::kv::detail
