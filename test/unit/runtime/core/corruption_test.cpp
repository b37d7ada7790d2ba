//===- corruption_test.cpp - Damaged and incompatible artifacts
//------------===//
//
// Every refusal has its own error code and message, and none of them runs
// code from the file: the code section used here has an ELF constructor
// that creates a marker file when the dynamic loader runs it.
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

using namespace sits::runtime;
using namespace sits::runtime::test;

namespace {

class Corruption : public ::testing::Test {
protected:
  void SetUp() override {
    code_ = kernelBytes("constructor");
    good_ = writeArtifact(manifestJson({addEntry()}), code_);
    ASSERT_FALSE(good_.empty());
  }

  /// Loads `bytes`, expecting `code`; returns the status. Asserts that no
  /// code ran.
  Status refuse(const std::vector<uint8_t> &bytes, StatusCode code,
                const std::string &fragment = "") {
    LoadMarker marker;
    StatusOr<Module> m = Module::load(bytes.data(), bytes.size());
    EXPECT_FALSE(m.ok());
    EXPECT_EQ(m.code(), code) << m.status().toString();
    if (!fragment.empty()) {
      EXPECT_NE(m.status().message().find(fragment), std::string::npos)
          << m.status().toString();
    }
    EXPECT_FALSE(marker.fired()) << "code from a refused artifact ran";
    return m.ok() ? Status::OK() : m.status();
  }

  std::vector<uint8_t> code_;
  std::vector<uint8_t> good_;
};

TEST_F(Corruption, TheIntactArtifactLoadsAndRunsItsConstructor) {
  LoadMarker marker;
  StatusOr<Module> m = Module::load(good_.data(), good_.size());
  ASSERT_TRUE(m.ok()) << m.status().toString();
  EXPECT_TRUE(marker.fired()) << "the marker mechanism works";
}

TEST_F(Corruption, EveryFlippedByteIsRefused) {
  // Reading (which verifies everything) is enough to refuse; a sample of
  // positions also goes through Module::load to prove no code runs.
  size_t refusedAsCorrupt = 0;
  for (size_t i = 0; i < good_.size(); ++i) {
    std::vector<uint8_t> bad = good_;
    bad[i] ^= uint8_t(1u << (i % 8));
    StatusOr<ArtifactReader> r =
        ArtifactReader::fromMemory(bad.data(), bad.size());
    ASSERT_FALSE(r.ok()) << "flipping byte " << i << " went unnoticed";
    if (i >= 8 && i < 12) {
      // The format version: a damaged one reads as "some other version".
      EXPECT_TRUE(r.code() == StatusCode::kUnsupportedVersion ||
                  r.code() == StatusCode::kCorruptArtifact)
          << i << ": " << r.status().toString();
    } else {
      ASSERT_EQ(r.code(), StatusCode::kCorruptArtifact)
          << "byte " << i << ": " << r.status().toString();
      ++refusedAsCorrupt;
    }
    if (i % 509 == 0)
      refuse(bad, r.code());
  }
  EXPECT_EQ(refusedAsCorrupt, good_.size() - 4);
}

TEST_F(Corruption, FlippedCodeByteIsAHashMismatch) {
  uint64_t codeOffset = get64(good_, 64 + 64 + 40); // second section
  std::vector<uint8_t> bad = good_;
  bad[codeOffset + 100] ^= 0xff;
  Status s = refuse(bad, StatusCode::kCorruptArtifact, "content hash mismatch");
  EXPECT_EQ(s.info().subject, "content_hash");
}

TEST_F(Corruption, TruncationAtAnyLengthIsRefused) {
  for (size_t len = 0; len < good_.size(); len += (len < 200 ? 1 : 61)) {
    std::vector<uint8_t> bad(good_.begin(), good_.begin() + long(len));
    StatusOr<ArtifactReader> r =
        ArtifactReader::fromMemory(bad.data(), bad.size());
    ASSERT_FALSE(r.ok()) << len;
    ASSERT_EQ(r.code(), StatusCode::kCorruptArtifact) << len;
  }
  std::vector<uint8_t> bad(good_.begin(), good_.end() - 1);
  refuse(bad, StatusCode::kCorruptArtifact, "(truncated)");
  std::vector<uint8_t> tiny(good_.begin(), good_.begin() + 10);
  refuse(tiny, StatusCode::kCorruptArtifact, "too small");
  std::vector<uint8_t> longer = good_;
  longer.push_back(0);
  refuse(longer, StatusCode::kCorruptArtifact, "extra bytes");
}

TEST_F(Corruption, BadMagic) {
  std::vector<uint8_t> bad = good_;
  std::memcpy(bad.data(),
              "\x7f"
              "ELF",
              4);
  Status s = refuse(bad, StatusCode::kCorruptArtifact, "bad magic");
  EXPECT_EQ(s.info().subject, "magic");
  // A plain text file is not an artifact either.
  std::string text(200, 'x');
  refuse(std::vector<uint8_t>(text.begin(), text.end()),
         StatusCode::kCorruptArtifact, "bad magic");
}

TEST_F(Corruption, NewerFormatVersion) {
  std::vector<uint8_t> bad = good_;
  put32(bad, 8, kArtifactFormatVersion + 1);
  Status s =
      refuse(bad, StatusCode::kUnsupportedVersion, "newer than this runtime");
  EXPECT_EQ(s.info().expected, std::to_string(kArtifactFormatVersion));
  EXPECT_EQ(s.info().actual, std::to_string(kArtifactFormatVersion + 1));
  // Also when the rest of the file is consistent with that version.
  RawArtifact a = decode(good_);
  a.version = kArtifactFormatVersion + 1;
  refuse(encode(a), StatusCode::kUnsupportedVersion);
  put32(bad, 8, 0);
  refuse(bad, StatusCode::kCorruptArtifact, "version 0");
}

TEST_F(Corruption, SectionOutOfBounds) {
  // Entry 1 (the code): offset beyond the end; size beyond the end; an
  // offset+size that overflows; a misaligned offset; an overlap.
  size_t e = 64 + 64;
  std::vector<uint8_t> bad = good_;
  put64(bad, e + 40, (good_.size() / 64 + 1) * 64);
  refuse(bad, StatusCode::kCorruptArtifact, "lies outside the file");
  bad = good_;
  put64(bad, e + 48, good_.size());
  refuse(bad, StatusCode::kCorruptArtifact, "lies outside the file");
  bad = good_;
  put64(bad, e + 48, ~uint64_t(0) - 10);
  refuse(bad, StatusCode::kCorruptArtifact, "lies outside the file");
  bad = good_;
  put64(bad, e + 40, get64(good_, e + 40) + 8);
  refuse(bad, StatusCode::kCorruptArtifact, "not 64-byte aligned");
  bad = good_;
  put64(bad, e + 40, get64(good_, 64 + 40)); // onto the manifest
  refuse(bad, StatusCode::kCorruptArtifact, "overlap");
  bad = good_;
  put64(bad, e + 40, 0); // onto the header
  refuse(bad, StatusCode::kCorruptArtifact, "overlaps the header");
  bad = good_;
  put32(bad, 16, 1000); // section count vs header size
  refuse(bad, StatusCode::kCorruptArtifact, "header size");
  bad = good_;
  std::memcpy(&bad[e], "CODE", 4);
  refuse(bad, StatusCode::kCorruptArtifact, "invalid name");
  bad = good_;
  put32(bad, 20,
        uint32_t(get64(good_, 64 + 48))); // hash position past manifest
  refuse(bad, StatusCode::kCorruptArtifact, "out of bounds");
}

TEST_F(Corruption, DuplicateOrMissingSections) {
  std::vector<uint8_t> bad = good_;
  std::memcpy(&bad[64 + 64], "manifest\0\0\0\0", 12);
  refuse(bad, StatusCode::kCorruptArtifact, "appears twice");
  RawArtifact noCode = decode(good_);
  noCode.sections.pop_back();
  refuse(encode(noCode), StatusCode::kCorruptArtifact, "no 'code.cpu' section");
}

TEST_F(Corruption, ManifestThatIsNotJsonOrBreaksTheSchema) {
  refuse(patchManifest(good_, "\"entry_points\": [", "\"entry_points\": [[["),
         StatusCode::kCorruptArtifact, "not valid JSON");
  Status s =
      refuse(patchManifest(good_, "\"dtype\": \"f32\"", "\"dtype\": \"f33\""),
             StatusCode::kCorruptArtifact, "unknown element type");
  EXPECT_EQ(s.info().subject, "entry_points[0].args[0].dtype");
  const std::string version = std::to_string(kArtifactFormatVersion);
  refuse(patchManifest(good_, "\"format_version\": " + version,
                       "\"format_version\": 1"),
         StatusCode::kCorruptArtifact, "header says " + version);
}

TEST_F(Corruption, CodeSectionThatIsNotASharedObject) {
  RawArtifact a = decode(good_);
  std::vector<uint8_t> *code = a.section("code.cpu");
  ASSERT_NE(code, nullptr);
  std::vector<uint8_t> elfHeaderOnly(code->begin(), code->begin() + 64);
  *code = std::vector<uint8_t>(5000, 0x90);
  refuse(encode(a), StatusCode::kCorruptArtifact, "no ELF magic");
  *code = elfHeaderOnly; // section headers point outside
  refuse(encode(a), StatusCode::kCorruptArtifact, "section headers outside");
}

TEST_F(Corruption, WrongArchitecture) {
  std::string other = hostCpuInfo().arch == "x86_64" ? "aarch64" : "x86_64";
  Status s = refuse(
      patchManifest(good_, hostTriple(), other + "-unknown-linux-gnu"),
      StatusCode::kIncompatibleTarget, "artifact was built for " + other);
  EXPECT_EQ(s.info().expected, other);
  EXPECT_EQ(s.info().actual, hostCpuInfo().arch);
  refuse(patchManifest(good_, hostTriple(),
                       hostCpuInfo().arch + "-apple-darwin23"),
         StatusCode::kIncompatibleTarget, "built for darwin");
}

TEST_F(Corruption, MissingCpuFeature) {
  // A feature this runtime knows but this CPU lacks.
  const HostCpuInfo &host = hostCpuInfo();
  std::string absent;
  for (const std::string &f : host.knownFeatures)
    if (!host.hasFeature(f).value_or(true)) {
      absent = f;
      break;
    }
  if (absent.empty())
    GTEST_SKIP() << "this CPU has every feature the runtime knows";
  std::vector<uint8_t> bad =
      writeArtifact(manifestJson({addEntry()}, {"+sse2", "+" + absent}), code_);
  Status s = refuse(bad, StatusCode::kIncompatibleTarget,
                    "artifact was built for " + host.arch + " with +" + absent +
                        ", which this CPU lacks");
  EXPECT_EQ(s.info().missing, std::vector<std::string>{"+" + absent});
  // Disabled features ("-x") are never a reason to refuse.
  std::vector<uint8_t> ok =
      writeArtifact(manifestJson({addEntry()}, {"+sse2", "-" + absent}), code_);
  EXPECT_TRUE(Module::load(ok.data(), ok.size()).ok());
}

TEST_F(Corruption, UnknownCpuFeatureIsRefusedToo) {
  std::vector<uint8_t> bad = writeArtifact(
      manifestJson({addEntry()}, {"+sse2", "+quantum-tunnelling"}), code_);
  Status s = refuse(bad, StatusCode::kIncompatibleTarget, "cannot detect");
  EXPECT_EQ(s.info().missing, std::vector<std::string>{"+quantum-tunnelling"});
}

TEST_F(Corruption, MissingEntrySymbol) {
  // Same length, so only the symbol changes; the hash is recomputed.
  Status s =
      refuse(patchManifest(good_, "\"sits_entry_main\"", "\"sits_entry_mair\""),
             StatusCode::kMissingSymbol, "sits_entry_mair");
  EXPECT_EQ(s.info().subject, "sits_entry_mair");
}

TEST_F(Corruption, CodeTheDynamicLoaderRefuses) {
  std::vector<uint8_t> bytes =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("undefined"));
  refuse(bytes, StatusCode::kLoadFailed, "sits_test_function_nobody_defines");
}

TEST_F(Corruption, MissingFileAndNonArtifactPaths) {
  StatusOr<Module> m = Module::load(tempDir() + "/does-not-exist.sitsm");
  EXPECT_EQ(m.code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("does-not-exist.sitsm"),
            std::string::npos);
  StatusOr<Module> d = Module::load(tempDir());
  EXPECT_EQ(d.code(), StatusCode::kIoError);
  std::string path = tempDir() + "/bad.sitsm";
  std::vector<uint8_t> bad = good_;
  bad[bad.size() / 2] ^= 1;
  writeBytes(path, bad);
  StatusOr<Module> c = Module::load(path);
  EXPECT_EQ(c.code(), StatusCode::kCorruptArtifact);
  EXPECT_EQ(c.status().message().rfind(path + ": ", 0), 0u) << "names the file";
}

} // namespace

namespace {

TEST_F(Corruption, RandomManifestDamageWithAValidHashNeverCrashes) {
  // The hash protects against accidents, not against a crafted file: the
  // manifest parser must survive anything (run this under ASan/UBSan).
  RawArtifact a = decode(good_);
  std::string manifest = a.manifest();
  size_t hashAt = manifest.rfind("\"content_hash\"");
  uint64_t seed = 0x9e3779b97f4a7c15ULL;
  auto next = [&seed] {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  const char alphabet[] =
      "{}[]\":,-0123456789.eE+ abcdefnulltrue\\u\x01\xff\xc3";
  int accepted = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string m = manifest;
    hashAt = manifest.rfind("\"content_hash\"");
    int edits = 1 + int(next() % 4);
    for (int k = 0; k < edits; ++k) {
      size_t pos = next() % hashAt; // keep the hash key intact
      switch (next() % 3) {
      case 0:
        m[pos] = alphabet[next() % (sizeof(alphabet) - 1)];
        break;
      case 1:
        m.insert(pos, 1, alphabet[next() % (sizeof(alphabet) - 1)]);
        break;
      default:
        m.erase(pos, 1 + next() % 8);
        break;
      }
      hashAt = m.rfind("\"content_hash\"");
      if (hashAt == std::string::npos)
        break;
    }
    if (m.rfind("\"content_hash\": \"") == std::string::npos)
      continue;
    RawArtifact damaged = a;
    damaged.setManifest(m);
    std::vector<uint8_t> bytes = encode(damaged);
    StatusOr<ArtifactReader> r =
        ArtifactReader::fromMemory(bytes.data(), bytes.size());
    if (r.ok()) {
      ++accepted; // harmless edits (whitespace) may leave it valid
      continue;
    }
    EXPECT_EQ(r.code(), StatusCode::kCorruptArtifact) << r.status().toString();
    EXPECT_FALSE(r.status().message().empty());
  }
  EXPECT_LT(accepted, 400);
}

} // namespace
