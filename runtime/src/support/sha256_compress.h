//===- sha256_compress.h - SHA-256 compression function (internal) --------===//
//
// For callers that pad their own short messages and compress them in place
// (the KV block hasher: a 16-token block is exactly two SHA-256 blocks).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_SRC_SUPPORT_SHA256_COMPRESS_H
#define SITS_RUNTIME_SRC_SUPPORT_SHA256_COMPRESS_H

#include <cstddef>
#include <cstdint>

namespace sits::runtime::detail {

/// The SHA-256 initial hash value H(0).
extern const uint32_t kSha256InitialState[8];

/// Compresses `blocks` 64-byte blocks into `state` with the fastest
/// implementation this CPU supports (chosen once).
void sha256Compress(uint32_t state[8], const uint8_t *data, size_t blocks);

} // namespace sits::runtime::detail

#endif // SITS_RUNTIME_SRC_SUPPORT_SHA256_COMPRESS_H
