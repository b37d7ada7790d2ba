//===- status.cpp - Status helpers ----------------------------------------===//
#include "sits/runtime/kv/status.h"

#include <cstdio>
#include <cstdlib>

namespace sits::runtime::kv {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::kOk:
    return "OK";
  case StatusCode::kInvalidArgument:
    return "InvalidArgument";
  case StatusCode::kOutOfBlocks:
    return "OutOfBlocks";
  case StatusCode::kCapacityExceeded:
    return "CapacityExceeded";
  case StatusCode::kUnknownSequence:
    return "UnknownSequence";
  case StatusCode::kSequenceExists:
    return "SequenceExists";
  case StatusCode::kInvalidState:
    return "InvalidState";
  case StatusCode::kHostTierFull:
    return "HostTierFull";
  case StatusCode::kDoubleFree:
    return "DoubleFree";
  case StatusCode::kInternal:
    return "Internal";
  case StatusCode::kOutOfMemory:
    return "OutOfMemory";
  }
  return "Unknown";
}

const ErrorInfo &Status::info() const {
  static const ErrorInfo okInfo;
  return info_ ? *info_ : okInfo;
}

const std::string &Status::message() const { return info().message; }

std::string Status::toString() const {
  if (ok())
    return "OK";
  std::string out = statusCodeName(info_->code);
  if (!info_->message.empty()) {
    out += ": ";
    out += info_->message;
  }
  return out;
}

namespace detail {
void abortOnBadStatusOrAccess(const Status &status) {
  std::fprintf(stderr, "sits::runtime::kv: value() of a failed StatusOr: %s\n",
               status.toString().c_str());
  std::abort();
}
} // namespace detail

} // namespace sits::runtime::kv
