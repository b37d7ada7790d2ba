//===- builtins_test.cpp - Compiler builtins the runtime provides ---------===//
//
// Looks __truncsfbf2 up the way compiled code does (the global scope) and
// checks its rounding against the bf16 format: exact values, round to
// nearest even on ties, overflow to infinity, NaN kept quiet.
//
//===----------------------------------------------------------------------===//
#include "core_test_util.h"

#include <cmath>
#include <cstring>
#include <dlfcn.h>
#include <limits>

namespace {

uint16_t bf16Of(float (*trunc)(float), float x) {
  float r = trunc(x);
  uint32_t bits;
  std::memcpy(&bits, &r, sizeof(bits));
  return uint16_t(bits & 0xffffu);
}

float fromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

TEST(Builtins, TruncSFBF2RoundsToNearestEven) {
  // What compiled code does: resolve it in the global scope.
  void *self = dlopen(nullptr, RTLD_NOW);
  auto trunc = reinterpret_cast<float (*)(float)>(dlsym(self, "__truncsfbf2"));
  ASSERT_NE(trunc, nullptr);
  EXPECT_EQ(bf16Of(trunc, 1.0f), 0x3f80);
  EXPECT_EQ(bf16Of(trunc, -2.0f), 0xc000);
  EXPECT_EQ(bf16Of(trunc, 0.0f), 0x0000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even 1.
  EXPECT_EQ(bf16Of(trunc, fromBits(0x3f808000u)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between two odd/even neighbours: up, to even.
  EXPECT_EQ(bf16Of(trunc, fromBits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(bf16Of(trunc, fromBits(0x3f808001u)), 0x3f81); // above half
  EXPECT_EQ(bf16Of(trunc, std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(bf16Of(trunc, -std::numeric_limits<float>::infinity()), 0xff80);
  uint16_t nan = bf16Of(trunc, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  // A signalling NaN whose payload sits in the dropped bits stays a NaN.
  EXPECT_NE(bf16Of(trunc, fromBits(0x7f800001u)) & 0x007f, 0);
}

} // namespace
