//===- artifact_writer.cpp - Writing .sitsm files
//---------------------------===//
//
// The writer completes the manifest (versions, target name, symbols, the
// content hash), validates it with the same schema the reader applies,
// cross-checks it against the sections (the code exports each entry symbol,
// weights exist when used), lays the sections out and hashes the result
// before writing a single byte, then writes to a temporary file renamed
// over the destination.
//
//===----------------------------------------------------------------------===//
#include "artifact_format.h"
#include "elf.h"
#include "json.h"
#include "manifest_internal.h"
#include "sha256.h"

#include "sits/runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace sits::runtime {
namespace {

Status invalid(const std::string &message, const std::string &subject = "") {
  return Status(StatusCode::kInvalidArgument, message).withSubject(subject);
}

struct PendingSection {
  std::string name;
  const uint8_t *data;
  size_t size;
};

/// Everything needed to emit the file: the header + table bytes, the
/// sections with their offsets, the final size.
struct Layout {
  std::vector<uint8_t> header;
  std::string manifest;
  std::vector<PendingSection> sections; // manifest first
  std::vector<uint64_t> offsets;
  uint64_t fileSize = 0;
  uint64_t manifestHashPos = 0;
  std::string contentHash;
};

/// Feeds the file's bytes, in order, to `sink(data, size)`.
template <typename Sink> bool emit(const Layout &layout, Sink &&sink) {
  static const uint8_t kZeros[4096] = {};
  if (!sink(layout.header.data(), layout.header.size()))
    return false;
  uint64_t pos = layout.header.size();
  for (size_t i = 0; i < layout.sections.size(); ++i) {
    while (pos < layout.offsets[i]) {
      size_t n =
          size_t(std::min<uint64_t>(sizeof(kZeros), layout.offsets[i] - pos));
      if (!sink(kZeros, n))
        return false;
      pos += n;
    }
    const PendingSection &s = layout.sections[i];
    // The manifest is read from the layout's own string (it is patched with
    // the hash after layout, and moves with the layout).
    const uint8_t *data =
        i == 0 ? reinterpret_cast<const uint8_t *>(layout.manifest.data())
               : s.data;
    if (s.size && !sink(data, s.size))
      return false;
    pos += s.size;
  }
  return true;
}

} // namespace

struct ArtifactWriter::Impl {
  bool haveManifest = false;
  json::Value manifest;
  std::vector<PendingSection> sections;

  StatusOr<Layout> build() const;
  Status completeManifest(json::Value &m) const;
  Status crossCheck(const Manifest &m) const;
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

Status ArtifactWriter::addSection(std::string_view name, const void *data,
                                  size_t size) {
  std::string n(name);
  if (!format::isValidSectionName(n))
    return invalid(
        "section name '" + n + "' must be 1-39 characters of [a-z0-9_.-]", n);
  if (n == "manifest")
    return invalid("the manifest section is written from setManifest()", n);
  if (impl_->find(n))
    return invalid("section '" + n + "' was already added", n);
  if (impl_->sections.size() + 1 >= format::kMaxSections)
    return invalid("too many sections", n);
  if (!data && size)
    return invalid("section '" + n + "' has no data", n);
  impl_->sections.push_back({n, static_cast<const uint8_t *>(data), size});
  return Status::OK();
}

Status ArtifactWriter::Impl::completeManifest(json::Value &m) const {
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
  out.set("content_hash",
          json::Value::string(std::string(format::kContentHashHexChars, '0')));
  m = std::move(out);
  return Status::OK();
}

Status ArtifactWriter::Impl::crossCheck(const Manifest &m) const {
  std::string codeName = m.codeSectionName();
  const PendingSection *code = find(codeName);
  if (!code)
    return invalid("the manifest's target is '" + m.target.name +
                       "' but there is no '" + codeName + "' section",
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
  for (const EntryPointSpec &ep : m.entryPoints) {
    if (!ep.hasWeights())
      continue;
    if (!weights)
      return invalid("entry point '" + ep.name +
                         "' takes the weights but no weights section was added",
                     "weights");
    int64_t declared = ep.args.front().shape[0];
    if (declared >= 0 && uint64_t(declared) != weights->size)
      return invalid("entry point '" + ep.name + "' declares " +
                         std::to_string(declared) +
                         " bytes of weights but the "
                         "weights section has " +
                         std::to_string(weights->size),
                     "weights");
  }
  return Status::OK();
}

StatusOr<Layout> ArtifactWriter::Impl::build() const {
  using namespace format;
  if (!haveManifest)
    return invalid("no manifest was set", "manifest");
  json::Value m = manifest;
  SITS_RETURN_IF_ERROR(completeManifest(m));
  Layout layout;
  layout.manifest = json::print(m);

  // The schema the reader applies, reported as the caller's error.
  Manifest parsed;
  if (Status s = manifestFromJson(m, parsed); !s.ok()) {
    ErrorInfo info = s.info();
    info.code = StatusCode::kInvalidArgument;
    return Status(std::move(info));
  }
  SITS_RETURN_IF_ERROR(crossCheck(parsed));

  std::string needle =
      "\"content_hash\": \"" + std::string(kContentHashHexChars, '0');
  size_t at = layout.manifest.rfind(needle);
  if (at == std::string::npos)
    return Status(StatusCode::kInternal, "content_hash placeholder not found");
  layout.manifestHashPos = at + needle.size() - kContentHashHexChars;

  // Order: manifest, code and device sections as added, weights last (on a
  // page boundary).
  layout.sections.push_back({"manifest", nullptr, layout.manifest.size()});
  for (const PendingSection &s : sections)
    if (s.name != "weights")
      layout.sections.push_back(s);
  if (const PendingSection *w = find("weights"))
    layout.sections.push_back(*w);

  uint32_t count = uint32_t(layout.sections.size());
  uint64_t headerSize = kHeaderSize + uint64_t(count) * kSectionEntrySize;
  uint64_t pos = headerSize;
  for (const PendingSection &s : layout.sections) {
    pos = alignUp(pos,
                  s.name == "weights" ? kWeightsAlignment : kSectionAlignment);
    layout.offsets.push_back(pos);
    pos += s.size;
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

  // Hash with both hash fields at their placeholder values, then fill them.
  Sha256 sha;
  emit(layout, [&](const void *p, size_t n) {
    sha.update(p, n);
    return true;
  });
  Sha256::Digest digest = sha.finish();
  layout.contentHash = Sha256::hex(digest);
  std::memcpy(h.data() + kOffContentHash, digest.data(), digest.size());
  layout.manifest.replace(size_t(layout.manifestHashPos), kContentHashHexChars,
                          layout.contentHash);
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

StatusOr<std::vector<uint8_t>>
ArtifactWriter::serialize(ArtifactInfo *info) const {
  StatusOr<Layout> layout = impl_->build();
  if (!layout.ok())
    return layout.status();
  std::vector<uint8_t> out;
  out.reserve(size_t(layout->fileSize));
  emit(*layout, [&](const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    out.insert(out.end(), b, b + n);
    return true;
  });
  if (info)
    *info = infoOf(*layout);
  return out;
}

StatusOr<ArtifactInfo> ArtifactWriter::write(const std::string &path) const {
  StatusOr<Layout> layout = impl_->build();
  if (!layout.ok())
    return layout.status();
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(counter.fetch_add(1));
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) {
    int err = errno;
    return Status(StatusCode::kIoError,
                  "cannot create " + tmp + ": " + std::strerror(err))
        .withSubject(path);
  }
  int err = 0;
  bool ok = emit(*layout, [&](const void *p, size_t n) {
    const auto *b = static_cast<const uint8_t *>(p);
    while (n) {
      ssize_t w = ::write(fd, b, n);
      if (w < 0) {
        if (errno == EINTR)
          continue;
        err = errno;
        return false;
      }
      b += w;
      n -= size_t(w);
    }
    return true;
  });
  if (::close(fd) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && ::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    return Status(StatusCode::kIoError,
                  "cannot write " + path + ": " + std::strerror(err))
        .withSubject(path);
  }
  return infoOf(*layout);
}

} // namespace sits::runtime
