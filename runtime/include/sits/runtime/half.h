//===- half.h - IEEE binary16 conversions ---------------------------------===//
//
// Portable f16 <-> f32 conversions for the runtime's scalar paths (f16
// logits, the f16 parameters of KIVI KV blocks); vector paths use F16C.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_HALF_H
#define SITS_RUNTIME_HALF_H

#include <cstdint>
#include <cstring>

namespace sits::runtime {

/// IEEE binary16 to f32 (exact).
inline float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;
  } else { // subnormal: normalize
    uint32_t e = 113;
    while (!(mant & 0x400u)) {
      mant <<= 1;
      --e;
    }
    bits = sign | (e << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

/// f32 to IEEE binary16, rounded to nearest even; finite values beyond the
/// largest f16 (65504) saturate to it, NaN stays NaN.
inline uint16_t floatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u)
    return uint16_t(sign | 0x7e00u);
  if (x >= 0x477ff000u) // rounds to 65520 or more
    return uint16_t(sign | 0x7bffu);
  if (x < 0x38800000u) { // below the smallest normal f16 (2^-14)
    if (x < 0x33000000u) // below half the smallest subnormal
      return sign;
    const uint32_t e = x >> 23, mant = (x & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e; // 14..24 : value = mant * 2^(e-150)
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u)))
      ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = ((x >> 13) - (112u << 10)) & 0xffffu;
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
    ++h;
  return uint16_t(sign | h);
}

} // namespace sits::runtime

#endif // SITS_RUNTIME_HALF_H
