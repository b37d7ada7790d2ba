//===- status.h - Error codes and Status/StatusOr of the whole runtime ----===//
//
// Every public call of the runtime (the core: artifacts, modules, devices,
// the thread pool; and the KV-cache allocator, sits/runtime/kv/) reports
// failure through a `Status` or a `StatusOr<T>`; no exception crosses the
// API. An OK status is a null pointer, so returning it costs nothing on hot
// paths. An error carries its `StatusCode`, a message that reads well on its
// own and includes the payload, and the structured payload fields of
// `ErrorInfo`, which the Python bindings turn into typed exceptions with
// attributes (sits_mlir.runtime.errors, sits_mlir.runtime.kv).
//
// This header and its implementation (src/support/status.cpp) live in the
// small static library SitsRuntimeSupport that both SitsRuntimeKV and
// SitsRuntime link; it depends on nothing but the C++ standard library.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_STATUS_H
#define SITS_RUNTIME_STATUS_H

#include "sits/runtime/export.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sits::runtime {

/// Every error code of the runtime, in three groups. Only the names are
/// stable (`statusCodeName`); the Python layer maps by name:
///   * core codes to sits_mlir.runtime.errors (kCorruptArtifact,
///     kUnsupportedVersion, kIncompatibleTarget, kMissingSymbol, kLoadFailed,
///     kNotFound to `ArtifactError` subclasses, kSignatureMismatch to
///     `SignatureError`, kDeviceUnavailable to `DeviceError`, kDriverError
///     to `GpuDriverError`);
///   * KV codes (spec kv-allocator.md §4.9) to sits_mlir.runtime.kv's
///     exceptions (`KVOutOfBlocks`, `KVCapacityError`, ...).
enum class StatusCode : int32_t {
  kOk = 0,

  // --- shared -----------------------------------------------------------
  /// A bad argument: an invalid manifest handed to the writer, an unknown
  /// entry point, a malformed device URI, a bad KV pool field, a negative
  /// count, a position out of range, an output buffer too small. Payload:
  /// `subject` (the argument or field), for KV calls also `value`.
  kInvalidArgument = 1,
  /// A bug or an impossible state. In the KV allocator: the pool is poisoned
  /// (a failed invariant); `invariant` is 1..10 for I1..I10, 0 for an
  /// impossible state found elsewhere, and every later call fails fast with
  /// this code.
  kInternal = 2,
  /// An allocation failed. Payload: `value` (bytes requested).
  kOutOfMemory = 3,
  /// Recognised but not implemented yet (e.g. PTX on a HIP device).
  kUnimplemented = 4,

  // --- runtime core: files, artifacts, modules, devices ------------------
  /// A file that does not exist. `subject` is the path.
  kNotFound = 10,
  /// Reading or writing a file failed. `subject` is the path.
  kIoError = 11,
  /// The artifact is damaged or not an artifact: bad magic, a section out of
  /// bounds, a hash mismatch, a manifest that does not follow the schema, a
  /// code section that is not a loadable ELF object. `subject` names the part
  /// (a section or manifest field), `index` a byte offset when there is one.
  kCorruptArtifact = 12,
  /// The artifact's format version is newer than this runtime reads.
  /// `expected` is the newest supported version, `actual` the file's.
  kUnsupportedVersion = 13,
  /// The artifact is intact but was built for another machine: a different
  /// architecture or OS, or CPU features this host lacks (`missing`).
  kIncompatibleTarget = 14,
  /// An entry point's symbol is not exported by the code. `subject` is the
  /// symbol.
  kMissingSymbol = 15,
  /// The dynamic loader refused the code (an undefined symbol, ...).
  kLoadFailed = 16,
  /// A call's arguments do not match the entry point's signature: wrong
  /// count, dtype, rank or shape. `subject` is the argument's name, `index`
  /// its position, `expected`/`actual` what was wanted and what was given.
  kSignatureMismatch = 17,
  /// The device URI names a device that is not there (no driver, no such
  /// ordinal). `subject` is the URI.
  kDeviceUnavailable = 18,
  /// A call of the GPU driver library failed (CUDA / HIP). `subject` is the
  /// device's URI, `expected` the driver function ("cuMemAlloc_v2"),
  /// `actual` the driver's error name ("CUDA_ERROR_OUT_OF_MEMORY"), `value`
  /// its numeric code.
  kDriverError = 19,
  /// The values of a call's inputs are outside what the model accepts: an
  /// index past the extent it indexes (ONNX Gather, GatherElements,
  /// ScatterElements, ScatterND), found by the code's own checks (the
  /// status argument). `subject` is the entry point, `value` the check's
  /// number; the message says which node.
  kOutOfRange = 20,

  // --- KV-cache allocator (spec §4.9) -----------------------------------
  /// Retryable: free + evictable blocks < needed (+ watermark for
  /// admission). Payload: `needed`, `available`, `evictable`, `evicting`.
  kOutOfBlocks = 30,
  /// Permanent: the request can never fit. Payload: `subject` (the limit's
  /// name: "max_seq_len", "usable_blocks"), `value` (requested), `limit`.
  kCapacityExceeded = 31,
  /// A call named a sequence that is not live. Payload: `seq_id`.
  kUnknownSequence = 32,
  /// `add_sequence` / `fork` into a live id. Payload: `seq_id`.
  kSequenceExists = 33,
  /// Operation not allowed in the current state. Payload: `state`, maybe
  /// `seq_id`.
  kInvalidState = 34,
  /// `swap_out` without enough host blocks. Payload: `needed`, `available`.
  kHostTierFull = 35,
  /// Block-level unref of a block whose reference count is 0. Payload:
  /// `block_id`.
  kDoubleFree = 36,
};

/// The code's name: "InvalidArgument", "CorruptArtifact", "OutOfBlocks", ...
SITS_RUNTIME_API const char *statusCodeName(StatusCode code);

/// The payload of an error. Fields that do not apply to a code keep their
/// defaults (see each code above for the ones it sets).
struct ErrorInfo {
  StatusCode code = StatusCode::kOk;
  /// A complete message that includes the payload, e.g. "artifact was built
  /// for x86_64 with +avx512bf16, which this CPU lacks" or "needed = 5,
  /// available = 3, evictable = 1, evicting = 0".
  std::string message;
  /// What the error is about: an argument or config field, a section, a
  /// manifest field, a symbol, a path, a URI, or a KV limit's name.
  std::string subject;
  /// What was required and what was found (dtype, shape, version, ...).
  std::string expected;
  std::string actual;
  /// An argument position or a byte offset; -1 when none applies.
  int64_t index = -1;
  /// kIncompatibleTarget: every CPU feature the code needs that the host
  /// lacks, LLVM spelling with the '+' ("+avx512bf16").
  std::vector<std::string> missing;

  /// kInvalidArgument (KV): the offending value; kCapacityExceeded: what was
  /// asked; kOutOfMemory: bytes requested.
  int64_t value = 0;
  /// kCapacityExceeded: the limit that `value` exceeds.
  int64_t limit = 0;
  /// kOutOfBlocks / kHostTierFull.
  int64_t needed = 0;
  int64_t available = 0;
  int64_t evictable = 0;
  int64_t evicting = 0;
  /// kUnknownSequence / kSequenceExists / kInvalidState (when a sequence is
  /// concerned).
  bool has_seq_id = false;
  uint64_t seq_id = 0;
  /// kDoubleFree.
  int32_t block_id = -1;
  /// kInternal (KV): violated invariant (1..10 = I1..I10; 0 = impossible
  /// state).
  int32_t invariant = 0;
  /// kInvalidState: the state that forbids the call ("SWAPPED", "ACTIVE",
  /// "NO_HOST_TIER", ...).
  std::string state;
  /// KV batch calls: index of the item that failed (-1 for single calls).
  int64_t batch_index = -1;
};

/// OK or an error with its payload. Cheap to return when OK: a null
/// pointer, and every member that an OK status touches is inline (hot paths
/// of the KV allocator return one per call).
class SITS_RUNTIME_API Status {
public:
  Status() noexcept = default;
  explicit Status(ErrorInfo info) : info_(newInfo(std::move(info))) {}
  Status(StatusCode code, std::string message);
  Status(const Status &other)
      : info_(other.info_ ? copyInfo(*other.info_) : nullptr) {}
  Status &operator=(const Status &other) {
    if (this != &other) {
      Status copy(other);
      std::swap(info_, copy.info_);
    }
    return *this;
  }
  Status(Status &&other) noexcept : info_(other.info_) {
    other.info_ = nullptr;
  }
  Status &operator=(Status &&other) noexcept {
    std::swap(info_, other.info_);
    return *this;
  }
  ~Status() {
    if (info_)
      deleteInfo(info_);
  }

  static Status OK() { return Status(); }

  bool ok() const { return info_ == nullptr; }
  StatusCode code() const { return info_ ? info_->code : StatusCode::kOk; }
  /// The payload; for an OK status, an all-default ErrorInfo.
  const ErrorInfo &info() const;
  /// The payload of an error, for builders that add to it. Must not be
  /// called on an OK status.
  ErrorInfo &mutableInfo() { return *info_; }
  const std::string &message() const;
  /// "CorruptArtifact: ..." / "OutOfBlocks: needed = 5, ..." or "OK".
  std::string toString() const;

  /// Builder-style setters for the payload (no-ops on an OK status).
  Status &withSubject(std::string subject);
  Status &withExpected(std::string expected, std::string actual);
  Status &withIndex(int64_t index);
  Status &withValue(int64_t value);

private:
  // Out of line: only errors allocate and free a payload.
  static ErrorInfo *newInfo(ErrorInfo &&info);
  static ErrorInfo *copyInfo(const ErrorInfo &info);
  static void deleteInfo(ErrorInfo *info) noexcept;

  ErrorInfo *info_ = nullptr;
};

/// A value or an error. Calling value() on an error aborts the process (a
/// programming error, never a reaction to input): check ok() first.
template <typename T> class StatusOr {
public:
  StatusOr(T value) : value_(std::move(value)) {}
  StatusOr(Status status) : status_(std::move(status)) {
    if (status_.ok())
      status_ =
          Status(StatusCode::kInternal,
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
  T &&operator*() && { return std::move(*this).value(); }

private:
  void checkValue() const;
  Status status_;
  std::optional<T> value_;
};

namespace detail {
[[noreturn]] SITS_RUNTIME_API void
abortOnBadStatusOrAccess(const Status &status);
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
