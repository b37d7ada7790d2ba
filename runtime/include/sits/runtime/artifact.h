//===- artifact.h - The .sitsm compiled-artifact format
//---------------------===//
//
// One file holds everything a compiled model needs: a manifest (UTF-8 JSON),
// the code for each target (`code.<target>`: a host shared object today,
// `device.<target>` binaries later) and the weights, each in its own 64-byte
// aligned section, under digests stored in the file (SHA-256 over all but the
// weights, XXH3-128 over the weights). The byte layout is specified in
// runtime/src/core/ARTIFACT.md; this library is the only code that writes or
// reads it (the compiler calls `ArtifactWriter` through the Python
// bindings).
//
// `ArtifactReader::open` verifies integrity (magic, version, section bounds,
// hashes, manifest schema) and never executes anything;
// `checkHostCompatibility` then verifies the artifact can run here
// (architecture, OS, CPU features, ELF class/machine and entry symbols).
// `Module::load` does both before any byte of the code runs.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_ARTIFACT_H
#define SITS_RUNTIME_ARTIFACT_H

#include "sits/runtime/dtype.h"
#include "sits/runtime/export.h"
#include "sits/runtime/status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sits::runtime {

/// The format version this runtime writes, and the newest it reads.
/// Version 2: the weights section has its own XXH3-128 digest (manifest key
/// `weights_digest`) and the SHA-256 content hash covers every other byte.
inline constexpr uint32_t kArtifactFormatVersion = 2;
/// The oldest format version this runtime reads (version 1: one SHA-256
/// over the whole file).
inline constexpr uint32_t kOldestArtifactFormatVersion = 1;

/// The C symbol of entry point `<name>` is this prefix + name: the
/// convention between the compiler (sits-cpu-mark-entry-points names the
/// functions it exports so) and the artifact writer (which fills in an
/// entry's symbol from it).
inline constexpr char kEntrySymbolPrefix[] = "sits_entry_";
/// Conventional file extension.
inline constexpr const char *kArtifactExtension = ".sitsm";

//===----------------------------------------------------------------------===//
// Manifest
//===----------------------------------------------------------------------===//

/// What an argument of an entry point is.
enum class ArgRole : uint8_t {
  /// The artifact's `weights` section as a rank-1 i8 memref; always the
  /// first argument when present, supplied by the runtime.
  kWeights,
  /// A caller-supplied input, read only.
  kInput,
  /// A caller-owned output buffer the code writes in place.
  kOutput,
  /// The code's error flag: an i32 scalar after every output, supplied by
  /// the runtime and zeroed before each call. The code leaves 0, or writes
  /// k >= 1 when check k failed (an index out of range); the runtime then
  /// fails the call with kOutOfRange and `messages[k - 1]`. At most one.
  kStatus,
};
/// "weights", "input", "output", "status".
SITS_RUNTIME_API std::string_view argRoleName(ArgRole role);

struct SITS_RUNTIME_API ArgSpec {
  ArgRole role = ArgRole::kInput;
  std::string name;
  DType dtype = DType::kF32;
  /// One extent per dimension; -1 is dynamic.
  std::vector<int64_t> shape;
  /// Empty, or one entry per dimension: a symbolic name ("batch") that ties
  /// equal dynamic extents together across arguments, or "" for none. The
  /// runtime uses it to check inputs agree and to size dynamic outputs.
  std::vector<std::string> dimNames;
  /// An input the code also writes (a paged KV pool): the caller's buffer
  /// receives the update, staged or not. Manifest key "updated_in_place".
  bool updatedInPlace = false;
  /// A status argument's messages: what check k (1-based) found.
  std::vector<std::string> messages;
  /// A paged KV pool of KIVI blocks (an i8 [blocks, bytes] input): the
  /// mode (bits, plus kivi::kKeysPerToken for keys quantized per token:
  /// "keys": "token"), layers, kv heads, block size and head dim of its
  /// layout (sits/runtime/kivi_layout.h); all 0 for other arguments.
  /// Manifest key "kivi".
  struct Kivi {
    int64_t bits = 0, layers = 0, kvHeads = 0, blockSize = 0, headDim = 0;
    /// bits = kivi::kMixedWidths: the width of each (layer, kv head).
    std::vector<uint8_t> widths;
  } kivi;

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  /// "f32[?, 4]".
  std::string typeString() const;
};

struct SITS_RUNTIME_API EntryPointSpec {
  /// The name callers use ("main").
  std::string name;
  /// The exported C symbol: `void <symbol>(void **args)`, by convention
  /// kEntrySymbolPrefix + name.
  std::string symbol;
  /// In call order: [weights], inputs..., outputs...
  std::vector<ArgSpec> args;

  bool hasWeights() const {
    return !args.empty() && args.front().role == ArgRole::kWeights;
  }
  /// The input (resp. output) arguments, in order.
  std::vector<const ArgSpec *> inputs() const;
  std::vector<const ArgSpec *> outputs() const;
  /// The status argument (the last one), or nullptr.
  const ArgSpec *status() const {
    return !args.empty() && args.back().role == ArgRole::kStatus ? &args.back()
                                                                 : nullptr;
  }
};

struct SITS_RUNTIME_API TargetSpec {
  /// The compiler's target name ("cpu"); the code lives in `code.<name>`.
  std::string name;
  /// LLVM target triple ("x86_64-unknown-linux-gnu").
  std::string triple;
  /// LLVM CPU name ("emeraldrapids", "generic").
  std::string cpu;
  /// LLVM feature strings the code was built with ("+avx512f", "-amx-tile").
  std::vector<std::string> features;

  /// The triple's architecture, normalised ("x86_64", "aarch64").
  std::string arch() const;
};

/// The manifest's optional `device` object: the host code carries device
/// code and calls a GPU runtime ABI (passes/Codegen/GPU/README.md).
struct SITS_RUNTIME_API DeviceCodeSpec {
  /// The device kind it runs on: "cuda", "hip".
  std::string kind;
  /// The runtime ABI the host code calls: "mlir-gpu-runtime".
  std::string abi;
  /// The architecture the device code was built for ("sm_90"), or "".
  std::string chip;
  /// "fatbin", "bin", "ptx", or "".
  std::string imageFormat;
};

/// The manifest's `weights_digest` (format version 2): the digest of the
/// `weights` section's bytes, which the content hash does not cover.
struct WeightsDigest {
  /// "xxh3-128": XXH3_128bits, seed 0.
  std::string algorithm;
  /// The canonical (big-endian) digest as 32 lowercase hex digits.
  std::string hex;
};

struct SITS_RUNTIME_API Manifest {
  uint32_t formatVersion = 0;
  std::string sitsVersion;
  std::string llvmVersion;
  TargetSpec target;
  /// Present for artifacts whose code runs on a GPU.
  std::optional<DeviceCodeSpec> device;
  std::vector<EntryPointSpec> entryPoints;
  /// Present when the artifact has a `weights` section (version 2).
  std::optional<WeightsDigest> weightsDigest;
  /// Lowercase hex SHA-256 of the file (see ARTIFACT.md).
  std::string contentHash;
  /// The manifest exactly as stored (keys the runtime does not know
  /// included).
  std::string json;

  const EntryPointSpec *findEntryPoint(std::string_view name) const;
  std::string codeSectionName() const { return "code." + target.name; }
};

/// Parses and validates a manifest against the schema of ARTIFACT.md.
/// kCorruptArtifact (with `subject` = the offending field) on failure.
SITS_RUNTIME_API StatusOr<Manifest> parseManifest(std::string_view json);

//===----------------------------------------------------------------------===//
// Sections
//===----------------------------------------------------------------------===//

struct SectionInfo {
  std::string name;
  /// Byte offset from the start of the file (a multiple of 64).
  uint64_t offset = 0;
  uint64_t size = 0;
};

struct ByteSpan {
  const uint8_t *data = nullptr;
  size_t size = 0;
};

/// Produces a section's bytes in order while the artifact is written: fills
/// `buffer` with up to `capacity` bytes and returns how many it wrote, 0 at
/// the end (an error aborts the write and is returned by it).
using SectionReader =
    std::function<StatusOr<size_t>(uint8_t *buffer, size_t capacity)>;

//===----------------------------------------------------------------------===//
// Writer
//===----------------------------------------------------------------------===//

/// What was written.
struct ArtifactInfo {
  std::string contentHash;
  uint64_t fileSize = 0;
  std::vector<SectionInfo> sections;
  /// The completed manifest as stored.
  std::string manifestJson;
};

/// A new artifact file, not yet named, whose weights section is filled
/// before anything else about the artifact is known: a compiler writes the
/// weights it re-lays out straight to their place in it (each byte written
/// once, never to a scratch file first), and ArtifactWriter::writeAround
/// completes the artifact around them and names it. Unless that succeeds,
/// the file disappears when this object is destroyed.
class SITS_RUNTIME_API PlacedWeightsFile {
public:
  /// Where the weights section starts: after the header and room for a
  /// table of 63 sections, on a page boundary.
  static constexpr uint64_t kWeightsOffset = 4096;

  /// A new file in `directory` (which must be on the file system the
  /// artifact is to be named on): unnamed (O_TMPFILE) where the file system
  /// allows, else a hidden temporary name removed on destruction.
  static StatusOr<PlacedWeightsFile> create(const std::string &directory);

  PlacedWeightsFile(PlacedWeightsFile &&other) noexcept;
  PlacedWeightsFile &operator=(PlacedWeightsFile &&other) noexcept;
  PlacedWeightsFile(const PlacedWeightsFile &) = delete;
  PlacedWeightsFile &operator=(const PlacedWeightsFile &) = delete;
  ~PlacedWeightsFile();

  /// The file's descriptor (read-write), for mapping the weights' place.
  int fd() const { return fd_; }
  /// Whether writeAround named it already (it can be named once).
  bool named() const { return named_; }
  /// Closes the descriptor (removing the file unless it was named).
  void close();

private:
  friend class ArtifactWriter;
  PlacedWeightsFile(int fd, std::string tempPath)
      : fd_(fd), tempPath_(std::move(tempPath)) {}
  /// Names the file `path` atomically (replacing any file there).
  Status name(const std::string &path);

  int fd_ = -1;
  /// The temporary name, when the file system has no unnamed files.
  std::string tempPath_;
  bool named_ = false;
};

class SITS_RUNTIME_API ArtifactWriter {
public:
  ArtifactWriter();
  ~ArtifactWriter();
  ArtifactWriter(ArtifactWriter &&) noexcept;
  ArtifactWriter &operator=(ArtifactWriter &&) noexcept;

  /// The manifest, a JSON object following ARTIFACT.md. The writer fills in
  /// `format_version`, `content_hash`, `sits_version` and `llvm_version`
  /// (when absent: the versions this runtime was built with), and
  /// `target.name` (when absent: from the single `code.*` section). Checked
  /// when written, against the sections added.
  Status setManifest(std::string_view json);

  /// Adds section `name` ("code.cpu", "weights", "device.sm_90", ...). The
  /// bytes are referenced, not copied: keep them alive until `write` or
  /// `serialize` returns.
  Status addSection(std::string_view name, const void *data, size_t size);
  /// Adds section `name` with the bytes of the file at `path`, copied into
  /// the artifact in chunks (64 MiB) while it is written and hashed, never
  /// held in memory whole. The size is taken now; a file that has a
  /// different size when it is copied fails the write (kIoError). Not for
  /// `code.*` sections, which the writer inspects.
  Status addSectionFromFile(std::string_view name, const std::string &path);
  /// Adds section `name` whose bytes `reader` produces, in chunks, while the
  /// artifact is written. `size` is their total, or -1 when unknown (only
  /// for `weights`, which is laid out last). The reader is called once: a
  /// writer with a reader section writes (or serializes) once. Not for
  /// `code.*` sections.
  Status addSectionFromReader(std::string_view name, SectionReader reader,
                              int64_t size = -1);

  /// Writes the artifact to `path` atomically (a temporary file renamed
  /// over it). Fails with kInvalidArgument when the manifest does not
  /// follow the schema or does not match the sections (a missing code
  /// section, an entry symbol the code does not export, weights arguments
  /// without a weights section, ...). Each byte is read from its source
  /// once: the weights are digested while they are copied, the rest is
  /// hashed while it is written, and the two hash fields are filled in last.
  StatusOr<ArtifactInfo> write(const std::string &path) const;
  /// The same bytes, in memory.
  StatusOr<std::vector<uint8_t>> serialize(ArtifactInfo *info = nullptr) const;
  /// Like `write`, into `file`, whose first `placed` bytes of weights are
  /// already at PlacedWeightsFile::kWeightsOffset: the weights section is
  /// those bytes followed by the `weights` section added (if any, of known
  /// size), and the other sections follow it. The placed bytes are read
  /// once, to digest them; nothing is copied. Then `file` is named `path`.
  StatusOr<ArtifactInfo> writeAround(const std::string &path,
                                     PlacedWeightsFile &file,
                                     uint64_t placed) const;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

//===----------------------------------------------------------------------===//
// Reader
//===----------------------------------------------------------------------===//

/// How much of an artifact the reader verifies.
enum class Verify : uint8_t {
  /// Everything: the content hash and the weights digest (the default).
  kFull,
  /// Everything but the weights digest: the header, the section table, the
  /// content hash over every byte outside the weights section, the manifest.
  /// Damage inside the weights goes unnoticed; for callers that verified
  /// the file once already, on storage they trust. Version 1 files have no
  /// separate weights digest and are always verified in full.
  kMetadata,
};

class SITS_RUNTIME_API ArtifactReader {
public:
  /// Maps `path` read-only and verifies it: magic, format version, header
  /// and section bounds, the content hash, the manifest schema, the weights
  /// digest. Nothing in the file is executed.
  static StatusOr<ArtifactReader> open(const std::string &path,
                                       Verify verify = Verify::kFull);
  /// The same for bytes in memory (copied into 64-byte-aligned storage).
  static StatusOr<ArtifactReader> fromMemory(const void *data, size_t size,
                                             Verify verify = Verify::kFull);

  const Manifest &manifest() const;
  uint32_t formatVersion() const;
  const std::string &contentHash() const;
  /// Whether the weights section's bytes were checked (always for version
  /// 1 files and with Verify::kFull; false when there are no weights).
  bool weightsVerified() const;
  /// OK while the artifact's bytes can all be read; kIoError when the file
  /// it maps was truncated after opening (reading the lost pages would
  /// raise SIGBUS). Module::run checks it before every call.
  Status intact() const;
  uint64_t fileSize() const;
  const std::vector<SectionInfo> &sections() const;
  /// The bytes of section `name`; nullopt when absent. Valid while this
  /// reader (or a copy, or a Module loaded from it) lives; 64-byte aligned.
  std::optional<ByteSpan> section(std::string_view name) const;

  struct Impl;
  explicit ArtifactReader(std::shared_ptr<const Impl> impl)
      : impl_(std::move(impl)) {}
  const std::shared_ptr<const Impl> &impl() const { return impl_; }

private:
  std::shared_ptr<const Impl> impl_;
};

/// Whether the verified artifact can run on this host: the target triple's
/// architecture and OS equal the host's, every CPU feature the code was
/// built with is present (kIncompatibleTarget, listing them in `missing`),
/// the code section is an ELF shared object for this machine
/// (kCorruptArtifact / kIncompatibleTarget) and exports every entry symbol
/// (kMissingSymbol). Reads bytes only; runs nothing.
SITS_RUNTIME_API Status checkHostCompatibility(const ArtifactReader &reader);

} // namespace sits::runtime

#endif // SITS_RUNTIME_ARTIFACT_H
