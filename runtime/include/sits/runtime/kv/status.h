//===- status.h - The KV allocator's errors: the runtime's Status
//----------===//
//
// The KV allocator reports failure with the runtime's one `Status` /
// `StatusOr` (sits/runtime/status.h): its codes (kOutOfBlocks,
// kCapacityExceeded, kUnknownSequence, kSequenceExists, kInvalidState,
// kHostTierFull, kDoubleFree, plus the shared kInvalidArgument, kInternal,
// kOutOfMemory) and the structured payload of spec §4.9 in `ErrorInfo`
// (needed / available / evictable, seq_id, subject = the field name, value,
// invariant, batch_index, ...). The names are re-exported into the kv
// namespace so that `kv::Status` and `using namespace sits::runtime::kv`
// keep working.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_KV_STATUS_H
#define SITS_RUNTIME_KV_STATUS_H

#include "sits/runtime/status.h"

namespace sits::runtime::kv {

using ::sits::runtime::ErrorInfo;
using ::sits::runtime::Status;
using ::sits::runtime::StatusCode;
using ::sits::runtime::statusCodeName;
using ::sits::runtime::StatusOr;

} // namespace sits::runtime::kv

#endif // SITS_RUNTIME_KV_STATUS_H
