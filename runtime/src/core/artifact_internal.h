//===- artifact_internal.h - Reader internals shared with Module (internal)
//===//
#ifndef SITS_RUNTIME_CORE_ARTIFACT_INTERNAL_H
#define SITS_RUNTIME_CORE_ARTIFACT_INTERNAL_H

#include "sits/runtime/artifact.h"

#include <memory>

namespace sits::runtime {

/// The bytes of a file: a read-only mapping or a heap copy.
struct Storage {
  virtual ~Storage() = default;
  const uint8_t *data = nullptr;
  size_t size = 0;
  /// OK while every byte of `data` can be read: a file mapping whose file
  /// was truncated after it was mapped cannot (its pages past the new end
  /// raise SIGBUS).
  virtual Status intact() const { return Status::OK(); }
};

struct ArtifactReader::Impl {
  std::shared_ptr<const Storage> storage;
  Manifest manifest;
  uint32_t formatVersion = 0;
  std::string contentHash;
  bool weightsVerified = false;
  std::vector<SectionInfo> sections;
};

} // namespace sits::runtime

#endif // SITS_RUNTIME_CORE_ARTIFACT_INTERNAL_H
