//===- fuzz_mutate.cpp - The deterministic driver's mutation engine -------===//
#include "fuzz_support.h"

#include <algorithm>
#include <cstring>
#include <string_view>

namespace sits::fuzz {
namespace {

/// Bytes that change what a JSON parser or a binary reader does.
constexpr uint8_t kInterestingBytes[] = {
    0x00, 0x01, 0x1f, 0x20, 0x7f, 0x80, 0xbf, 0xc0, 0xc3, 0xed,
    0xf4, 0xf5, 0xff, '"',  '\\', '/',  '{',  '}',  '[',  ']',
    ',',  ':',  '0',  '1',  '9',  '-',  '+',  '.',  'e',  'E',
    'u',  't',  'f',  'n',  ' ',  '\t', '\n', '\r'};

/// Tokens, valid and not, for the JSON grammar and its edges.
constexpr std::string_view kTokens[] = {
    "{", "}", "[", "]", ",", ":", "\"", "\\", "{}", "[]", "\"\"",
    "\"a\":", "\"k\": 1, ", "true", "false", "null", "tru", "nul", "NaN",
    "Infinity", "-Infinity",
    // escapes: valid, truncated, surrogates paired and not, bad hex
    "\\n", "\\u", "\\u00", "\\u0000", "\\u001f", "\\u00e9", "\\uffff",
    "\\ud800", "\\udbff\\udfff", "\\udc00", "\\ud800\\u0041", "\\ud800\\",
    "\\uD83D\\uDE00", "\\x41", "\\'", "\\ug000",
    // numbers at and past the edges of int64 and double
    "0", "-0", "-", "01", "1.", ".5", "1e", "1e+", "1E-7", "-0.0", "0.0e0",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "18446744073709551616", "1e308", "1.8e308", "1e309",
    "-1e309", "1e-400", "4.9e-324", "2.2250738585072014e-308",
    "123456789012345678901234567890123456789012345678901234567890",
    "0.000000000000000000000000000000000000000000000000000000000001",
    "1e99999999999999999999",
    // UTF-8: valid multi-byte, overlong, surrogate, out of range, truncated
    "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xc0\xaf", "\xc1\xbf",
    "\xe0\x80\xaf", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80",
    "\xf8\x88\x80\x80\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98", "\x80", "\xfe",
    "\xff",
    // control characters and whitespace JSON does not allow
    std::string_view("\0", 1), "\x01", "\x1f", "\x0b", "\x0c", "\xc2\xa0",
    // manifest keys and values, so that schema checks are reached
    "\"format_version\"", "\"entry_points\"", "\"args\"", "\"role\"",
    "\"weights\"", "\"input\"", "\"output\"", "\"shape\"", "\"dim_names\"",
    "\"dtype\"", "\"i8\"", "\"f32\"", "\"bool\"", "\"target\"", "\"features\"",
    "\"+sse2\"", "\"device\"", "\"content_hash\"", "\"updated_in_place\"",
    "\"symbol\"", "\"name\"", "-1", "-2", "4294967295", "4294967296"};

size_t insertBytes(uint8_t *d, size_t size, size_t maxSize, size_t pos,
                   const uint8_t *bytes, size_t n) {
  n = std::min(n, maxSize - size);
  if (n == 0)
    return size;
  std::memmove(d + pos + n, d + pos, size - pos);
  std::memcpy(d + pos, bytes, n);
  return size + n;
}

size_t eraseBytes(uint8_t *d, size_t size, size_t pos, size_t n) {
  n = std::min(n, size - pos);
  std::memmove(d + pos, d + pos + n, size - pos - n);
  return size - n;
}

size_t insertToken(uint8_t *d, size_t size, size_t maxSize, size_t pos,
                   std::string_view token) {
  return insertBytes(d, size, maxSize, pos,
                     reinterpret_cast<const uint8_t *>(token.data()),
                     token.size());
}

/// `count` repetitions of an opening token (deep nesting), at `pos`.
size_t insertNesting(uint8_t *d, size_t size, size_t maxSize, size_t pos,
                     Rng &rng) {
  static constexpr size_t kDepths[] = {1,  2,  8,   63,   64,
                                       65, 66, 100, 1000, 5000};
  size_t depth = kDepths[rng.below(sizeof(kDepths) / sizeof(kDepths[0]))];
  std::string_view open =
      rng.oneIn(2) ? std::string_view("[") : std::string_view("{\"k\":");
  for (size_t i = 0; i < depth && size < maxSize; ++i)
    size = insertToken(d, size, maxSize, pos, open);
  if (rng.oneIn(2)) { // and maybe close some of them
    std::string_view close = open == "[" ? "]" : "}";
    size_t at = std::min(size, pos + depth * open.size());
    for (size_t i = 0, n = rng.below(depth + 1); i < n && size < maxSize; ++i)
      size = insertToken(d, size, maxSize, at, close);
  }
  return size;
}

} // namespace

size_t mutateOnce(uint8_t *d, size_t size, size_t maxSize, Rng &rng) {
  if (maxSize == 0)
    return 0;
  size = std::min(size, maxSize);
  const size_t pos = rng.below(size + 1);       // an insertion point
  const size_t at = size ? rng.below(size) : 0; // an existing byte
  switch (rng.below(14)) {
  case 0: // flip one bit
    if (size)
      d[at] ^= uint8_t(1u << rng.below(8));
    return size;
  case 1: // a random byte
    if (size)
      d[at] = uint8_t(rng.next());
    return size;
  case 2: // an interesting byte
    if (size)
      d[at] = kInterestingBytes[rng.below(sizeof(kInterestingBytes))];
    return size;
  case 3: // ASCII +/- 1 (a digit, a bracket, a quote nearby)
    if (size)
      d[at] = uint8_t(d[at] + (rng.oneIn(2) ? 1 : -1));
    return size;
  case 4: // erase a short range
    if (size)
      return eraseBytes(d, size, at, 1 + rng.below(std::min<size_t>(size, 16)));
    return size;
  case 5: { // insert random bytes
    uint8_t bytes[8];
    size_t n = 1 + rng.below(sizeof(bytes));
    for (size_t i = 0; i < n; ++i)
      bytes[i] = uint8_t(rng.next());
    return insertBytes(d, size, maxSize, pos, bytes, n);
  }
  case 6: // insert a token
  case 7:
    return insertToken(
        d, size, maxSize, pos,
        kTokens[rng.below(sizeof(kTokens) / sizeof(kTokens[0]))]);
  case 8: // overwrite with a token (replacing a value, a key, a number)
    if (size) {
      std::string_view t =
          kTokens[rng.below(sizeof(kTokens) / sizeof(kTokens[0]))];
      size_t n = std::min(t.size(), size - at);
      std::memcpy(d + at, t.data(), n);
    }
    return size;
  case 9: // duplicate a range somewhere else (repeated members, items)
    if (size) {
      size_t n = 1 + rng.below(std::min<size_t>(size - at, 64));
      uint8_t chunk[64];
      std::memcpy(chunk, d + at, n);
      return insertBytes(d, size, maxSize, pos, chunk, n);
    }
    return size;
  case 10: // truncate (unterminated strings, objects, escapes)
    return rng.below(size + 1);
  case 11: // deep nesting
    return insertNesting(d, size, maxSize, pos, rng);
  case 12: { // copy a range over another (same size)
    if (size < 2)
      return size;
    size_t from = rng.below(size), to = rng.below(size);
    size_t n = 1 + rng.below(std::min(size - from, size - to));
    std::memmove(d + to, d + from, n);
    return size;
  }
  default: { // swap two bytes
    if (size < 2)
      return size;
    size_t b = rng.below(size);
    std::swap(d[at], d[b]);
    return size;
  }
  }
}

} // namespace sits::fuzz
