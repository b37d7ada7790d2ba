//===- dtype.h - Element types of entry-point arguments
//--------------------===//
//
// The element types an artifact's manifest can name, spelled as in MLIR
// ("f32", "bf16", "i64", "u8", "bool"). `bool` is MLIR's i1, stored one byte
// per element (as numpy and DLPack store it).
//
// The sub-byte integers and the 4- and 8-bit floats (i4, f8e4m3fn, ...) are
// stored one element per byte, as ml_dtypes stores them: the value in the low
// bits, the rest zero. NumPy and DLPack have no such types, so their arrays
// cross the boundary as their bits (storageDType: u8; bf16 likewise as u16).
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
  kI4,
  kU4,
  kI2,
  kU2,
  kF8E4M3FN,
  kF8E5M2,
  kF8E4M3FNUZ,
  kF8E5M2FNUZ,
  kF8E8M0FNU,
  kF4E2M1FN,
};

/// "f32", "bf16", ... (the manifest spelling).
SITS_RUNTIME_API std::string_view dtypeName(DType dtype);
/// The DType spelled `name`, or nullopt.
SITS_RUNTIME_API std::optional<DType> parseDType(std::string_view name);
/// Bytes per element.
SITS_RUNTIME_API size_t dtypeSize(DType dtype);
/// The plain type an array of `dtype` is passed as through NumPy/DLPack:
/// u16 for bf16, u8 for the 4- and 8-bit floats and sub-byte integers,
/// `dtype` itself otherwise.
SITS_RUNTIME_API DType storageDType(DType dtype);
/// Every DType, in declaration order.
SITS_RUNTIME_API const DType *allDTypes(size_t *count);

} // namespace sits::runtime

#endif // SITS_RUNTIME_DTYPE_H
