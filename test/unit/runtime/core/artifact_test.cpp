//===- artifact_test.cpp - Writer/reader round trips and the schema
//--------===//
#include "core_test_util.h"
#include "json.h"

#include <chrono>
#include <sys/stat.h>

using namespace sits::runtime;
using namespace sits::runtime::test;

namespace {

TEST(Artifact, RoundTripThroughMemory) {
  std::vector<uint8_t> code = kernelBytes("add");
  std::vector<uint8_t> weights(10000);
  for (size_t i = 0; i < weights.size(); ++i)
    weights[i] = uint8_t(i * 7);
  std::string manifest = manifestJson(
      {addEntry(), entryJson("scale", {{"input", "x", "f32", {-1}, {}},
                                       {"output", "out", "f32", {-1}, {}}})},
      {"+sse2", "-avx512f"}, hostTriple(),
      ", \"compiler\": {\"pipeline\": \"cpu-default\"}");
  ArtifactInfo info;
  std::vector<uint8_t> bytes = writeArtifact(manifest, code, &weights, &info);
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(info.fileSize, bytes.size());

  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok()) << r.status().toString();
  const Manifest &m = r->manifest();
  EXPECT_EQ(m.formatVersion, kArtifactFormatVersion);
  EXPECT_EQ(m.sitsVersion, SITS_TEST_VERSION);
  EXPECT_EQ(m.llvmVersion, llvmVersion());
  EXPECT_EQ(m.target.name, "cpu");
  EXPECT_EQ(m.target.triple, hostTriple());
  EXPECT_EQ(m.target.cpu, "generic");
  EXPECT_EQ(m.target.features, (std::vector<std::string>{"+sse2", "-avx512f"}));
  ASSERT_EQ(m.entryPoints.size(), 2u);
  const EntryPointSpec &ep = m.entryPoints[0];
  EXPECT_EQ(ep.name, "main");
  EXPECT_EQ(ep.symbol, "sits_entry_main"); // filled in by the writer
  ASSERT_EQ(ep.args.size(), 3u);
  EXPECT_EQ(ep.args[0].role, ArgRole::kInput);
  EXPECT_EQ(ep.args[0].name, "x");
  EXPECT_EQ(ep.args[0].dtype, DType::kF32);
  EXPECT_EQ(ep.args[0].shape, (std::vector<int64_t>{-1, 4}));
  EXPECT_EQ(ep.args[0].dimNames, (std::vector<std::string>{"batch", ""}));
  EXPECT_EQ(ep.args[2].role, ArgRole::kOutput);
  EXPECT_EQ(ep.inputs().size(), 2u);
  EXPECT_EQ(ep.outputs().size(), 1u);
  EXPECT_EQ(m.entryPoints[1].symbol, "sits_entry_scale");
  EXPECT_EQ(m.contentHash, r->contentHash());
  EXPECT_EQ(m.contentHash, info.contentHash);
  EXPECT_NE(m.json.find("\"pipeline\": \"cpu-default\""), std::string::npos)
      << "unknown manifest keys are kept";

  // Sections: the bytes come back, 64-byte aligned; weights page-aligned.
  std::optional<ByteSpan> c = r->section("code.cpu");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(std::vector<uint8_t>(c->data, c->data + c->size), code);
  std::optional<ByteSpan> w = r->section("weights");
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(std::vector<uint8_t>(w->data, w->data + w->size), weights);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(w->data) % 64, 0u);
  for (const SectionInfo &s : r->sections())
    EXPECT_EQ(s.offset % 64, 0u) << s.name;
  EXPECT_EQ(r->sections().front().name, "manifest");
  EXPECT_EQ(r->sections().back().name, "weights");
  EXPECT_EQ(r->sections().back().offset % 4096, 0u);
  EXPECT_FALSE(r->section("device.sm_90").has_value());
}

TEST(Artifact, RoundTripThroughAFile) {
  std::vector<uint8_t> code = kernelBytes("add");
  ArtifactWriter w;
  SITS_ASSERT_OK(w.setManifest(manifestJson({addEntry()})));
  SITS_ASSERT_OK(w.addSection("code.cpu", code.data(), code.size()));
  std::string path = tempDir() + "/roundtrip.sitsm";
  StatusOr<ArtifactInfo> info = w.write(path);
  ASSERT_TRUE(info.ok()) << info.status().toString();
  std::vector<uint8_t> onDisk = readBytes(path);
  EXPECT_EQ(onDisk.size(), info->fileSize);
  StatusOr<std::vector<uint8_t>> inMemory = w.serialize();
  ASSERT_TRUE(inMemory.ok());
  EXPECT_EQ(onDisk, *inMemory) << "write() and serialize() agree";

  StatusOr<ArtifactReader> r = ArtifactReader::open(path);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->contentHash(), info->contentHash);
  EXPECT_EQ(r->fileSize(), onDisk.size());
  // No temporary files are left next to the artifact.
  EXPECT_EQ(std::system(("ls " + path + ".tmp.* >/dev/null 2>&1").c_str()) == 0,
            false);
}

// A file at the destination is replaced whole. One still open keeps its
// contents (the old file goes only when its last user does), and a FIFO in
// its place is replaced without being opened (which would block).
TEST(Artifact, WritingReplacesWhatThePathNamed) {
  std::vector<uint8_t> code = kernelBytes("add");
  std::string path = tempDir() + "/replaced.sitsm";
  ArtifactWriter first;
  SITS_ASSERT_OK(first.setManifest(manifestJson({addEntry()})));
  SITS_ASSERT_OK(first.addSection("code.cpu", code.data(), code.size()));
  ASSERT_TRUE(first.write(path).ok());
  StatusOr<ArtifactReader> old = ArtifactReader::open(path);
  ASSERT_TRUE(old.ok()) << old.status().toString();
  std::string oldHash = old->contentHash();

  std::vector<uint8_t> weights(1 << 20, 7);
  ArtifactWriter second;
  SITS_ASSERT_OK(second.setManifest(manifestJson({addEntry()})));
  SITS_ASSERT_OK(second.addSection("code.cpu", code.data(), code.size()));
  SITS_ASSERT_OK(second.addSection("weights", weights.data(), weights.size()));
  StatusOr<ArtifactInfo> info = second.write(path);
  ASSERT_TRUE(info.ok()) << info.status().toString();
  StatusOr<ArtifactReader> now = ArtifactReader::open(path);
  ASSERT_TRUE(now.ok()) << now.status().toString();
  EXPECT_EQ(now->contentHash(), info->contentHash);
  EXPECT_NE(now->contentHash(), oldHash);
  EXPECT_EQ(old->contentHash(), oldHash) << "the open one is unchanged";

  std::string fifo = tempDir() + "/fifo.sitsm";
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ASSERT_TRUE(second.write(fifo).ok());
  struct stat st;
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(uint64_t(st.st_size), info->fileSize);
}

TEST(Artifact, WriterOutputMatchesTheIndependentEncoder) {
  // The test's own encoder follows ARTIFACT.md; re-encoding what the writer
  // produced must give the same bytes, hash included.
  std::vector<uint8_t> code = kernelBytes("weights");
  std::vector<uint8_t> weights(16, 1);
  std::string manifest =
      manifestJson({entryJson("main", {{"weights", "weights", "i8", {16}, {}},
                                       {"input", "x", "f32", {4}, {}},
                                       {"output", "y", "f32", {4}, {}}})});
  std::vector<uint8_t> bytes = writeArtifact(manifest, code, &weights);
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(encode(decode(bytes)), bytes);
}

TEST(Artifact, HashIsOverTheWholeFile) {
  std::vector<uint8_t> bytes =
      writeArtifact(manifestJson({addEntry()}), kernelBytes("add"));
  // Recompute by hand: zero the header hash and the manifest's 64 digits.
  std::vector<uint8_t> copy = bytes;
  std::memset(&copy[32], 0, 32);
  uint32_t pos = get32(bytes, 20);
  uint64_t manifestOffset = get64(bytes, 64 + 40);
  std::memset(&copy[manifestOffset + pos], '0', 64);
  Sha256 sha;
  sha.update(copy.data(), copy.size());
  std::string hex = Sha256::hex(sha.finish());
  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->contentHash(), hex);
  EXPECT_EQ(
      std::string(reinterpret_cast<const char *>(&bytes[manifestOffset + pos]),
                  64),
      hex);
}

TEST(Artifact, WriterFillsVersionsButKeepsExplicitOnes) {
  std::string manifest = manifestJson({addEntry()}, {}, hostTriple(),
                                      ", \"llvm_version\": \"22.1.8-custom\"");
  std::vector<uint8_t> bytes = writeArtifact(manifest, kernelBytes("add"));
  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(bytes.data(), bytes.size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->manifest().llvmVersion, "22.1.8-custom");
  EXPECT_EQ(r->manifest().sitsVersion, sitsVersion());
  EXPECT_TRUE(r->manifest().target.features.empty());
}

TEST(Artifact, WriterInfersTheTargetNameFromTheCodeSection) {
  std::vector<uint8_t> code = kernelBytes("add");
  ArtifactWriter w;
  SITS_ASSERT_OK(w.setManifest("{\"target\": {\"triple\": \"" + hostTriple() +
                               "\"}, \"entry_points\": [" + addEntry() + "]}"));
  SITS_ASSERT_OK(w.addSection("code.host", code.data(), code.size()));
  StatusOr<std::vector<uint8_t>> bytes = w.serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(bytes->data(), bytes->size());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->manifest().target.name, "host");
  EXPECT_EQ(r->manifest().target.cpu, "generic");
}

Status writeWith(const std::string &manifest, const std::vector<uint8_t> &code,
                 const std::string &codeName = "code.cpu",
                 const std::vector<uint8_t> *weights = nullptr) {
  ArtifactWriter w;
  Status s = w.setManifest(manifest);
  if (!s.ok())
    return s;
  if (!code.empty())
    SITS_RETURN_IF_ERROR(w.addSection(codeName, code.data(), code.size()));
  if (weights)
    SITS_RETURN_IF_ERROR(
        w.addSection("weights", weights->data(), weights->size()));
  StatusOr<std::vector<uint8_t>> out = w.serialize();
  return out.ok() ? Status::OK() : out.status();
}

TEST(Artifact, WriterRefusesInconsistentInput) {
  std::vector<uint8_t> code = kernelBytes("add");
  auto expectInvalid = [](const Status &s, const std::string &fragment) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.toString();
  };
  expectInvalid(writeWith("{not json", code), "not valid JSON");
  expectInvalid(writeWith("[1, 2]", code), "JSON object");
  expectInvalid(writeWith(manifestJson({addEntry()}), code, "code.gpu"),
                "no 'code.cpu' section");
  expectInvalid(
      writeWith(manifestJson({addEntry("main", "sits_entry_nope")}), code),
      "does not export a function named 'sits_entry_nope'");
  std::vector<uint8_t> garbage(100, 0x42);
  expectInvalid(writeWith(manifestJson({addEntry()}), garbage),
                "not a loadable shared object");
  expectInvalid(
      writeWith(manifestJson({addEntry()}, {}, "aarch64-unknown-linux-gnu"),
                code),
      "holds " + hostCpuInfo().arch + " code");
  std::string weightsEntry =
      entryJson("main", {{"weights", "w", "i8", {16}, {}},
                         {"input", "x", "f32", {4}, {}},
                         {"output", "y", "f32", {4}, {}}});
  std::vector<uint8_t> wcode = kernelBytes("weights");
  expectInvalid(writeWith(manifestJson({weightsEntry}), wcode),
                "no weights section");
  std::vector<uint8_t> eight(8);
  expectInvalid(
      writeWith(manifestJson({weightsEntry}), wcode, "code.cpu", &eight),
      "declares 16 bytes of weights");
  expectInvalid(writeWith("{\"format_version\": 7, \"target\": {}}", code),
                "format_version");
  // Schema errors surface as the writer's InvalidArgument with the field.
  Status s = writeWith(
      manifestJson({entryJson("main", {{"input", "x", "f99", {4}, {}}})}),
      code);
  expectInvalid(s, "unknown element type \"f99\"");
  EXPECT_EQ(s.info().subject, "entry_points[0].args[0].dtype");

  ArtifactWriter w;
  expectInvalid(w.addSection("Code.CPU", code.data(), code.size()),
                "[a-z0-9_.-]");
  expectInvalid(w.addSection("manifest", code.data(), code.size()),
                "setManifest");
  SITS_ASSERT_OK(w.addSection("code.cpu", code.data(), code.size()));
  expectInvalid(w.addSection("code.cpu", code.data(), code.size()),
                "already added");
  expectInvalid(w.addSection(std::string(40, 'a'), code.data(), code.size()),
                "1-39");
  expectInvalid(w.serialize().status(), "no manifest");
}

TEST(Artifact, DeviceSectionsTravelUntouched) {
  std::vector<uint8_t> code = kernelBytes("add");
  std::vector<uint8_t> ptx = {'/', '/', ' ', 'P', 'T', 'X'};
  ArtifactWriter w;
  SITS_ASSERT_OK(w.setManifest(manifestJson({addEntry()})));
  SITS_ASSERT_OK(w.addSection("code.cpu", code.data(), code.size()));
  SITS_ASSERT_OK(w.addSection("device.sm_90", ptx.data(), ptx.size()));
  StatusOr<std::vector<uint8_t>> bytes = w.serialize();
  ASSERT_TRUE(bytes.ok());
  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(bytes->data(), bytes->size());
  ASSERT_TRUE(r.ok());
  std::optional<ByteSpan> d = r->section("device.sm_90");
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(std::vector<uint8_t>(d->data, d->data + d->size), ptx);
}

//===----------------------------------------------------------------------===//
// The manifest schema
//===----------------------------------------------------------------------===//

std::string validManifest() {
  return "{\"format_version\": 1, \"sits_version\": \"0.1.0\", "
         "\"llvm_version\": "
         "\"22.1.8\", \"target\": {\"name\": \"cpu\", \"triple\": "
         "\"x86_64-unknown-linux-gnu\", \"cpu\": \"generic\", \"features\": "
         "[\"+sse2\"]}, \"entry_points\": [{\"name\": \"main\", \"symbol\": "
         "\"sits_entry_main\", \"args\": [{\"role\": \"input\", \"name\": "
         "\"x\", "
         "\"dtype\": \"f32\", \"shape\": [-1, 4]}, {\"role\": \"output\", "
         "\"name\": \"y\", \"dtype\": \"bool\", \"shape\": []}]}], "
         "\"content_hash\": \"" +
         std::string(64, 'a') + "\"}";
}

void expectSchemaError(const std::string &from, const std::string &to,
                       const std::string &field) {
  std::string m = validManifest();
  size_t at = m.find(from);
  ASSERT_NE(at, std::string::npos) << from;
  m.replace(at, from.size(), to);
  StatusOr<Manifest> r = parseManifest(m);
  ASSERT_FALSE(r.ok()) << "accepted: " << m;
  EXPECT_EQ(r.code(), StatusCode::kCorruptArtifact);
  EXPECT_EQ(r.status().info().subject, field) << r.status().toString();
}

TEST(Manifest, ValidOneParses) {
  StatusOr<Manifest> m = parseManifest(validManifest());
  ASSERT_TRUE(m.ok()) << m.status().toString();
  EXPECT_EQ(m->entryPoints[0].args[1].dtype, DType::kBool);
  EXPECT_EQ(m->entryPoints[0].args[1].rank(), 0);
  EXPECT_EQ(m->target.arch(), "x86_64");
  EXPECT_EQ(m->codeSectionName(), "code.cpu");
  EXPECT_NE(m->findEntryPoint("main"), nullptr);
  EXPECT_EQ(m->findEntryPoint("nope"), nullptr);
}

TEST(Manifest, EveryFieldIsChecked) {
  expectSchemaError("\"format_version\": 1", "\"format_version\": \"1\"",
                    "format_version");
  expectSchemaError("\"sits_version\": \"0.1.0\", ", "", "sits_version");
  expectSchemaError("\"llvm_version\": \"22.1.8\"", "\"llvm_version\": 22",
                    "llvm_version");
  expectSchemaError("\"name\": \"cpu\"", "\"name\": \"CPU!\"", "target.name");
  expectSchemaError("\"triple\": \"x86_64-unknown-linux-gnu\"",
                    "\"triple\": \"\"", "target.triple");
  expectSchemaError("[\"+sse2\"]", "[\"sse2\"]", "target.features");
  expectSchemaError("[\"+sse2\"]", "\"+sse2\"", "target.features");
  expectSchemaError("\"entry_points\": [", "\"entry_points\": [], \"x\": [",
                    "entry_points");
  expectSchemaError("\"name\": \"main\"", "\"name\": \"main-1\"",
                    "entry_points[0].name");
  expectSchemaError("\"symbol\": \"sits_entry_main\"", "\"symbol\": \"a b\"",
                    "entry_points[0].symbol");
  expectSchemaError("\"role\": \"input\"", "\"role\": \"inout\"",
                    "entry_points[0].args[0].role");
  expectSchemaError("\"dtype\": \"f32\"", "\"dtype\": \"float\"",
                    "entry_points[0].args[0].dtype");
  expectSchemaError("[-1, 4]", "[-2, 4]", "entry_points[0].args[0].shape");
  expectSchemaError("[-1, 4]", "[1.5, 4]", "entry_points[0].args[0].shape");
  expectSchemaError("\"shape\": [-1, 4]",
                    "\"shape\": [-1, 4], \"dim_names\": [\"b\"]",
                    "entry_points[0].args[0].dim_names");
  expectSchemaError("\"name\": \"y\"", "\"name\": \"x\"",
                    "entry_points[0].args[1].name");
  expectSchemaError(
      "{\"role\": \"input\", \"name\": \"x\"",
      "{\"role\": \"output\", \"name\": \"x0\", \"dtype\": \"f32\", "
      "\"shape\": []}, {\"role\": \"input\", \"name\": \"x\"",
      "entry_points[0].args[1]");
  expectSchemaError(
      "{\"role\": \"input\", \"name\": \"x\", \"dtype\": \"f32\"",
      "{\"role\": \"weights\", \"name\": \"x\", \"dtype\": \"f32\"",
      "entry_points[0].args[0]");
  // The status argument: last, one, an i32 scalar with 1+ messages.
  const std::string status = "{\"role\": \"status\", \"name\": \"s\", "
                             "\"dtype\": \"i32\", \"shape\": [], "
                             "\"messages\": [\"m\"]}";
  const std::string firstArg = "{\"role\": \"input\", \"name\": \"x\"";
  expectSchemaError(firstArg, status + ", " + firstArg,
                    "entry_points[0].args[1]"); // out of order
  expectSchemaError(firstArg,
                    "{\"role\": \"status\", \"name\": \"s\", \"dtype\": "
                    "\"i64\", \"shape\": [], \"messages\": [\"m\"]}, " +
                        firstArg,
                    "entry_points[0].args[0]");
  expectSchemaError(firstArg,
                    "{\"role\": \"status\", \"name\": \"s\", \"dtype\": "
                    "\"i32\", \"shape\": [], \"messages\": []}, " +
                        firstArg,
                    "entry_points[0].args[0].messages");
  expectSchemaError(firstArg,
                    "{\"role\": \"status\", \"name\": \"s\", \"dtype\": "
                    "\"i32\", \"shape\": [], \"messages\": [1]}, " +
                        firstArg,
                    "entry_points[0].args[0].messages");
  expectSchemaError("\"shape\": []}]}]",
                    "\"shape\": []}, " + status + ", " + status + "]}]",
                    "entry_points[0].args[3]"); // a second status
  expectSchemaError(std::string(64, 'a'), std::string(63, 'a'), "content_hash");
  expectSchemaError(std::string(64, 'a'), std::string(64, 'A'), "content_hash");
}

TEST(Manifest, RejectsDuplicateEntryPointsAndBadText) {
  std::string m = validManifest();
  size_t at = m.find("{\"name\": \"main\"");
  size_t end = m.find("], \"content_hash\"");
  std::string entry = m.substr(at, end - at);
  std::string twice = m;
  twice.insert(end, ", " + entry);
  StatusOr<Manifest> r = parseManifest(twice);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().info().subject, "entry_points[1].name");

  EXPECT_EQ(parseManifest("").code(), StatusCode::kCorruptArtifact);
  EXPECT_EQ(parseManifest("\xff\xfe").code(), StatusCode::kCorruptArtifact);
  EXPECT_EQ(parseManifest("{\"a\": 1, \"a\": 2}").code(),
            StatusCode::kCorruptArtifact);
}

//===----------------------------------------------------------------------===//
// The JSON and SHA-256 internals
//===----------------------------------------------------------------------===//

TEST(Json, ParsesAndPrints) {
  json::Value v;
  std::string err;
  ASSERT_TRUE(json::parse(" {\"a\": [1, -2, 3.5, 1e3, true, false, null], "
                          "\"b\": {\"c\": \"x\\n\\u00e9\\ud83d\\ude00\"}} ",
                          v, err))
      << err;
  EXPECT_EQ(v.find("a")->items()[1].asInt(), -2);
  EXPECT_TRUE(v.find("a")->items()[2].kind() == json::Value::Kind::kDouble);
  EXPECT_DOUBLE_EQ(v.find("a")->items()[3].asDouble(), 1000.0);
  EXPECT_EQ(v.find("b")->find("c")->asString(), "x\n\xc3\xa9\xf0\x9f\x98\x80");
  json::Value back;
  ASSERT_TRUE(json::parse(json::print(v), back, err)) << err;
  EXPECT_EQ(json::print(back), json::print(v));
  EXPECT_EQ(json::print(json::Value::number(2.0)), "2.0\n");
  EXPECT_EQ(json::print(json::Value::integer(9007199254740993LL)),
            "9007199254740993\n");
}

TEST(Json, RejectsHostileInput) {
  json::Value v;
  std::string err;
  for (const char *bad : {"", "{", "[1,]", "{\"a\" 1}", "\"\\x\"", "\"abc",
                          "01", "-", "1.", "1e", "nul", "[1] 2", "\"\\ud800\"",
                          "\"\x01\"", "{\"a\":1,\"a\":2}", "1e999"}) {
    EXPECT_FALSE(json::parse(bad, v, err)) << bad;
  }
  std::string deep(100, '[');
  EXPECT_FALSE(json::parse(deep + std::string(100, ']'), v, err));
  EXPECT_NE(err.find("deeper"), std::string::npos);
  EXPECT_FALSE(json::isValidUtf8("\xc0\x80"));     // overlong
  EXPECT_FALSE(json::isValidUtf8("\xed\xa0\x80")); // surrogate
  EXPECT_TRUE(json::isValidUtf8("\xe2\x82\xac"));
}

TEST(Json, DeepNestingIsAnErrorNotAStackOverflow) {
  json::Value v;
  std::string err;
  for (const char *open : {"[", "{\"k\":"}) {
    std::string text;
    for (int i = 0; i < 1000000; ++i)
      text += open;
    EXPECT_FALSE(json::parse(text, v, err));
    EXPECT_NE(err.find("deeper than 64"), std::string::npos) << err;
  }
  // 65 levels of arrays are the most there may be (depth 0..64).
  EXPECT_TRUE(json::parse(std::string(65, '[') + std::string(65, ']'), v, err))
      << err;
  EXPECT_FALSE(
      json::parse(std::string(66, '[') + std::string(66, ']'), v, err));
}

TEST(Json, ManyKeysTakeNearLinearTime) {
  // The duplicate-key check used to scan the object for every key: 10^5
  // members took tens of seconds, a hostile manifest's denial of service.
  const int n = 100000;
  std::string text = "{";
  for (int i = 0; i < n; ++i)
    text +=
        (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  const auto t0 = std::chrono::steady_clock::now();
  json::Value v;
  std::string err;
  ASSERT_TRUE(json::parse(text + "}", v, err)) << err;
  ASSERT_EQ(v.members().size(), size_t(n));
  EXPECT_EQ(v.members()[12345].first, "k12345"); // the order is kept
  // A duplicate is found however late it comes, and wherever the first is.
  for (int dup : {0, 16, n / 2, n - 1}) {
    EXPECT_FALSE(
        json::parse(text + ",\"k" + std::to_string(dup) + "\":0}", v, err));
    EXPECT_NE(err.find("duplicate key \"k" + std::to_string(dup) + "\""),
              std::string::npos)
        << err;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  EXPECT_LT(seconds, 20.0); // well under 1 s; with the scan, minutes
  // Small objects (the linear scan) and the switch to the index.
  for (int size = 1; size <= 40; ++size) {
    std::string small = "{";
    for (int i = 0; i < size; ++i)
      small += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":1";
    ASSERT_TRUE(json::parse(small + "}", v, err)) << small << ": " << err;
    for (int i = 0; i < size; ++i)
      EXPECT_FALSE(
          json::parse(small + ",\"k" + std::to_string(i) + "\":2}", v, err))
          << size << " " << i;
  }
}

TEST(Sha256, KnownVectorsAndBothPathsAgree) {
  Sha256 abc;
  abc.update("abc", 3);
  EXPECT_EQ(Sha256::hex(abc.finish()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  Sha256 empty;
  EXPECT_EQ(Sha256::hex(empty.finish()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  std::string two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  Sha256 t;
  t.update(two.data(), two.size());
  EXPECT_EQ(Sha256::hex(t.finish()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  std::vector<uint8_t> data(100000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = uint8_t(i * 2654435761u >> 13);
  for (size_t n : {0u, 1u, 55u, 56u, 63u, 64u, 65u, 1000u, 100000u}) {
    Sha256 fast(true), slow(false);
    fast.update(data.data(), n / 3);
    fast.update(data.data() + n / 3, n - n / 3);
    slow.update(data.data(), n);
    EXPECT_EQ(fast.finish(), slow.finish()) << n;
  }
}

} // namespace
