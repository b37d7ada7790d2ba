//===- dtype.cpp - Element types ------------------------------------------===//
#include "sits/runtime/dtype.h"

#include <iterator>

namespace sits::runtime {
namespace {
struct DTypeEntry {
  DType dtype;
  std::string_view name;
  size_t size;
};
constexpr DTypeEntry kDTypes[] = {
    {DType::kF64, "f64", 8},
    {DType::kF32, "f32", 4},
    {DType::kF16, "f16", 2},
    {DType::kBF16, "bf16", 2},
    {DType::kI64, "i64", 8},
    {DType::kI32, "i32", 4},
    {DType::kI16, "i16", 2},
    {DType::kI8, "i8", 1},
    {DType::kU64, "u64", 8},
    {DType::kU32, "u32", 4},
    {DType::kU16, "u16", 2},
    {DType::kU8, "u8", 1},
    {DType::kBool, "bool", 1},
    {DType::kI4, "i4", 1},
    {DType::kU4, "u4", 1},
    {DType::kI2, "i2", 1},
    {DType::kU2, "u2", 1},
    {DType::kF8E4M3FN, "f8e4m3fn", 1},
    {DType::kF8E5M2, "f8e5m2", 1},
    {DType::kF8E4M3FNUZ, "f8e4m3fnuz", 1},
    {DType::kF8E5M2FNUZ, "f8e5m2fnuz", 1},
    {DType::kF8E8M0FNU, "f8e8m0fnu", 1},
    {DType::kF4E2M1FN, "f4e2m1fn", 1},
};
constexpr DType kAll[] = {
    DType::kF64,        DType::kF32,       DType::kF16,     DType::kBF16,
    DType::kI64,        DType::kI32,       DType::kI16,     DType::kI8,
    DType::kU64,        DType::kU32,       DType::kU16,     DType::kU8,
    DType::kBool,       DType::kI4,        DType::kU4,      DType::kI2,
    DType::kU2,         DType::kF8E4M3FN,  DType::kF8E5M2,  DType::kF8E4M3FNUZ,
    DType::kF8E5M2FNUZ, DType::kF8E8M0FNU, DType::kF4E2M1FN};
} // namespace

std::string_view dtypeName(DType dtype) {
  for (const DTypeEntry &e : kDTypes)
    if (e.dtype == dtype)
      return e.name;
  return "?";
}

std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeEntry &e : kDTypes)
    if (e.name == name)
      return e.dtype;
  // MLIR's spelling of the signless types and of bool.
  if (name == "i1")
    return DType::kBool;
  if (name == "ui8")
    return DType::kU8;
  if (name == "ui16")
    return DType::kU16;
  if (name == "ui32")
    return DType::kU32;
  if (name == "ui64")
    return DType::kU64;
  return std::nullopt;
}

size_t dtypeSize(DType dtype) {
  for (const DTypeEntry &e : kDTypes)
    if (e.dtype == dtype)
      return e.size;
  return 0;
}

DType storageDType(DType dtype) {
  switch (dtype) {
  case DType::kBF16:
    return DType::kU16;
  case DType::kI4:
  case DType::kU4:
  case DType::kI2:
  case DType::kU2:
  case DType::kF8E4M3FN:
  case DType::kF8E5M2:
  case DType::kF8E4M3FNUZ:
  case DType::kF8E5M2FNUZ:
  case DType::kF8E8M0FNU:
  case DType::kF4E2M1FN:
    return DType::kU8;
  default:
    return dtype;
  }
}

const DType *allDTypes(size_t *count) {
  *count = std::size(kAll);
  return kAll;
}

} // namespace sits::runtime
