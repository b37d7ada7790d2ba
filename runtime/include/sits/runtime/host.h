//===- host.h - What this machine can run
//----------------------------------===//
//
// The host's architecture, OS and CPU features in LLVM's spelling (the
// names `-mattr` and the target table use: "avx512f", "sse4.1", "amx-bf16"),
// detected with cpuid on x86-64 (the same bits LLVM's getHostCPUFeatures
// reads, including the OS-enabled register state) and from /proc/cpuinfo
// elsewhere. Used to refuse code built for features this CPU lacks.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_HOST_H
#define SITS_RUNTIME_HOST_H

#include "sits/runtime/export.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sits::runtime {

struct SITS_RUNTIME_API HostCpuInfo {
  /// "x86_64", "aarch64".
  std::string arch;
  /// "linux".
  std::string os;
  /// The CPU's model name from /proc/cpuinfo ("" when unknown).
  std::string modelName;
  /// x86-64: the vendor cpuid names ("GenuineIntel", "AuthenticAMD"); ""
  /// elsewhere. Kernels tune for it where microarchitectures differ.
  std::string vendor;
  /// Present features, LLVM names without '+', sorted.
  std::vector<std::string> features;
  /// Every feature name this runtime can test, present or not, sorted.
  std::vector<std::string> knownFeatures;

  /// true/false for a known feature ("avx512f" or "+avx512f"); nullopt when
  /// the name is unknown to this runtime.
  std::optional<bool> hasFeature(std::string_view name) const;
};

/// Detected once per process.
SITS_RUNTIME_API const HostCpuInfo &hostCpuInfo();

/// Normalises a triple's architecture ("amd64" -> "x86_64", "arm64" ->
/// "aarch64"); returns the input unchanged when unknown.
SITS_RUNTIME_API std::string normalizeArch(std::string_view arch);

} // namespace sits::runtime

#endif // SITS_RUNTIME_HOST_H
