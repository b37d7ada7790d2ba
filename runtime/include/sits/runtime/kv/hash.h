//===- hash.h - Block hashing for prefix caching
//---------------------------===//
//
// Two 128-bit-or-wider hash functions and the chained block hash of spec
// §4.1/§4.7:
//
//   * SHA-256 ("sha256", default, cryptographic): the runtime's one
//     implementation (internal to the runtime, with SHA-NI when the CPU has
//     it), which the artifact code uses too.
//   * XXH3-128 ("xxh3_128", fast, non-cryptographic): XXH3_128bits with
//     seed 0 from the vendored xxHash (runtime/third_party/xxhash). The
//     allocator always verifies a hit against the stored tokens of the block
//     (and its parent hash) when this algorithm is selected, as spec §4.7
//     requires of a non-cryptographic hash. "murmur3_128", the name of the
//     fast option before XXH3 replaced MurmurHash3, is still accepted by
//     parseHashAlgo as a deprecated alias of "xxh3_128".
//
// Chain (all integers little-endian):
//
//   root = H(seed ‖ u32 len(namespace) ‖ namespace ‖ u32 len(salt) ‖ salt)
//   h_i  = H(h_{i-1} ‖ tokens[i*bs, (i+1)*bs) as int32 ‖ u32 len(extra_i) ‖
//   extra_i)
//
// with h_{-1} = root. A key is the first 16 bytes of the digest (SHA-256) or
// the 16-byte canonical (big-endian) XXH128 digest, so that Hash128::hex()
// reads as `sha256sum` (truncated) or `xxhsum -H2` print. `root` folds the
// spec's `seed ‖ namespace` prefix of h_0 into one value that is computed
// once per (namespace, salt) pair.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KV_HASH_H
#define SITS_RUNTIME_KV_HASH_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace sits::runtime::kv {

/// A 128-bit block hash (`lo` = first 8 bytes of the key, little-endian).
struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const Hash128 &a, const Hash128 &b) {
    return a.lo == b.lo && a.hi == b.hi;
  }
  friend bool operator!=(const Hash128 &a, const Hash128 &b) {
    return !(a == b);
  }
  bool isZero() const { return lo == 0 && hi == 0; }
  /// 32 lowercase hex digits of the 16 key bytes, in byte order.
  std::string hex() const;
};

enum class HashAlgo : int32_t {
  kSha256 = 0,  ///< cryptographic (default)
  kXxh3_128 = 1 ///< non-cryptographic; hits are verified against tokens
};

/// "sha256" / "xxh3_128" (the canonical names; see parseHashAlgo in
/// config.h for the accepted aliases).
const char *hashAlgoName(HashAlgo algo);
/// True for the algorithms whose hits need no token verification.
bool isCryptographic(HashAlgo algo);

/// Hashes an arbitrary message with `algo` into a 128-bit key.
Hash128 hashBytes(HashAlgo algo, const void *data, size_t len);

/// Computes the chain of spec §4.1 for one pool (`algo`, `seed`,
/// `block_size` fixed at construction). Thread-safe (immutable).
class BlockHasher {
public:
  BlockHasher(HashAlgo algo, std::string seed, int32_t blockSize);

  HashAlgo algo() const { return algo_; }
  int32_t blockSize() const { return blockSize_; }

  /// root = H(seed ‖ len ‖ namespace ‖ len ‖ salt).
  Hash128 root(std::string_view nameSpace, std::string_view salt) const;

  /// h = H(parent ‖ tokens[0, blockSize) ‖ len(extra) ‖ extra).
  Hash128 block(const Hash128 &parent, const int32_t *tokens,
                std::string_view extra = {}) const;

private:
  HashAlgo algo_;
  std::string seed_;
  int32_t blockSize_;
};

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_KV_HASH_H
