//===- dtype.h - Element types of entry-point arguments --------------------===//
//
// The element types an artifact's manifest can name, spelled as in MLIR
// ("f32", "bf16", "i64", "u8", "bool"). `bool` is MLIR's i1, stored one byte
// per element (as numpy and DLPack store it).
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_DTYPE_H
#define SITS_RUNTIME_DTYPE_H

#include "sits/runtime/export.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace sits::runtime {

enum class DType : uint8_t {
  kF64,
  kF32,
  kF16,
  kBF16,
  kI64,
  kI32,
  kI16,
  kI8,
  kU64,
  kU32,
  kU16,
  kU8,
  kBool,
};

/// "f32", "bf16", ... (the manifest spelling).
SITS_RUNTIME_API std::string_view dtypeName(DType dtype);
/// The DType spelled `name`, or nullopt.
SITS_RUNTIME_API std::optional<DType> parseDType(std::string_view name);
/// Bytes per element.
SITS_RUNTIME_API size_t dtypeSize(DType dtype);
/// Every DType, in declaration order.
SITS_RUNTIME_API const DType *allDTypes(size_t *count);

} // namespace sits::runtime

#endif // SITS_RUNTIME_DTYPE_H
