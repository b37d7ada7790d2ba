//===- status.cpp - Status helpers
//-----------------------------------------===//
#include "sits/runtime/status.h"

#include <cstdio>
#include <cstdlib>

namespace sits::runtime {

const char *statusCodeName(StatusCode code) {
  switch (code) {
  case StatusCode::kOk:
    return "OK";
  case StatusCode::kInvalidArgument:
    return "InvalidArgument";
  case StatusCode::kInternal:
    return "Internal";
  case StatusCode::kOutOfMemory:
    return "OutOfMemory";
  case StatusCode::kUnimplemented:
    return "Unimplemented";
  case StatusCode::kNotFound:
    return "NotFound";
  case StatusCode::kIoError:
    return "IoError";
  case StatusCode::kCorruptArtifact:
    return "CorruptArtifact";
  case StatusCode::kUnsupportedVersion:
    return "UnsupportedVersion";
  case StatusCode::kIncompatibleTarget:
    return "IncompatibleTarget";
  case StatusCode::kMissingSymbol:
    return "MissingSymbol";
  case StatusCode::kLoadFailed:
    return "LoadFailed";
  case StatusCode::kSignatureMismatch:
    return "SignatureMismatch";
  case StatusCode::kDeviceUnavailable:
    return "DeviceUnavailable";
  case StatusCode::kDriverError:
    return "DriverError";
  case StatusCode::kOutOfRange:
    return "OutOfRange";
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
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  ErrorInfo info;
  info.code = code;
  info.message = std::move(message);
  info_ = newInfo(std::move(info));
}

ErrorInfo *Status::newInfo(ErrorInfo &&info) {
  return new ErrorInfo(std::move(info));
}

ErrorInfo *Status::copyInfo(const ErrorInfo &info) {
  return new ErrorInfo(info);
}

void Status::deleteInfo(ErrorInfo *info) noexcept { delete info; }

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

Status &Status::withSubject(std::string subject) {
  if (info_)
    info_->subject = std::move(subject);
  return *this;
}

Status &Status::withExpected(std::string expected, std::string actual) {
  if (info_) {
    info_->expected = std::move(expected);
    info_->actual = std::move(actual);
  }
  return *this;
}

Status &Status::withIndex(int64_t index) {
  if (info_)
    info_->index = index;
  return *this;
}

Status &Status::withValue(int64_t value) {
  if (info_)
    info_->value = value;
  return *this;
}

namespace detail {
void abortOnBadStatusOrAccess(const Status &status) {
  std::fprintf(stderr, "sits::runtime: value() of a failed StatusOr: %s\n",
               status.toString().c_str());
  std::abort();
}
} // namespace detail

} // namespace sits::runtime
