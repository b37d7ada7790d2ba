//===- status.h - Error codes and Status/StatusOr of the runtime core -----===//
//
// Every public call of the runtime core reports failure through a `Status`
// (or a `StatusOr<T>`); no exception crosses the API. The style follows the
// KV allocator's (`sits/runtime/kv/status.h`): an OK status is a null pointer,
// an error carries its code, a message that reads well on its own, and the
// structured fields the Python bindings turn into typed exceptions
// (`subject`, `expected`, `actual`, `index`).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_STATUS_H
#define SITS_RUNTIME_STATUS_H

#include "sits/runtime/export.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sits::runtime {

/// Error codes of the runtime core. The Python layer maps them to exceptions:
/// kCorruptArtifact, kUnsupportedVersion, kIncompatibleTarget, kMissingSymbol
/// and kLoadFailed to `ArtifactError` subclasses, kSignatureMismatch to
/// `SignatureError`, kDeviceUnavailable to `DeviceError`.
enum class StatusCode : int32_t {
  kOk = 0,
  /// A bad argument to an API call: an invalid manifest handed to the writer,
  /// an unknown entry point name, a thread count < 0, a malformed device URI.
  /// `subject` names the argument or manifest field.
  kInvalidArgument = 1,
  /// A file that does not exist. `subject` is the path.
  kNotFound = 2,
  /// Reading or writing a file failed. `subject` is the path.
  kIoError = 3,
  /// The artifact is damaged or not an artifact: bad magic, a section out of
  /// bounds, a hash mismatch, a manifest that does not follow the schema, a
  /// code section that is not a loadable ELF object. `subject` names the part
  /// (a section or manifest field), `index` a byte offset when there is one.
  kCorruptArtifact = 4,
  /// The artifact's format version is newer than this runtime reads.
  /// `expected` is the newest supported version, `actual` the file's.
  kUnsupportedVersion = 5,
  /// The artifact is intact but was built for another machine: a different
  /// architecture or OS, or CPU features this host lacks (`missing`).
  kIncompatibleTarget = 6,
  /// An entry point's symbol is not exported by the code. `subject` is the
  /// symbol.
  kMissingSymbol = 7,
  /// The dynamic loader refused the code (an undefined symbol, ...).
  kLoadFailed = 8,
  /// A call's arguments do not match the entry point's signature: wrong
  /// count, dtype, rank or shape. `subject` is the argument's name, `index`
  /// its position, `expected`/`actual` what was wanted and what was given.
  kSignatureMismatch = 9,
  /// The device URI names a device that is not there (no driver, no such
  /// ordinal). `subject` is the URI.
  kDeviceUnavailable = 10,
  /// Recognised but not implemented yet (e.g. executing on a GPU).
  kUnimplemented = 11,
  /// A bug in the runtime (an impossible state). Please report it.
  kInternal = 12,
  /// An allocation failed. `index` is the byte count requested.
  kOutOfMemory = 13,
};

/// "InvalidArgument", "CorruptArtifact", ...
SITS_RUNTIME_API const char *statusCodeName(StatusCode code);

/// The payload of an error. Fields that do not apply keep their defaults.
struct ErrorInfo {
  StatusCode code = StatusCode::kOk;
  /// A complete sentence-like message, e.g. "artifact was built for x86_64
  /// with +avx512bf16, which this CPU lacks".
  std::string message;
  /// What the error is about: an argument, section, field, symbol, path, URI.
  std::string subject;
  /// What was required and what was found (dtype, shape, version, ...).
  std::string expected;
  std::string actual;
  /// An argument position or a byte offset; -1 when none applies.
  int64_t index = -1;
  /// kIncompatibleTarget: every CPU feature the code needs that the host
  /// lacks, LLVM spelling with the '+' ("+avx512bf16").
  std::vector<std::string> missing;
};

/// OK or an error with its payload. Cheap to return when OK.
class SITS_RUNTIME_API Status {
public:
  Status() noexcept = default;
  explicit Status(ErrorInfo info)
      : info_(std::make_unique<ErrorInfo>(std::move(info))) {}
  Status(StatusCode code, std::string message);
  Status(const Status &other)
      : info_(other.info_ ? std::make_unique<ErrorInfo>(*other.info_)
                          : nullptr) {}
  Status &operator=(const Status &other) {
    if (this != &other)
      info_ = other.info_ ? std::make_unique<ErrorInfo>(*other.info_) : nullptr;
    return *this;
  }
  Status(Status &&) noexcept = default;
  Status &operator=(Status &&) noexcept = default;

  static Status OK() { return Status(); }

  bool ok() const { return info_ == nullptr; }
  StatusCode code() const { return info_ ? info_->code : StatusCode::kOk; }
  /// The payload; for an OK status, an all-default ErrorInfo.
  const ErrorInfo &info() const;
  const std::string &message() const;
  /// "CorruptArtifact: ..." or "OK".
  std::string toString() const;

  /// Builder-style setters for the payload (no-ops on an OK status).
  Status &withSubject(std::string subject);
  Status &withExpected(std::string expected, std::string actual);
  Status &withIndex(int64_t index);

private:
  std::unique_ptr<ErrorInfo> info_;
};

/// A value or an error. Calling value() on an error aborts the process (a
/// programming error, never a reaction to input): check ok() first.
template <typename T> class StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_ = Status(StatusCode::kInternal,
                       "StatusOr constructed from an OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status &status() const & { return status_; }
  Status status() && { return std::move(status_); }
  StatusCode code() const { return status_.code(); }

  T &value() & {
    checkValue();
    return *value_;
  }
  const T &value() const & {
    checkValue();
    return *value_;
  }
  T &&value() && {
    checkValue();
    return std::move(*value_);
  }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() & { return value(); }
  const T &operator*() const & { return value(); }

private:
  void checkValue() const;
  Status status_;
  std::optional<T> value_;
};

namespace detail {
[[noreturn]] SITS_RUNTIME_API void abortOnBadStatusOrAccess(const Status &status);
} // namespace detail

template <typename T> void StatusOr<T>::checkValue() const {
  if (!value_)
    detail::abortOnBadStatusOrAccess(status_);
}

} // namespace sits::runtime

/// Returns early from the enclosing function when `expr` (a Status) fails.
#define SITS_RETURN_IF_ERROR(expr)                                             \
  do {                                                                         \
    ::sits::runtime::Status _sits_status = (expr);                             \
    if (!_sits_status.ok())                                                    \
      return _sits_status;                                                     \
  } while (0)

#endif // SITS_RUNTIME_STATUS_H
