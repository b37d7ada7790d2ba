//===- json.cpp - A small JSON value, parser and printer
//-------------------===//
#include "json.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>

namespace sits::runtime::json {

Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.bool_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.int_ = i;
  return v;
}
Value Value::number(double d) {
  Value v;
  v.kind_ = Kind::kDouble;
  v.double_ = d;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.string_ = std::move(s);
  return v;
}
Value Value::array() {
  Value v;
  v.kind_ = Kind::kArray;
  return v;
}
Value Value::object() {
  Value v;
  v.kind_ = Kind::kObject;
  return v;
}

void Value::push(Value v) { items_.push_back(std::move(v)); }

const Value *Value::find(std::string_view key) const {
  for (const Member &m : members_)
    if (m.first == key)
      return &m.second;
  return nullptr;
}

Value *Value::find(std::string_view key) {
  for (Member &m : members_)
    if (m.first == key)
      return &m.second;
  return nullptr;
}

void Value::set(std::string key, Value v) {
  if (Value *existing = find(key)) {
    *existing = std::move(v);
    return;
  }
  members_.emplace_back(std::move(key), std::move(v));
}

void Value::erase(std::string_view key) {
  for (auto it = members_.begin(); it != members_.end(); ++it)
    if (it->first == key) {
      members_.erase(it);
      return;
    }
}

const char *Value::kindName(Kind kind) {
  switch (kind) {
  case Kind::kNull:
    return "null";
  case Kind::kBool:
    return "boolean";
  case Kind::kInt:
    return "integer";
  case Kind::kDouble:
    return "number";
  case Kind::kString:
    return "string";
  case Kind::kArray:
    return "array";
  case Kind::kObject:
    return "object";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// UTF-8
//===----------------------------------------------------------------------===//

bool isValidUtf8(std::string_view text) {
  const auto *s = reinterpret_cast<const unsigned char *>(text.data());
  size_t n = text.size(), i = 0;
  while (i < n) {
    unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + len > n)
      return false;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80)
        return false;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += len;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Parser
//===----------------------------------------------------------------------===//

namespace {
constexpr int kMaxDepth = 64;
/// Objects up to this many members look for a duplicate key by scanning;
/// larger ones through an ordered index (O(n log n) for any keys: a hostile
/// manifest with 10^5 members took minutes with the scan, and a hash index
/// could be flooded with colliding keys).
constexpr size_t kLinearKeyScan = 16;

/// Indices of an object's members ordered by key; looks up a string_view
/// without copying it. The members may move (the vector grows): the index
/// holds positions, not pointers.
class KeyIndex {
public:
  explicit KeyIndex(const std::vector<Value::Member> &members)
      : keys_(KeyLess{&members}) {}
  bool contains(std::string_view key) const { return keys_.count(key) != 0; }
  void add(size_t member) { keys_.insert(member); }

private:
  struct KeyLess {
    using is_transparent = void;
    const std::vector<Value::Member> *m;
    std::string_view key(size_t i) const { return (*m)[i].first; }
    bool operator()(size_t a, size_t b) const { return key(a) < key(b); }
    bool operator()(size_t a, std::string_view b) const { return key(a) < b; }
    bool operator()(std::string_view a, size_t b) const { return a < key(b); }
  };
  std::set<size_t, KeyLess> keys_;
};

class Parser {
public:
  Parser(std::string_view text, std::string &error) : t_(text), error_(error) {}

  bool parseDocument(Value &out) {
    skipSpace();
    if (!parseValue(out, 0))
      return false;
    skipSpace();
    if (p_ != t_.size())
      return fail("unexpected text after the JSON value");
    return true;
  }

private:
  bool fail(const std::string &what) {
    error_ = what + " at byte " + std::to_string(p_);
    return false;
  }
  void skipSpace() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\t' ||
                              t_[p_] == '\n' || t_[p_] == '\r'))
      ++p_;
  }
  bool consume(char c) {
    if (p_ < t_.size() && t_[p_] == c) {
      ++p_;
      return true;
    }
    return false;
  }
  bool literal(std::string_view word) {
    if (t_.substr(p_, word.size()) == word) {
      p_ += word.size();
      return true;
    }
    return false;
  }

  bool parseValue(Value &out, int depth) {
    if (depth > kMaxDepth)
      return fail("JSON nested deeper than " + std::to_string(kMaxDepth));
    if (p_ >= t_.size())
      return fail("unexpected end of JSON");
    char c = t_[p_];
    switch (c) {
    case '{':
      return parseObject(out, depth);
    case '[':
      return parseArray(out, depth);
    case '"': {
      std::string s;
      if (!parseString(s))
        return false;
      out = Value::string(std::move(s));
      return true;
    }
    case 't':
      if (literal("true")) {
        out = Value::boolean(true);
        return true;
      }
      return fail("invalid literal");
    case 'f':
      if (literal("false")) {
        out = Value::boolean(false);
        return true;
      }
      return fail("invalid literal");
    case 'n':
      if (literal("null")) {
        out = Value();
        return true;
      }
      return fail("invalid literal");
    default:
      if (c == '-' || (c >= '0' && c <= '9'))
        return parseNumber(out);
      return fail(
          std::string("unexpected character '") +
          (c >= 0x20 && c < 0x7f ? std::string(1, c) : std::string("?")) + "'");
    }
  }

  bool parseObject(Value &out, int depth) {
    ++p_; // '{'
    out = Value::object();
    skipSpace();
    if (consume('}'))
      return true;
    std::vector<Value::Member> &members = out.members();
    KeyIndex index(members); // filled once the object outgrows the scan
    while (true) {
      skipSpace();
      if (p_ >= t_.size() || t_[p_] != '"')
        return fail("expected a string key");
      std::string key;
      if (!parseString(key))
        return false;
      if (members.size() < kLinearKeyScan ? out.find(key) != nullptr
                                          : index.contains(key))
        return fail("duplicate key \"" + key + "\"");
      skipSpace();
      if (!consume(':'))
        return fail("expected ':'");
      skipSpace();
      Value v;
      if (!parseValue(v, depth + 1))
        return false;
      members.emplace_back(std::move(key), std::move(v));
      if (members.size() == kLinearKeyScan) {
        for (size_t i = 0; i < members.size(); ++i)
          index.add(i);
      } else if (members.size() > kLinearKeyScan) {
        index.add(members.size() - 1);
      }
      skipSpace();
      if (consume(','))
        continue;
      if (consume('}'))
        return true;
      return fail("expected ',' or '}'");
    }
  }

  bool parseArray(Value &out, int depth) {
    ++p_; // '['
    out = Value::array();
    skipSpace();
    if (consume(']'))
      return true;
    while (true) {
      skipSpace();
      Value v;
      if (!parseValue(v, depth + 1))
        return false;
      out.push(std::move(v));
      skipSpace();
      if (consume(','))
        continue;
      if (consume(']'))
        return true;
      return fail("expected ',' or ']'");
    }
  }

  static void appendUtf8(std::string &s, uint32_t cp) {
    if (cp < 0x80) {
      s += char(cp);
    } else if (cp < 0x800) {
      s += char(0xC0 | (cp >> 6));
      s += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      s += char(0xE0 | (cp >> 12));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    } else {
      s += char(0xF0 | (cp >> 18));
      s += char(0x80 | ((cp >> 12) & 0x3F));
      s += char(0x80 | ((cp >> 6) & 0x3F));
      s += char(0x80 | (cp & 0x3F));
    }
  }

  bool parseHex4(uint32_t &out) {
    if (p_ + 4 > t_.size())
      return fail("truncated \\u escape");
    out = 0;
    for (int k = 0; k < 4; ++k) {
      char c = t_[p_++];
      out <<= 4;
      if (c >= '0' && c <= '9')
        out |= uint32_t(c - '0');
      else if (c >= 'a' && c <= 'f')
        out |= uint32_t(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        out |= uint32_t(c - 'A' + 10);
      else
        return fail("invalid \\u escape");
    }
    return true;
  }

  bool parseString(std::string &out) {
    ++p_; // '"'
    while (true) {
      if (p_ >= t_.size())
        return fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(t_[p_]);
      if (c == '"') {
        ++p_;
        return true;
      }
      if (c < 0x20)
        return fail("control character in string");
      if (c != '\\') {
        out += char(c);
        ++p_;
        continue;
      }
      ++p_;
      if (p_ >= t_.size())
        return fail("unterminated escape");
      char e = t_[p_++];
      switch (e) {
      case '"':
        out += '"';
        break;
      case '\\':
        out += '\\';
        break;
      case '/':
        out += '/';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'u': {
        uint32_t cp = 0;
        if (!parseHex4(cp))
          return false;
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t lo = 0;
          if (!(consume('\\') && consume('u')) || !parseHex4(lo) ||
              lo < 0xDC00 || lo > 0xDFFF)
            return fail("unpaired surrogate in \\u escape");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return fail("unpaired surrogate in \\u escape");
        }
        appendUtf8(out, cp);
        break;
      }
      default:
        return fail("invalid escape");
      }
    }
  }

  bool parseNumber(Value &out) {
    size_t start = p_;
    bool isInteger = true;
    consume('-');
    if (p_ >= t_.size() || !(t_[p_] >= '0' && t_[p_] <= '9'))
      return fail("invalid number");
    if (t_[p_] == '0') {
      ++p_;
    } else {
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9')
        ++p_;
    }
    if (p_ < t_.size() && t_[p_] == '.') {
      isInteger = false;
      ++p_;
      if (p_ >= t_.size() || !(t_[p_] >= '0' && t_[p_] <= '9'))
        return fail("invalid number");
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9')
        ++p_;
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      isInteger = false;
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-'))
        ++p_;
      if (p_ >= t_.size() || !(t_[p_] >= '0' && t_[p_] <= '9'))
        return fail("invalid number");
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9')
        ++p_;
    }
    std::string text(t_.substr(start, p_ - start));
    if (isInteger) {
      errno = 0;
      char *end = nullptr;
      long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && end && *end == '\0') {
        out = Value::integer(static_cast<int64_t>(v));
        return true;
      }
    }
    char *end = nullptr;
    double d = std::strtod(text.c_str(), &end);
    if (!end || *end != '\0' || !std::isfinite(d))
      return fail("number out of range");
    out = Value::number(d);
    return true;
  }

  std::string_view t_;
  size_t p_ = 0;
  std::string &error_;
};

void printString(std::string &out, const std::string &s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\f':
      out += "\\f";
      break;
    default:
      if (c < 0x20) {
        char buf[8];
        std::snprintf(buf, sizeof(buf), "\\u%04x", c);
        out += buf;
      } else {
        out += char(c);
      }
    }
  }
  out += '"';
}

bool isScalar(const Value &v) { return !v.isArray() && !v.isObject(); }

void printValue(std::string &out, const Value &v, int indent) {
  switch (v.kind()) {
  case Value::Kind::kNull:
    out += "null";
    return;
  case Value::Kind::kBool:
    out += v.asBool() ? "true" : "false";
    return;
  case Value::Kind::kInt:
    out += std::to_string(v.asInt());
    return;
  case Value::Kind::kDouble: {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.17g", v.asDouble());
    std::string s = buf;
    // Keep it a JSON number that reads back as a double.
    if (s.find_first_of(".eE") == std::string::npos)
      s += ".0";
    out += s;
    return;
  }
  case Value::Kind::kString:
    printString(out, v.asString());
    return;
  case Value::Kind::kArray: {
    bool flat = true;
    for (const Value &item : v.items())
      flat = flat && isScalar(item);
    if (v.items().empty()) {
      out += "[]";
      return;
    }
    if (flat) {
      out += '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i)
          out += ", ";
        printValue(out, v.items()[i], indent);
      }
      out += ']';
      return;
    }
    out += "[\n";
    for (size_t i = 0; i < v.items().size(); ++i) {
      out.append(size_t(indent + 2), ' ');
      printValue(out, v.items()[i], indent + 2);
      out += i + 1 < v.items().size() ? ",\n" : "\n";
    }
    out.append(size_t(indent), ' ');
    out += ']';
    return;
  }
  case Value::Kind::kObject: {
    if (v.members().empty()) {
      out += "{}";
      return;
    }
    out += "{\n";
    for (size_t i = 0; i < v.members().size(); ++i) {
      out.append(size_t(indent + 2), ' ');
      printString(out, v.members()[i].first);
      out += ": ";
      printValue(out, v.members()[i].second, indent + 2);
      out += i + 1 < v.members().size() ? ",\n" : "\n";
    }
    out.append(size_t(indent), ' ');
    out += '}';
    return;
  }
  }
}
} // namespace

bool parse(std::string_view text, Value &out, std::string &error) {
  Parser parser(text, error);
  return parser.parseDocument(out);
}

std::string print(const Value &v) {
  std::string out;
  printValue(out, v, 0);
  out += '\n';
  return out;
}

} // namespace sits::runtime::json
