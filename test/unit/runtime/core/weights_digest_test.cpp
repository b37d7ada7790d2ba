//===- weights_digest_test.cpp - Format version 2 and streamed sections ---===//
//
// The weights section has its own XXH3-128 digest (manifest key
// weights_digest) and the SHA-256 content hash covers every other byte
// (ARTIFACT.md). Damage anywhere, the weights included, is refused with a
// typed error; version 1 files still read; the writer streams sections from
// files and readers and gives the same bytes as from memory.
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include <functional>

using namespace sits::runtime;
using namespace sits::runtime::test;

namespace {

std::vector<uint8_t> patternBytes(size_t n, uint32_t seed = 1) {
  std::vector<uint8_t> out(n);
  uint32_t x = seed;
  for (uint8_t &b : out) {
    x = x * 1664525u + 1013904223u;
    b = uint8_t(x >> 24);
  }
  return out;
}

/// The weights kernel's entry with weights of any size.
std::string anyWeightsManifest(int64_t declared = -1) {
  return manifestJson(
      {entryJson("main", {{"weights", "weights", "i8", {declared}, {}},
                          {"input", "x", "f32", {4}, {}},
                          {"output", "y", "f32", {4}, {}}})});
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

class WeightsDigest : public ::testing::Test {
protected:
  void SetUp() override {
    code_ = kernelBytes("weights");
    weights_ = patternBytes(6000);
    good_ = writeArtifact(anyWeightsManifest(), code_, &weights_);
    ASSERT_FALSE(good_.empty());
    RawArtifact a = decode(good_);
    weightsOffset_ = 0;
    for (uint32_t i = 0; i < get32(good_, 16); ++i)
      if (std::string(reinterpret_cast<const char *>(&good_[64 + 64 * i])) ==
          "weights")
        weightsOffset_ = get64(good_, 64 + 64 * i + 40);
    ASSERT_NE(weightsOffset_, 0u);
  }

  std::vector<uint8_t> code_, weights_, good_;
  uint64_t weightsOffset_ = 0;
};

TEST_F(WeightsDigest, WriterRecordsTheXxh3OfTheWeights) {
  EXPECT_EQ(get32(good_, 8), 2u) << "the writer writes format version 2";
  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(good_.data(), good_.size());
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->formatVersion(), 2u);
  EXPECT_TRUE(r->weightsVerified());
  const Manifest &m = r->manifest();
  ASSERT_TRUE(m.weightsDigest.has_value());
  EXPECT_EQ(m.weightsDigest->algorithm, "xxh3-128");
  uint8_t want[16];
  xxh3_128(weights_.data(), weights_.size(), want);
  EXPECT_EQ(m.weightsDigest->hex, hexOf(want, 16));
  // The key sits right before content_hash, as an object.
  EXPECT_NE(m.json.find("\"weights_digest\": {"), std::string::npos) << m.json;
  EXPECT_LT(m.json.rfind("\"weights_digest\""),
            m.json.rfind("\"content_hash\""));
  // No weights, no digest.
  std::vector<uint8_t> plain =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("add"));
  StatusOr<ArtifactReader> p =
      ArtifactReader::fromMemory(plain.data(), plain.size());
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->manifest().weightsDigest.has_value());
  EXPECT_FALSE(p->weightsVerified());
}

TEST_F(WeightsDigest, ContentHashSkipsTheWeightsSection) {
  // By hand: SHA-256 of everything but the weights, placeholders in place.
  std::vector<uint8_t> copy = good_;
  std::memset(&copy[32], 0, 32);
  uint32_t pos = get32(good_, 20);
  uint64_t manifestOffset = get64(good_, 64 + 40);
  std::memset(&copy[manifestOffset + pos], '0', 64);
  Sha256 sha;
  sha.update(copy.data(), weightsOffset_);
  sha.update(copy.data() + weightsOffset_ + weights_.size(),
             copy.size() - weightsOffset_ - weights_.size());
  std::string hex = Sha256::hex(sha.finish());
  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(good_.data(), good_.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->contentHash(), hex);
  // And the independent encoder reproduces the writer byte for byte.
  EXPECT_EQ(encode(decode(good_)), good_);
}

TEST_F(WeightsDigest, EveryFlippedByteIsRefusedWeightsIncluded) {
  size_t inWeights = 0;
  for (size_t i = 0; i < good_.size(); ++i) {
    std::vector<uint8_t> bad = good_;
    bad[i] ^= uint8_t(1u << (i % 8));
    StatusOr<ArtifactReader> r =
        ArtifactReader::fromMemory(bad.data(), bad.size());
    ASSERT_FALSE(r.ok()) << "flipping byte " << i << " went unnoticed";
    if (i >= 8 && i < 12) {
      EXPECT_TRUE(r.code() == StatusCode::kUnsupportedVersion ||
                  r.code() == StatusCode::kCorruptArtifact);
      continue;
    }
    ASSERT_EQ(r.code(), StatusCode::kCorruptArtifact)
        << i << ": " << r.status().toString();
    if (i >= weightsOffset_ && i < weightsOffset_ + weights_.size()) {
      ++inWeights;
      ASSERT_EQ(r.status().info().subject, "weights") << i;
      ASSERT_EQ(r.status().info().index, int64_t(weightsOffset_));
      ASSERT_NE(r.status().message().find("weights digest mismatch"),
                std::string::npos)
          << r.status().toString();
    }
  }
  EXPECT_EQ(inWeights, weights_.size());
}

TEST_F(WeightsDigest, DamagedWeightsThroughModuleLoadAndOpen) {
  std::vector<uint8_t> bad = good_;
  bad[weightsOffset_ + weights_.size() - 1] ^= 0x80;
  StatusOr<Module> m = Module::load(bad.data(), bad.size());
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.code(), StatusCode::kCorruptArtifact);
  EXPECT_EQ(m.status().info().subject, "weights");
  std::string path = tempDir() + "/damaged-weights.sitsm";
  writeBytes(path, bad);
  StatusOr<ArtifactReader> r = ArtifactReader::open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().info().subject, "weights");
  EXPECT_NE(r.status().message().find(path), std::string::npos);
  // Verify::kMetadata skips exactly that check ...
  StatusOr<ArtifactReader> meta = ArtifactReader::open(path, Verify::kMetadata);
  ASSERT_TRUE(meta.ok()) << meta.status().toString();
  EXPECT_FALSE(meta->weightsVerified());
  LoadOptions o;
  o.verify = Verify::kMetadata;
  EXPECT_TRUE(Module::load(path, o).ok());
  // ... and nothing else: a damaged manifest is still refused.
  std::vector<uint8_t> badManifest = good_;
  badManifest[get64(good_, 64 + 40) + 3] ^= 1;
  StatusOr<ArtifactReader> rm = ArtifactReader::fromMemory(
      badManifest.data(), badManifest.size(), Verify::kMetadata);
  ASSERT_FALSE(rm.ok());
  EXPECT_EQ(rm.status().info().subject, "content_hash");
  ::unlink(path.c_str());
}

TEST_F(WeightsDigest, DigestMustBePresentExactlyWithWeights) {
  // Dropped (re-sealed, so only the rule catches it).
  RawArtifact a = decode(good_);
  std::string m = a.manifest();
  size_t key = m.rfind("\"weights_digest\"");
  size_t end = m.find("},", key);
  ASSERT_NE(end, std::string::npos);
  m.erase(key, end + 2 - key);
  a.setManifest(m);
  std::vector<uint8_t> dropped = encode(a);
  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(dropped.data(), dropped.size());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.code(), StatusCode::kCorruptArtifact);
  EXPECT_EQ(r.status().info().subject, "weights_digest");
  // Present without a weights section.
  std::vector<uint8_t> plain =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("add"));
  std::vector<uint8_t> extra = patchManifest(
      plain, "\"content_hash\"",
      "\"weights_digest\": {\"algorithm\": \"xxh3-128\", \"hex\": \"" +
          std::string(32, 'a') + "\"}, \"content_hash\"");
  StatusOr<ArtifactReader> e =
      ArtifactReader::fromMemory(extra.data(), extra.size());
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().info().subject, "weights_digest");
  // A digest of another algorithm, or not 32 lowercase hex digits.
  std::vector<uint8_t> sha1 = patchManifest(good_, "xxh3-128", "sha1");
  StatusOr<ArtifactReader> s =
      ArtifactReader::fromMemory(sha1.data(), sha1.size());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().info().subject, "weights_digest.algorithm");
  std::string digest = ArtifactReader::fromMemory(good_.data(), good_.size())
                           ->manifest()
                           .weightsDigest->hex;
  std::string upper = digest;
  for (char &c : upper)
    c = char(std::toupper(static_cast<unsigned char>(c)));
  if (upper != digest) {
    // (encode() rewrites the digest from the weights; patch after it.)
    std::vector<uint8_t> bad = good_;
    uint64_t mo = get64(good_, 64 + 40);
    std::string text(bad.begin() + long(mo),
                     bad.begin() + long(mo + get64(good_, 64 + 48)));
    size_t at = text.find(digest);
    std::memcpy(&bad[mo + at], upper.data(), 32);
    StatusOr<ArtifactReader> u =
        ArtifactReader::fromMemory(bad.data(), bad.size());
    ASSERT_FALSE(u.ok());
    EXPECT_EQ(u.code(), StatusCode::kCorruptArtifact);
  }
  // The writer owns the key: a caller's value is replaced.
  std::vector<uint8_t> owned = writeArtifact(
      manifestJson({entryJson("main", {{"weights", "weights", "i8", {-1}, {}},
                                       {"input", "x", "f32", {4}, {}},
                                       {"output", "y", "f32", {4}, {}}})},
                   {"+sse2"}, hostTriple(),
                   ", \"weights_digest\": {\"algorithm\": \"md5\"}"),
      code_, &weights_);
  EXPECT_EQ(owned, good_);
}

TEST_F(WeightsDigest, Version1FilesStillRead) {
  // A version 1 file: no weights_digest, one SHA-256 over the whole file.
  RawArtifact a = decode(good_);
  std::string m = a.manifest();
  size_t key = m.rfind("\"weights_digest\"");
  m.erase(key, m.find("},", key) + 2 - key);
  size_t fv = m.find("\"format_version\": 2");
  ASSERT_NE(fv, std::string::npos);
  m.replace(fv, 19, "\"format_version\": 1");
  a.setManifest(m);
  a.version = 1;
  std::vector<uint8_t> v1 = encode(a);
  StatusOr<ArtifactReader> r = ArtifactReader::fromMemory(v1.data(), v1.size());
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->formatVersion(), 1u);
  EXPECT_TRUE(r->weightsVerified()) << "covered by the content hash";
  // Its hash covers the weights: damage there is a content hash mismatch,
  // also with Verify::kMetadata (version 1 has nothing cheaper).
  std::vector<uint8_t> bad = v1;
  bad[weightsOffset_ + 10] ^= 4;
  for (Verify v : {Verify::kFull, Verify::kMetadata}) {
    StatusOr<ArtifactReader> b =
        ArtifactReader::fromMemory(bad.data(), bad.size(), v);
    ASSERT_FALSE(b.ok());
    EXPECT_EQ(b.status().info().subject, "content_hash");
  }
  // A version 1 header over a version 2 hash is refused, and the reverse.
  std::vector<uint8_t> mixed = good_;
  put32(mixed, 8, 1);
  EXPECT_EQ(ArtifactReader::fromMemory(mixed.data(), mixed.size()).code(),
            StatusCode::kCorruptArtifact);
  EXPECT_EQ(kOldestArtifactFormatVersion, 1u);
}

//===----------------------------------------------------------------------===//
// Streamed sections
//===----------------------------------------------------------------------===//

std::string writeTemp(const std::string &name,
                      const std::vector<uint8_t> &bytes) {
  std::string path = tempDir() + "/" + name;
  writeBytes(path, bytes);
  return path;
}

/// A SectionReader over `bytes`, in pieces of `piece` bytes at most.
SectionReader readerOf(std::shared_ptr<std::vector<uint8_t>> bytes,
                       size_t piece, int *calls = nullptr) {
  auto pos = std::make_shared<size_t>(0);
  return [bytes, piece, pos, calls](uint8_t *buffer,
                                    size_t capacity) -> StatusOr<size_t> {
    if (calls)
      ++*calls;
    size_t n = std::min({capacity, piece, bytes->size() - *pos});
    std::memcpy(buffer, bytes->data() + *pos, n);
    *pos += n;
    return n;
  };
}

TEST_F(WeightsDigest, FileAndReaderSourcesGiveTheSameBytes) {
  std::string wpath = writeTemp("weights.bin", weights_);
  std::string manifest = anyWeightsManifest();
  auto shared = std::make_shared<std::vector<uint8_t>>(weights_);
  for (int variant = 0; variant < 4; ++variant) {
    ArtifactWriter w;
    SITS_ASSERT_OK(w.setManifest(manifest));
    SITS_ASSERT_OK(w.addSection("code.cpu", code_.data(), code_.size()));
    if (variant == 0)
      SITS_ASSERT_OK(w.addSectionFromFile("weights", wpath));
    else if (variant == 1)
      SITS_ASSERT_OK(w.addSectionFromReader("weights", readerOf(shared, 1000),
                                            int64_t(weights_.size())));
    else if (variant == 2)
      SITS_ASSERT_OK(w.addSectionFromReader("weights", readerOf(shared, 777)));
    else
      SITS_ASSERT_OK(w.addSectionFromReader("weights", readerOf(shared, 1)));
    ArtifactInfo info;
    StatusOr<std::vector<uint8_t>> bytes = w.serialize(&info);
    ASSERT_TRUE(bytes.ok()) << variant << ": " << bytes.status().toString();
    EXPECT_EQ(*bytes, good_) << "variant " << variant;
    EXPECT_EQ(info.fileSize, good_.size());
    EXPECT_EQ(info.sections.back().size, weights_.size());
  }
  // write() from a file equals serialize() from memory.
  ArtifactWriter w;
  SITS_ASSERT_OK(w.setManifest(manifest));
  SITS_ASSERT_OK(w.addSection("code.cpu", code_.data(), code_.size()));
  SITS_ASSERT_OK(w.addSectionFromFile("weights", wpath));
  SITS_ASSERT_OK(w.addSectionFromFile("device.sm_90", wpath));
  std::string out = tempDir() + "/streamed.sitsm";
  StatusOr<ArtifactInfo> info = w.write(out);
  ASSERT_TRUE(info.ok()) << info.status().toString();
  ArtifactWriter mem;
  SITS_ASSERT_OK(mem.setManifest(manifest));
  SITS_ASSERT_OK(mem.addSection("code.cpu", code_.data(), code_.size()));
  SITS_ASSERT_OK(mem.addSection("weights", weights_.data(), weights_.size()));
  SITS_ASSERT_OK(
      mem.addSection("device.sm_90", weights_.data(), weights_.size()));
  StatusOr<std::vector<uint8_t>> expected = mem.serialize();
  ASSERT_TRUE(expected.ok());
  EXPECT_EQ(readBytes(out), *expected);
  EXPECT_EQ(info->contentHash, ArtifactReader::open(out)->contentHash());
  // A file source can be written again; it is read afresh.
  EXPECT_TRUE(w.write(out).ok());
  ::unlink(out.c_str());
  ::unlink(wpath.c_str());
}

TEST_F(WeightsDigest, StreamedSourcesAreChecked) {
  std::string manifest = anyWeightsManifest();
  auto shared = std::make_shared<std::vector<uint8_t>>(weights_);
  auto writer = [&] {
    ArtifactWriter w;
    EXPECT_TRUE(w.setManifest(manifest).ok());
    EXPECT_TRUE(w.addSection("code.cpu", code_.data(), code_.size()).ok());
    return w;
  };
  {
    // The reader runs once.
    ArtifactWriter w = writer();
    int calls = 0;
    SITS_ASSERT_OK(
        w.addSectionFromReader("weights", readerOf(shared, 4096, &calls)));
    EXPECT_TRUE(w.serialize().ok());
    EXPECT_GT(calls, 0);
    SITS_EXPECT_CODE(w.serialize().status(), StatusCode::kInvalidArgument);
  }
  {
    // A reader that produces another size than announced.
    ArtifactWriter w = writer();
    SITS_ASSERT_OK(w.addSectionFromReader("weights", readerOf(shared, 4096),
                                          int64_t(weights_.size() + 1)));
    StatusOr<std::vector<uint8_t>> r = w.serialize();
    SITS_EXPECT_CODE(r.status(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("announced"), std::string::npos);
  }
  {
    // A reader's error aborts the write, and no file is left behind.
    ArtifactWriter w = writer();
    SITS_ASSERT_OK(w.addSectionFromReader(
        "weights", [](uint8_t *, size_t) -> StatusOr<size_t> {
          return Status(StatusCode::kIoError, "disk on fire");
        }));
    std::string out = tempDir() + "/never.sitsm";
    StatusOr<ArtifactInfo> r = w.write(out);
    SITS_EXPECT_CODE(r.status(), StatusCode::kIoError);
    EXPECT_EQ(::access(out.c_str(), F_OK), -1);
  }
  {
    // Unknown size: checked against the declared size once streamed.
    manifest = anyWeightsManifest(int64_t(weights_.size()) + 8);
    ArtifactWriter w = writer();
    SITS_ASSERT_OK(w.addSectionFromReader("weights", readerOf(shared, 4096)));
    StatusOr<std::vector<uint8_t>> r = w.serialize();
    SITS_EXPECT_CODE(r.status(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("declares"), std::string::npos);
    manifest = anyWeightsManifest();
  }
  {
    // A file that changes size after it was added.
    std::vector<uint8_t> grown = weights_;
    std::string path = writeTemp("changing.bin", weights_);
    ArtifactWriter w = writer();
    SITS_ASSERT_OK(w.addSectionFromFile("weights", path));
    grown.push_back(1);
    writeBytes(path, grown);
    SITS_EXPECT_CODE(w.serialize().status(), StatusCode::kIoError);
    ::unlink(path.c_str());
    SITS_EXPECT_CODE(w.serialize().status(), StatusCode::kIoError);
  }
  {
    ArtifactWriter w = writer();
    SITS_EXPECT_CODE(w.addSectionFromFile("weights", tempDir() + "/missing"),
                     StatusCode::kNotFound);
    SITS_EXPECT_CODE(w.addSectionFromFile("device.x", tempDir()),
                     StatusCode::kIoError);
    // Code is inspected by the writer: memory only. Unknown sizes only for
    // the weights, which come last.
    SITS_EXPECT_CODE(
        w.addSectionFromReader("code.gpu", readerOf(shared, 1), 10),
        StatusCode::kInvalidArgument);
    SITS_EXPECT_CODE(w.addSectionFromReader("device.x", readerOf(shared, 1)),
                     StatusCode::kInvalidArgument);
    SITS_EXPECT_CODE(w.addSectionFromReader("device.x", nullptr, 1),
                     StatusCode::kInvalidArgument);
  }
}

/// A PlacedWeightsFile in the test directory holding `placed` at the
/// weights' place and `reserved` bytes of room past them.
PlacedWeightsFile placedFile(const std::vector<uint8_t> &placed,
                             size_t reserved = 0) {
  StatusOr<PlacedWeightsFile> file = PlacedWeightsFile::create(tempDir());
  EXPECT_TRUE(file.ok()) << file.status().toString();
  std::vector<uint8_t> bytes(placed);
  bytes.resize(placed.size() + reserved, 0xa5);
  EXPECT_EQ(::pwrite(file->fd(), bytes.data(), bytes.size(),
                     off_t(PlacedWeightsFile::kWeightsOffset)),
            ssize_t(bytes.size()));
  return std::move(*file);
}

TEST_F(WeightsDigest, PlacedWeightsAreCompletedInTheirFile) {
  // The first 4000 bytes already in the file (with reserved room after
  // them), the other 2000 added as the weights section.
  std::vector<uint8_t> head(weights_.begin(), weights_.begin() + 4000);
  std::vector<uint8_t> tail(weights_.begin() + 4000, weights_.end());
  PlacedWeightsFile file = placedFile(head, 3 * 4096);
  ArtifactWriter w;
  SITS_ASSERT_OK(w.setManifest(anyWeightsManifest(int64_t(weights_.size()))));
  SITS_ASSERT_OK(w.addSection("code.cpu", code_.data(), code_.size()));
  SITS_ASSERT_OK(w.addSection("weights", tail.data(), tail.size()));
  std::string out = tempDir() + "/placed.sitsm";
  StatusOr<ArtifactInfo> info = w.writeAround(out, file, head.size());
  ASSERT_TRUE(info.ok()) << info.status().toString();
  EXPECT_TRUE(file.named());
  // Every byte verifies; the weights come first, at their place, and hold
  // what a plain write holds, under the same digest.
  StatusOr<ArtifactReader> r = ArtifactReader::open(out);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_TRUE(r->weightsVerified());
  EXPECT_EQ(r->contentHash(), info->contentHash);
  std::vector<uint8_t> bytes = readBytes(out);
  EXPECT_EQ(bytes.size(), info->fileSize);
  ASSERT_EQ(info->sections.front().name, "weights");
  EXPECT_EQ(info->sections.front().offset, PlacedWeightsFile::kWeightsOffset);
  EXPECT_EQ(info->sections.front().size, weights_.size());
  EXPECT_TRUE(std::equal(weights_.begin(), weights_.end(),
                         bytes.begin() + PlacedWeightsFile::kWeightsOffset));
  StatusOr<ArtifactReader> plain =
      ArtifactReader::fromMemory(good_.data(), good_.size());
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(r->manifest().weightsDigest->hex,
            plain->manifest().weightsDigest->hex);
  EXPECT_TRUE(Module::load(out).ok());
  // It is named once.
  SITS_EXPECT_CODE(w.writeAround(out, file, head.size()).status(),
                   StatusCode::kInvalidArgument);
  ::unlink(out.c_str());
}

TEST_F(WeightsDigest, PlacedWeightsAloneOrRefused) {
  std::string out = tempDir() + "/placed-alone.sitsm";
  {
    // All the weights placed, no weights section added.
    PlacedWeightsFile file = placedFile(weights_);
    ArtifactWriter w;
    SITS_ASSERT_OK(w.setManifest(anyWeightsManifest(int64_t(weights_.size()))));
    SITS_ASSERT_OK(w.addSection("code.cpu", code_.data(), code_.size()));
    StatusOr<ArtifactInfo> info = w.writeAround(out, file, weights_.size());
    ASSERT_TRUE(info.ok()) << info.status().toString();
    StatusOr<ArtifactReader> r = ArtifactReader::open(out);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    ::unlink(out.c_str());
  }
  auto refused = [&](int64_t declared, size_t placed, bool unknownTail,
                     StatusCode want) {
    PlacedWeightsFile file = placedFile(weights_);
    ArtifactWriter w;
    SITS_ASSERT_OK(w.setManifest(anyWeightsManifest(declared)));
    SITS_ASSERT_OK(w.addSection("code.cpu", code_.data(), code_.size()));
    if (unknownTail)
      SITS_ASSERT_OK(w.addSectionFromReader(
          "weights",
          readerOf(std::make_shared<std::vector<uint8_t>>(weights_), 100)));
    SITS_EXPECT_CODE(w.writeAround(out, file, placed).status(), want);
    EXPECT_FALSE(file.named());
    // Nothing appears at the path.
    struct stat st;
    EXPECT_NE(::stat(out.c_str(), &st), 0);
  };
  // Entry points declaring another size.
  refused(int64_t(weights_.size()) + 1, weights_.size(), false,
          StatusCode::kInvalidArgument);
  // More bytes announced than the file holds.
  refused(-1, weights_.size() + 10000, false, StatusCode::kInvalidArgument);
  // The rest of unknown size: the sections after it could not be laid out.
  refused(-1, 100, true, StatusCode::kInvalidArgument);
}

} // namespace
