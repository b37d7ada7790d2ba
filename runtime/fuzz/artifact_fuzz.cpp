//===- artifact_fuzz.cpp - Fuzz target: reading hostile .sitsm artifacts
//---===//
//
// The artifact reader is the runtime's hostile-input surface: a .sitsm file
// may come from anywhere. For any bytes, ArtifactReader::fromMemory returns
// (no crash, no hang, no sanitizer report) either kCorruptArtifact /
// kUnsupportedVersion with a message, or a reader whose sections all lie in
// the file and whose manifest is consistent with them; on an accepted
// artifact, checkHostCompatibility (which parses the ELF code section)
// returns a status too.
//
// Random bytes rarely get past the content hash, so the custom mutator is
// structure-aware: it starts from valid artifacts (written in process with
// ArtifactWriter around a synthetic ELF shared object; no corpus needed),
// mutates the manifest text, the header, the section table, the set of
// sections or the ELF bytes, and then (almost always) re-seals the content
// hash, so that the mutated file reaches the checks behind it: the section
// bounds, the manifest's JSON and schema, the weights, the ELF reader.
//
//===----------------------------------------------------------------------===//
#include "fuzz_support.h"
#include "sha256.h"   // internal (runtime/src/support): re-sealing mutants
#include "xxh3_128.h" // internal: the weights digest of re-sealed mutants
// Internal too; by path, as src/core/elf.h would hide the system's <elf.h>.
#include "../src/core/json.h"

#include "sits/runtime/runtime.h"

#include <algorithm>
#include <cstring>
#include <elf.h>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace {

using sits::fuzz::Rng;
using namespace sits::runtime;
namespace json = sits::runtime::json;

//===----------------------------------------------------------------------===//
// A synthetic ELF shared object: what the writer and checkHostCompatibility
// read of one (header, section headers, .dynsym and .dynstr), nothing to
// run. Never loaded.
//===----------------------------------------------------------------------===//

uint16_t hostMachine() {
#if defined(__x86_64__)
  return EM_X86_64;
#elif defined(__aarch64__)
  return EM_AARCH64;
#elif defined(__riscv) && defined(EM_RISCV)
  return EM_RISCV;
#elif defined(__powerpc64__)
  return EM_PPC64;
#elif defined(__s390x__)
  return EM_S390;
#else
  return EM_NONE;
#endif
}

template <typename T> void append(std::vector<uint8_t> &out, const T &v) {
  const auto *p = reinterpret_cast<const uint8_t *>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

std::vector<uint8_t>
syntheticSharedObject(const std::vector<std::string> &exports) {
  // .dynstr: "\0" then the names; a local and an undefined symbol too.
  std::string dynstr(1, '\0');
  std::vector<uint32_t> nameAt;
  std::vector<std::string> names = exports;
  names.push_back("local_helper");
  names.push_back("undefined_import");
  for (const std::string &n : names) {
    nameAt.push_back(uint32_t(dynstr.size()));
    dynstr += n;
    dynstr += '\0';
  }
  const uint8_t text[16] = {0xc3}; // "ret", for the look of it
  const size_t dynstrOff = sizeof(Elf64_Ehdr);
  const size_t dynsymOff = (dynstrOff + dynstr.size() + 7) / 8 * 8;
  const size_t dynsymSize = (names.size() + 1) * sizeof(Elf64_Sym);
  const size_t textOff = dynsymOff + dynsymSize;
  const size_t shOff = (textOff + sizeof(text) + 7) / 8 * 8;

  Elf64_Ehdr eh{};
  std::memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_DYN;
  eh.e_machine = hostMachine();
  eh.e_version = EV_CURRENT;
  eh.e_shoff = shOff;
  eh.e_ehsize = sizeof(Elf64_Ehdr);
  eh.e_shentsize = sizeof(Elf64_Shdr);
  eh.e_shnum = 4; // null, .dynstr, .dynsym, .text

  std::vector<uint8_t> out;
  append(out, eh);
  out.insert(out.end(), dynstr.begin(), dynstr.end());
  out.resize(dynsymOff, 0);
  append(out, Elf64_Sym{});
  for (size_t i = 0; i < names.size(); ++i) {
    Elf64_Sym s{};
    s.st_name = nameAt[i];
    const bool local = names[i] == "local_helper";
    const bool undefined = names[i] == "undefined_import";
    s.st_info = ELF64_ST_INFO(local ? STB_LOCAL : STB_GLOBAL, STT_FUNC);
    s.st_other = STV_DEFAULT;
    s.st_shndx = undefined ? SHN_UNDEF : 3;
    s.st_value = undefined ? 0 : textOff;
    s.st_size = undefined ? 0 : 1;
    append(out, s);
  }
  out.insert(out.end(), text, text + sizeof(text));
  out.resize(shOff, 0);
  Elf64_Shdr sh[4]{};
  sh[1].sh_type = SHT_STRTAB;
  sh[1].sh_offset = dynstrOff;
  sh[1].sh_size = dynstr.size();
  sh[1].sh_addralign = 1;
  sh[2].sh_type = SHT_DYNSYM;
  sh[2].sh_offset = dynsymOff;
  sh[2].sh_size = dynsymSize;
  sh[2].sh_link = 1;
  sh[2].sh_info = 1;
  sh[2].sh_entsize = sizeof(Elf64_Sym);
  sh[2].sh_addralign = 8;
  sh[3].sh_type = SHT_PROGBITS;
  sh[3].sh_flags = SHF_ALLOC | SHF_EXECINSTR;
  sh[3].sh_offset = textOff;
  sh[3].sh_size = sizeof(text);
  sh[3].sh_addralign = 16;
  for (const Elf64_Shdr &h : sh)
    append(out, h);
  return out;
}

//===----------------------------------------------------------------------===//
// Seeds: valid artifacts from the library's writer.
//===----------------------------------------------------------------------===//

std::vector<uint8_t> writeSeed(
    const std::string &manifest,
    const std::vector<std::pair<std::string, std::vector<uint8_t>>> &sections) {
  ArtifactWriter w;
  Status s = w.setManifest(manifest);
  for (const auto &sec : sections)
    if (s.ok())
      s = w.addSection(sec.first, sec.second.data(), sec.second.size());
  StatusOr<std::vector<uint8_t>> bytes =
      s.ok() ? w.serialize() : StatusOr<std::vector<uint8_t>>(s);
  if (!bytes.ok()) {
    std::fprintf(stderr, "artifact_fuzz: cannot write a seed: %s\n",
                 bytes.status().toString().c_str());
    std::abort();
  }
  // The seed must be accepted as it is, or the fuzzer explores nothing.
  StatusOr<ArtifactReader> r =
      ArtifactReader::fromMemory(bytes->data(), bytes->size());
  if (!r.ok()) {
    std::fprintf(stderr, "artifact_fuzz: a seed is refused: %s\n",
                 r.status().toString().c_str());
    std::abort();
  }
  return *bytes;
}

const std::vector<std::vector<uint8_t>> &seeds() {
  static const std::vector<std::vector<uint8_t>> all = [] {
    const std::string triple = hostCpuInfo().arch + "-unknown-linux-gnu";
    const std::string target = "\"target\": {\"triple\": \"" + triple +
                               "\", \"cpu\": \"generic\", \"features\": []}";
    const std::vector<uint8_t> code =
        syntheticSharedObject({"sits_entry_main", "sits_entry_step", "other"});
    std::vector<std::vector<uint8_t>> out;
    // Inputs and outputs with named dynamic dimensions.
    out.push_back(writeSeed(
        "{" + target +
            ", \"entry_points\": [{\"name\": \"main\", \"args\": ["
            "{\"role\": \"input\", \"name\": \"x\", \"dtype\": \"f32\", "
            "\"shape\": [-1, 4], \"dim_names\": [\"batch\", null]}, "
            "{\"role\": \"input\", \"name\": \"y\", \"dtype\": \"bf16\", "
            "\"shape\": [-1, 4], \"dim_names\": [\"batch\", null]}, "
            "{\"role\": \"output\", \"name\": \"z\", \"dtype\": \"f32\", "
            "\"shape\": [-1, 4], \"dim_names\": [\"batch\", null]}]}]}",
        {{"code.cpu", code}}));
    // Weights (4096-aligned section), two entry points, a scalar updated in
    // place, unknown keys, an extra section.
    std::vector<uint8_t> weights(256);
    for (size_t i = 0; i < weights.size(); ++i)
      weights[i] = uint8_t(i * 7);
    out.push_back(writeSeed(
        "{" + target +
            ", \"entry_points\": ["
            "{\"name\": \"main\", \"args\": ["
            "{\"role\": \"weights\", \"name\": \"w\", \"dtype\": \"i8\", "
            "\"shape\": [256]}, "
            "{\"role\": \"input\", \"name\": \"ids\", \"dtype\": \"i64\", "
            "\"shape\": [1, 8]}, "
            "{\"role\": \"output\", \"name\": \"logits\", \"dtype\": \"f16\", "
            "\"shape\": [1, 8, 32]}]}, "
            "{\"name\": \"step\", \"args\": ["
            "{\"role\": \"weights\", \"name\": \"w\", \"dtype\": \"i8\", "
            "\"shape\": [-1]}, "
            "{\"role\": \"input\", \"name\": \"pos\", \"dtype\": \"i32\", "
            "\"shape\": [], "
            "\"updated_in_place\": true}, "
            "{\"role\": \"output\", \"name\": \"done\", \"dtype\": \"bool\", "
            "\"shape\": [2, 3]}]}], "
            "\"compiler\": {\"passes\": [\"a\", \"b\"], \"opt\": 3, \"ratio\": "
            "0.5}}",
        {{"code.cpu", code}, {"weights", weights}, {"notes.txt", {'h', 'i'}}}));
    // GPU code: the device object and a device image section.
    out.push_back(
        writeSeed("{" + target +
                      ", \"device\": {\"kind\": \"cuda\", \"abi\": "
                      "\"mlir-gpu-runtime\", \"chip\": \"sm_90\", "
                      "\"image_format\": \"fatbin\"}, "
                      "\"entry_points\": [{\"name\": \"main\", \"symbol\": "
                      "\"other\", \"args\": ["
                      "{\"role\": \"input\", \"name\": \"a\", \"dtype\": "
                      "\"u8\", \"shape\": [3]}, "
                      "{\"role\": \"output\", \"name\": \"b\", \"dtype\": "
                      "\"u8\", \"shape\": [3]}]}]}",
                  {{"code.cpu", code},
                   {"device.sm_90", std::vector<uint8_t>(100, 0xab)}}));
    return out;
  }();
  return all;
}

//===----------------------------------------------------------------------===//
// The layout (ARTIFACT.md), for mutants: a bounds-checked decoder, an
// encoder and a re-sealer of the content hash.
//===----------------------------------------------------------------------===//

constexpr uint8_t kMagic[8] = {0x89, 'S', 'I', 'T', 'S', 'M', '\r', '\n'};
constexpr size_t kHeader = 64, kEntry = 64;

uint32_t get32(const uint8_t *p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 |
         uint32_t(p[3]) << 24;
}
uint64_t get64(const uint8_t *p) {
  return get32(p) | uint64_t(get32(p + 4)) << 32;
}
void put32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    p[i] = uint8_t(v >> (8 * i));
}
void put64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    p[i] = uint8_t(v >> (8 * i));
}

struct Layout {
  uint32_t version = 2;
  uint32_t hashPos = 0;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> sections;

  std::vector<uint8_t> *find(const std::string &name) {
    for (auto &s : sections)
      if (s.first == name)
        return &s.second;
    return nullptr;
  }
};

bool decode(const std::vector<uint8_t> &b, Layout &out) {
  if (b.size() < kHeader || std::memcmp(b.data(), kMagic, 8) != 0)
    return false;
  out.version = get32(&b[8]);
  out.hashPos = get32(&b[20]);
  const uint32_t count = get32(&b[16]);
  if (count == 0 || count > 64 || kHeader + size_t(count) * kEntry > b.size())
    return false;
  out.sections.clear();
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t *e = &b[kHeader + size_t(i) * kEntry];
    std::string name(reinterpret_cast<const char *>(e),
                     strnlen(reinterpret_cast<const char *>(e), 40));
    uint64_t off = get64(e + 40), size = get64(e + 48);
    if (off > b.size() || size > b.size() - off)
      return false;
    out.sections.emplace_back(
        name, std::vector<uint8_t>(b.begin() + long(off),
                                   b.begin() + long(off + size)));
  }
  return true;
}

/// Zeroes the header's hash and the manifest's 64 digits at `hashPos`,
/// hashes the file and writes the digest to both, when the header and the
/// manifest entry are readable; else leaves the bytes as they are. From
/// format version 2 on, first recomputes the weights digest in the manifest
/// (when both are there) and leaves the weights section out of the hash,
/// as ARTIFACT.md says. With `fixSize`, first sets the header's file size
/// to the real one.
void reseal(std::vector<uint8_t> &b, bool fixSize = true) {
  if (b.size() < kHeader)
    return;
  if (fixSize)
    put64(&b[24], b.size());
  const uint32_t count = get32(&b[16]);
  if (count == 0 || count > 1024 || kHeader + size_t(count) * kEntry > b.size())
    return;
  const bool separateWeights = get32(&b[8]) >= 2;
  uint64_t manifestOff = 0, manifestSize = 0;
  uint64_t weightsOff = b.size(), weightsSize = 0;
  bool haveManifest = false;
  for (uint32_t i = 0; i < count; ++i) {
    const uint8_t *e = &b[kHeader + size_t(i) * kEntry];
    const uint64_t off = get64(e + 40), size = get64(e + 48);
    if (off > b.size() || size > b.size() - off)
      continue;
    if (std::memcmp(e, "manifest\0", 9) == 0 && !haveManifest) {
      haveManifest = true;
      manifestOff = off;
      manifestSize = size;
    } else if (std::memcmp(e, "weights\0", 8) == 0 && separateWeights &&
               weightsOff == b.size()) {
      weightsOff = off;
      weightsSize = size;
    }
  }
  const uint64_t pos = get32(&b[20]);
  if (!haveManifest || pos > manifestSize || manifestSize - pos < 64)
    return;
  // The hash skips the weights only where they do not overlap the fields
  // being sealed (a mutant may make them overlap; then hash everything).
  const bool overlaps =
      weightsSize && ((weightsOff < 64 && weightsOff + weightsSize > 32) ||
                      (weightsOff < manifestOff + manifestSize &&
                       weightsOff + weightsSize > manifestOff));
  if (weightsSize && !overlaps) {
    static const std::string key = "\"weights_digest\": {";
    std::string text(b.begin() + long(manifestOff),
                     b.begin() + long(manifestOff + manifestSize));
    size_t k = text.rfind(key);
    size_t at = k == std::string::npos ? k : text.find("\"hex\": \"", k);
    if (at != std::string::npos && at + 8 + 32 <= text.size()) {
      Xxh3_128 xxh;
      xxh.update(&b[weightsOff], weightsSize);
      const std::string hex = Xxh3_128::hex(xxh.finish());
      std::memcpy(&b[manifestOff + at + 8], hex.data(), 32);
    }
  }
  std::memset(&b[32], 0, 32);
  std::memset(&b[manifestOff + pos], '0', 64);
  Sha256 sha;
  if (weightsSize && !overlaps) {
    sha.update(b.data(), weightsOff);
    sha.update(b.data() + weightsOff + weightsSize,
               b.size() - weightsOff - weightsSize);
  } else {
    sha.update(b.data(), b.size());
  }
  const Sha256::Digest digest = sha.finish();
  const std::string hex = Sha256::hex(digest);
  std::memcpy(&b[32], digest.data(), 32);
  std::memcpy(&b[manifestOff + pos], hex.data(), 64);
}

/// Lays the sections out (64-byte aligned, weights on 4096), points the
/// header at the manifest's `"content_hash": "` value when there is one and
/// seals the file.
std::vector<uint8_t> encode(Layout a) {
  if (std::vector<uint8_t> *m = a.find("manifest")) {
    static const std::string key = "\"content_hash\": \"";
    std::string text(m->begin(), m->end());
    size_t at = text.rfind(key);
    if (at != std::string::npos && at + key.size() + 64 <= text.size())
      a.hashPos = uint32_t(at + key.size());
  }
  const size_t count = a.sections.size();
  size_t pos = kHeader + kEntry * count;
  std::vector<size_t> offsets;
  for (const auto &s : a.sections) {
    const size_t align = s.first == "weights" ? 4096 : 64;
    pos = (pos + align - 1) / align * align;
    offsets.push_back(pos);
    pos += s.second.size();
  }
  std::vector<uint8_t> b(pos, 0);
  std::memcpy(b.data(), kMagic, 8);
  put32(&b[8], a.version);
  put32(&b[12], uint32_t(kHeader + kEntry * count));
  put32(&b[16], uint32_t(count));
  put32(&b[20], a.hashPos);
  put64(&b[24], pos);
  for (size_t i = 0; i < count; ++i) {
    uint8_t *e = &b[kHeader + i * kEntry];
    std::memcpy(e, a.sections[i].first.data(),
                std::min<size_t>(a.sections[i].first.size(), 40));
    put64(e + 40, offsets[i]);
    put64(e + 48, a.sections[i].second.size());
    if (!a.sections[i].second.empty())
      std::memcpy(&b[offsets[i]], a.sections[i].second.data(),
                  a.sections[i].second.size());
  }
  reseal(b);
  return b;
}

//===----------------------------------------------------------------------===//
// Mutations
//===----------------------------------------------------------------------===//

uint64_t interestingValue(Rng &rng, uint64_t near, uint64_t fileSize) {
  const uint64_t values[] = {0,
                             1,
                             2,
                             63,
                             64,
                             65,
                             128,
                             4096,
                             1024,
                             1025,
                             near - 1,
                             near + 1,
                             near + 64,
                             near - 64,
                             fileSize,
                             fileSize - 1,
                             fileSize + 1,
                             fileSize - 64,
                             0x7fffffffull,
                             0x80000000ull,
                             0xffffffffull,
                             0x100000000ull,
                             0x7fffffffffffffffull,
                             0x8000000000000000ull,
                             ~0ull,
                             ~0ull - 63,
                             rng.next()};
  return values[rng.below(sizeof(values) / sizeof(values[0]))];
}

/// Mutates bytes [0, size) of `v` with the driver's (or libFuzzer's)
/// mutators, 1-4 times, growing it by at most `room` bytes.
void mutateBytes(std::vector<uint8_t> &v, size_t room, Rng &rng) {
  size_t size = v.size();
  v.resize(size + room);
  for (size_t k = 0, n = 1 + rng.below(4); k < n; ++k)
    size = LLVMFuzzerMutate(v.data(), size, v.size());
  v.resize(size);
}

std::vector<uint8_t> mutateManifest(Layout a, Rng &rng) {
  std::vector<uint8_t> *m = a.find("manifest");
  if (!m)
    return encode(a);
  // Usually keep `"content_hash": "<64 digits>"` intact, so that the file
  // still verifies and the damage reaches the JSON parser and the schema.
  std::string text(m->begin(), m->end());
  size_t keep = text.rfind("\"content_hash\"");
  if (keep == std::string::npos || rng.oneIn(4))
    keep = text.size();
  std::vector<uint8_t> head(m->begin(), m->begin() + long(keep));
  mutateBytes(head, 256, rng);
  head.insert(head.end(), m->begin() + long(keep), m->end());
  *m = std::move(head);
  return encode(a);
}

/// Values that the manifest schema treats specially (or should refuse).
json::Value interestingJson(Rng &rng, const json::Value &old) {
  static const char *kStrings[] = {
      "",
      "weights",
      "input",
      "output",
      "i8",
      "f32",
      "bool",
      "f64x",
      "main",
      "sits_entry_main",
      "other",
      "1abc",
      "a-b",
      "+avx2",
      "-amx-tile",
      "avx",
      "+",
      "cpu",
      "CPU",
      "code.cpu",
      "x86_64-unknown-linux-gnu",
      "aarch64-linux-gnu",
      "riscv64",
      "cuda",
      "mlir-gpu-runtime",
      "0000000000000000000000000000000000000000000000000000000000000000",
      "\xc3\xa9",
      "a\x01b"};
  static const int64_t kInts[] = {-9223372036854775807LL - 1,
                                  -2,
                                  -1,
                                  0,
                                  1,
                                  2,
                                  3,
                                  64,
                                  65,
                                  255,
                                  256,
                                  257,
                                  4096,
                                  4294967295LL,
                                  4294967296LL,
                                  9223372036854775807LL};
  switch (rng.below(9)) {
  case 0:
    return json::Value();
  case 1:
    return json::Value::boolean(rng.oneIn(2));
  case 2:
    return json::Value::integer(
        kInts[rng.below(sizeof(kInts) / sizeof(kInts[0]))]);
  case 3:
    return json::Value::number(rng.oneIn(2) ? 0.5 : -1e300);
  case 4:
    return json::Value::string(
        kStrings[rng.below(sizeof(kStrings) / sizeof(kStrings[0]))]);
  case 5:
    return json::Value::array();
  case 6:
    return json::Value::object();
  case 7: { // an integer near the old one (shapes, versions)
    const int64_t v = old.isInt() ? old.asInt() : 0;
    return json::Value::integer(rng.oneIn(2) ? v + 1 : v - 1);
  }
  default: // a long string
    return json::Value::string(std::string(1 + rng.below(200), 'a'));
  }
}

void collect(json::Value &v, std::vector<json::Value *> &all) {
  all.push_back(&v);
  if (v.isArray())
    for (json::Value &item : v.items())
      collect(item, all);
  if (v.isObject())
    for (json::Value::Member &m : v.members())
      collect(m.second, all);
}

/// Mutates the manifest as a JSON value (a node replaced, a member or item
/// dropped, duplicated, reordered, renamed, a known key added), so that the
/// result is valid JSON and reaches the schema checks, then re-lays the file
/// out. Falls back to text mutation when the manifest does not parse.
std::vector<uint8_t> mutateManifestValue(Layout a, Rng &rng) {
  std::vector<uint8_t> *m = a.find("manifest");
  json::Value root;
  std::string error;
  if (!m ||
      !json::parse(std::string_view(reinterpret_cast<const char *>(m->data()),
                                    m->size()),
                   root, error))
    return mutateManifest(std::move(a), rng);
  for (size_t k = 0, n = 1 + rng.below(3); k < n; ++k) {
    std::vector<json::Value *> all;
    collect(root, all);
    json::Value &v = *all[rng.below(all.size())];
    switch (rng.below(6)) {
    case 0:
      v = interestingJson(rng, v);
      break;
    case 1: // drop a member or an item
      if (v.isObject() && !v.members().empty())
        v.members().erase(v.members().begin() +
                          long(rng.below(v.members().size())));
      else if (v.isArray() && !v.items().empty())
        v.items().erase(v.items().begin() + long(rng.below(v.items().size())));
      break;
    case 2: // duplicate an item (a member: under a new key)
      if (v.isArray() && !v.items().empty() && v.items().size() < 64) {
        json::Value copy = v.items()[rng.below(v.items().size())];
        v.push(std::move(copy));
      } else if (v.isObject() && !v.members().empty()) {
        json::Value::Member copy = v.members()[rng.below(v.members().size())];
        v.set(copy.first + "_", std::move(copy.second));
      }
      break;
    case 3: // reorder
      if (v.isArray() && v.items().size() > 1) {
        const size_t i = rng.below(v.items().size());
        std::swap(v.items()[i], v.items()[rng.below(v.items().size())]);
      } else if (v.isObject() && v.members().size() > 1) {
        const size_t i = rng.below(v.members().size());
        std::swap(v.members()[i], v.members()[rng.below(v.members().size())]);
      }
      break;
    case 4: { // add or replace a key the schema knows
      static const char *kKeys[] = {
          "role",         "name",      "dtype",
          "shape",        "dim_names", "updated_in_place",
          "symbol",       "args",      "device",
          "kind",         "abi",       "features",
          "triple",       "target",    "format_version",
          "entry_points", "cpu"};
      if (v.isObject()) {
        const char *key = kKeys[rng.below(sizeof(kKeys) / sizeof(kKeys[0]))];
        v.set(key, interestingJson(rng, json::Value()));
      }
      break;
    }
    default: // rename a member
      if (v.isObject() && !v.members().empty()) {
        std::string &key = v.members()[rng.below(v.members().size())].first;
        key = rng.oneIn(2) ? key + "x" : key.substr(0, key.size() / 2);
      }
      break;
    }
  }
  // Keep the hash member (last, 64 digits) so the file still verifies.
  if (!root.isObject())
    root = json::Value::object();
  root.erase("content_hash");
  root.set("content_hash", json::Value::string(std::string(64, '0')));
  const std::string text = json::print(root);
  m->assign(text.begin(), text.end());
  return encode(a);
}

std::vector<uint8_t> mutateHeader(std::vector<uint8_t> b, Rng &rng) {
  static constexpr size_t kFields[][2] = {{8, 4},  {12, 4}, {16, 4},
                                          {20, 4}, {24, 8}, {0, 1}};
  const auto &f = kFields[rng.below(sizeof(kFields) / sizeof(kFields[0]))];
  if (f[1] == 4)
    put32(&b[f[0]], uint32_t(interestingValue(rng, get32(&b[f[0]]), b.size())));
  else if (f[1] == 8)
    put64(&b[f[0]], interestingValue(rng, get64(&b[f[0]]), b.size()));
  else { // the magic
    const size_t at = rng.below(8);
    b[at] ^= uint8_t(1u << rng.below(8));
  }
  if (!rng.oneIn(8))
    reseal(b, /*fixSize=*/f[0] != 24);
  return b;
}

std::vector<uint8_t> mutateSectionTable(std::vector<uint8_t> b, Rng &rng) {
  const uint32_t count = get32(&b[16]);
  if (count == 0 || kHeader + size_t(count) * kEntry > b.size())
    return b;
  uint8_t *e = &b[kHeader + rng.below(count) * kEntry];
  switch (rng.below(5)) {
  case 0: { // offset, possibly onto another section's
    const uint8_t *other = &b[kHeader + rng.below(count) * kEntry];
    put64(e + 40, rng.oneIn(3)
                      ? get64(other + 40)
                      : interestingValue(rng, get64(e + 40), b.size()));
    break;
  }
  case 1:
    put64(e + 48, interestingValue(rng, get64(e + 48), b.size()));
    break;
  case 2: { // flags or reserved
    const size_t field = 56 + 4 * rng.below(2);
    put32(e + field, uint32_t(rng.next() | 1));
    break;
  }
  case 3: { // the name: a byte, the NUL padding, a full 40-byte name
    static const char kChars[] = "aZ_.-0/\x00\xff ";
    const size_t at = rng.below(40);
    e[at] = uint8_t(kChars[rng.below(sizeof(kChars) - 1)]);
    if (rng.oneIn(4))
      std::memset(e, 'a', 40);
    break;
  }
  default: { // another entry's name (duplicates)
    const uint8_t *other = &b[kHeader + rng.below(count) * kEntry];
    std::memmove(e, other, 40);
    break;
  }
  }
  if (!rng.oneIn(8))
    reseal(b);
  return b;
}

std::vector<uint8_t> mutateSections(Layout a, Rng &rng) {
  auto &s = a.sections;
  switch (rng.below(5)) {
  case 0: // drop one (the manifest, the code, the weights ...)
    if (!s.empty())
      s.erase(s.begin() + long(rng.below(s.size())));
    break;
  case 1: // duplicate one
    if (!s.empty())
      s.push_back(s[rng.below(s.size())]);
    break;
  case 2: { // add one
    static const char *kNames[] = {"weights",  "code.gpu", "device.sm_90", "x",
                                   "manifest", "code.cpu", "a.b-c_d"};
    // (One draw per statement: argument order is unspecified.)
    const char *name = kNames[rng.below(sizeof(kNames) / sizeof(kNames[0]))];
    const size_t bytes = rng.below(300);
    const uint8_t fill = uint8_t(rng.next());
    s.emplace_back(name, std::vector<uint8_t>(bytes, fill));
    break;
  }
  case 3: // reorder
    if (s.size() > 1)
      std::swap(s[rng.below(s.size())], s[rng.below(s.size())]);
    break;
  default: // resize one (the weights against the declared size, ...)
    if (!s.empty()) {
      auto &bytes = s[rng.below(s.size())].second;
      bytes.resize(rng.oneIn(2) ? rng.below(bytes.size() + 1)
                                : bytes.size() + 1 + rng.below(64),
                   0x5a);
    }
    break;
  }
  if (rng.oneIn(8))
    a.version = uint32_t(interestingValue(rng, a.version, 0));
  return encode(a);
}

/// The ELF code section: an aligned field set to an interesting value, or
/// generic byte mutations.
std::vector<uint8_t> mutateCode(Layout a, Rng &rng) {
  std::vector<uint8_t> *code = nullptr;
  for (auto &s : a.sections)
    if (s.first.rfind("code.", 0) == 0)
      code = &s.second;
  if (!code || code->empty())
    return encode(a);
  if (rng.oneIn(3)) {
    mutateBytes(*code, 64, rng);
  } else {
    static constexpr size_t kWidths[] = {1, 2, 4, 8};
    const size_t width = kWidths[rng.below(4)];
    if (code->size() >= width) {
      const size_t at = rng.below(code->size() - width + 1) / width * width;
      const uint64_t v = interestingValue(rng, 0, code->size());
      for (size_t i = 0; i < width; ++i)
        (*code)[at + i] = uint8_t(v >> (8 * i));
    }
  }
  return encode(a);
}

/// With SITS_FUZZ_STATS set: how many inputs ended where (the error's code
/// and subject, or the compatibility check's), printed at exit; shows which
/// checks the mutants reach.
void countOutcome(const Status &s, const char *stage) {
  static const bool enabled = std::getenv("SITS_FUZZ_STATS") != nullptr;
  if (!enabled)
    return;
  static std::map<std::string, size_t> *counts = [] {
    auto *m = new std::map<std::string, size_t>();
    std::atexit([] {
      for (const auto &[what, n] : *counts)
        std::fprintf(stderr, "%8zu  %s\n", n, what.c_str());
    });
    return m;
  }();
  std::string subject = s.info().subject;
  if (subject.rfind("entry_points[", 0) == 0)
    subject = "entry_points[...]"; // one line for all indices
  ++(*counts)[std::string(stage) + " " + statusCodeName(s.code()) + " " +
              subject];
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  StatusOr<ArtifactReader> r = ArtifactReader::fromMemory(data, size);
  countOutcome(r.status(), "read:");
  if (!r.ok()) {
    const StatusCode c = r.code();
    SITS_FUZZ_REQUIRE(c == StatusCode::kCorruptArtifact ||
                      c == StatusCode::kUnsupportedVersion ||
                      c == StatusCode::kOutOfMemory);
    SITS_FUZZ_REQUIRE(!r.status().message().empty());
    return 0;
  }
  // Accepted: everything the reader hands out lies inside the file.
  const ArtifactReader &a = *r;
  SITS_FUZZ_REQUIRE(a.fileSize() == size);
  SITS_FUZZ_REQUIRE(a.contentHash().size() == 64);
  SITS_FUZZ_REQUIRE(a.manifest().contentHash == a.contentHash());
  SITS_FUZZ_REQUIRE(a.manifest().formatVersion == a.formatVersion());
  SITS_FUZZ_REQUIRE(!a.manifest().entryPoints.empty());
  // Every byte was checked, the weights included.
  SITS_FUZZ_REQUIRE(!a.section("weights") || a.weightsVerified());
  const uint64_t tableEnd = 64 + 64 * uint64_t(a.sections().size());
  bool haveManifest = false;
  for (const SectionInfo &s : a.sections()) {
    SITS_FUZZ_REQUIRE(s.offset % 64 == 0 && s.offset >= tableEnd);
    SITS_FUZZ_REQUIRE(s.offset <= size && s.size <= size - s.offset);
    std::optional<ByteSpan> span = a.section(s.name);
    SITS_FUZZ_REQUIRE(span && span->size == s.size);
    if (span->size) { // touch both ends: ASan checks them
      volatile uint8_t first = span->data[0];
      volatile uint8_t last = span->data[span->size - 1];
      (void)first;
      (void)last;
    }
    haveManifest = haveManifest || s.name == "manifest";
  }
  SITS_FUZZ_REQUIRE(haveManifest);
  for (const EntryPointSpec &ep : a.manifest().entryPoints) {
    if (!ep.hasWeights())
      continue;
    std::optional<ByteSpan> w = a.section("weights");
    SITS_FUZZ_REQUIRE(w.has_value());
    SITS_FUZZ_REQUIRE(ep.args.front().shape.size() == 1);
    const int64_t declared = ep.args.front().shape[0];
    SITS_FUZZ_REQUIRE(declared == -1 || uint64_t(declared) == w->size);
  }
  // The ELF reader, on whatever the code section holds. Nothing is loaded.
  const Status compat = checkHostCompatibility(a);
  countOutcome(compat, "compat:");
  SITS_FUZZ_REQUIRE(compat.ok() ||
                    compat.code() == StatusCode::kCorruptArtifact ||
                    compat.code() == StatusCode::kIncompatibleTarget ||
                    compat.code() == StatusCode::kMissingSymbol);
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size,
                                          size_t maxSize, unsigned int seed) {
  Rng rng(0x5175u ^ (uint64_t(seed) << 17) ^ seed);
  const auto &all = seeds();
  std::vector<uint8_t> base(data, data + size);
  Layout layout;
  bool fresh = false;
  if (!decode(base, layout) || rng.oneIn(8)) {
    base = all[rng.below(all.size())];
    fresh = decode(base, layout);
  }
  std::vector<uint8_t> out;
  switch (rng.below(10)) {
  case 0:
    out = fresh ? base : mutateManifestValue(layout, rng); // a seed as it is
    break;
  case 1:
  case 2:
    out = mutateManifestValue(layout, rng);
    break;
  case 3:
    out = mutateManifest(layout, rng);
    break;
  case 4: // raw bytes anywhere, re-sealed
    out = base;
    mutateBytes(out, 64, rng);
    reseal(out);
    break;
  case 5:
    out = mutateHeader(base, rng);
    break;
  case 6:
    out = mutateSectionTable(base, rng);
    break;
  case 7:
    out = mutateSections(layout, rng);
    break;
  case 8:
    out = mutateCode(layout, rng);
    break;
  default: // raw bytes, not re-sealed: the hash check itself
    out = base;
    mutateBytes(out, 64, rng);
    break;
  }
  if (out.size() > maxSize)
    out =
        base.size() <= maxSize
            ? base
            : std::vector<uint8_t>(base.begin(), base.begin() + long(maxSize));
  if (!out.empty())
    std::memcpy(data, out.data(), out.size());
  return out.size();
}
