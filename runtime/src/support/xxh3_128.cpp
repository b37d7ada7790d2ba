//===- xxh3_128.cpp - XXH3 128-bit hash from the vendored xxHash ----------===//
//
// The one translation unit that includes runtime/third_party/xxhash/xxhash.h.
// XXH_INLINE_ALL makes every xxHash function static to this file: the
// library exports nothing of it and cannot clash with another xxHash linked
// into the same process.
//
//===----------------------------------------------------------------------===//
#include "xxh3_128.h"

#define XXH_INLINE_ALL
#include "xxhash.h"

#include <cstdlib>
#include <new>

namespace sits::runtime {
namespace {

Xxh3_128::Digest canonical(XXH128_hash_t h) {
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  static_assert(sizeof(c.digest) == 16, "XXH128 digest is 16 bytes");
  Xxh3_128::Digest out;
  for (int i = 0; i < 16; ++i)
    out[size_t(i)] = c.digest[i];
  return out;
}

} // namespace

void xxh3_128(const void *data, size_t len, uint8_t out[16]) {
  Xxh3_128::Digest d = canonical(XXH3_128bits(data, len));
  for (size_t i = 0; i < d.size(); ++i)
    out[i] = d[i];
}

Xxh3_128::Xxh3_128() : state_(XXH3_createState()) {
  if (!state_)
    throw std::bad_alloc();
  XXH3_128bits_reset(static_cast<XXH3_state_t *>(state_));
}

Xxh3_128::~Xxh3_128() { XXH3_freeState(static_cast<XXH3_state_t *>(state_)); }

void Xxh3_128::update(const void *data, size_t size) {
  if (size)
    XXH3_128bits_update(static_cast<XXH3_state_t *>(state_), data, size);
}

Xxh3_128::Digest Xxh3_128::finish() {
  return canonical(
      XXH3_128bits_digest(static_cast<const XXH3_state_t *>(state_)));
}

std::string Xxh3_128::hex(const Digest &digest) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * digest.size());
  for (uint8_t b : digest) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

} // namespace sits::runtime
