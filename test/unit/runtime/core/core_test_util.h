//===- core_test_util.h - Helpers of the runtime-core unit tests
//-----------===//
//
// * kernelPath(): compiles a C kernel of kernels/ into a shared object once
//   per test process (with the C compiler CMake found).
// * An independent encoder/decoder of the .sitsm layout written from
//   ARTIFACT.md (not from the library), used to check the writer byte for
//   byte and to craft damaged or inconsistent artifacts with valid hashes.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_TEST_CORE_TEST_UTIL_H
#define SITS_TEST_CORE_TEST_UTIL_H

#include "sha256.h"
#include "sits/runtime/runtime.h"
#include "xxh3_128.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace sits::runtime::test {

#define SITS_ASSERT_OK(expr)                                                   \
  do {                                                                         \
    const ::sits::runtime::Status &_s = (expr);                                \
    ASSERT_TRUE(_s.ok()) << _s.toString();                                     \
  } while (0)

#define SITS_EXPECT_CODE(expr, want)                                           \
  do {                                                                         \
    ::sits::runtime::Status _s = (expr);                                       \
    EXPECT_EQ(_s.code(), (want)) << _s.toString();                             \
  } while (0)

/// Seconds per call of `call(i)` (i counts the calls, warm-up included)
/// for the disabled benchmarks: `warmup` calls, then calls until at least
/// `minSeconds` and `minCalls` have passed.
template <typename Call>
double secondsPerCall(Call &&call, size_t warmup, double minSeconds,
                      size_t minCalls) {
  size_t i = 0;
  for (; i < warmup; ++i)
    call(i);
  const auto start = std::chrono::steady_clock::now();
  size_t calls = 0;
  double elapsed = 0;
  do {
    call(i++);
    ++calls;
    elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
  } while (elapsed < minSeconds || calls < minCalls);
  return elapsed / double(calls);
}

inline std::string tempDir() {
  static std::string dir = [] {
    const char *base = std::getenv("TMPDIR");
    std::string t =
        std::string(base && *base ? base : "/tmp") + "/sits-core-test-XXXXXX";
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    if (!mkdtemp(buf.data()))
      std::abort();
    return std::string(buf.data());
  }();
  return dir;
}

inline std::vector<uint8_t> readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)),
                              std::istreambuf_iterator<char>());
}

inline void writeBytes(const std::string &path,
                       const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()),
            std::streamsize(bytes.size()));
}

/// Compiles kernels/<name>.c to a shared object (once) and returns its path.
inline std::string kernelPath(const std::string &name) {
  static std::mutex mu;
  static std::map<std::string, std::string> built;
  std::lock_guard<std::mutex> lock(mu);
  auto it = built.find(name);
  if (it != built.end())
    return it->second;
  std::string out = tempDir() + "/" + name + ".so";
  std::string cmd = std::string(SITS_TEST_CC) +
                    " -shared -fPIC -O2 -pthread -o '" + out + "' '" +
                    SITS_TEST_KERNEL_DIR + "/" + name + ".c'";
  if (std::system(cmd.c_str()) != 0) {
    ADD_FAILURE() << "cannot compile kernel: " << cmd;
    return "";
  }
  built[name] = out;
  return out;
}

inline std::vector<uint8_t> kernelBytes(const std::string &name) {
  return readBytes(kernelPath(name));
}

/// One argument of a manifest entry point.
struct Arg {
  std::string role, name, dtype;
  std::vector<int64_t> shape;
  std::vector<std::string> dimNames; // "" = null
};

inline std::string jsonShape(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

inline std::string entryJson(const std::string &name,
                             const std::vector<Arg> &args,
                             const std::string &symbol = "") {
  std::string s = "{\"name\": \"" + name + "\"";
  if (!symbol.empty())
    s += ", \"symbol\": \"" + symbol + "\"";
  s += ", \"args\": [";
  for (size_t i = 0; i < args.size(); ++i) {
    const Arg &a = args[i];
    s += (i ? ", " : "");
    s += "{\"role\": \"" + a.role + "\", \"name\": \"" + a.name +
         "\", \"dtype\": \"" + a.dtype + "\", \"shape\": " + jsonShape(a.shape);
    if (!a.dimNames.empty()) {
      s += ", \"dim_names\": [";
      for (size_t k = 0; k < a.dimNames.size(); ++k)
        s += (k ? ", " : "") + (a.dimNames[k].empty()
                                    ? std::string("null")
                                    : "\"" + a.dimNames[k] + "\"");
      s += "]";
    }
    s += "}";
  }
  return s + "]}";
}

inline std::string hostTriple() {
  return hostCpuInfo().arch + "-unknown-linux-gnu";
}

/// A manifest for `entries` (JSON objects) compiled for the host.
inline std::string
manifestJson(const std::vector<std::string> &entries,
             const std::vector<std::string> &features = {"+sse2"},
             const std::string &triple = hostTriple(),
             const std::string &extra = "") {
  std::string s = "{\"target\": {\"name\": \"cpu\", \"triple\": \"" + triple +
                  "\", \"cpu\": \"generic\", \"features\": [";
  for (size_t i = 0; i < features.size(); ++i)
    s += (i ? ", " : "") + ("\"" + features[i] + "\"");
  s += "]}, \"entry_points\": [";
  for (size_t i = 0; i < entries.size(); ++i)
    s += (i ? ", " : "") + entries[i];
  s += "]" + extra + "}";
  return s;
}

/// The add kernel's entry point: x, y: f32[?, 4] ("batch") -> z.
inline std::string addEntry(const std::string &name = "main",
                            const std::string &symbol = "") {
  return entryJson(name,
                   {{"input", "x", "f32", {-1, 4}, {"batch", ""}},
                    {"input", "y", "f32", {-1, 4}, {"batch", ""}},
                    {"output", "z", "f32", {-1, 4}, {"batch", ""}}},
                   symbol);
}

/// Serialises an artifact with the library's writer; fails the test on error.
inline std::vector<uint8_t>
writeArtifact(const std::string &manifest, const std::vector<uint8_t> &code,
              const std::vector<uint8_t> *weights = nullptr,
              ArtifactInfo *info = nullptr) {
  ArtifactWriter w;
  Status s = w.setManifest(manifest);
  EXPECT_TRUE(s.ok()) << s.toString();
  s = w.addSection("code.cpu", code.data(), code.size());
  EXPECT_TRUE(s.ok()) << s.toString();
  if (weights) {
    s = w.addSection("weights", weights->data(), weights->size());
    EXPECT_TRUE(s.ok()) << s.toString();
  }
  StatusOr<std::vector<uint8_t>> bytes = w.serialize(info);
  EXPECT_TRUE(bytes.ok()) << bytes.status().toString();
  return bytes.ok() ? *bytes : std::vector<uint8_t>();
}

//===----------------------------------------------------------------------===//
// An independent implementation of the layout (ARTIFACT.md)
//===----------------------------------------------------------------------===//

inline uint32_t get32(const std::vector<uint8_t> &b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i)
    v = (v << 8) | b[at + size_t(i)];
  return v;
}
inline uint64_t get64(const std::vector<uint8_t> &b, size_t at) {
  return uint64_t(get32(b, at)) | uint64_t(get32(b, at + 4)) << 32;
}
inline void put32(std::vector<uint8_t> &b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    b[at + size_t(i)] = uint8_t(v >> (8 * i));
}
inline void put64(std::vector<uint8_t> &b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    b[at + size_t(i)] = uint8_t(v >> (8 * i));
}

struct RawArtifact {
  uint32_t version = kArtifactFormatVersion;
  /// In file order; the manifest text is sections[i] with name "manifest".
  std::vector<std::pair<std::string, std::vector<uint8_t>>> sections;

  std::string manifest() const {
    for (const auto &s : sections)
      if (s.first == "manifest")
        return std::string(s.second.begin(), s.second.end());
    return "";
  }
  void setManifest(const std::string &text) {
    for (auto &s : sections)
      if (s.first == "manifest")
        s.second.assign(text.begin(), text.end());
  }
  std::vector<uint8_t> *section(const std::string &name) {
    for (auto &s : sections)
      if (s.first == name)
        return &s.second;
    return nullptr;
  }
};

/// Splits a well-formed artifact into its sections.
inline RawArtifact decode(const std::vector<uint8_t> &b) {
  RawArtifact a;
  a.version = get32(b, 8);
  uint32_t count = get32(b, 16);
  for (uint32_t i = 0; i < count; ++i) {
    size_t e = 64 + size_t(i) * 64;
    std::string name(reinterpret_cast<const char *>(&b[e]));
    uint64_t off = get64(b, e + 40), size = get64(b, e + 48);
    a.sections.emplace_back(name,
                            std::vector<uint8_t>(b.begin() + long(off),
                                                 b.begin() + long(off + size)));
  }
  return a;
}

/// Where the 32 hex digits of the manifest's top-level weights_digest value
/// start (in the last "weights_digest" object), or npos.
inline size_t weightsDigestPos(const std::string &manifest) {
  size_t key = manifest.rfind("\"weights_digest\": {");
  if (key == std::string::npos)
    return key;
  const std::string hexKey = "\"hex\": \"";
  size_t at = manifest.find(hexKey, key);
  return at == std::string::npos ? at : at + hexKey.size();
}

/// Lays `a` out as ARTIFACT.md says (64-byte sections, weights on 4096) and
/// seals it. The manifest's "content_hash" value (whatever it is) is
/// replaced by the new hash; it must be 64 characters long. From version 2
/// on, the weights digest (when the manifest has one) is recomputed too and
/// the content hash skips the weights section; version 1 hashes the whole
/// file.
inline std::vector<uint8_t> encode(RawArtifact a) {
  std::string manifest = a.manifest();
  const bool separateWeights = a.version >= 2;
  if (const std::vector<uint8_t> *w = a.section("weights");
      w && separateWeights) {
    size_t at = weightsDigestPos(manifest);
    if (at != std::string::npos && at + 32 <= manifest.size()) {
      Xxh3_128 xxh;
      xxh.update(w->data(), w->size());
      manifest.replace(at, 32, Xxh3_128::hex(xxh.finish()));
    }
  }
  const std::string key = "\"content_hash\": \"";
  size_t at = manifest.rfind(key);
  if (at == std::string::npos || at + key.size() + 64 > manifest.size()) {
    ADD_FAILURE() << "manifest without a content_hash";
    return {};
  }
  size_t hashPos = at + key.size();
  manifest.replace(hashPos, 64, std::string(64, '0'));
  a.setManifest(manifest);

  size_t count = a.sections.size();
  size_t pos = 64 + 64 * count;
  std::vector<uint64_t> offsets;
  for (auto &s : a.sections) {
    size_t align = s.first == "weights" ? 4096 : 64;
    pos = (pos + align - 1) / align * align;
    offsets.push_back(pos);
    pos += s.second.size();
  }
  std::vector<uint8_t> b(pos, 0);
  const uint8_t magic[8] = {0x89, 'S', 'I', 'T', 'S', 'M', '\r', '\n'};
  std::memcpy(b.data(), magic, 8);
  put32(b, 8, a.version);
  put32(b, 12, uint32_t(64 + 64 * count));
  put32(b, 16, uint32_t(count));
  put32(b, 20, uint32_t(hashPos));
  put64(b, 24, pos);
  size_t manifestOffset = 0;
  size_t skipBegin = b.size(), skipEnd = b.size(); // the weights, from v2
  for (size_t i = 0; i < count; ++i) {
    size_t e = 64 + i * 64;
    std::memcpy(&b[e], a.sections[i].first.data(), a.sections[i].first.size());
    put64(b, e + 40, offsets[i]);
    put64(b, e + 48, a.sections[i].second.size());
    if (!a.sections[i].second.empty())
      std::memcpy(&b[offsets[i]], a.sections[i].second.data(),
                  a.sections[i].second.size());
    if (a.sections[i].first == "manifest")
      manifestOffset = offsets[i];
    if (a.sections[i].first == "weights" && separateWeights) {
      skipBegin = offsets[i];
      skipEnd = offsets[i] + a.sections[i].second.size();
    }
  }
  Sha256 sha;
  sha.update(b.data(), skipBegin);
  sha.update(b.data() + skipEnd, b.size() - skipEnd);
  Sha256::Digest d = sha.finish();
  std::memcpy(&b[32], d.data(), 32);
  std::string hex = Sha256::hex(d);
  std::memcpy(&b[manifestOffset + hashPos], hex.data(), 64);
  return b;
}

/// Replaces `from` by `to` in the manifest and re-encodes with a valid hash.
inline std::vector<uint8_t> patchManifest(const std::vector<uint8_t> &bytes,
                                          const std::string &from,
                                          const std::string &to) {
  RawArtifact a = decode(bytes);
  std::string m = a.manifest();
  size_t at = m.find(from);
  if (at == std::string::npos) {
    ADD_FAILURE() << "'" << from << "' not in the manifest:\n" << m;
    return bytes;
  }
  m.replace(at, from.size(), to);
  a.setManifest(m);
  return encode(a);
}

/// A file that a kernel with a constructor creates when it is loaded.
struct LoadMarker {
  std::string path;
  LoadMarker() {
    static int counter = 0;
    path = tempDir() + "/marker-" + std::to_string(getpid()) + "-" +
           std::to_string(counter++);
    ::unlink(path.c_str());
    ::setenv("SITS_TEST_MARKER", path.c_str(), 1);
  }
  ~LoadMarker() {
    ::unlink(path.c_str());
    ::unsetenv("SITS_TEST_MARKER");
  }
  bool fired() const {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
  }
};

} // namespace sits::runtime::test

#endif // SITS_TEST_CORE_TEST_UTIL_H
