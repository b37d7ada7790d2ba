//===- errors.h - Builders for the allocator's errors (internal) ----------===//
#ifndef SITS_RUNTIME_SRC_KV_ERRORS_H
#define SITS_RUNTIME_SRC_KV_ERRORS_H

#include "sits/runtime/kv/status.h"

#include <string>

namespace sits::runtime::kv::errors {

inline Status invalidArgument(std::string field, int64_t value,
                              std::string detail) {
  ErrorInfo e;
  e.code = StatusCode::kInvalidArgument;
  e.message = field + " = " + std::to_string(value) + ": " + detail;
  e.subject = std::move(field);
  e.value = value;
  return Status(std::move(e));
}

inline Status capacityExceeded(std::string limitName, int64_t value,
                               int64_t limit, std::string what) {
  ErrorInfo e;
  e.code = StatusCode::kCapacityExceeded;
  e.message = what + " = " + std::to_string(value) + " exceeds " + limitName +
              " = " + std::to_string(limit) + " (can never fit)";
  e.subject = std::move(limitName);
  e.value = value;
  e.limit = limit;
  return Status(std::move(e));
}

inline Status outOfBlocks(int64_t needed, int64_t available, int64_t evictable,
                          int64_t evicting, int64_t watermark) {
  ErrorInfo e;
  e.code = StatusCode::kOutOfBlocks;
  e.message = "needed = " + std::to_string(needed) +
              ", available = " + std::to_string(available) +
              ", evictable = " + std::to_string(evictable) +
              ", evicting = " + std::to_string(evicting);
  if (watermark > 0)
    e.message += ", watermark = " + std::to_string(watermark);
  e.needed = needed;
  e.available = available;
  e.evictable = evictable;
  e.evicting = evicting;
  return Status(std::move(e));
}

inline Status hostTierFull(int64_t needed, int64_t available) {
  ErrorInfo e;
  e.code = StatusCode::kHostTierFull;
  e.message = "needed = " + std::to_string(needed) +
              ", available = " + std::to_string(available) + " host blocks";
  e.needed = needed;
  e.available = available;
  return Status(std::move(e));
}

inline Status unknownSequence(uint64_t seq) {
  ErrorInfo e;
  e.code = StatusCode::kUnknownSequence;
  e.message = "seq " + std::to_string(seq) + " is not live";
  e.has_seq_id = true;
  e.seq_id = seq;
  return Status(std::move(e));
}

inline Status sequenceExists(uint64_t seq) {
  ErrorInfo e;
  e.code = StatusCode::kSequenceExists;
  e.message = "seq " + std::to_string(seq) + " is already live";
  e.has_seq_id = true;
  e.seq_id = seq;
  return Status(std::move(e));
}

inline Status invalidState(std::string state, std::string detail) {
  ErrorInfo e;
  e.code = StatusCode::kInvalidState;
  e.message = "state " + state + ": " + detail;
  e.state = std::move(state);
  return Status(std::move(e));
}

inline Status invalidSeqState(uint64_t seq, std::string state,
                              std::string detail) {
  Status s = invalidState(std::move(state),
                          "seq " + std::to_string(seq) + ": " + detail);
  s.mutableInfo().has_seq_id = true;
  s.mutableInfo().seq_id = seq;
  return s;
}

inline Status doubleFree(int32_t block) {
  ErrorInfo e;
  e.code = StatusCode::kDoubleFree;
  e.message = "block " + std::to_string(block) + " has reference count 0";
  e.block_id = block;
  return Status(std::move(e));
}

inline Status internal(int invariant, std::string detail) {
  ErrorInfo e;
  e.code = StatusCode::kInternal;
  if (invariant > 0)
    e.message.append("I")
        .append(std::to_string(invariant))
        .append(" violated: ");
  else
    e.message.append("impossible state: ");
  e.message.append(detail).append(" (pool poisoned)");
  e.invariant = invariant;
  return Status(std::move(e));
}

inline Status outOfMemory(int64_t bytes) {
  ErrorInfo e;
  e.code = StatusCode::kOutOfMemory;
  e.message = "could not allocate " + std::to_string(bytes) + " bytes";
  e.value = bytes;
  return Status(std::move(e));
}

} // namespace sits::runtime::kv::errors

#endif // SITS_RUNTIME_SRC_KV_ERRORS_H
