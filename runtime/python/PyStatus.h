//===- PyStatus.h - Status → typed Python exception (module-internal)
//------===//
//
// Shared by the sources of sits_mlir._sits_runtime (SitsRuntimeModule.cpp,
// KVBindings.cpp): a failed `sits::runtime::Status` becomes the typed
// exception that sits_mlir.runtime.errors._from_status builds from the
// code's name, the message and the structured payload of `ErrorInfo`.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_PYTHON_PYSTATUS_H
#define SITS_RUNTIME_PYTHON_PYSTATUS_H

#include "sits/runtime/kv/allocator.h"
#include "sits/runtime/status.h"

#include <nanobind/nanobind.h>

#include <memory>
#include <vector>

namespace sits::runtime::kv {
class Memory;
} // namespace sits::runtime::kv

namespace sits::runtime::python {

/// Which family of exceptions a status maps to: the core's
/// (ArtifactError, SignatureError, ...) or the KV allocator's (KVOutOfBlocks,
/// UnknownSequence, ...). The code alone does not say: kInvalidArgument and
/// kInternal are shared.
enum class ErrorDomain { kCore, kKV };

/// Raises the Python exception for `status` (never returns).
[[noreturn]] void raise(const Status &status,
                        ErrorDomain domain = ErrorDomain::kCore);

inline void check(const Status &s, ErrorDomain domain = ErrorDomain::kCore) {
  if (!s.ok())
    raise(s, domain);
}

template <typename T>
T unwrap(StatusOr<T> &&s, ErrorDomain domain = ErrorDomain::kCore) {
  if (!s.ok())
    raise(s.status(), domain);
  return std::move(s).value();
}

/// Adds the KV allocator's classes and functions to the module.
void bindKV(nanobind::module_ &m);

/// The allocator behind a native `KVAllocator` object (raises TypeError for
/// anything else, InvalidState when it is closed); the engine shares it.
std::shared_ptr<kv::Allocator> sharedAllocator(nanobind::handle allocator);
/// The memory behind a native `KVMemory` object (the same errors).
std::shared_ptr<kv::Memory> sharedMemory(nanobind::handle memory);
/// BlockCopy tuples (epoch, src_tier, src, dst_tier, dst, tokens), as
/// take_pending_copies returns them; KVInvalidArgument for anything else.
std::vector<kv::BlockCopy> parseCopies(nanobind::handle copies);

/// Adds the generation engine (EngineBindings.cpp).
void bindEngine(nanobind::module_ &m);

} // namespace sits::runtime::python

#endif // SITS_RUNTIME_PYTHON_PYSTATUS_H
