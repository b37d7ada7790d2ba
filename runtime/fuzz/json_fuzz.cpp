//===- json_fuzz.cpp - Fuzz target: the manifest's JSON parser
//-------------===//
//
// Artifacts may be hostile, and their manifest is read by the hand-written
// parser of src/core/json.cpp. For any bytes:
//   * json::parse returns (no crash, no hang, no sanitizer report) and a
//     failure has a message with the byte offset;
//   * a parsed value prints to JSON that parses back to an equal value and
//     prints the same again (print is a fixed point after one round);
//   * parseManifest (UTF-8 check, parse, schema) succeeds or fails with
//     kCorruptArtifact, and accepts nothing that is not valid UTF-8 JSON.
//
//===----------------------------------------------------------------------===//
#include "fuzz_support.h"
#include "json.h"

#include "sits/runtime/artifact.h"

#include <cstring>
#include <string>
#include <string_view>

namespace {

using sits::runtime::json::Value;

bool sameValue(const Value &a, const Value &b) {
  if (a.kind() != b.kind())
    return false;
  switch (a.kind()) {
  case Value::Kind::kNull:
    return true;
  case Value::Kind::kBool:
    return a.asBool() == b.asBool();
  case Value::Kind::kInt:
    return a.asInt() == b.asInt();
  case Value::Kind::kDouble: {
    // Bit for bit (so -0.0 stays -0.0); NaN and infinities never parse.
    double x = a.asDouble(), y = b.asDouble();
    return std::memcmp(&x, &y, sizeof(double)) == 0;
  }
  case Value::Kind::kString:
    return a.asString() == b.asString();
  case Value::Kind::kArray:
    if (a.items().size() != b.items().size())
      return false;
    for (size_t i = 0; i < a.items().size(); ++i)
      if (!sameValue(a.items()[i], b.items()[i]))
        return false;
    return true;
  case Value::Kind::kObject:
    if (a.members().size() != b.members().size())
      return false;
    for (size_t i = 0; i < a.members().size(); ++i)
      if (a.members()[i].first != b.members()[i].first ||
          !sameValue(a.members()[i].second, b.members()[i].second))
        return false;
    return true;
  }
  return false;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  namespace json = sits::runtime::json;
  const std::string_view text(reinterpret_cast<const char *>(data), size);

  Value v;
  std::string error;
  const bool parsed = json::parse(text, v, error);
  if (!parsed) {
    SITS_FUZZ_REQUIRE(error.find(" at byte ") != std::string::npos);
  } else {
    const std::string printed = json::print(v);
    Value again;
    std::string error2;
    SITS_FUZZ_REQUIRE(json::parse(printed, again, error2));
    SITS_FUZZ_REQUIRE(sameValue(v, again));
    SITS_FUZZ_REQUIRE(json::print(again) == printed);
  }

  const bool utf8 = json::isValidUtf8(text);
  sits::runtime::StatusOr<sits::runtime::Manifest> m =
      sits::runtime::parseManifest(text);
  if (m.ok()) {
    SITS_FUZZ_REQUIRE(utf8 && parsed);
    SITS_FUZZ_REQUIRE(m->json == text);
    SITS_FUZZ_REQUIRE(!m->entryPoints.empty());
  } else {
    SITS_FUZZ_REQUIRE(m.code() == sits::runtime::StatusCode::kCorruptArtifact);
    SITS_FUZZ_REQUIRE(!m.status().message().empty());
  }
  return 0;
}
