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

/// One entry of the table; the fields and their meaning are listed in
/// TargetFields.def.
struct TargetInfo {
#define SITS_TARGET_STRING(NAME, PY) llvm::StringRef NAME;
#define SITS_TARGET_INT(NAME, PY) int64_t NAME;
#define SITS_TARGET_REAL(NAME, PY) double NAME;
#define SITS_TARGET_PEAK(NAME, DTYPE) double NAME;
#define SITS_TARGET_ALIASES(NAME, PY) llvm::ArrayRef<llvm::StringRef> NAME;
#define SITS_TARGET_VENDOR(NAME, PY) Vendor NAME;
#define SITS_TARGET_FP8(NAME, PY) unsigned NAME;
#include "dialects/Target/TargetFields.def"
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
