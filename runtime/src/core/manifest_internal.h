//===- manifest_internal.h - Manifest helpers shared by reader and writer
//--===//
#ifndef SITS_RUNTIME_CORE_MANIFEST_INTERNAL_H
#define SITS_RUNTIME_CORE_MANIFEST_INTERNAL_H

#include "sits/runtime/artifact.h"

namespace sits::runtime {
namespace json {
class Value;
}
/// Validates a parsed manifest and fills `m` (all but `m.json`).
Status manifestFromJson(const json::Value &root, Manifest &m);
} // namespace sits::runtime

#endif // SITS_RUNTIME_CORE_MANIFEST_INTERNAL_H
