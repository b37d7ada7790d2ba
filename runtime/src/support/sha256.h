//===- sha256.h - SHA-256 (FIPS 180-4) (internal) -------------------------===//
//
// The runtime's one SHA-256: the artifact content hash (core) and the
// default prefix-cache block hash (KV allocator) both use it. The
// compression function uses the x86 SHA extensions (SHA-NI) when cpuid
// reports them and a portable implementation otherwise; the choice is made
// once, and both give identical digests (tested).
//
// An implementation detail, not part of the public API: no installed header
// declares it and libSitsRuntime.so does not export it. The runtime's own
// libraries, tests and benchmarks reach it through SitsRuntimeSupport's
// build-tree include directory (src/support).
//
// Implemented in src/support/sha256.cpp (library SitsRuntimeSupport).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_SRC_SUPPORT_SHA256_H
#define SITS_RUNTIME_SRC_SUPPORT_SHA256_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sits::runtime {

/// SHA-256 of `len` bytes into `out[32]`, with SHA-NI when present.
void sha256(const void *data, size_t len, uint8_t out[32]);
/// The portable implementation (tests and benchmarks compare both).
void sha256Portable(const void *data, size_t len, uint8_t out[32]);
/// True when this CPU has the x86 SHA extensions (and they are used).
bool sha256HardwareAccelerated();

/// Streaming SHA-256, for inputs that arrive in pieces (a multi-GB weights
/// section hashed at memory speed).
class Sha256 {
public:
  using Digest = std::array<uint8_t, 32>;

  /// `accelerated` = false forces the portable code (tests compare both).
  explicit Sha256(bool accelerated = true);
  void update(const void *data, size_t size);
  Digest finish();

  /// 64 lowercase hex digits.
  static std::string hex(const Digest &digest);

private:
  void compress(const uint8_t *blocks, size_t count);

  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;
  bool accelerated_;
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_SRC_SUPPORT_SHA256_H
