//===- xxh3_128.h - XXH3 128-bit hash (internal)
//---------------------------===//
//
// The runtime's one XXH3-128 (seed 0), from the vendored xxHash
// (runtime/third_party/xxhash), compiled in xxh3_128.cpp only: the fast,
// non-cryptographic digest of an artifact's weights section (core) and the
// KV allocator's `xxh3_128` block hash.
//
// An implementation detail, not part of the public API, like sha256.h: no
// installed header declares it and libSitsRuntime.so does not export it.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_SRC_SUPPORT_XXH3_128_H
#define SITS_RUNTIME_SRC_SUPPORT_XXH3_128_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sits::runtime {

/// XXH3_128bits of `len` bytes (seed 0); `out[16]` gets the canonical
/// (big-endian) representation of the hash, the bytes whose hex is what
/// `xxhsum -H2` and python-xxhash's `xxh3_128_hexdigest` print.
void xxh3_128(const void *data, size_t len, uint8_t out[16]);

/// Streaming XXH3-128 (seed 0), for inputs that arrive in chunks; gives the
/// same digest as xxh3_128() over their concatenation.
class Xxh3_128 {
public:
  using Digest = std::array<uint8_t, 16>;

  Xxh3_128();
  ~Xxh3_128();
  Xxh3_128(const Xxh3_128 &) = delete;
  Xxh3_128 &operator=(const Xxh3_128 &) = delete;

  void update(const void *data, size_t size);
  /// The canonical (big-endian) digest; the hasher may not be used after.
  Digest finish();

  /// 32 lowercase hex digits.
  static std::string hex(const Digest &digest);

private:
  void *state_; // XXH3_state_t, which must stay inside xxh3_128.cpp
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_SRC_SUPPORT_XXH3_128_H
