//===- status.h - Error codes and Status/StatusOr for the KV allocator ----===//
//
// Every public call of the KV allocator reports failure through a `Status`
// (or a `StatusOr<T>`); no exception crosses the API. An error carries its
// `StatusCode` plus the payload fields of spec §4.9 (needed / available /
// evictable, the sequence id, the field name, the invariant id, ...), so the
// Python bindings can map each code to a typed exception with its payload.
//
// An OK `Status` is a null pointer: returning it costs nothing on hot paths.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KV_STATUS_H
#define SITS_RUNTIME_KV_STATUS_H

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace sits::runtime::kv {

/// Error codes of spec §4.9 (plus `kOutOfMemory` of §4.2).
enum class StatusCode : int32_t {
  kOk = 0,
  /// Bad config field, negative count, position out of range, output buffer
  /// too small. Payload: `field`, `value`.
  kInvalidArgument = 1,
  /// Retryable: free + evictable blocks < needed (+ watermark for admission).
  /// Payload: `needed`, `available`, `evictable`, `evicting`.
  kOutOfBlocks = 2,
  /// Permanent: the request can never fit. Payload: `field` (the limit's
  /// name), `value` (requested), `limit`.
  kCapacityExceeded = 3,
  /// A call named a sequence that is not live. Payload: `seq_id`.
  kUnknownSequence = 4,
  /// `add_sequence` / `fork` into a live id. Payload: `seq_id`.
  kSequenceExists = 5,
  /// Operation not allowed in the current state. Payload: `state`, maybe
  /// `seq_id`.
  kInvalidState = 6,
  /// `swap_out` without enough host blocks. Payload: `needed`, `available`.
  kHostTierFull = 7,
  /// Block-level unref of a block whose reference count is 0. Payload:
  /// `block_id`.
  kDoubleFree = 8,
  /// The pool is poisoned (failed invariant or impossible state). Payload:
  /// `invariant` (1..10 for I1..I10, 0 for an impossible state found
  /// elsewhere). Every later call fails fast with this code.
  kInternal = 9,
  /// Memory for the KV tensors could not be allocated. Payload: `value`
  /// (bytes requested).
  kOutOfMemory = 10,
};

/// "InvalidArgument", "OutOfBlocks", ... (the spec's names).
const char *statusCodeName(StatusCode code);

/// The payload of an error. Fields that do not apply to a code keep their
/// defaults.
struct ErrorInfo {
  StatusCode code = StatusCode::kOk;
  /// Human-readable text that includes the payload (e.g.
  /// "needed = 5, available = 3, evictable = 1").
  std::string message;
  /// InvalidArgument: the config field or argument; CapacityExceeded: the
  /// limit's name ("max_seq_len", "max_blocks_per_seq", "usable_blocks").
  std::string field;
  /// InvalidArgument: the offending value; CapacityExceeded: what was asked;
  /// OutOfMemory: bytes requested.
  int64_t value = 0;
  /// CapacityExceeded: the limit that `value` exceeds.
  int64_t limit = 0;
  /// OutOfBlocks / HostTierFull.
  int64_t needed = 0;
  int64_t available = 0;
  int64_t evictable = 0;
  int64_t evicting = 0;
  /// UnknownSequence / SequenceExists / InvalidState (when a sequence is
  /// concerned).
  bool has_seq_id = false;
  uint64_t seq_id = 0;
  /// DoubleFree.
  int32_t block_id = -1;
  /// Internal: violated invariant (1..10 = I1..I10; 0 = impossible state).
  int32_t invariant = 0;
  /// InvalidState: the state that forbids the call ("SWAPPED", "ACTIVE",
  /// "no_host_tier", ...).
  std::string state;
  /// Batch calls: index of the item that failed (-1 for single calls).
  int64_t batch_index = -1;
};

/// OK or an error with its payload. Cheap to return when OK.
class Status {
public:
  Status() noexcept = default;
  explicit Status(ErrorInfo info)
      : info_(std::make_unique<ErrorInfo>(std::move(info))) {}
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
  ErrorInfo &mutableInfo() { return *info_; }
  const std::string &message() const;
  /// "OutOfBlocks: needed = 5, available = 3, ..." or "OK".
  std::string toString() const;

private:
  std::unique_ptr<ErrorInfo> info_;
};

/// A value or an error. Calling value() on an error aborts the process (a
/// programming error, never a reaction to user input): check ok() first.
template <typename T> class StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.ok()) {
      ErrorInfo info;
      info.code = StatusCode::kInternal;
      info.message = "StatusOr constructed from an OK status without a value";
      status_ = Status(std::move(info));
    }
  }

  bool ok() const { return status_.ok(); }
  const Status &status() const { return status_; }
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
  T &&operator*() && { return std::move(*this).value(); }

private:
  void checkValue() const;
  Status status_;
  std::optional<T> value_;
};

namespace detail {
[[noreturn]] void abortOnBadStatusOrAccess(const Status &status);
} // namespace detail

template <typename T> void StatusOr<T>::checkValue() const {
  if (!value_)
    detail::abortOnBadStatusOrAccess(status_);
}

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_KV_STATUS_H
