//===- sha256_internal.h - SHA-256 compression (internal) ------------------===//
#ifndef SITS_RUNTIME_SRC_KV_SHA256_INTERNAL_H
#define SITS_RUNTIME_SRC_KV_SHA256_INTERNAL_H

#include <cstddef>
#include <cstdint>

namespace sits::runtime::kv::detail {

/// The SHA-256 initial hash value H(0).
extern const uint32_t kSha256InitialState[8];

/// Compresses `blocks` 64-byte blocks into `state` with the fastest
/// implementation this CPU supports (chosen once).
void sha256Compress(uint32_t state[8], const uint8_t *data, size_t blocks);

} // namespace sits::runtime::kv::detail

#endif // SITS_RUNTIME_SRC_KV_SHA256_INTERNAL_H
