//===- artifact_reader.cpp - Opening and verifying .sitsm files
//------------===//
//
// The checks run in the order of ARTIFACT.md §"Verification"; each failure
// is a kCorruptArtifact (or kUnsupportedVersion) naming what is wrong, and
// none of them executes anything from the file.
//
//===----------------------------------------------------------------------===//
#include "artifact_format.h"
#include "artifact_internal.h"
#include "sha256.h"
#include "xxh3_128.h"

#include "sits/runtime/buffer.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sits::runtime {
namespace {

struct MappedStorage : Storage {
  ~MappedStorage() override {
    if (data)
      ::munmap(const_cast<uint8_t *>(data), size);
    if (fd >= 0)
      ::close(fd);
  }
  Status intact() const override {
    struct stat st;
    if (fd < 0 || ::fstat(fd, &st) != 0 || uint64_t(st.st_size) >= size)
      return Status::OK();
    return Status(StatusCode::kIoError,
                  path + " was truncated after it was loaded (" +
                      std::to_string(st.st_size) + " of " +
                      std::to_string(size) +
                      " bytes left): its mapped pages are gone; restore the "
                      "file and load it again")
        .withSubject(path)
        .withExpected(std::to_string(size), std::to_string(st.st_size));
  }
  /// The mapped file, kept open to watch its size.
  int fd = -1;
  std::string path;
};

struct HeapStorage : Storage {
  ~HeapStorage() override { std::free(const_cast<uint8_t *>(data)); }
};

Status corrupt(const std::string &message, const std::string &subject = "",
               int64_t offset = -1) {
  return Status(StatusCode::kCorruptArtifact, message)
      .withSubject(subject)
      .withIndex(offset);
}

std::string hexOf(const uint8_t *p, size_t n) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kHex[p[i] >> 4];
    out += kHex[p[i] & 15];
  }
  return out;
}

/// Feeds [0, end) of `d` to `sha`, except the regions of `holes`
/// (sorted, disjoint, inside [0, end)): a hole with a `fill` byte is
/// hashed as that many copies of it, one without is skipped.
struct Hole {
  uint64_t offset, size;
  int fill; // -1: skipped
};
void hashWithHoles(Sha256 &sha, const uint8_t *d, uint64_t end,
                   const std::vector<Hole> &holes) {
  static const uint8_t kZeros[64] = {};
  static const std::string kDigits(64, '0');
  uint64_t pos = 0;
  for (const Hole &h : holes) {
    sha.update(d + pos, size_t(h.offset - pos));
    if (h.fill == 0)
      sha.update(kZeros, size_t(h.size));
    else if (h.fill == '0')
      sha.update(kDigits.data(), size_t(h.size));
    pos = h.offset + h.size;
  }
  sha.update(d + pos, size_t(end - pos));
}

StatusOr<std::shared_ptr<const ArtifactReader::Impl>>
verify(std::shared_ptr<const Storage> storage, Verify verifyWhat) {
  using namespace format;
  const uint8_t *d = storage->data;
  const uint64_t actualSize = storage->size;

  if (actualSize < kHeaderSize)
    return corrupt("file is " + std::to_string(actualSize) +
                       " bytes, too small to be a SITS artifact",
                   "header");
  if (std::memcmp(d + kOffMagic, kMagic, sizeof(kMagic)) != 0)
    return corrupt("not a SITS artifact (bad magic number)", "magic", 0);

  uint32_t version = load32(d + kOffVersion);
  if (version == 0)
    return corrupt("format version 0 is invalid", "format_version",
                   kOffVersion);
  if (version > kArtifactFormatVersion)
    return Status(StatusCode::kUnsupportedVersion,
                  "artifact format version " + std::to_string(version) +
                      " is newer than this runtime reads (up to " +
                      std::to_string(kArtifactFormatVersion) +
                      "); upgrade sits-mlir")
        .withSubject("format_version")
        .withExpected(std::to_string(kArtifactFormatVersion),
                      std::to_string(version));

  uint32_t headerSize = load32(d + kOffHeaderSize);
  uint32_t count = load32(d + kOffSectionCount);
  uint32_t manifestHashPos = load32(d + kOffManifestHashPos);
  uint64_t fileSize = load64(d + kOffFileSize);
  if (count == 0 || count > kMaxSections)
    return corrupt("section count " + std::to_string(count) +
                       " is out of range (1.." + std::to_string(kMaxSections) +
                       ")",
                   "header", kOffSectionCount);
  if (headerSize != kHeaderSize + uint64_t(count) * kSectionEntrySize)
    return corrupt("header size " + std::to_string(headerSize) +
                       " does not match " + std::to_string(count) + " sections",
                   "header", kOffHeaderSize);
  if (fileSize != actualSize)
    return corrupt(
               "file is " + std::to_string(actualSize) +
                   " bytes but its header says " + std::to_string(fileSize) +
                   (actualSize < fileSize ? " (truncated)" : " (extra bytes)"),
               "file_size", kOffFileSize)
        .withExpected(std::to_string(fileSize), std::to_string(actualSize));
  if (headerSize > actualSize)
    return corrupt("section table runs past the end of the file", "header",
                   kOffHeaderSize);

  auto impl = std::make_shared<ArtifactReader::Impl>();
  impl->formatVersion = version;
  std::set<std::string> names;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t *e = d + kHeaderSize + size_t(i) * kSectionEntrySize;
    int64_t entryOffset = int64_t(kHeaderSize + size_t(i) * kSectionEntrySize);
    size_t nameLen =
        strnlen(reinterpret_cast<const char *>(e), kSectionNameBytes);
    std::string name(reinterpret_cast<const char *>(e), nameLen);
    std::string label = "section #" + std::to_string(i);
    if (nameLen == kSectionNameBytes || !isValidSectionName(name))
      return corrupt(label + " has an invalid name", "section_table",
                     entryOffset);
    for (size_t k = nameLen; k < kSectionNameBytes; ++k)
      if (e[k] != 0)
        return corrupt(label + " ('" + name + "') has bytes after its name",
                       "section_table", entryOffset);
    if (!names.insert(name).second)
      return corrupt("section '" + name + "' appears twice", name, entryOffset);
    uint64_t offset = load64(e + kOffEntryOffset);
    uint64_t size = load64(e + kOffEntrySize);
    if (load32(e + kOffEntryFlags) != 0 || load32(e + kOffEntryReserved) != 0)
      return corrupt("section '" + name + "' has reserved fields set", name,
                     entryOffset);
    if (offset % kSectionAlignment != 0)
      return corrupt("section '" + name + "' at offset " +
                         std::to_string(offset) + " is not 64-byte aligned",
                     name, entryOffset);
    if (offset < headerSize)
      return corrupt("section '" + name + "' at offset " +
                         std::to_string(offset) + " overlaps the header",
                     name, entryOffset);
    if (offset > actualSize || size > actualSize - offset)
      return corrupt("section '" + name + "' [" + std::to_string(offset) +
                         ", +" + std::to_string(size) +
                         ") lies outside the file (" +
                         std::to_string(actualSize) + " bytes)",
                     name, entryOffset);
    ranges.emplace_back(offset, size);
    impl->sections.push_back({name, offset, size});
  }
  // Sections may not overlap each other.
  std::vector<std::pair<uint64_t, uint64_t>> sorted = ranges;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 1; i < sorted.size(); ++i)
    if (sorted[i - 1].first + sorted[i - 1].second > sorted[i].first)
      return corrupt("sections overlap at offset " +
                         std::to_string(sorted[i].first),
                     "section_table", int64_t(sorted[i].first));

  const SectionInfo *manifestSection = nullptr;
  for (const SectionInfo &s : impl->sections)
    if (s.name == "manifest")
      manifestSection = &s;
  if (!manifestSection)
    return corrupt("the artifact has no manifest section", "manifest");
  if (manifestHashPos > manifestSection->size ||
      manifestSection->size - manifestHashPos < kContentHashHexChars)
    return corrupt("the manifest's content-hash position is out of bounds",
                   "header", kOffManifestHashPos);

  const SectionInfo *weights = nullptr;
  for (const SectionInfo &s : impl->sections)
    if (s.name == "weights")
      weights = &s;
  // Version 2 leaves the weights out of the content hash: they have their
  // own digest, recorded in the manifest (checked below).
  const bool separateWeights = version >= kFirstVersionWithWeightsDigest;

  // The content hash: SHA-256 of the file (version 2: less the weights
  // section) with the header's hash field zeroed and the manifest's 64 hash
  // digits replaced by '0'.
  const uint8_t *storedHash = d + kOffContentHash;
  std::string storedHex = hexOf(storedHash, kContentHashBytes);
  uint64_t hexAt = manifestSection->offset + manifestHashPos;
  if (std::memcmp(d + hexAt, storedHex.data(), kContentHashHexChars) != 0)
    return corrupt("content hash mismatch: the manifest's copy of the hash "
                   "differs from the header's (the file is damaged)",
                   "content_hash", int64_t(hexAt));
  std::vector<Hole> holes = {{kOffContentHash, kContentHashBytes, 0},
                             {hexAt, kContentHashHexChars, '0'}};
  if (separateWeights && weights && weights->size)
    holes.push_back({weights->offset, weights->size, -1});
  std::sort(holes.begin(), holes.end(),
            [](const Hole &a, const Hole &b) { return a.offset < b.offset; });
  Sha256 sha;
  hashWithHoles(sha, d, actualSize, holes);
  Sha256::Digest digest = sha.finish();
  if (std::memcmp(digest.data(), storedHash, kContentHashBytes) != 0)
    return corrupt("content hash mismatch: the file is damaged or was "
                   "modified after it was written (stored " +
                       storedHex.substr(0, 16) + "..., computed " +
                       Sha256::hex(digest).substr(0, 16) + "...)",
                   "content_hash", kOffContentHash)
        .withExpected(storedHex, Sha256::hex(digest));
  impl->contentHash = storedHex;

  std::string_view manifestText(
      reinterpret_cast<const char *>(d + manifestSection->offset),
      manifestSection->size);
  StatusOr<Manifest> manifest = parseManifest(manifestText);
  if (!manifest.ok())
    return manifest.status();
  if (manifest->formatVersion != version)
    return corrupt("the manifest says format version " +
                       std::to_string(manifest->formatVersion) +
                       " but the header says " + std::to_string(version),
                   "format_version");
  if (manifest->contentHash != storedHex)
    return corrupt("the manifest's content_hash is not at the position the "
                   "header records",
                   "content_hash");
  // Weights arguments need a weights section of the size they declare.
  for (const EntryPointSpec &ep : manifest->entryPoints) {
    if (!ep.hasWeights())
      continue;
    if (!weights)
      return corrupt("entry point '" + ep.name +
                         "' takes the weights but the artifact has no "
                         "weights section",
                     "weights");
    int64_t declared = ep.args.front().shape[0];
    if (declared >= 0 && uint64_t(declared) != weights->size)
      return corrupt("entry point '" + ep.name + "' expects " +
                         std::to_string(declared) +
                         " bytes of weights, the "
                         "weights section holds " +
                         std::to_string(weights->size),
                     "weights");
  }

  // The weights digest (version 2), last: the one check whose cost grows
  // with the model. XXH3 streams through the mapping at memory speed; the
  // pages it brings in are the ones the compiled code reads next.
  if (separateWeights) {
    if (weights && !manifest->weightsDigest)
      return corrupt("the manifest has no weights_digest for the weights "
                     "section",
                     kWeightsDigestKey);
    if (!weights && manifest->weightsDigest)
      return corrupt("the manifest has a weights_digest but the artifact has "
                     "no weights section",
                     kWeightsDigestKey);
  }
  if (weights && separateWeights && verifyWhat == Verify::kFull) {
    const uint8_t *begin = d + weights->offset;
    if (weights->size) {
      // Read-ahead for a file not in the page cache yet (a no-op for one
      // that is, and for heap storage).
      uintptr_t page = uintptr_t(::sysconf(_SC_PAGESIZE));
      uintptr_t lo = reinterpret_cast<uintptr_t>(begin) / page * page;
      ::madvise(reinterpret_cast<void *>(lo),
                size_t(reinterpret_cast<uintptr_t>(begin) + weights->size - lo),
                MADV_WILLNEED);
    }
    uint8_t computed[16];
    xxh3_128(begin, size_t(weights->size), computed);
    std::string computedHex = hexOf(computed, sizeof(computed));
    const std::string &storedDigest = manifest->weightsDigest->hex;
    if (computedHex != storedDigest)
      return corrupt("weights digest mismatch: the weights section is "
                     "damaged (stored xxh3-128 " +
                         storedDigest + ", computed " + computedHex + ")",
                     "weights", int64_t(weights->offset))
          .withExpected(storedDigest, computedHex);
    impl->weightsVerified = true;
  } else if (weights && !separateWeights) {
    impl->weightsVerified = true; // covered by the content hash
  }

  impl->manifest = std::move(manifest).value();
  impl->storage = std::move(storage);
  return std::shared_ptr<const ArtifactReader::Impl>(std::move(impl));
}

} // namespace

StatusOr<ArtifactReader> ArtifactReader::open(const std::string &path,
                                              Verify verifyWhat) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                  "cannot open " + path + ": " + std::strerror(err))
        .withSubject(path);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status(StatusCode::kIoError, path + " is not a regular file")
        .withSubject(path);
  }
  auto storage = std::make_shared<MappedStorage>();
  size_t size = size_t(st.st_size);
  if (size > 0) {
    void *p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return Status(StatusCode::kIoError,
                    "cannot map " + path + ": " + std::strerror(err))
          .withSubject(path);
    }
    storage->data = static_cast<const uint8_t *>(p);
    storage->size = size;
    storage->fd = fd;
    storage->path = path;
  } else {
    ::close(fd);
  }
  StatusOr<std::shared_ptr<const Impl>> impl =
      verify(std::move(storage), verifyWhat);
  if (!impl.ok()) {
    Status s = impl.status();
    ErrorInfo info = s.info();
    info.message = path + ": " + info.message;
    return Status(std::move(info));
  }
  return ArtifactReader(std::move(impl).value());
}

StatusOr<ArtifactReader>
ArtifactReader::fromMemory(const void *data, size_t size, Verify verifyWhat) {
  auto storage = std::make_shared<HeapStorage>();
  size_t rounded = format::alignUp(size ? size : 1, kBufferAlignment);
  void *copy =
      std::aligned_alloc(format::kWeightsAlignment,
                         format::alignUp(rounded, format::kWeightsAlignment));
  if (!copy)
    return Status(StatusCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(size) + " bytes")
        .withValue(int64_t(size));
  if (size)
    std::memcpy(copy, data, size);
  storage->data = static_cast<const uint8_t *>(copy);
  storage->size = size;
  StatusOr<std::shared_ptr<const Impl>> impl =
      verify(std::move(storage), verifyWhat);
  if (!impl.ok())
    return impl.status();
  return ArtifactReader(std::move(impl).value());
}

const Manifest &ArtifactReader::manifest() const { return impl_->manifest; }
uint32_t ArtifactReader::formatVersion() const { return impl_->formatVersion; }
const std::string &ArtifactReader::contentHash() const {
  return impl_->contentHash;
}
bool ArtifactReader::weightsVerified() const { return impl_->weightsVerified; }
Status ArtifactReader::intact() const { return impl_->storage->intact(); }
uint64_t ArtifactReader::fileSize() const { return impl_->storage->size; }
const std::vector<SectionInfo> &ArtifactReader::sections() const {
  return impl_->sections;
}

std::optional<ByteSpan> ArtifactReader::section(std::string_view name) const {
  for (const SectionInfo &s : impl_->sections)
    if (s.name == name)
      return ByteSpan{impl_->storage->data + s.offset, size_t(s.size)};
  return std::nullopt;
}

} // namespace sits::runtime
