//===- KnownTargets.cpp - The table of hardware SITS compiles for ---------===//

#include "dialects/Target/KnownTargets.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"
#include "llvm/TargetParser/X86TargetParser.h"

#include <thread>
#include <unistd.h>

using namespace mlir::sits::target;

namespace {

const llvm::StringRef kH100Aliases[] = {"h100-sxm", "sm_90", "sm_90a"};
const llvm::StringRef kH200Aliases[] = {"h200-sxm"};
const llvm::StringRef kA100Aliases[] = {"a100-sxm-80gb", "sm_80"};
const llvm::StringRef kV100Aliases[] = {"v100-sxm2", "sm_70"};
const llvm::StringRef kMI300XAliases[] = {"gfx942"};
const llvm::StringRef kCpuAliases[] = {"host", "native"};

constexpr llvm::StringLiteral kNvptxTriple = "nvptx64-nvidia-cuda";
constexpr llvm::StringLiteral kAmdgcnTriple = "amdgcn-amd-amdhsa";

// Datasheet figures, dense (no structured sparsity). Field order:
// name, aliases, vendor, architecture, triple, chip, features,
// computeUnits, simdWidth, vectorRegisters and isaLevel (CPU only),
// memoryGB, memoryBandwidthGBs, lastLevelCacheMB, sharedMemoryPerUnitKB,
// peak fp32/fp16/bf16/fp8 TFLOP/s, int8 TOP/s, fp8Formats, interconnectGBs,
// minPtxVersion.
const TargetInfo kDatasheetTargets[] = {
    // NVIDIA H100 Tensor Core GPU datasheet (SXM5); Hopper tuning guide for
    // 228 KB shared memory per SM. sm_90 needs PTX ISA >= 8.0 (+ptx80).
    {"h100",
     kH100Aliases,
     Vendor::Nvidia,
     "Hopper",
     kNvptxTriple,
     "sm_90",
     "+ptx80",
     132,
     32,
     0,
     "",
     80,
     3350,
     50,
     228,
     67,
     989,
     989,
     1979,
     1979,
     kFp8E4M3 | kFp8E5M2,
     /*NVLink 4*/ 900,
     80},
    // NVIDIA H200 Tensor Core GPU datasheet (SXM): Hopper compute with
    // 141 GB of HBM3e at 4.8 TB/s.
    {"h200",
     kH200Aliases,
     Vendor::Nvidia,
     "Hopper",
     kNvptxTriple,
     "sm_90",
     "+ptx80",
     132,
     32,
     0,
     "",
     141,
     4800,
     50,
     228,
     67,
     989,
     989,
     1979,
     1979,
     kFp8E4M3 | kFp8E5M2,
     /*NVLink 4*/ 900,
     80},
    // NVIDIA A100 Tensor Core GPU datasheet (SXM4 80 GB); Ampere tuning
    // guide for 164 KB shared memory per SM. No FP8 before sm_89.
    {"a100",
     kA100Aliases,
     Vendor::Nvidia,
     "Ampere",
     kNvptxTriple,
     "sm_80",
     "+ptx70",
     108,
     32,
     0,
     "",
     80,
     2039,
     40,
     164,
     19.5,
     312,
     312,
     0,
     624,
     kFp8None,
     /*NVLink 3*/ 600,
     70},
    // NVIDIA V100 Tensor Core GPU datasheet (SXM2 32 GB); Volta tuning guide
    // for 96 KB shared memory per SM. Tensor cores take FP16 only.
    {"v100",
     kV100Aliases,
     Vendor::Nvidia,
     "Volta",
     kNvptxTriple,
     "sm_70",
     "+ptx60",
     80,
     32,
     0,
     "",
     32,
     900,
     6,
     96,
     15.7,
     125,
     0,
     0,
     0,
     kFp8None,
     /*NVLink 2*/ 300,
     60},
    // AMD Instinct MI300X data sheet; CDNA3 ISA guide for wave64 and 64 KB
    // LDS per CU. 256 MB Infinity Cache is the last level.
    {"mi300x",
     kMI300XAliases,
     Vendor::Amd,
     "CDNA3",
     kAmdgcnTriple,
     "gfx942",
     "",
     304,
     64,
     0,
     "",
     192,
     5300,
     256,
     64,
     163.4,
     1307.4,
     1307.4,
     2614.9,
     2614.9,
     kFp8E4M3 | kFp8E5M2,
     /*Infinity Fabric, aggregate*/ 896,
     0},
};

// Named CPU instruction-set targets: what code for a fleet of machines may
// assume, independent of the machine that compiles it. The x86-64 entries
// are the psABI microarchitecture levels; their feature lists come from
// LLVM's own definition of each level, so the artifact's manifest names
// exactly what the runtime must find on the CPU. They describe no machine:
// cores, memory, caches and peaks are 0 (unknown), and code for them is
// tiled for the compiling machine's cores unless told otherwise.
struct CpuLevel {
  llvm::StringRef name;
  llvm::ArrayRef<llvm::StringRef> aliases;
  llvm::StringRef architecture;
  llvm::StringRef triple;
  llvm::StringRef chip;
  /// Features beyond the chip's own (AArch64 has no levels in LLVM's x86
  /// sense: its baseline is spelled out).
  llvm::StringRef extraFeatures;
  int64_t simdWidth;
  int64_t vectorRegisters;
};

const llvm::StringRef kX86_64Aliases[] = {"x86_64", "sse2"};
const llvm::StringRef kX86_64V2Aliases[] = {"sse4.2"};
const llvm::StringRef kX86_64V3Aliases[] = {"avx2"};
const llvm::StringRef kX86_64V4Aliases[] = {"avx512"};
const llvm::StringRef kAArch64Aliases[] = {"arm64", "neon"};

constexpr llvm::StringLiteral kX86Triple = "x86_64-unknown-linux-gnu";

const CpuLevel kCpuLevels[] = {
    // 16 XMM registers of 4 floats (SSE2).
    {"x86-64", kX86_64Aliases, "x86-64 (SSE2)", kX86Triple, "x86-64", "", 4,
     16},
    // + SSE4.2, POPCNT, CX16: still 4-float vectors.
    {"x86-64-v2", kX86_64V2Aliases, "x86-64-v2 (SSE4.2)", kX86Triple,
     "x86-64-v2", "", 4, 16},
    // + AVX2, FMA, F16C, BMI1/2: 16 YMM registers of 8 floats.
    {"x86-64-v3", kX86_64V3Aliases, "x86-64-v3 (AVX2, FMA)", kX86Triple,
     "x86-64-v3", "", 8, 16},
    // + AVX-512 F/BW/CD/DQ/VL: 32 ZMM registers of 16 floats.
    {"x86-64-v4", kX86_64V4Aliases, "x86-64-v4 (AVX-512)", kX86Triple,
     "x86-64-v4", "", 16, 32},
    // Armv8-A: 32 NEON registers of 4 floats.
    {"aarch64", kAArch64Aliases, "Armv8-A (NEON)", "aarch64-unknown-linux-gnu",
     "generic", "+fp-armv8,+neon", 4, 32},
};

double hostMemoryGB() {
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  return pages > 0 && pageSize > 0 ? double(pages) * double(pageSize) / 1e9
                                   : 0.0;
}

/// "+a,+b" for the level: LLVM's features of its chip (x86), sorted, plus
/// its extra ones. x87 is left out: every x86-64 CPU has it, and neither
/// LLVM's host detection nor the runtime's reports it.
std::string levelFeatures(const CpuLevel &level) {
  llvm::SmallVector<std::string> features;
  if (llvm::Triple(level.triple).isX86()) {
    llvm::SmallVector<llvm::StringRef> fromChip;
    llvm::X86::getFeaturesForCPU(level.chip, fromChip, /*NeedPlus=*/true);
    for (llvm::StringRef f : fromChip)
      if (f != "+x87")
        features.push_back(f.str());
  }
  for (llvm::StringRef f : llvm::split(level.extraFeatures, ','))
    if (!f.empty())
      features.push_back(f.str());
  llvm::sort(features);
  return llvm::join(features, ",");
}

/// Whether every feature of `level` is in `features` ("+a,+b,...").
bool hasAllFeatures(llvm::StringRef features, llvm::StringRef level) {
  llvm::SmallVector<llvm::StringRef> have;
  features.split(have, ',', -1, /*KeepEmpty=*/false);
  return llvm::all_of(llvm::split(level, ','), [&](llvm::StringRef f) {
    return f.empty() || llvm::is_contained(have, f);
  });
}

// The host entry: what LLVM and the OS report about the machine we run on,
// with the host's exact features (AMX, VNNI, ...: `cpu` compiles for this
// machine at its best). Its isaLevel names the highest named level whose
// features the host has. Peak throughput and bandwidth are left at 0
// (unknown): no datasheet lists them. sits_mlir.targets.measure_host
// measures them once per machine and compile() hands them to the cost model
// (sits-reorder's peak-gflops and bandwidth-gbs); without them the cost
// model uses marked nominal figures.
TargetInfo makeHostTarget(llvm::ArrayRef<TargetInfo> levels) {
  static const std::string triple = llvm::sys::getProcessTriple();
  static const std::string cpu = llvm::sys::getHostCPUName().str();
  static const std::string features = [] {
    llvm::SmallVector<std::string> enabled;
    for (const auto &feature : llvm::sys::getHostCPUFeatures())
      if (feature.getValue())
        enabled.push_back("+" + feature.getKey().str());
    llvm::sort(enabled);
    return llvm::join(enabled, ",");
  }();
  llvm::Triple hostTriple(triple);
  const TargetInfo *level = nullptr;
  for (const TargetInfo &candidate : levels)
    if (llvm::Triple(candidate.triple).getArch() == hostTriple.getArch() &&
        hasAllFeatures(features, candidate.features))
      level = &candidate; // levels are listed in increasing order
  auto has = [&](llvm::StringRef f) {
    return hasAllFeatures(features, ("+" + f).str());
  };
  int64_t lanes = has("avx512f") ? 16 : has("avx2") || has("avx") ? 8 : 4;
  int64_t registers = has("avx512f") || hostTriple.isAArch64() ? 32 : 16;
  double memoryGB = hostMemoryGB();
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  long l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  double llcMB = double(l3 > 0 ? l3 : (l2 > 0 ? l2 : 0)) / (1024.0 * 1024.0);
  unsigned cores = std::thread::hardware_concurrency();
  return {"cpu",
          kCpuAliases,
          Vendor::Cpu,
          cpu,
          triple,
          cpu,
          features,
          cores ? int64_t(cores) : 1,
          lanes,
          registers,
          level ? level->name : llvm::StringRef(),
          memoryGB,
          0,
          llcMB,
          l1d > 0 ? double(l1d) / 1024.0 : 0.0,
          0,
          0,
          0,
          0,
          0,
          kFp8None,
          0,
          0};
}

const std::vector<TargetInfo> &table() {
  static const std::vector<TargetInfo> targets = [] {
    std::vector<TargetInfo> all(std::begin(kDatasheetTargets),
                                std::end(kDatasheetTargets));
    static const std::vector<std::string> features = [] {
      std::vector<std::string> out;
      for (const CpuLevel &level : kCpuLevels)
        out.push_back(levelFeatures(level));
      return out;
    }();
    size_t firstLevel = all.size();
    for (auto [level, featureList] : llvm::zip_equal(kCpuLevels, features))
      all.push_back({level.name,
                     level.aliases,
                     Vendor::Cpu,
                     level.architecture,
                     level.triple,
                     level.chip,
                     featureList,
                     /*computeUnits=*/0,
                     level.simdWidth,
                     level.vectorRegisters,
                     level.name,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     0,
                     kFp8None,
                     0,
                     0});
    all.push_back(makeHostTarget(llvm::ArrayRef(all).drop_front(firstLevel)));
    return all;
  }();
  return targets;
}

} // namespace

llvm::ArrayRef<TargetInfo> mlir::sits::target::getKnownTargets() {
  return table();
}

int64_t mlir::sits::target::getComputeUnits(const TargetInfo &info) {
  if (info.computeUnits > 0)
    return info.computeUnits;
  unsigned cores = std::thread::hardware_concurrency();
  return cores ? int64_t(cores) : 1;
}

double mlir::sits::target::getMemoryGB(const TargetInfo &info) {
  return info.memoryGB > 0 ? info.memoryGB : hostMemoryGB();
}

const TargetInfo *mlir::sits::target::lookupTarget(llvm::StringRef name) {
  for (const TargetInfo &info : table()) {
    if (info.name.equals_insensitive(name))
      return &info;
    for (llvm::StringRef alias : info.aliases)
      if (alias.equals_insensitive(name))
        return &info;
  }
  return nullptr;
}

std::string mlir::sits::target::getKnownTargetNames() {
  llvm::SmallVector<llvm::StringRef> names;
  for (const TargetInfo &info : table())
    names.push_back(info.name);
  return llvm::join(names, ", ");
}

llvm::StringRef mlir::sits::target::stringifyVendor(Vendor vendor) {
  switch (vendor) {
  case Vendor::Nvidia:
    return "nvidia";
  case Vendor::Amd:
    return "amd";
  case Vendor::Cpu:
    return "cpu";
  }
  llvm_unreachable("unknown vendor");
}
