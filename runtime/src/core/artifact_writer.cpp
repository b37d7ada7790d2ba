//===- artifact_writer.cpp - Writing .sitsm files
//---------------------------===//
//
// The writer completes the manifest (versions, target name, symbols, the
// two digest placeholders), validates it with the same schema the reader
// applies, cross-checks it against the sections (the code exports each
// entry symbol, weights exist when used) and lays the sections out before
// writing a single byte. Then, reading every source once: the weights are
// copied to their place in chunks while XXH3-128 digests them, the digest
// goes into the manifest, everything else is written in order while SHA-256
// hashes it, and the content hash is filled into the header and the
// manifest last. Files go to a temporary file renamed over the destination.
//
//===----------------------------------------------------------------------===//
#include "artifact_format.h"
#include "elf.h"
#include "json.h"
#include "manifest_internal.h"
#include "sha256.h"
#include "xxh3_128.h"

#include "sits/runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace sits::runtime {
namespace {

/// Streamed sections go through a buffer of this size.
constexpr size_t kChunkBytes = size_t(64) << 20;

/// A name next to `path` no other writer uses, for the file renamed over it.
std::string temporaryName(const std::string &path) {
  static std::atomic<uint64_t> counter{0};
  return path + ".tmp." + std::to_string(::getpid()) + "." +
         std::to_string(counter.fetch_add(1));
}

void *closeDescriptor(void *fd) {
  ::close(static_cast<int>(reinterpret_cast<intptr_t>(fd)));
  return nullptr;
}

/// rename(tmp, path), errno as rename's. The file `path` named before is
/// released on a thread of its own when it can be: dropping the cached
/// pages of a large file (the previous artifact of the same model, GBs)
/// would otherwise hold up the caller, in rename, for as long as a second.
int renameOver(const std::string &tmp, const std::string &path) {
  // O_PATH neither opens the file (no blocking on a FIFO, no permission
  // needed) nor follows a link rename replaces; it only holds the inode.
  int old = ::open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  int rc = ::rename(tmp.c_str(), path.c_str());
  int err = errno;
  if (old >= 0) {
    pthread_t thread;
    pthread_attr_t attr;
    bool detached = false;
    if (rc == 0 && pthread_attr_init(&attr) == 0) {
      detached =
          pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0 &&
          pthread_create(&thread, &attr, closeDescriptor,
                         reinterpret_cast<void *>(intptr_t(old))) == 0;
      pthread_attr_destroy(&attr);
    }
    if (!detached)
      ::close(old);
  }
  errno = err;
  return rc;
}

Status invalid(const std::string &message, const std::string &subject = "") {
  return Status(StatusCode::kInvalidArgument, message).withSubject(subject);
}

Status ioError(const std::string &what, const std::string &path, int err) {
  return Status(StatusCode::kIoError,
                what + " " + path + ": " + std::strerror(err))
      .withSubject(path);
}

/// Where a section's bytes come from.
struct PendingSection {
  enum class Kind { kMemory, kFile, kReader };
  std::string name;
  Kind kind = Kind::kMemory;
  const uint8_t *data = nullptr; // kMemory
  std::string path;              // kFile
  std::shared_ptr<SectionReader> reader;
  uint64_t size = 0;
  bool sizeKnown = true; // false: a reader of unknown length (weights only)
};

/// Feeds the bytes of `s` to `consume(data, size)` in order, in chunks of
/// at most kChunkBytes; returns how many there were. Memory is passed
/// through without a copy; files and readers go through one buffer.
template <typename Consume>
StatusOr<uint64_t> streamSection(const PendingSection &s, Consume &&consume) {
  using Kind = PendingSection::Kind;
  if (s.kind == Kind::kMemory) {
    for (uint64_t pos = 0; pos < s.size;) {
      size_t n = size_t(std::min<uint64_t>(kChunkBytes, s.size - pos));
      SITS_RETURN_IF_ERROR(consume(s.data + pos, n));
      pos += n;
    }
    return s.size;
  }
  size_t capacity = kChunkBytes;
  if (s.sizeKnown)
    capacity =
        size_t(std::max<uint64_t>(1, std::min<uint64_t>(kChunkBytes, s.size)));
  std::unique_ptr<uint8_t[]> buffer(new uint8_t[capacity]);
  uint64_t total = 0;
  if (s.kind == Kind::kReader) {
    for (;;) {
      StatusOr<size_t> n = (*s.reader)(buffer.get(), capacity);
      if (!n.ok())
        return n.status();
      if (*n == 0)
        break;
      if (*n > capacity)
        return Status(StatusCode::kInternal, "section '" + s.name +
                                                 "': the reader returned more "
                                                 "bytes than the buffer holds")
            .withSubject(s.name);
      SITS_RETURN_IF_ERROR(consume(buffer.get(), *n));
      total += *n;
    }
    if (s.sizeKnown && total != s.size)
      return invalid("section '" + s.name + "': the reader produced " +
                         std::to_string(total) + " bytes, not the " +
                         std::to_string(s.size) + " announced",
                     s.name);
    return total;
  }
  int fd = ::open(s.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return ioError("cannot open", s.path, errno);
  Status status = Status::OK();
  for (;;) {
    ssize_t n = ::read(fd, buffer.get(), capacity);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      status = ioError("cannot read", s.path, errno);
      break;
    }
    if (n == 0)
      break;
    total += uint64_t(n);
    if (total > s.size)
      break;
    status = consume(buffer.get(), size_t(n));
    if (!status.ok())
      break;
  }
  ::close(fd);
  if (!status.ok())
    return status;
  if (total != s.size)
    return Status(StatusCode::kIoError, "section '" + s.name + "': " + s.path +
                                            " changed size "
                                            "while the artifact was written (" +
                                            std::to_string(s.size) +
                                            " bytes when added)")
        .withSubject(s.path);
  return total;
}

/// Everything needed to emit the file: the header + table bytes, the
/// sections with their offsets, the final size.
struct Layout {
  std::vector<uint8_t> header;
  std::string manifest;
  std::vector<PendingSection> sections; // manifest first, weights last
  std::vector<uint64_t> offsets;
  uint64_t fileSize = 0;
  uint64_t manifestHashPos = 0;
  /// Where in `manifest` the 32 digits of weights_digest.hex go; npos when
  /// there are no weights.
  size_t weightsDigestPos = std::string::npos;
  /// The weights section's index in `sections`, or -1.
  int weightsIndex = -1;
  /// The manifest section's index in `sections`.
  int manifestIndex = 0;
  /// Bytes at the start of the weights section already in the output file
  /// (ArtifactWriter::writeAround), and that file.
  uint64_t placed = 0;
  int placedFd = -1;
  /// The sizes the entry points declare for the weights (-1: any).
  std::vector<std::pair<std::string, int64_t>> declaredWeights;
  std::string contentHash;
  std::string weightsDigest;
};

/// Where the bytes go: a file (pwrite) or a vector.
struct Output {
  virtual ~Output() = default;
  virtual Status writeAt(uint64_t pos, const void *data, size_t size) = 0;
};

struct FileOutput : Output {
  int fd;
  std::string path;
  FileOutput(int fd, std::string path) : fd(fd), path(std::move(path)) {}
  Status writeAt(uint64_t pos, const void *data, size_t size) override {
    const auto *b = static_cast<const uint8_t *>(data);
    while (size) {
      ssize_t w = ::pwrite(fd, b, size, off_t(pos));
      if (w < 0) {
        if (errno == EINTR)
          continue;
        return ioError("cannot write", path, errno);
      }
      b += w;
      pos += uint64_t(w);
      size -= size_t(w);
    }
    return Status::OK();
  }
};

struct MemoryOutput : Output {
  std::vector<uint8_t> bytes;
  Status writeAt(uint64_t pos, const void *data, size_t size) override {
    if (bytes.size() < pos + size)
      bytes.resize(size_t(pos + size));
    if (size)
      std::memcpy(bytes.data() + pos, data, size);
    return Status::OK();
  }
};

void setSectionSize(Layout &layout, size_t index, uint64_t size) {
  layout.sections[index].size = size;
  format::store64(layout.header.data() + format::kHeaderSize +
                      index * format::kSectionEntrySize + format::kOffEntrySize,
                  size);
}

/// Writes the artifact of `layout` to `out`, reading each source once, and
/// fills in its two digests (in `layout` and in the bytes written).
Status emit(Layout &layout, Output &out) {
  using namespace format;
  // 1. The weights, at their place, digested as they are copied.
  if (layout.weightsIndex >= 0) {
    size_t wi = size_t(layout.weightsIndex);
    uint64_t pos = layout.offsets[wi];
    Xxh3_128 xxh;
    if (layout.placed) {
      // Bytes already in place: read once, to digest them, where they lie
      // (mapped: mostly still in the page cache) or else through a buffer.
      std::unique_ptr<uint8_t[]> buffer;
      for (uint64_t end = pos + layout.placed; pos < end;) {
        size_t want = size_t(std::min<uint64_t>(kChunkBytes, end - pos));
        void *mapped =
            ::mmap(nullptr, want, PROT_READ, MAP_SHARED | MAP_POPULATE,
                   layout.placedFd, off_t(pos));
        if (mapped != MAP_FAILED) {
          xxh.update(static_cast<const uint8_t *>(mapped), want);
          ::munmap(mapped, want);
          pos += want;
          continue;
        }
        if (!buffer)
          buffer.reset(new uint8_t[kChunkBytes]);
        ssize_t n = ::pread(layout.placedFd, buffer.get(), want, off_t(pos));
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0)
          return ioError("cannot read the placed weights of", "the artifact",
                         errno);
        if (n == 0)
          return Status(StatusCode::kIoError,
                        "the placed weights end before the " +
                            std::to_string(layout.placed) + " bytes announced")
              .withSubject("weights");
        xxh.update(buffer.get(), size_t(n));
        pos += uint64_t(n);
      }
    }
    // The rest (all of them unless some were placed) copied after them.
    PendingSection rest = layout.sections[wi];
    rest.size -= layout.placed;
    StatusOr<uint64_t> size =
        streamSection(rest, [&](const uint8_t *p, size_t n) {
          xxh.update(p, n);
          Status s = out.writeAt(pos, p, n);
          pos += n;
          return s;
        });
    if (!size.ok())
      return size.status();
    if (!layout.sections[wi].sizeKnown) {
      for (const auto &[entry, declared] : layout.declaredWeights)
        if (declared >= 0 && uint64_t(declared) != *size)
          return invalid("entry point '" + entry + "' declares " +
                             std::to_string(declared) +
                             " bytes of weights but the weights section has " +
                             std::to_string(*size),
                         "weights");
      setSectionSize(layout, wi, *size);
      layout.fileSize = layout.offsets[wi] + *size;
      store64(layout.header.data() + kOffFileSize, layout.fileSize);
    }
    layout.weightsDigest = Xxh3_128::hex(xxh.finish());
    layout.manifest.replace(layout.weightsDigestPos, kWeightsDigestHexChars,
                            layout.weightsDigest);
  }

  // 2. Everything else, in file order, hashed as it is written (both hash
  // fields still hold their placeholders).
  Sha256 sha;
  uint64_t pos = 0;
  auto put = [&](const uint8_t *p, size_t n) {
    sha.update(p, n);
    Status s = out.writeAt(pos, p, n);
    pos += n;
    return s;
  };
  static const uint8_t kZeros[4096] = {};
  SITS_RETURN_IF_ERROR(put(layout.header.data(), layout.header.size()));
  for (size_t i = 0; i < layout.sections.size(); ++i) {
    while (pos < layout.offsets[i]) {
      size_t n =
          size_t(std::min<uint64_t>(sizeof(kZeros), layout.offsets[i] - pos));
      SITS_RETURN_IF_ERROR(put(kZeros, n));
    }
    const PendingSection &s = layout.sections[i];
    if (int(i) == layout.weightsIndex) {
      pos += s.size; // written and digested above
      continue;
    }
    if (int(i) == layout.manifestIndex) {
      // The manifest: the layout's own string (patched with the digests).
      SITS_RETURN_IF_ERROR(
          put(reinterpret_cast<const uint8_t *>(layout.manifest.data()),
              layout.manifest.size()));
      continue;
    }
    StatusOr<uint64_t> n = streamSection(s, put);
    if (!n.ok())
      return n.status();
  }

  // 3. The content hash, into the header and the manifest.
  Sha256::Digest digest = sha.finish();
  layout.contentHash = Sha256::hex(digest);
  std::memcpy(layout.header.data() + kOffContentHash, digest.data(),
              digest.size());
  layout.manifest.replace(size_t(layout.manifestHashPos), kContentHashHexChars,
                          layout.contentHash);
  SITS_RETURN_IF_ERROR(
      out.writeAt(kOffContentHash, digest.data(), digest.size()));
  return out.writeAt(layout.offsets[size_t(layout.manifestIndex)] +
                         layout.manifestHashPos,
                     layout.contentHash.data(), kContentHashHexChars);
}

} // namespace

struct ArtifactWriter::Impl {
  bool haveManifest = false;
  json::Value manifest;
  std::vector<PendingSection> sections;
  /// A reader section was consumed by a write: it cannot be written again.
  mutable bool readersConsumed = false;

  Status checkNewSection(const std::string &n) const;
  /// checkNewSection, for a section whose bytes are read while writing.
  Status checkStreamedSection(const std::string &n) const {
    SITS_RETURN_IF_ERROR(checkNewSection(n));
    if (n.rfind("code.", 0) == 0)
      return invalid("section '" + n +
                         "': code sections are given in memory "
                         "(the writer inspects them)",
                     n);
    return Status::OK();
  }

  /// `placed`: bytes of weights already in the output file (writeAround).
  StatusOr<Layout> build(uint64_t placed) const;
  StatusOr<Layout> start(uint64_t placed = 0) const;
  Status completeManifest(json::Value &m, bool hasWeights) const;
  Status crossCheck(const Manifest &m, uint64_t placed) const;
  const PendingSection *find(const std::string &name) const {
    for (const PendingSection &s : sections)
      if (s.name == name)
        return &s;
    return nullptr;
  }
};

ArtifactWriter::ArtifactWriter() : impl_(std::make_unique<Impl>()) {}
ArtifactWriter::~ArtifactWriter() = default;
ArtifactWriter::ArtifactWriter(ArtifactWriter &&) noexcept = default;
ArtifactWriter &ArtifactWriter::operator=(ArtifactWriter &&) noexcept = default;

Status ArtifactWriter::setManifest(std::string_view text) {
  if (!json::isValidUtf8(text))
    return invalid("the manifest is not valid UTF-8", "manifest");
  json::Value v;
  std::string error;
  if (!json::parse(text, v, error))
    return invalid("the manifest is not valid JSON: " + error, "manifest");
  if (!v.isObject())
    return invalid("the manifest must be a JSON object", "manifest");
  impl_->manifest = std::move(v);
  impl_->haveManifest = true;
  return Status::OK();
}

Status ArtifactWriter::Impl::checkNewSection(const std::string &n) const {
  if (!format::isValidSectionName(n))
    return invalid(
        "section name '" + n + "' must be 1-39 characters of [a-z0-9_.-]", n);
  if (n == "manifest")
    return invalid("the manifest section is written from setManifest()", n);
  if (find(n))
    return invalid("section '" + n + "' was already added", n);
  if (sections.size() + 1 >= format::kMaxSections)
    return invalid("too many sections", n);
  return Status::OK();
}

Status ArtifactWriter::addSection(std::string_view name, const void *data,
                                  size_t size) {
  std::string n(name);
  SITS_RETURN_IF_ERROR(impl_->checkNewSection(n));
  if (!data && size)
    return invalid("section '" + n + "' has no data", n);
  PendingSection s;
  s.name = n;
  s.data = static_cast<const uint8_t *>(data);
  s.size = size;
  impl_->sections.push_back(std::move(s));
  return Status::OK();
}

Status ArtifactWriter::addSectionFromFile(std::string_view name,
                                          const std::string &path) {
  std::string n(name);
  SITS_RETURN_IF_ERROR(impl_->checkStreamedSection(n));
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kIoError,
                  "cannot read " + path + ": " + std::strerror(err))
        .withSubject(path);
  }
  if (!S_ISREG(st.st_mode))
    return Status(StatusCode::kIoError, path + " is not a regular file")
        .withSubject(path);
  PendingSection s;
  s.name = n;
  s.kind = PendingSection::Kind::kFile;
  s.path = path;
  s.size = uint64_t(st.st_size);
  impl_->sections.push_back(std::move(s));
  return Status::OK();
}

Status ArtifactWriter::addSectionFromReader(std::string_view name,
                                            SectionReader reader,
                                            int64_t size) {
  std::string n(name);
  SITS_RETURN_IF_ERROR(impl_->checkStreamedSection(n));
  if (!reader)
    return invalid("section '" + n + "' has no reader", n);
  if (size < -1 || (size == -1 && n != "weights"))
    return invalid("section '" + n +
                       "': only the weights section may have "
                       "an unknown size (it is laid out last)",
                   n);
  PendingSection s;
  s.name = n;
  s.kind = PendingSection::Kind::kReader;
  s.reader = std::make_shared<SectionReader>(std::move(reader));
  s.sizeKnown = size >= 0;
  s.size = size >= 0 ? uint64_t(size) : 0;
  impl_->sections.push_back(std::move(s));
  return Status::OK();
}

Status ArtifactWriter::Impl::completeManifest(json::Value &m,
                                              bool hasWeights) const {
  if (const json::Value *fv = m.find("format_version"))
    if (!fv->isInt() || fv->asInt() != kArtifactFormatVersion)
      return invalid("manifest format_version must be absent or " +
                         std::to_string(kArtifactFormatVersion) +
                         " (this writer's format)",
                     "format_version");
  json::Value *target = m.find("target");
  if (!target || !target->isObject())
    return invalid("manifest field 'target' must be an object with the "
                   "triple, cpu and features the code was compiled for",
                   "target");
  if (!target->find("name")) {
    std::vector<std::string> codes;
    for (const PendingSection &s : sections)
      if (s.name.rfind("code.", 0) == 0)
        codes.push_back(s.name.substr(5));
    if (codes.size() != 1)
      return invalid("manifest field 'target.name' is missing and cannot be "
                     "inferred: add exactly one code.<target> section or name "
                     "the target",
                     "target.name");
    target->set("name", json::Value::string(codes.front()));
  }
  if (!target->find("cpu"))
    target->set("cpu", json::Value::string("generic"));
  if (!target->find("features"))
    target->set("features", json::Value::array());
  if (json::Value *eps = m.find("entry_points"); eps && eps->isArray())
    for (json::Value &ep : eps->items())
      if (ep.isObject() && !ep.find("symbol"))
        if (const json::Value *name = ep.find("name"); name && name->isString())
          ep.set("symbol",
                 json::Value::string(kEntrySymbolPrefix + name->asString()));

  // Canonical order: what a reader looks at first, then anything else the
  // compiler recorded, the hash last.
  json::Value out = json::Value::object();
  out.set("format_version", json::Value::integer(kArtifactFormatVersion));
  const json::Value *sv = m.find("sits_version");
  out.set("sits_version", sv ? *sv : json::Value::string(sitsVersion()));
  const json::Value *lv = m.find("llvm_version");
  out.set("llvm_version", lv ? *lv : json::Value::string(llvmVersion()));
  out.set("target", *target);
  if (const json::Value *eps = m.find("entry_points"))
    out.set("entry_points", *eps);
  for (const json::Value::Member &member : m.members())
    if (!out.find(member.first) && member.first != "content_hash")
      out.set(member.first, member.second);
  // The writer owns the weights digest: a placeholder here, filled in once
  // the weights are copied.
  out.erase(format::kWeightsDigestKey);
  if (hasWeights) {
    json::Value digest = json::Value::object();
    digest.set("algorithm",
               json::Value::string(format::kWeightsDigestAlgorithm));
    digest.set("hex", json::Value::string(
                          std::string(format::kWeightsDigestHexChars, '0')));
    out.set(format::kWeightsDigestKey, std::move(digest));
  }
  out.set("content_hash",
          json::Value::string(std::string(format::kContentHashHexChars, '0')));
  m = std::move(out);
  return Status::OK();
}

Status ArtifactWriter::Impl::crossCheck(const Manifest &m,
                                        uint64_t placed) const {
  std::string codeName = m.codeSectionName();
  const PendingSection *code = find(codeName);
  if (!code)
    return invalid("the manifest's target is '" + m.target.name +
                       "' but there is no '" + codeName + "' section",
                   codeName);
  if (code->kind != PendingSection::Kind::kMemory)
    return invalid("section '" + codeName + "' must be given in memory",
                   codeName);
  StatusOr<ElfSummary> elf =
      inspectSharedObject({code->data, code->size}, codeName);
  if (!elf.ok())
    return invalid(elf.status().message(), codeName);
  if (elf->arch != m.target.arch())
    return invalid("section '" + codeName + "' holds " + elf->arch +
                       " code but the target triple is " + m.target.triple,
                   "target.triple");
  for (const EntryPointSpec &ep : m.entryPoints)
    if (!elf->exportedFunctions.count(ep.symbol))
      return invalid("entry point '" + ep.name + "': section '" + codeName +
                         "' does not export a function named '" + ep.symbol +
                         "'",
                     ep.symbol);
  const PendingSection *weights = find("weights");
  bool sizeKnown = !weights || weights->sizeKnown;
  uint64_t size = placed + (weights ? weights->size : 0);
  for (const EntryPointSpec &ep : m.entryPoints) {
    if (!ep.hasWeights())
      continue;
    if (!weights && !placed)
      return invalid("entry point '" + ep.name +
                         "' takes the weights but no weights section was added",
                     "weights");
    int64_t declared = ep.args.front().shape[0];
    if (declared >= 0 && sizeKnown && uint64_t(declared) != size)
      return invalid("entry point '" + ep.name + "' declares " +
                         std::to_string(declared) +
                         " bytes of weights but the "
                         "weights section has " +
                         std::to_string(size),
                     "weights");
  }
  return Status::OK();
}

StatusOr<Layout> ArtifactWriter::Impl::build(uint64_t placed) const {
  using namespace format;
  if (!haveManifest)
    return invalid("no manifest was set", "manifest");
  const PendingSection *tail = find("weights");
  if (placed && tail && !tail->sizeKnown)
    return invalid("the weights after the placed ones need a known size: "
                   "the sections after them are laid out first",
                   "weights");
  json::Value m = manifest;
  SITS_RETURN_IF_ERROR(completeManifest(m, tail || placed));
  Layout layout;
  layout.manifest = json::print(m);

  // The schema the reader applies, reported as the caller's error.
  Manifest parsed;
  if (Status s = manifestFromJson(m, parsed); !s.ok()) {
    ErrorInfo info = s.info();
    info.code = StatusCode::kInvalidArgument;
    return Status(std::move(info));
  }
  SITS_RETURN_IF_ERROR(crossCheck(parsed, placed));

  std::string needle =
      "\"content_hash\": \"" + std::string(kContentHashHexChars, '0');
  size_t at = layout.manifest.rfind(needle);
  if (at == std::string::npos)
    return Status(StatusCode::kInternal, "content_hash placeholder not found");
  layout.manifestHashPos = at + needle.size() - kContentHashHexChars;
  if (parsed.weightsDigest) {
    // The top-level key is printed last but one, so the last occurrence.
    size_t key =
        layout.manifest.rfind("\"" + std::string(kWeightsDigestKey) + "\": {");
    std::string hexNeedle =
        "\"hex\": \"" + std::string(kWeightsDigestHexChars, '0') + "\"";
    size_t hex =
        key == std::string::npos ? key : layout.manifest.find(hexNeedle, key);
    if (hex == std::string::npos || hex > layout.manifestHashPos)
      return Status(StatusCode::kInternal,
                    "weights_digest placeholder not found");
    layout.weightsDigestPos = hex + 8; // past `"hex": "`
  }
  for (const EntryPointSpec &ep : parsed.entryPoints)
    if (ep.hasWeights())
      layout.declaredWeights.emplace_back(ep.name, ep.args.front().shape[0]);

  // Order: manifest, code and device sections as added, weights last (on a
  // page boundary); with placed weights, the weights first, at their place.
  PendingSection manifestSection;
  manifestSection.name = "manifest";
  manifestSection.size = layout.manifest.size();
  auto addWeights = [&] {
    layout.weightsIndex = int(layout.sections.size());
    PendingSection w;
    if (tail)
      w = *tail;
    else
      w.name = "weights"; // placed bytes only
    w.size += placed;
    layout.sections.push_back(std::move(w));
  };
  if (placed)
    addWeights();
  layout.manifestIndex = int(layout.sections.size());
  layout.sections.push_back(std::move(manifestSection));
  for (const PendingSection &s : sections)
    if (s.name != "weights")
      layout.sections.push_back(s);
  if (!placed && tail)
    addWeights();
  layout.placed = placed;

  uint32_t count = uint32_t(layout.sections.size());
  uint64_t headerSize = kHeaderSize + uint64_t(count) * kSectionEntrySize;
  if (placed && headerSize > PlacedWeightsFile::kWeightsOffset)
    return invalid(std::to_string(count) +
                       " sections need a bigger header than placed "
                       "weights leave room for",
                   "weights");
  uint64_t pos = headerSize;
  for (const PendingSection &s : layout.sections) {
    if (placed && s.name == "weights")
      pos = PlacedWeightsFile::kWeightsOffset;
    pos = alignUp(pos,
                  s.name == "weights" ? kWeightsAlignment : kSectionAlignment);
    layout.offsets.push_back(pos);
    pos += s.size; // 0 for weights of unknown size, set once streamed
  }
  layout.fileSize = pos;

  std::vector<uint8_t> &h = layout.header;
  h.assign(size_t(headerSize), 0);
  std::memcpy(h.data() + kOffMagic, kMagic, sizeof(kMagic));
  store32(h.data() + kOffVersion, kArtifactFormatVersion);
  store32(h.data() + kOffHeaderSize, uint32_t(headerSize));
  store32(h.data() + kOffSectionCount, count);
  store32(h.data() + kOffManifestHashPos, uint32_t(layout.manifestHashPos));
  store64(h.data() + kOffFileSize, layout.fileSize);
  for (uint32_t i = 0; i < count; ++i) {
    uint8_t *e = h.data() + kHeaderSize + size_t(i) * kSectionEntrySize;
    const std::string &name = layout.sections[i].name;
    std::memcpy(e + kOffEntryName, name.data(), name.size());
    store64(e + kOffEntryOffset, layout.offsets[i]);
    store64(e + kOffEntrySize, layout.sections[i].size);
  }
  // Both digests are computed while the bytes are written (emit()).
  return layout;
}

namespace {
ArtifactInfo infoOf(const Layout &layout) {
  ArtifactInfo info;
  info.contentHash = layout.contentHash;
  info.fileSize = layout.fileSize;
  info.manifestJson = layout.manifest;
  for (size_t i = 0; i < layout.sections.size(); ++i)
    info.sections.push_back(
        {layout.sections[i].name, layout.offsets[i], layout.sections[i].size});
  return info;
}
} // namespace

/// A layout to emit; fails when a reader section was already consumed.
StatusOr<Layout> ArtifactWriter::Impl::start(uint64_t placed) const {
  for (const PendingSection &s : sections)
    if (s.kind == PendingSection::Kind::kReader) {
      if (readersConsumed)
        return invalid("section '" + s.name +
                           "' comes from a reader, which an earlier write "
                           "consumed",
                       s.name);
    }
  StatusOr<Layout> layout = build(placed);
  if (!layout.ok())
    return layout;
  for (const PendingSection &s : sections)
    if (s.kind == PendingSection::Kind::kReader)
      readersConsumed = true;
  return layout;
}

StatusOr<std::vector<uint8_t>>
ArtifactWriter::serialize(ArtifactInfo *info) const {
  StatusOr<Layout> layout = impl_->start();
  if (!layout.ok())
    return layout.status();
  MemoryOutput out;
  out.bytes.reserve(size_t(layout->fileSize));
  SITS_RETURN_IF_ERROR(emit(*layout, out));
  if (info)
    *info = infoOf(*layout);
  return std::move(out.bytes);
}

StatusOr<ArtifactInfo> ArtifactWriter::write(const std::string &path) const {
  StatusOr<Layout> layout = impl_->start();
  if (!layout.ok())
    return layout.status();
  std::string tmp = temporaryName(path);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    int err = errno;
    return Status(StatusCode::kIoError,
                  "cannot create " + tmp + ": " + std::strerror(err))
        .withSubject(path);
  }
  FileOutput out(fd, path);
  Status status = emit(*layout, out);
  if (::close(fd) != 0 && status.ok())
    status = ioError("cannot write", path, errno);
  if (status.ok() && renameOver(tmp, path) != 0)
    status = ioError("cannot write", path, errno);
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }
  return infoOf(*layout);
}

StatusOr<ArtifactInfo> ArtifactWriter::writeAround(const std::string &path,
                                                   PlacedWeightsFile &file,
                                                   uint64_t placed) const {
  if (file.fd() < 0 || file.named())
    return invalid("the placed-weights file is closed or was named already",
                   path);
  struct stat st;
  if (::fstat(file.fd(), &st) != 0)
    return ioError("cannot inspect the file for", path, errno);
  if (uint64_t(st.st_size) < PlacedWeightsFile::kWeightsOffset + placed)
    return invalid("the placed-weights file holds fewer than the " +
                       std::to_string(placed) + " bytes of weights announced",
                   "weights");
  StatusOr<Layout> layout = impl_->start(placed);
  if (!layout.ok())
    return layout.status();
  layout->placedFd = file.fd();
  FileOutput out(file.fd(), path);
  Status status = emit(*layout, out);
  // Anything past the end is room the compiler reserved and did not use.
  if (status.ok() && ::ftruncate(file.fd(), off_t(layout->fileSize)) != 0)
    status = ioError("cannot write", path, errno);
  if (status.ok())
    status = file.name(path);
  if (!status.ok())
    return status;
  return infoOf(*layout);
}

StatusOr<PlacedWeightsFile>
PlacedWeightsFile::create(const std::string &directory) {
  std::string dir = directory.empty() ? "." : directory;
  int fd = -1;
#ifdef O_TMPFILE
  fd = ::open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
  if (fd >= 0)
    return PlacedWeightsFile(fd, "");
#endif
  std::string tmp = temporaryName(dir + "/.sits-artifact");
  fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    return ioError("cannot create a file in", dir, errno);
  return PlacedWeightsFile(fd, tmp);
}

PlacedWeightsFile::PlacedWeightsFile(PlacedWeightsFile &&other) noexcept
    : fd_(other.fd_), tempPath_(std::move(other.tempPath_)),
      named_(other.named_) {
  other.fd_ = -1;
  other.tempPath_.clear();
}

PlacedWeightsFile &
PlacedWeightsFile::operator=(PlacedWeightsFile &&other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    tempPath_ = std::move(other.tempPath_);
    named_ = other.named_;
    other.fd_ = -1;
    other.tempPath_.clear();
  }
  return *this;
}

PlacedWeightsFile::~PlacedWeightsFile() { close(); }

void PlacedWeightsFile::close() {
  if (fd_ >= 0)
    ::close(fd_);
  if (!tempPath_.empty() && !named_)
    ::unlink(tempPath_.c_str());
  fd_ = -1;
  tempPath_.clear();
}

Status PlacedWeightsFile::name(const std::string &path) {
  std::string tmp = tempPath_;
  if (tmp.empty()) {
    // An unnamed file gets a temporary name first: link() cannot replace.
    tmp = temporaryName(path);
    std::string self = "/proc/self/fd/" + std::to_string(fd_);
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, tmp.c_str(),
                 AT_SYMLINK_FOLLOW) != 0 &&
        ::linkat(fd_, "", AT_FDCWD, tmp.c_str(), AT_EMPTY_PATH) != 0)
      return ioError("cannot name", path, errno);
  }
  if (renameOver(tmp, path) != 0) {
    int err = errno;
    if (tempPath_.empty())
      ::unlink(tmp.c_str());
    return ioError("cannot write", path, err);
  }
  named_ = true;
  tempPath_.clear();
  return Status::OK();
}

} // namespace sits::runtime
