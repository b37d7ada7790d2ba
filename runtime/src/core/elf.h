//===- elf.h - Reading an ELF shared object's exports without loading it
//---===//
//
// The loader must know a code section exports every entry symbol before the
// dynamic loader runs any of it (constructors run inside dlopen), so the
// dynamic symbol table is read from the bytes. Internal.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_ELF_H
#define SITS_RUNTIME_CORE_ELF_H

#include "sits/runtime/artifact.h"
#include "sits/runtime/status.h"

#include <set>
#include <string>

namespace sits::runtime {

struct ElfSummary {
  /// Architecture of e_machine, normalised ("x86_64", "aarch64", ...).
  std::string arch;
  /// Defined, globally visible functions in .dynsym.
  std::set<std::string> exportedFunctions;
};

/// Parses a 64-bit little-endian ELF shared object (ET_DYN). Fails with
/// kCorruptArtifact (subject = `what`) when the bytes are not one or any
/// table lies outside them.
StatusOr<ElfSummary> inspectSharedObject(ByteSpan bytes,
                                         const std::string &what);

} // namespace sits::runtime

#endif // SITS_RUNTIME_CORE_ELF_H
