// Python's two string-formatting languages: `text % args` (also the format
// filter) and str.format(). The common conversions and specs are covered;
// anything else raises JinjaError rather than printing something different.
#include <cctype>
#include <cmath>
#include <cstdio>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

namespace {

std::string c_format(const std::string& spec, double v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, spec.c_str(), v);
  return buf;
}

// Python's int(x) for %d and {:d}: floats truncate, strings are rejected.
int64_t integer_of(const Value& v, const char* conversion) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_float() && std::isfinite(v.as_double())) return static_cast<int64_t>(v.as_double());
  throw JinjaError(std::string("%") + conversion + " format: a real number is required, not " + v.type_name());
}

std::string to_base(int64_t v, int base, bool upper_digits) {
  uint64_t u = v < 0 ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
  const char* digits = upper_digits ? "0123456789ABCDEF" : "0123456789abcdef";
  std::string out;
  do {
    out.insert(out.begin(), digits[u % base]);
    u /= base;
  } while (u);
  return out;
}

// Applies width, alignment and fill to an already converted body.
std::string align(const std::string& sign, const std::string& body, int64_t width, char align_to, char32_t fill,
                  bool zero_pad) {
  int64_t len = py::length(sign) + py::length(body);
  if (width <= len) return sign + body;
  int64_t pad = width - len;
  std::string fills;
  for (int64_t i = 0; i < pad; ++i) py::append_utf8(fills, fill);
  if (zero_pad || align_to == '=') return sign + fills + body;
  if (align_to == '<') return sign + body + fills;
  if (align_to == '^') {
    std::string left, right;
    for (int64_t i = 0; i < pad / 2; ++i) py::append_utf8(left, fill);
    for (int64_t i = pad / 2; i < pad; ++i) py::append_utf8(right, fill);
    return left + sign + body + right;
  }
  return fills + sign + body;
}

std::string float_body(double v, char type, int precision) {
  if (std::isnan(v)) return type >= 'A' && type <= 'Z' ? "NAN" : "nan";
  if (std::isinf(v)) return type >= 'A' && type <= 'Z' ? "INF" : "inf";
  std::string spec = "%." + std::to_string(precision) + type;
  return c_format(spec, std::fabs(v));
}

}  // namespace

std::string percent_format(const std::string& text, const Value& args) {
  ValueList positional;
  const Dict* mapping = nullptr;
  if (args.is_sequence() && args.seq() == Value::Seq::Tuple) positional = args.as_list();
  else if (args.is_dict()) mapping = &args.as_dict();
  else positional.push_back(args);
  size_t next_arg = 0;
  bool used_mapping = false;
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    if (++i >= text.size()) throw JinjaError("incomplete format");
    const Value* arg = nullptr;
    if (text[i] == '(') {
      size_t close = text.find(')', i);
      if (close == std::string::npos) throw JinjaError("incomplete format key");
      if (!mapping) throw JinjaError("format requires a mapping");
      const Value* v = mapping->find(text.substr(i + 1, close - i - 1));
      if (!v) throw JinjaError("format key '" + text.substr(i + 1, close - i - 1) + "' is missing");
      arg = v;
      used_mapping = true;
      i = close + 1;
    }
    std::string flags;
    while (i < text.size() && std::string("-+ #0").find(text[i]) != std::string::npos) flags.push_back(text[i++]);
    int64_t width = 0;
    while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) width = width * 10 + (text[i++] - '0');
    int precision = -1;
    if (i < text.size() && text[i] == '.') {
      precision = 0;
      ++i;
      while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) precision = precision * 10 + (text[i++] - '0');
    }
    if (i < text.size() && text[i] == '*') throw JinjaError("'*' widths in % formatting are not supported");
    while (i < text.size() && (text[i] == 'l' || text[i] == 'h' || text[i] == 'L')) ++i;
    if (i >= text.size()) throw JinjaError("incomplete format");
    char type = text[i];
    if (type == '%') {
      out.push_back('%');
      continue;
    }
    if (!arg) {
      if (mapping && !used_mapping && positional.empty()) positional.push_back(args);
      if (next_arg >= positional.size()) throw JinjaError("not enough arguments for format string");
      arg = &positional[next_arg++];
    }
    bool left = flags.find('-') != std::string::npos;
    bool zero = flags.find('0') != std::string::npos && !left;
    std::string sign, body;
    switch (type) {
      case 's': body = arg->str(); break;
      case 'r': case 'a': body = arg->repr(); break;
      case 'd': case 'i': case 'u': case 'x': case 'X': case 'o': {
        int64_t v = integer_of(*arg, std::string(1, type).c_str());
        int base = (type == 'x' || type == 'X') ? 16 : type == 'o' ? 8 : 10;
        body = to_base(v, base, type == 'X');
        if (flags.find('#') != std::string::npos && base != 10) body = (type == 'o' ? "0o" : type == 'x' ? "0x" : "0X") + body;
        if (precision > 0 && static_cast<int>(body.size()) < precision) body.insert(0, precision - body.size(), '0');
        sign = v < 0 ? "-" : flags.find('+') != std::string::npos ? "+" : flags.find(' ') != std::string::npos ? " " : "";
        break;
      }
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
        if (!arg->is_number()) throw JinjaError(std::string("must be real number, not ") + arg->type_name());
        double v = arg->as_double();
        body = float_body(v, type, precision < 0 ? 6 : precision);
        sign = std::signbit(v) && !std::isnan(v) ? "-" : flags.find('+') != std::string::npos ? "+" : flags.find(' ') != std::string::npos ? " " : "";
        break;
      }
      case 'c':
        if (arg->is_string() && py::length(arg->as_string()) == 1) body = arg->as_string();
        else if (arg->is_int()) py::append_utf8(body, static_cast<char32_t>(arg->as_int()));
        else throw JinjaError("%c requires int or char");
        break;
      default:
        throw JinjaError(std::string("unsupported format character '") + type + "'");
    }
    if ((type == 's' || type == 'r' || type == 'a') && precision >= 0)
      body = py::encode(py::decode(body).substr(0, precision));
    bool numeric = type != 's' && type != 'r' && type != 'a' && type != 'c';
    out += align(sign, body, width, left ? '<' : '>', zero && numeric ? '0' : ' ', zero && numeric);
  }
  if (!mapping && next_arg < positional.size()) throw JinjaError("not all arguments converted during string formatting");
  return out;
}

namespace {

// format(value, spec) for the spec mini-language's common subset.
std::string format_field(const Value& v, const std::string& spec) {
  if (spec.empty()) return v.str();
  size_t i = 0;
  char32_t fill = ' ';
  char align_to = 0;
  std::u32string s = py::decode(spec);
  auto is_align = [](char32_t c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  if (s.size() >= 2 && is_align(s[1])) {
    fill = s[0];
    align_to = static_cast<char>(s[1]);
    i = 2;
  } else if (!s.empty() && is_align(s[0])) {
    align_to = static_cast<char>(s[0]);
    i = 1;
  }
  char sign_flag = '-';
  if (i < s.size() && (s[i] == '+' || s[i] == '-' || s[i] == ' ')) sign_flag = static_cast<char>(s[i++]);
  bool alternate = false;
  if (i < s.size() && s[i] == '#') alternate = true, ++i;
  bool zero = false;
  if (i < s.size() && s[i] == '0') zero = true, ++i;
  int64_t width = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') width = width * 10 + (s[i++] - '0');
  if (i < s.size() && (s[i] == ',' || s[i] == '_')) throw JinjaError("digit grouping in format specs is not supported");
  int precision = -1;
  if (i < s.size() && s[i] == '.') {
    precision = 0;
    ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') precision = precision * 10 + static_cast<int>(s[i++] - '0');
  }
  char type = 0;
  if (i < s.size()) type = static_cast<char>(s[i++]);
  if (i != s.size()) throw JinjaError("invalid format specifier '" + spec + "'");
  if (zero && !align_to) {
    fill = '0';
    align_to = '=';
  }

  if (v.is_string()) {
    if (type && type != 's') throw JinjaError(std::string("unknown format code '") + type + "' for object of type 'str'");
    std::string body = precision >= 0 ? py::encode(py::decode(v.as_string()).substr(0, precision)) : v.as_string();
    return align("", body, width, align_to ? align_to : '<', fill, false);
  }
  if (v.is_number()) {
    auto sign_of = [&](bool negative) {
      return negative ? "-" : sign_flag == '+' ? "+" : sign_flag == ' ' ? " " : "";
    };
    char a = align_to ? align_to : '>';
    if ((v.is_int() || v.is_bool()) && (type == 0 || type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b')) {
      if (type == 0 && v.is_bool() && width == 0 && precision < 0) return v.str();
      int64_t n = v.as_int();
      int base = type == 'x' || type == 'X' ? 16 : type == 'o' ? 8 : type == 'b' ? 2 : 10;
      std::string body = to_base(n, base, type == 'X');
      if (alternate && base != 10) body = std::string(type == 'o' ? "0o" : type == 'b' ? "0b" : type == 'X' ? "0X" : "0x") + body;
      return align(sign_of(n < 0), body, width, a, fill, false);
    }
    double d = v.as_double();
    std::string body;
    if (type == 0 && precision < 0) {
      body = py::float_repr(std::fabs(d));
    } else if (type == '%') {
      body = float_body(d * 100, 'f', precision < 0 ? 6 : precision) + "%";
    } else if (type == 0 || type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G') {
      if (type == 0) throw JinjaError("a precision without a presentation type ('{:.3}') is not supported");
      body = float_body(d, type, precision < 0 ? 6 : precision);
    } else {
      throw JinjaError(std::string("unknown format code '") + type + "' for a number");
    }
    return align(sign_of(std::signbit(d) && !std::isnan(d)), body, width, a, fill, false);
  }
  throw JinjaError("unsupported format string passed to " + v.type_name() + ".__format__");
}

// arg_name(.attr | [key])* of a replacement field.
Value resolve_field(const std::string& field, const CallArgs& args, size_t& auto_index, int& numbering) {
  size_t end = field.find_first_of(".[");
  std::string head = field.substr(0, end);
  Value v;
  if (head.empty() || std::isdigit(static_cast<unsigned char>(head[0]))) {
    size_t index;
    if (head.empty()) {
      if (numbering == 2) throw JinjaError("cannot switch from manual field specification to automatic field numbering");
      numbering = 1;
      index = auto_index++;
    } else {
      if (numbering == 1) throw JinjaError("cannot switch from automatic field numbering to manual field specification");
      numbering = 2;
      index = std::stoul(head);
    }
    if (index >= args.positional.size())
      throw JinjaError("Replacement index " + std::to_string(index) + " out of range for positional args tuple");
    v = args.positional[index];
  } else {
    bool found = false;
    for (const auto& [k, val] : args.keyword)
      if (k == head) v = val, found = true;
    if (!found) throw JinjaError("'" + head + "'");
  }
  size_t i = end;
  while (i != std::string::npos && i < field.size()) {
    if (field[i] == '.') {
      size_t next = field.find_first_of(".[", i + 1);
      v = get_attr(v, field.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1));
      i = next;
    } else {
      size_t close = field.find(']', i);
      if (close == std::string::npos) throw JinjaError("Missing ']' in format string");
      std::string key = field.substr(i + 1, close - i - 1);
      // Past 18 digits no list is that long: kept as a key (nothing found), never a stoll overflow.
      bool digits = !key.empty() && key.size() <= 18 && key.find_first_not_of("0123456789") == std::string::npos;
      v = get_item(v, digits ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
      i = close + 1;
    }
  }
  return v;
}

}  // namespace

std::string str_format(const std::string& text, const CallArgs& args) {
  std::string out;
  size_t auto_index = 0;
  int numbering = 0;  // 1 automatic, 2 manual
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '}') {
      if (i + 1 < text.size() && text[i + 1] == '}') {
        out.push_back('}');
        ++i;
        continue;
      }
      throw JinjaError("Single '}' encountered in format string");
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '{') {
      out.push_back('{');
      ++i;
      continue;
    }
    size_t close = text.find('}', i);
    if (close == std::string::npos) throw JinjaError("Single '{' encountered in format string");
    std::string field = text.substr(i + 1, close - i - 1);
    if (field.find('{') != std::string::npos) throw JinjaError("nested replacement fields in format specs are not supported");
    std::string spec, conversion;
    size_t colon = field.find(':');
    if (colon != std::string::npos) {
      spec = field.substr(colon + 1);
      field = field.substr(0, colon);
    }
    size_t bang = field.find('!');
    if (bang != std::string::npos) {
      conversion = field.substr(bang + 1);
      field = field.substr(0, bang);
    }
    Value v = resolve_field(field, args, auto_index, numbering);
    if (conversion == "r" || conversion == "a") v = Value(v.repr());
    else if (conversion == "s") v = Value(v.str());
    else if (!conversion.empty()) throw JinjaError("Unknown conversion specifier " + conversion);
    out += format_field(v, spec);
    i = close;
  }
  return out;
}

}  // namespace grpo::tok::jinja
