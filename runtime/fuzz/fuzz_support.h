//===- fuzz_support.h - Shared pieces of the runtime's fuzz targets -------===//
//
// The fuzz targets of runtime/fuzz are libFuzzer-style: each defines
// `LLVMFuzzerTestOneInput` (and may define `LLVMFuzzerCustomMutator`), and
// links either with libFuzzer (-fsanitize=fuzzer, CMake option
// SITS_LIBFUZZER) or with the deterministic driver of fuzz_driver.cpp, which
// is what ctest runs (under ASan+UBSan in tools/dev/sanitize.sh). The driver
// provides `LLVMFuzzerMutate` like libFuzzer does, so a custom mutator works
// the same with both.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_FUZZ_FUZZ_SUPPORT_H
#define SITS_RUNTIME_FUZZ_FUZZ_SUPPORT_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

extern "C" {
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/// Mutates data[0, size) in place into at most `maxSize` bytes and returns
/// the new size (libFuzzer's default mutators, or the driver's).
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t maxSize);
}

namespace sits::fuzz {

/// A small deterministic PRNG (xorshift64*): the same seed gives the same
/// inputs on every platform and standard library.
class Rng {
public:
  explicit Rng(uint64_t seed) : s_(seed ? seed : 0x9e3779b97f4a7c15ull) {}
  uint64_t next() {
    s_ ^= s_ >> 12;
    s_ ^= s_ << 25;
    s_ ^= s_ >> 27;
    return s_ * 0x2545f4914f6cdd1dull;
  }
  /// Uniform-ish in [0, n); 0 when n == 0.
  size_t below(size_t n) { return n ? size_t(next() % n) : 0; }
  bool oneIn(size_t n) { return below(n) == 0; }

private:
  uint64_t s_;
};

/// The driver's mutation engine, byte- and JSON-aware: bit flips, random
/// and "interesting" bytes, insertions and erasures, duplicated ranges,
/// truncation, JSON tokens (escapes, surrogates, huge and malformed
/// numbers, literals), invalid UTF-8, unterminated strings and runs of
/// nesting. Applies one mutation to data[0, size) (capacity `maxSize`) and
/// returns the new size (<= maxSize).
size_t mutateOnce(uint8_t *data, size_t size, size_t maxSize, Rng &rng);

/// A property of the target does not hold: prints and aborts (the driver,
/// like libFuzzer, saves the input that did it).
[[noreturn]] inline void fail(const char *what) {
  std::fprintf(stderr, "fuzz target: property violated: %s\n", what);
  std::abort();
}

} // namespace sits::fuzz

#define SITS_FUZZ_REQUIRE(cond)                                                \
  do {                                                                         \
    if (!(cond))                                                               \
      ::sits::fuzz::fail(#cond);                                               \
  } while (0)

#endif // SITS_RUNTIME_FUZZ_FUZZ_SUPPORT_H
