//===- host_cpu.cpp - Host architecture and CPU features
//-------------------===//
//
// x86-64: the cpuid bits LLVM's sys::getHostCPUFeatures reads (LLVM 22,
// llvm/lib/TargetParser/Host.cpp), including the XCR0 checks that make
// AVX/AVX-512/AMX count only when the OS saves their registers, so a
// feature reported present here is one LLVM would also report present.
// AArch64: /proc/cpuinfo "Features" mapped to LLVM names the way LLVM does.
// Any other name is looked up in /proc/cpuinfo's flags as a fallback
// (dots, dashes and underscores ignored), and otherwise unknown.
//
//===----------------------------------------------------------------------===//
#include "sits/runtime/host.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace sits::runtime {
namespace {

std::string normalizeFlag(std::string_view s) {
  std::string out;
  for (char c : s)
    if (c != '.' && c != '-' && c != '_')
      out += char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct CpuInfoFile {
  std::string modelName;
  std::set<std::string> flags; // raw flag words
};

CpuInfoFile readProcCpuinfo() {
  CpuInfoFile out;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool haveFlags = false, haveModel = false;
  while (std::getline(in, line) && !(haveFlags && haveModel)) {
    auto colon = line.find(':');
    if (colon == std::string::npos)
      continue;
    std::string key = line.substr(0, colon);
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back())))
      key.pop_back();
    std::string value = line.substr(colon + 1);
    if (!haveFlags && (key == "flags" || key == "Features")) {
      std::istringstream words(value);
      std::string w;
      while (words >> w)
        out.flags.insert(w);
      haveFlags = true;
    } else if (!haveModel && (key == "model name" || key == "CPU part")) {
      size_t b = value.find_first_not_of(" \t");
      out.modelName = b == std::string::npos ? "" : value.substr(b);
      haveModel = true;
    }
  }
  return out;
}

#if defined(__x86_64__)
bool cpuid(unsigned leaf, unsigned sub, unsigned r[4]) {
  return __get_cpuid_count(leaf, sub, &r[0], &r[1], &r[2], &r[3]) != 0;
}

std::string detectX86Vendor() {
  unsigned r[4] = {0, 0, 0, 0};
  if (!cpuid(0, 0, r))
    return "";
  // Twelve characters in EBX, EDX, ECX.
  char name[12];
  std::memcpy(name, &r[1], 4);
  std::memcpy(name + 4, &r[3], 4);
  std::memcpy(name + 8, &r[2], 4);
  return std::string(name, sizeof name);
}

std::map<std::string, bool> detectX86() {
  std::map<std::string, bool> f;
  unsigned r[4] = {0, 0, 0, 0};
  enum { EAX = 0, EBX = 1, ECX = 2, EDX = 3 };
  if (!cpuid(0, 0, r) || r[EAX] < 1)
    return f;
  unsigned maxLevel = r[EAX];
  cpuid(1, 0, r);
  unsigned ecx1 = r[ECX], edx1 = r[EDX];
  auto bit = [](unsigned reg, int b) { return ((reg >> b) & 1) != 0; };

  f["cx8"] = bit(edx1, 8);
  f["cmov"] = bit(edx1, 15);
  f["mmx"] = bit(edx1, 23);
  f["fxsr"] = bit(edx1, 24);
  f["sse"] = bit(edx1, 25);
  f["sse2"] = bit(edx1, 26);
  f["sse3"] = bit(ecx1, 0);
  f["pclmul"] = bit(ecx1, 1);
  f["ssse3"] = bit(ecx1, 9);
  f["cx16"] = bit(ecx1, 13);
  f["sse4.1"] = bit(ecx1, 19);
  f["sse4.2"] = bit(ecx1, 20);
  f["crc32"] = f["sse4.2"];
  f["movbe"] = bit(ecx1, 22);
  f["popcnt"] = bit(ecx1, 23);
  f["aes"] = bit(ecx1, 25);
  f["rdrnd"] = bit(ecx1, 30);

  // XCR0: which register state the OS saves on context switches.
  bool hasXSave = bit(ecx1, 27);
  uint64_t xcr0 = 0;
  if (hasXSave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    xcr0 = (uint64_t(hi) << 32) | lo;
  }
  bool avxSave = hasXSave && bit(ecx1, 28) && (xcr0 & 0x6) == 0x6;
  bool avx512Save = avxSave && (xcr0 & 0xe0) == 0xe0;
  bool amxSave = hasXSave && (xcr0 & 0x60000) == 0x60000;

  f["avx"] = avxSave;
  f["fma"] = bit(ecx1, 12) && avxSave;
  f["xsave"] = bit(ecx1, 26) && avxSave;
  f["f16c"] = bit(ecx1, 29) && avxSave;

  cpuid(0x80000000, 0, r);
  unsigned maxExt = r[EAX];
  bool ext1 = maxExt >= 0x80000001 && cpuid(0x80000001, 0, r);
  unsigned ecxE = ext1 ? r[ECX] : 0, edxE = ext1 ? r[EDX] : 0;
  f["sahf"] = bit(ecxE, 0);
  f["lzcnt"] = bit(ecxE, 5);
  f["sse4a"] = bit(ecxE, 6);
  f["prfchw"] = bit(ecxE, 8);
  f["xop"] = bit(ecxE, 11) && avxSave;
  f["lwp"] = bit(ecxE, 15);
  f["fma4"] = bit(ecxE, 16) && avxSave;
  f["tbm"] = bit(ecxE, 21);
  f["mwaitx"] = bit(ecxE, 29);
  f["64bit"] = bit(edxE, 29);

  bool ext8 = maxExt >= 0x80000008 && cpuid(0x80000008, 0, r);
  unsigned ebx8 = ext8 ? r[EBX] : 0;
  f["clzero"] = bit(ebx8, 0);
  f["rdpru"] = bit(ebx8, 4);
  f["wbnoinvd"] = bit(ebx8, 9);

  bool leaf7 = maxLevel >= 7 && cpuid(7, 0, r);
  unsigned eax7 = leaf7 ? r[EAX] : 0, ebx7 = leaf7 ? r[EBX] : 0,
           ecx7 = leaf7 ? r[ECX] : 0, edx7 = leaf7 ? r[EDX] : 0;
  f["fsgsbase"] = bit(ebx7, 0);
  f["sgx"] = bit(ebx7, 2);
  f["bmi"] = bit(ebx7, 3);
  f["avx2"] = bit(ebx7, 5) && avxSave;
  f["bmi2"] = bit(ebx7, 8);
  f["invpcid"] = bit(ebx7, 10);
  f["rtm"] = bit(ebx7, 11);
  f["avx512f"] = bit(ebx7, 16) && avx512Save;
  f["evex512"] = f["avx512f"]; // LLVM 18-21 spelled 512-bit EVEX this way
  f["avx512dq"] = bit(ebx7, 17) && avx512Save;
  f["rdseed"] = bit(ebx7, 18);
  f["adx"] = bit(ebx7, 19);
  f["avx512ifma"] = bit(ebx7, 21) && avx512Save;
  f["clflushopt"] = bit(ebx7, 23);
  f["clwb"] = bit(ebx7, 24);
  f["avx512pf"] = bit(ebx7, 26) && avx512Save;
  f["avx512er"] = bit(ebx7, 27) && avx512Save;
  f["avx512cd"] = bit(ebx7, 28) && avx512Save;
  f["sha"] = bit(ebx7, 29);
  f["avx512bw"] = bit(ebx7, 30) && avx512Save;
  f["avx512vl"] = bit(ebx7, 31) && avx512Save;

  f["prefetchwt1"] = bit(ecx7, 0);
  f["avx512vbmi"] = bit(ecx7, 1) && avx512Save;
  f["pku"] = bit(ecx7, 4);
  f["waitpkg"] = bit(ecx7, 5);
  f["avx512vbmi2"] = bit(ecx7, 6) && avx512Save;
  f["shstk"] = bit(ecx7, 7);
  f["gfni"] = bit(ecx7, 8);
  f["vaes"] = bit(ecx7, 9) && avxSave;
  f["vpclmulqdq"] = bit(ecx7, 10) && avxSave;
  f["avx512vnni"] = bit(ecx7, 11) && avx512Save;
  f["avx512bitalg"] = bit(ecx7, 12) && avx512Save;
  f["avx512vpopcntdq"] = bit(ecx7, 14) && avx512Save;
  f["rdpid"] = bit(ecx7, 22);
  f["kl"] = bit(ecx7, 23);
  f["cldemote"] = bit(ecx7, 25);
  f["movdiri"] = bit(ecx7, 27);
  f["movdir64b"] = bit(ecx7, 28);
  f["enqcmd"] = bit(ecx7, 29);

  f["uintr"] = bit(edx7, 5);
  f["avx512vp2intersect"] = bit(edx7, 8) && avx512Save;
  f["serialize"] = bit(edx7, 14);
  f["tsxldtrk"] = bit(edx7, 16);
  f["pconfig"] = bit(edx7, 18);
  f["amx-bf16"] = bit(edx7, 22) && amxSave;
  f["avx512fp16"] = bit(edx7, 23) && avx512Save;
  f["amx-tile"] = bit(edx7, 24) && amxSave;
  f["amx-int8"] = bit(edx7, 25) && amxSave;

  bool leaf7s1 = leaf7 && eax7 >= 1 && cpuid(7, 1, r);
  unsigned eax71 = leaf7s1 ? r[EAX] : 0, edx71 = leaf7s1 ? r[EDX] : 0;
  f["sha512"] = bit(eax71, 0);
  f["sm3"] = bit(eax71, 1);
  f["sm4"] = bit(eax71, 2);
  f["raoint"] = bit(eax71, 3);
  f["avxvnni"] = bit(eax71, 4) && avxSave;
  f["avx512bf16"] = bit(eax71, 5) && avx512Save;
  f["cmpccxadd"] = bit(eax71, 7);
  f["amx-fp16"] = bit(eax71, 21) && amxSave;
  f["hreset"] = bit(eax71, 22);
  f["avxifma"] = bit(eax71, 23) && avxSave;
  f["movrs"] = bit(eax71, 31);
  f["avxvnniint8"] = bit(edx71, 4) && avxSave;
  f["avxneconvert"] = bit(edx71, 5) && avxSave;
  f["amx-complex"] = bit(edx71, 8) && amxSave;
  f["avxvnniint16"] = bit(edx71, 10) && avxSave;
  f["prefetchi"] = bit(edx71, 14);
  f["usermsr"] = bit(edx71, 15);
  bool hasAvx10 = bit(edx71, 19);
  bool apxf = bit(edx71, 21);
  for (const char *n :
       {"egpr", "push2pop2", "ppx", "ndd", "ccmp", "nf", "cf", "zu"})
    f[n] = apxf;

  bool leafD = maxLevel >= 0xd && cpuid(0xd, 1, r);
  unsigned eaxD = leafD ? r[EAX] : 0;
  f["xsaveopt"] = bit(eaxD, 0) && avxSave;
  f["xsavec"] = bit(eaxD, 1) && avxSave;
  f["xsaves"] = bit(eaxD, 3) && avxSave;

  bool leaf14 = maxLevel >= 0x14 && cpuid(0x14, 0, r);
  f["ptwrite"] = leaf14 && bit(r[EBX], 4);

  bool leaf19 = maxLevel >= 0x19 && cpuid(0x19, 0, r);
  f["widekl"] = leaf7 && leaf19 && bit(r[EBX], 2);

  bool leaf1E = maxLevel >= 0x1e && cpuid(0x1e, 1, r);
  unsigned eax1E = leaf1E ? r[EAX] : 0;
  f["amx-fp8"] = bit(eax1E, 4) && amxSave;
  f["amx-transpose"] = bit(eax1E, 5) && amxSave;
  f["amx-tf32"] = bit(eax1E, 6) && amxSave;
  f["amx-avx512"] = bit(eax1E, 7) && amxSave;
  f["amx-movrs"] = bit(eax1E, 8) && amxSave;

  bool leaf24 = maxLevel >= 0x24 && cpuid(0x24, 0, r);
  unsigned avx10Version = leaf24 ? (r[EBX] & 0xff) : 0;
  f["avx10.1"] = hasAvx10 && avx10Version >= 1;
  f["avx10.2"] = hasAvx10 && avx10Version >= 2;
  // Spellings of earlier LLVM releases.
  f["avx10.1-256"] = f["avx10.1"];
  f["avx10.1-512"] = f["avx10.1"];
  f["avx10.2-256"] = f["avx10.2"];
  f["avx10.2-512"] = f["avx10.2"];
  return f;
}
#endif

#if defined(__aarch64__)
std::map<std::string, bool> detectAArch64(const CpuInfoFile &info) {
  std::map<std::string, bool> f;
  static const std::pair<const char *, const char *> kMap[] = {
      {"asimd", "neon"},       {"fp", "fp-armv8"},    {"crc32", "crc"},
      {"atomics", "lse"},      {"sha3", "sha3"},      {"sm4", "sm4"},
      {"sve", "sve"},          {"sve2", "sve2"},      {"sveaes", "sve-aes"},
      {"svesha3", "sve-sha3"}, {"svesm4", "sve-sm4"}, {"asimddp", "dotprod"},
      {"asimdhp", "fullfp16"}, {"bf16", "bf16"},      {"i8mm", "i8mm"},
      {"fphp", "fullfp16"}};
  for (const auto &[linuxName, llvmName] : kMap)
    f[llvmName] = f[llvmName] || info.flags.count(linuxName) != 0;
  bool aes = info.flags.count("aes") && info.flags.count("pmull");
  bool sha2 = info.flags.count("sha1") && info.flags.count("sha2");
  f["aes"] = aes;
  f["sha2"] = sha2;
  return f;
}
#endif

HostCpuInfo detectHost() {
  HostCpuInfo info;
#if defined(__x86_64__)
  info.arch = "x86_64";
#elif defined(__aarch64__)
  info.arch = "aarch64";
#elif defined(__riscv) && __riscv_xlen == 64
  info.arch = "riscv64";
#else
  info.arch = "unknown";
#endif
#if defined(__linux__)
  info.os = "linux";
#elif defined(__APPLE__)
  info.os = "darwin";
#else
  info.os = "unknown";
#endif
  CpuInfoFile file = readProcCpuinfo();
  info.modelName = file.modelName;
  std::map<std::string, bool> features;
#if defined(__x86_64__)
  info.vendor = detectX86Vendor();
  features = detectX86();
#elif defined(__aarch64__)
  features = detectAArch64(file);
#endif
  for (const auto &[name, present] : features) {
    info.knownFeatures.push_back(name);
    if (present)
      info.features.push_back(name);
  }
  return info;
}

} // namespace

std::optional<bool> HostCpuInfo::hasFeature(std::string_view name) const {
  if (!name.empty() && (name.front() == '+' || name.front() == '-'))
    name.remove_prefix(1);
  if (std::binary_search(knownFeatures.begin(), knownFeatures.end(), name))
    return std::binary_search(features.begin(), features.end(), name);
  // Fallback: a flag of the same name in /proc/cpuinfo.
  static const std::set<std::string> procFlags = [] {
    std::set<std::string> out;
    for (const std::string &f : readProcCpuinfo().flags)
      out.insert(normalizeFlag(f));
    return out;
  }();
  if (procFlags.count(normalizeFlag(name)))
    return true;
  return std::nullopt;
}

const HostCpuInfo &hostCpuInfo() {
  static const HostCpuInfo info = detectHost();
  return info;
}

std::string normalizeArch(std::string_view arch) {
  std::string a(arch);
  for (char &c : a)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  if (a == "x86_64" || a == "amd64" || a == "x86-64" || a == "x64")
    return "x86_64";
  if (a == "aarch64" || a == "arm64")
    return "aarch64";
  return a;
}

} // namespace sits::runtime
