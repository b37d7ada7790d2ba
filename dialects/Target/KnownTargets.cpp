//===- KnownTargets.cpp - The table of hardware SITS compiles for ---------===//

#include "dialects/Target/KnownTargets.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/TargetParser/Host.h"

#include <thread>
#include <unistd.h>

using namespace mlir::sits::target;

namespace {

const llvm::StringRef kH100Aliases[] = {"h100-sxm", "sm_90", "sm_90a"};
const llvm::StringRef kH200Aliases[] = {"h200-sxm"};
const llvm::StringRef kA100Aliases[] = {"a100-sxm-80gb", "sm_80"};
const llvm::StringRef kV100Aliases[] = {"v100-sxm2", "sm_70"};
const llvm::StringRef kMI300XAliases[] = {"gfx942"};
const llvm::StringRef kCpuAliases[] = {"host"};

constexpr llvm::StringLiteral kNvptxTriple = "nvptx64-nvidia-cuda";
constexpr llvm::StringLiteral kAmdgcnTriple = "amdgcn-amd-amdhsa";

// Datasheet figures, dense (no structured sparsity). Field order:
// name, aliases, vendor, architecture, triple, chip, features,
// computeUnits, simdWidth, memoryGB, memoryBandwidthGBs, lastLevelCacheMB,
// sharedMemoryPerUnitKB, peak fp32/fp16/bf16/fp8 TFLOP/s, int8 TOP/s,
// fp8Formats, interconnectGBs, minPtxVersion.
const TargetInfo kDatasheetTargets[] = {
    // NVIDIA H100 Tensor Core GPU datasheet (SXM5); Hopper tuning guide for
    // 228 KB shared memory per SM. sm_90 needs PTX ISA >= 8.0 (+ptx80).
    {"h100", kH100Aliases, Vendor::Nvidia, "Hopper", kNvptxTriple, "sm_90",
     "+ptx80", 132, 32, 80, 3350, 50, 228, 67, 989, 989, 1979, 1979,
     kFp8E4M3 | kFp8E5M2, /*NVLink 4*/ 900, 80},
    // NVIDIA H200 Tensor Core GPU datasheet (SXM): Hopper compute with
    // 141 GB of HBM3e at 4.8 TB/s.
    {"h200", kH200Aliases, Vendor::Nvidia, "Hopper", kNvptxTriple, "sm_90",
     "+ptx80", 132, 32, 141, 4800, 50, 228, 67, 989, 989, 1979, 1979,
     kFp8E4M3 | kFp8E5M2, /*NVLink 4*/ 900, 80},
    // NVIDIA A100 Tensor Core GPU datasheet (SXM4 80 GB); Ampere tuning
    // guide for 164 KB shared memory per SM. No FP8 before sm_89.
    {"a100", kA100Aliases, Vendor::Nvidia, "Ampere", kNvptxTriple, "sm_80",
     "+ptx70", 108, 32, 80, 2039, 40, 164, 19.5, 312, 312, 0, 624, kFp8None,
     /*NVLink 3*/ 600, 70},
    // NVIDIA V100 Tensor Core GPU datasheet (SXM2 32 GB); Volta tuning guide
    // for 96 KB shared memory per SM. Tensor cores take FP16 only.
    {"v100", kV100Aliases, Vendor::Nvidia, "Volta", kNvptxTriple, "sm_70",
     "+ptx60", 80, 32, 32, 900, 6, 96, 15.7, 125, 0, 0, 0, kFp8None,
     /*NVLink 2*/ 300, 60},
    // AMD Instinct MI300X data sheet; CDNA3 ISA guide for wave64 and 64 KB
    // LDS per CU. 256 MB Infinity Cache is the last level.
    {"mi300x", kMI300XAliases, Vendor::Amd, "CDNA3", kAmdgcnTriple, "gfx942",
     "", 304, 64, 192, 5300, 256, 64, 163.4, 1307.4, 1307.4, 2614.9, 2614.9,
     kFp8E4M3 | kFp8E5M2, /*Infinity Fabric, aggregate*/ 896, 0},
};

// The host entry: what LLVM and the OS report about the machine we run on.
// Peak throughput and bandwidth are left at 0 (unknown): no datasheet lists
// them. sits_mlir.targets.measure_host measures them once per machine and
// compile() hands them to the cost model (sits-reorder's peak-gflops and
// bandwidth-gbs); without them the cost model uses marked nominal figures.
TargetInfo makeHostTarget() {
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
  auto has = [&](llvm::StringRef f) {
    return llvm::is_contained(llvm::split(features, ','), ("+" + f).str());
  };
  int64_t lanes = has("avx512f") ? 16 : has("avx2") || has("avx") ? 8 : 4;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  double memoryGB = pages > 0 && pageSize > 0
                        ? double(pages) * double(pageSize) / 1e9
                        : 0.0;
  long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE), l2 = sysconf(_SC_LEVEL2_CACHE_SIZE);
  long l1d = sysconf(_SC_LEVEL1_DCACHE_SIZE);
  double llcMB = double(l3 > 0 ? l3 : (l2 > 0 ? l2 : 0)) / (1024.0 * 1024.0);
  unsigned cores = std::thread::hardware_concurrency();
  return {"cpu", kCpuAliases, Vendor::Cpu, cpu, triple, cpu, features,
          cores ? int64_t(cores) : 1, lanes, memoryGB, 0, llcMB,
          l1d > 0 ? double(l1d) / 1024.0 : 0.0, 0, 0, 0, 0, 0, kFp8None, 0,
          0};
}

const std::vector<TargetInfo> &table() {
  static const std::vector<TargetInfo> targets = [] {
    std::vector<TargetInfo> all(std::begin(kDatasheetTargets),
                                std::end(kDatasheetTargets));
    all.push_back(makeHostTarget());
    return all;
  }();
  return targets;
}

} // namespace

llvm::ArrayRef<TargetInfo> mlir::sits::target::getKnownTargets() {
  return table();
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
