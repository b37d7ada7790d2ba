//===- builtins.cpp - Compiler builtins compiled code may call ------------===//
//
// LLVM rounds f32 to bf16 with one instruction only on targets with AVX-512
// BF16 or AVX-NE-CONVERT; elsewhere it calls compiler-rt's __truncsfbf2,
// which libgcc has only from GCC 13 on. sits-cpu-expand-small-floats turns
// the conversions the model computes into integer code, but LLVM can still
// emit the call itself (materializing a bf16 constant it folded from a
// load, for one), and a missing symbol would make the code fail to load.
// SitsRuntime provides it: round to nearest even, NaN stays a quiet NaN.
//
//===----------------------------------------------------------------------===//
#include "sits/runtime/export.h"

#include <cstdint>
#include <cstring>

namespace {

uint16_t roundToBF16(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) // NaN: keep it, quiet
    return uint16_t((bits >> 16) | 0x0040u);
  uint32_t bias = 0x7fffu + ((bits >> 16) & 1u);
  return uint16_t((bits + bias) >> 16);
}

} // namespace

// x86-64 returns bf16 in the low 16 bits of xmm0, as the low half of a
// float's bits: returning such a float is that convention without needing
// a compiler with the __bf16 type.
extern "C" SITS_RUNTIME_API float __truncsfbf2(float x) {
  uint32_t bits = roundToBF16(x);
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}
