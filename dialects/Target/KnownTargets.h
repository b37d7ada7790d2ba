//===- KnownTargets.h - The table of hardware SITS compiles for -*- C++ -*-===//
//
// One table of hardware facts, read by every pass that needs them (through
// #sits.target) and by Python (through the C API). Figures are public
// datasheet numbers; each entry in KnownTargets.cpp cites its source.
//
//===----------------------------------------------------------------------===//

#ifndef SITS_DIALECTS_TARGET_KNOWNTARGETS_H
#define SITS_DIALECTS_TARGET_KNOWNTARGETS_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include <cstdint>
#include <string>

namespace mlir::sits::target {

enum class Vendor { Nvidia, Amd, Cpu };

/// Low-precision floating-point formats a target computes in natively.
enum Fp8Formats : unsigned {
  kFp8None = 0,
  kFp8E4M3 = 1u << 0,
  kFp8E5M2 = 1u << 1,
};

struct TargetInfo {
  llvm::StringRef name;
  /// Other names accepted for this target (chip names, SKU names).
  llvm::ArrayRef<llvm::StringRef> aliases;
  Vendor vendor;
  /// Marketing architecture ("Hopper", "CDNA3", host CPU name for the host).
  llvm::StringRef architecture;
  /// LLVM target triple, chip and features code generation uses.
  llvm::StringRef triple;
  llvm::StringRef chip;
  llvm::StringRef features;
  /// SMs (NVIDIA), CUs (AMD) or cores (CPU). 0 for the named CPU
  /// instruction-set targets, which describe no particular machine: code for
  /// them is tiled for the cores of the machine that compiles it (see
  /// getComputeUnits).
  int64_t computeUnits;
  /// Threads that execute in lockstep: warp (32) or wavefront (64); SIMD
  /// float32 lanes on a CPU.
  int64_t simdWidth;
  /// Architectural SIMD registers a CPU core has (16 with AVX2, 32 with
  /// AVX-512 or NEON): what bounds a register block of accumulators. 0 on
  /// GPUs.
  int64_t vectorRegisters;
  /// CPU targets: the named instruction-set level this entry's code runs on
  /// ("x86-64-v3"); the host entry names the highest level its features
  /// include. Empty on GPUs.
  llvm::StringRef isaLevel;
  double memoryGB;
  /// 0 when unknown (the host CPU's bandwidth is measured, not listed).
  double memoryBandwidthGBs;
  /// Last-level cache (L2 on NVIDIA, Infinity Cache on MI300X, L3 on a CPU).
  double lastLevelCacheMB;
  /// Shared memory (NVIDIA) / LDS (AMD) per compute unit; L1D for a CPU core.
  double sharedMemoryPerUnitKB;
  /// Dense peak throughput per dtype in TFLOP/s (TOP/s for int8); 0 means
  /// the target has no native support (or, for the host, not yet measured).
  double peakFp32Tflops;
  double peakFp16Tflops;
  double peakBf16Tflops;
  double peakFp8Tflops;
  double peakInt8Tops;
  unsigned fp8Formats;
  /// Interconnect bandwidth per device in GB/s (0: none).
  double interconnectGBs;
  /// Minimum PTX ISA version (e.g. 80 for 8.0) for NVIDIA targets, else 0.
  int64_t minPtxVersion;
};

/// All known targets, in a fixed order: GPUs, the named CPU instruction-set
/// targets, then the host CPU (`cpu`), detected on first use.
llvm::ArrayRef<TargetInfo> getKnownTargets();

/// The target's compute units, or this machine's core count for a target
/// that lists none (the named CPU instruction-set targets).
int64_t getComputeUnits(const TargetInfo &info);

/// The target's memory in GB, or this machine's for a target that lists
/// none.
double getMemoryGB(const TargetInfo &info);

/// Looks a target up by canonical name or alias (case-insensitive). Returns
/// null when unknown.
const TargetInfo *lookupTarget(llvm::StringRef nameOrAlias);

/// Comma-separated canonical names, for diagnostics.
std::string getKnownTargetNames();

llvm::StringRef stringifyVendor(Vendor vendor);

} // namespace mlir::sits::target

#endif // SITS_DIALECTS_TARGET_KNOWNTARGETS_H
