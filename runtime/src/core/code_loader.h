//===- code_loader.h - Loading a code section into the process (internal) -===//
//
// Loads the bytes of a verified `code.<target>` section with the dynamic
// loader without ever giving it a path someone could swap: the bytes go to
// an anonymous, sealed memfd that is dlopen'ed as /proc/self/fd/N (a private
// 0700 temporary directory is the fallback when memfd or /proc is missing).
// Before the first load, SitsRuntime promotes itself to the global symbol
// scope so the code's undefined `mlirAsyncRuntime*` references resolve to
// it even when SitsRuntime itself was loaded RTLD_LOCAL (as a Python
// extension's dependency is).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_CODE_LOADER_H
#define SITS_RUNTIME_CORE_CODE_LOADER_H

#include "sits/runtime/artifact.h"
#include "sits/runtime/status.h"

#include <memory>
#include <string>

namespace sits::runtime {

class LoadedCode {
public:
  /// `label` names the memfd (visible in /proc/<pid>/maps).
  static StatusOr<std::unique_ptr<LoadedCode>> load(ByteSpan bytes,
                                                    const std::string &label);
  ~LoadedCode();
  LoadedCode(const LoadedCode &) = delete;
  LoadedCode &operator=(const LoadedCode &) = delete;

  /// dlsym; nullptr when absent.
  void *symbol(const std::string &name) const;
  /// How the code was loaded: "memfd" or "tempfile".
  const std::string &method() const { return method_; }

private:
  LoadedCode() = default;
  void *handle_ = nullptr;
  /// The memfd stays open while the code is loaded: its /proc/self/fd/N
  /// name is how glibc identifies the object, and a reused fd number would
  /// make a later dlopen return this object instead of the new one.
  int fd_ = -1;
  std::string path_;
  std::string method_;
};

/// Makes SitsRuntime's exported symbols (sitsRuntimeParallelFor, the async
/// runtime ABI, ...) globally
/// visible to code loaded later. Idempotent; thread-safe.
Status promoteRuntimeToGlobalScope();

} // namespace sits::runtime

#endif // SITS_RUNTIME_CORE_CODE_LOADER_H
