//===- errors.h - Engine error helpers -------------------------*- C++ -*-===//
#ifndef SITS_RUNTIME_ENGINE_ERRORS_H
#define SITS_RUNTIME_ENGINE_ERRORS_H

#include "sits/runtime/status.h"

#include <string>

namespace sits::runtime::engine {

/// An InvalidArgument status naming the argument (`subject`) at fault.
inline Status invalidArgument(const char *subject, std::string message) {
  Status status(StatusCode::kInvalidArgument, std::move(message));
  status.withSubject(subject);
  return status;
}

} // namespace sits::runtime::engine

#endif // SITS_RUNTIME_ENGINE_ERRORS_H
