// A small JSON reader for plugin options and dataset columns.
// Rationale: a plugin author needs nothing beyond this SDK and a compiler, so
// the C++ layer cannot depend on a JSON library; this covers what plugins read
// (objects, arrays, strings, numbers, booleans, null) and nothing more.
#ifndef GRPO_SDK_JSON_HPP
#define GRPO_SDK_JSON_HPP

#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace grpo {

class Json {
 public:
  enum class Type { Null, Bool, Number, String, Array, Object };

  Json() = default;
  static Json parse(std::string_view text) {
    Parser p{text, 0};
    Json v = p.value(0);
    p.skip_ws();
    if (p.pos != text.size()) p.fail("trailing characters");
    return v;
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::Null; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_number() const { return type_ == Type::Number; }
  bool is_string() const { return type_ == Type::String; }
  bool is_array() const { return type_ == Type::Array; }
  bool is_object() const { return type_ == Type::Object; }

  bool as_bool() const { expect(Type::Bool, "a boolean"); return bool_; }
  double as_double() const { expect(Type::Number, "a number"); return number_; }
  long long as_int() const {
    expect(Type::Number, "a number");
    if (number_ != std::floor(number_)) throw std::runtime_error("expected an integer");
    return static_cast<long long>(number_);
  }
  const std::string& as_string() const { expect(Type::String, "a string"); return string_; }
  const std::vector<Json>& as_array() const { expect(Type::Array, "an array"); return array_; }
  const std::map<std::string, Json>& as_object() const { expect(Type::Object, "an object"); return object_; }

  // Object member or nullptr.
  const Json* find(const std::string& key) const {
    if (type_ != Type::Object) return nullptr;
    auto it = object_.find(key);
    return it == object_.end() ? nullptr : &it->second;
  }

 private:
  void expect(Type t, const char* what) const {
    if (type_ != t) throw std::runtime_error(std::string("expected ") + what);
  }

  struct Parser {
    std::string_view s;
    size_t pos;

    [[noreturn]] void fail(const char* what) const {
      throw std::runtime_error("malformed JSON at byte " + std::to_string(pos) + ": " + what);
    }
    void skip_ws() {
      while (pos < s.size() && (s[pos] == ' ' || s[pos] == '\n' || s[pos] == '\r' || s[pos] == '\t')) ++pos;
    }
    bool consume(std::string_view word) {
      if (s.substr(pos, word.size()) != word) return false;
      pos += word.size();
      return true;
    }
    Json value(int depth) {
      if (depth > 256) fail("nested too deeply");
      skip_ws();
      if (pos >= s.size()) fail("unexpected end");
      Json v;
      char c = s[pos];
      if (c == '{') {
        v.type_ = Type::Object;
        ++pos;
        skip_ws();
        if (pos < s.size() && s[pos] == '}') { ++pos; return v; }
        for (;;) {
          skip_ws();
          if (pos >= s.size() || s[pos] != '"') fail("expected a key");
          std::string key = string();
          skip_ws();
          if (pos >= s.size() || s[pos] != ':') fail("expected ':'");
          ++pos;
          v.object_[key] = value(depth + 1);
          skip_ws();
          if (pos < s.size() && s[pos] == ',') { ++pos; continue; }
          if (pos < s.size() && s[pos] == '}') { ++pos; return v; }
          fail("expected ',' or '}'");
        }
      }
      if (c == '[') {
        v.type_ = Type::Array;
        ++pos;
        skip_ws();
        if (pos < s.size() && s[pos] == ']') { ++pos; return v; }
        for (;;) {
          v.array_.push_back(value(depth + 1));
          skip_ws();
          if (pos < s.size() && s[pos] == ',') { ++pos; continue; }
          if (pos < s.size() && s[pos] == ']') { ++pos; return v; }
          fail("expected ',' or ']'");
        }
      }
      if (c == '"') { v.type_ = Type::String; v.string_ = string(); return v; }
      if (consume("true")) { v.type_ = Type::Bool; v.bool_ = true; return v; }
      if (consume("false")) { v.type_ = Type::Bool; v.bool_ = false; return v; }
      if (consume("null")) return v;
      if (c == '-' || (c >= '0' && c <= '9')) {
        size_t start = pos;
        while (pos < s.size() && std::string_view("+-.eE0123456789").find(s[pos]) != std::string_view::npos) ++pos;
        std::string num(s.substr(start, pos - start));
        char* end = nullptr;
        v.number_ = std::strtod(num.c_str(), &end);
        if (end != num.c_str() + num.size()) fail("bad number");
        v.type_ = Type::Number;
        return v;
      }
      fail("unexpected character");
    }
    unsigned hex4() {
      if (pos + 4 > s.size()) fail("short \\u escape");
      unsigned cp = 0;
      for (int i = 0; i < 4; ++i) {
        char h = s[pos++];
        cp <<= 4;
        if (h >= '0' && h <= '9') cp |= unsigned(h - '0');
        else if (h >= 'a' && h <= 'f') cp |= unsigned(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F') cp |= unsigned(h - 'A' + 10);
        else fail("bad \\u escape");
      }
      return cp;
    }
    static void put_utf8(std::string& out, unsigned cp) {
      if (cp < 0x80) { out += char(cp); }
      else if (cp < 0x800) { out += char(0xC0 | (cp >> 6)); out += char(0x80 | (cp & 0x3F)); }
      else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12)); out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F));
      } else {
        out += char(0xF0 | (cp >> 18)); out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F)); out += char(0x80 | (cp & 0x3F));
      }
    }
    std::string string() {
      ++pos;  // opening quote
      std::string out;
      while (pos < s.size() && s[pos] != '"') {
        char c = s[pos++];
        if (c != '\\') { out += c; continue; }
        if (pos >= s.size()) break;
        char e = s[pos++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            // A surrogate that is not half of a pair is U+FFFD, as the host
            // repairs text: encoded as it is, it would not be UTF-8.
            unsigned cp = hex4();
            if (cp >= 0xDC00 && cp < 0xE000) {
              cp = 0xFFFD;
            } else if (cp >= 0xD800 && cp < 0xDC00) {
              const size_t after_high = pos;
              unsigned lo = 0;
              if (consume("\\u") && (lo = hex4()) >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              } else {
                pos = after_high;  // whatever follows is read on its own
                cp = 0xFFFD;
              }
            }
            put_utf8(out, cp);
            break;
          }
          default: fail("bad escape");
        }
      }
      if (pos >= s.size()) fail("unterminated string");
      ++pos;  // closing quote
      return out;
    }
  };

  Type type_ = Type::Null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> array_;
  std::map<std::string, Json> object_;
};

// Quotes a string as a JSON string literal.
inline std::string json_quote(std::string_view text) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          static const char* hex = "0123456789abcdef";
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 15];
        } else {
          out += char(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace grpo

#endif  // GRPO_SDK_JSON_HPP
