//===- artifact_format.h - Byte layout of .sitsm files (internal)
//----------===//
//
// See ARTIFACT.md in this folder for the specification; this header is its
// code. All integers are little-endian.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_ARTIFACT_FORMAT_H
#define SITS_RUNTIME_CORE_ARTIFACT_FORMAT_H

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace sits::runtime::format {

/// "\x89SITSM\r\n": a non-ASCII first byte, then a name, then CR LF, so
/// text-mode transfers and truncation to 7 bits are detected at once.
inline constexpr uint8_t kMagic[8] = {0x89, 'S', 'I',  'T',
                                      'S',  'M', '\r', '\n'};

inline constexpr size_t kHeaderSize = 64;
inline constexpr size_t kSectionEntrySize = 64;
inline constexpr size_t kSectionNameBytes = 40; // NUL-padded, <= 39 chars
inline constexpr size_t kSectionAlignment = 64;
/// The writer places `weights` on a page boundary so it can be mapped alone.
inline constexpr size_t kWeightsAlignment = 4096;
inline constexpr uint32_t kMaxSections = 1024;

// Field offsets in the fixed header.
inline constexpr size_t kOffMagic = 0;
inline constexpr size_t kOffVersion = 8;
inline constexpr size_t kOffHeaderSize = 12;
inline constexpr size_t kOffSectionCount = 16;
inline constexpr size_t kOffManifestHashPos = 20;
inline constexpr size_t kOffFileSize = 24;
inline constexpr size_t kOffContentHash = 32;
inline constexpr size_t kContentHashBytes = 32;
inline constexpr size_t kContentHashHexChars = 64;

/// The manifest's `weights_digest` (version 2): the digest of the `weights`
/// section, which the content hash skips.
inline constexpr char kWeightsDigestKey[] = "weights_digest";
inline constexpr char kWeightsDigestAlgorithm[] = "xxh3-128";
inline constexpr size_t kWeightsDigestHexChars = 32;
/// The first format version with a separate weights digest.
inline constexpr uint32_t kFirstVersionWithWeightsDigest = 2;

// Field offsets in a section table entry.
inline constexpr size_t kOffEntryName = 0;
inline constexpr size_t kOffEntryOffset = 40;
inline constexpr size_t kOffEntrySize = 48;
inline constexpr size_t kOffEntryFlags = 56;
inline constexpr size_t kOffEntryReserved = 60;

inline uint32_t load32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}
inline uint64_t load64(const uint8_t *p) {
  return uint64_t(load32(p)) | uint64_t(load32(p + 4)) << 32;
}
inline void store32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = uint8_t(v >> (8 * i));
}
inline void store64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = uint8_t(v >> (8 * i));
}

inline uint64_t alignUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

/// Section names: 1..39 bytes of [a-z0-9_.-] (e.g. "code.cpu",
/// "device.sm_90").
inline bool isValidSectionName(const std::string &name) {
  if (name.empty() || name.size() >= kSectionNameBytes)
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return false;
  return true;
}

} // namespace sits::runtime::format

#endif // SITS_RUNTIME_CORE_ARTIFACT_FORMAT_H
