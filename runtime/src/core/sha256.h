//===- sha256.h - SHA-256 for the artifact content hash (internal) ---------===//
//
// Streaming SHA-256 (FIPS 180-4). Uses the x86 SHA extensions when the CPU
// has them (hashing a multi-GB weights section at memory speed), a portable
// implementation otherwise; both give identical digests.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_SHA256_H
#define SITS_RUNTIME_CORE_SHA256_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace sits::runtime {

class Sha256 {
public:
  using Digest = std::array<uint8_t, 32>;

  /// `accelerated` = false forces the portable code (tests compare both).
  explicit Sha256(bool accelerated = true);
  void update(const void *data, size_t size);
  Digest finish();

  static std::string hex(const Digest &digest);
  /// Whether the accelerated path is available on this CPU.
  static bool hasAcceleration();

private:
  void compress(const uint8_t *blocks, size_t count);

  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t length_ = 0;
  bool accelerated_;
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_CORE_SHA256_H
