#include "tokenizer/jinja/pyjson.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

namespace {

void append_escape(std::string& out, unsigned code) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\u%04x", code);
  out += buf;
}

void dump_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out.push_back('"');
  for (char32_t cp : py::decode(s)) {
    switch (cp) {
      case '"': out += "\\\""; continue;
      case '\\': out += "\\\\"; continue;
      case '\n': out += "\\n"; continue;
      case '\r': out += "\\r"; continue;
      case '\t': out += "\\t"; continue;
      case '\b': out += "\\b"; continue;
      case '\f': out += "\\f"; continue;
      default: break;
    }
    if (cp < 0x20 || (ensure_ascii && cp > 0x7E)) {
      if (cp >= 0x10000) {  // a surrogate pair, as Python writes astral code points
        char32_t v = cp - 0x10000;
        append_escape(out, 0xD800 + static_cast<unsigned>(v >> 10));
        append_escape(out, 0xDC00 + static_cast<unsigned>(v & 0x3FF));
      } else {
        append_escape(out, static_cast<unsigned>(cp));
      }
      continue;
    }
    py::append_utf8(out, cp);
  }
  out.push_back('"');
}

std::string float_text(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return py::float_repr(d);
}

[[noreturn]] void not_serializable(const Value& v) {
  throw JinjaError("Object of type " + v.type_name() + " is not JSON serializable");
}

class Dumper {
 public:
  explicit Dumper(const JsonDumpOptions& o)
      : o_(o),
        item_sep_(o.item_separator ? *o.item_separator : (o.indent ? "," : ", ")),
        key_sep_(o.key_separator ? *o.key_separator : ": ") {}

  void dump(std::string& out, const Value& v, int level) {
    switch (v.type()) {
      case Value::Type::None: out += "null"; return;
      case Value::Type::Bool: out += v.as_bool() ? "true" : "false"; return;
      case Value::Type::Int: out += int_text(v.as_wide_int()); return;
      case Value::Type::Float: out += float_text(v.as_double()); return;
      case Value::Type::String: dump_string(out, v.as_string(), o_.ensure_ascii); return;
      case Value::Type::Sequence: {
        if (!v.is_indexable()) not_serializable(v);
        const auto& items = v.as_list();
        if (items.empty()) {
          out += "[]";
          return;
        }
        out.push_back('[');
        for (size_t i = 0; i < items.size(); ++i) {
          if (i) out += item_sep_;
          newline(out, level + 1);
          dump(out, items[i], level + 1);
        }
        newline(out, level);
        out.push_back(']');
        return;
      }
      case Value::Type::Dict: dump_dict(out, v.as_dict(), level); return;
      default: not_serializable(v);
    }
  }

 private:
  void newline(std::string& out, int level) {
    if (!o_.indent) return;
    out.push_back('\n');
    for (int i = 0; i < level; ++i) out += *o_.indent;
  }

  static std::string key_text(const Value& k) {
    switch (k.type()) {
      case Value::Type::String: return k.as_string();
      case Value::Type::Int: return int_text(k.as_wide_int());
      case Value::Type::Float: return float_text(k.as_double());
      case Value::Type::Bool: return k.as_bool() ? "true" : "false";
      case Value::Type::None: return "null";
      default: throw JinjaError("keys must be str, int, float, bool or None, not " + k.type_name());
    }
  }

  void dump_dict(std::string& out, const Dict& d, int level) {
    if (d.size() == 0) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> entries;
    for (const auto& [k, v] : d.entries()) entries.emplace_back(key_text(k), &v);
    if (o_.sort_keys)
      std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    out.push_back('{');
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out += item_sep_;
      newline(out, level + 1);
      dump_string(out, entries[i].first, o_.ensure_ascii);
      out += key_sep_;
      dump(out, *entries[i].second, level + 1);
    }
    newline(out, level);
    out.push_back('}');
  }

  const JsonDumpOptions& o_;
  std::string item_sep_;
  std::string key_sep_;
};

}  // namespace

std::string json_dumps(const Value& value, const JsonDumpOptions& options) {
  std::string out;
  Dumper(options).dump(out, value, 0);
  return out;
}

}  // namespace grpo::tok::jinja
