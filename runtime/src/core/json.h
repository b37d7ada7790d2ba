//===- json.h - A small JSON value, parser and printer (internal)
//----------===//
//
// Enough JSON for manifests: objects keep their key order, integers that fit
// stay int64, duplicate keys and nesting deeper than 64 are errors, and the
// parser never crashes on hostile input and takes O(n log n) time at worst
// (it reads the manifest of files that may be damaged or crafted; fuzzed by
// runtime/fuzz/json_fuzz.cpp). Not part of the public API.
//
//===----------------------------------------------------------------------===//
#ifndef SITS_RUNTIME_CORE_JSON_H
#define SITS_RUNTIME_CORE_JSON_H

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sits::runtime::json {

class Value {
public:
  enum class Kind : uint8_t {
    kNull,
    kBool,
    kInt,
    kDouble,
    kString,
    kArray,
    kObject
  };
  using Member = std::pair<std::string, Value>;

  Value() = default;
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value number(double d);
  static Value string(std::string s);
  static Value array();
  static Value object();

  Kind kind() const { return kind_; }
  bool isNull() const { return kind_ == Kind::kNull; }
  bool isBool() const { return kind_ == Kind::kBool; }
  bool isInt() const { return kind_ == Kind::kInt; }
  bool isNumber() const {
    return kind_ == Kind::kInt || kind_ == Kind::kDouble;
  }
  bool isString() const { return kind_ == Kind::kString; }
  bool isArray() const { return kind_ == Kind::kArray; }
  bool isObject() const { return kind_ == Kind::kObject; }

  bool asBool() const { return bool_; }
  int64_t asInt() const { return int_; }
  double asDouble() const {
    return kind_ == Kind::kInt ? double(int_) : double_;
  }
  const std::string &asString() const { return string_; }

  const std::vector<Value> &items() const { return items_; }
  std::vector<Value> &items() { return items_; }
  void push(Value v);

  const std::vector<Member> &members() const { return members_; }
  std::vector<Member> &members() { return members_; }
  /// The member called `key`, or nullptr.
  const Value *find(std::string_view key) const;
  Value *find(std::string_view key);
  /// Replaces member `key` in place, or appends it.
  void set(std::string key, Value v);
  /// Removes member `key` (no-op when absent).
  void erase(std::string_view key);

  /// "null", "boolean", "integer", "number", "string", "array", "object".
  static const char *kindName(Kind kind);

private:
  Kind kind_ = Kind::kNull;
  bool bool_ = false;
  int64_t int_ = 0;
  double double_ = 0;
  std::string string_;
  std::vector<Value> items_;
  std::vector<Member> members_;
};

/// Parses `text` (which must be one JSON value, whitespace around allowed).
/// On failure returns false and sets `error` to a message with the byte
/// offset.
bool parse(std::string_view text, Value &out, std::string &error);

/// Prints `v`: objects one member per line indented by two spaces, arrays of
/// scalars on one line.
std::string print(const Value &v);

/// Whether `text` is well-formed UTF-8 (no overlongs, no surrogates).
bool isValidUtf8(std::string_view text);

} // namespace sits::runtime::json

#endif // SITS_RUNTIME_CORE_JSON_H
