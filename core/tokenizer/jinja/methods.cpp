// Attribute and item access as jinja's sandboxed environment performs them,
// and the Python str / dict / list methods templates call. The sandbox is
// immutable: methods that would modify a list or dict raise.
#include <utf8proc.h>

#include <algorithm>
#include <set>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

// --- Params -------------------------------------------------------------------------

Params::Params(const std::string& what, const CallArgs& args, std::initializer_list<const char*> names) : what_(what) {
  bind(args, names, false, false);
}

Params Params::variadic(const std::string& what, const CallArgs& args, std::initializer_list<const char*> names,
                        bool extra_positional, bool extra_keywords) {
  Params p;
  p.what_ = what;
  p.bind(args, names, extra_positional, extra_keywords);
  return p;
}

void Params::bind(const CallArgs& args, std::initializer_list<const char*> names, bool extra_positional,
                  bool extra_keywords) {
  for (const char* n : names) names_.emplace_back(n);
  values_.resize(names_.size());
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (i < names_.size()) values_[i] = args.positional[i];
    else if (extra_positional) rest_.push_back(args.positional[i]);
    else
      throw JinjaError(what_ + " takes at most " + std::to_string(names_.size()) + " argument(s) (" +
                       std::to_string(args.positional.size()) + " given)");
  }
  for (const auto& [key, value] : args.keyword) {
    auto it = std::find(names_.begin(), names_.end(), key);
    if (it == names_.end()) {
      if (!extra_keywords) throw JinjaError(what_ + " got an unexpected keyword argument '" + key + "'");
      extra_keywords_.emplace_back(key, value);
      continue;
    }
    auto& slot = values_[it - names_.begin()];
    if (slot) throw JinjaError(what_ + " got multiple values for argument '" + key + "'");
    slot = value;
  }
}

const Value& Params::get(size_t i) const {
  if (!values_[i]) throw JinjaError(what_ + " is missing the required argument '" + names_[i] + "'");
  return *values_[i];
}

namespace {

const std::set<std::string>& str_methods() {
  static const std::set<std::string> names = {
      "capitalize", "casefold", "center", "count", "encode", "endswith", "expandtabs", "find", "format",
      "format_map", "index", "isalnum", "isalpha", "isascii", "isdecimal", "isdigit", "isidentifier", "islower",
      "isnumeric", "isprintable", "isspace", "istitle", "isupper", "join", "ljust", "lower", "lstrip", "maketrans",
      "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
      "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill"};
  return names;
}
const std::set<std::string>& dict_methods() {
  static const std::set<std::string> names = {"clear", "copy", "fromkeys", "get", "items", "keys",
                                              "pop", "popitem", "setdefault", "update", "values"};
  return names;
}
const std::set<std::string>& list_methods() {
  static const std::set<std::string> names = {"append", "clear", "copy", "count", "extend", "index",
                                              "insert", "pop", "remove", "reverse", "sort"};
  return names;
}

// How jinja names an object in "... has no attribute ..." messages.
std::string object_name(const Value& v) {
  if (v.is_none()) return "None";
  return v.type_name() + " object";
}

Value no_attribute(const Value& obj, const std::string& name) {
  return Value::undefined("'" + object_name(obj) + "' has no attribute '" + name + "'");
}

Value bound_method(const Value& obj, const std::string& name) {
  return Value::function(obj.type_name() + "." + name,
                         [obj, name](const CallArgs& args) { return call_method(obj, name, args); });
}

std::optional<std::string> optional_str(const Params& p, size_t i, const char* what) {
  if (!p.has(i) || p.get(i).is_none()) return std::nullopt;
  if (!p.get(i).is_string()) throw JinjaError(std::string(what) + " arg must be None or str");
  return p.get(i).as_string();
}

std::optional<int64_t> optional_index(const Params& p, size_t i) {
  if (!p.has(i) || p.get(i).is_none()) return std::nullopt;
  if (!p.get(i).is_int() && !p.get(i).is_bool())
    throw JinjaError("slice indices must be integers or None or have an __index__ method");
  return p.get(i).as_int();
}

const std::string& require_str(const Value& v, const std::string& what) {
  if (!v.is_string()) throw JinjaError(what + " must be str, not " + v.type_name());
  return v.as_string();
}

int64_t require_int(const Value& v, const std::string& what) {
  if (!v.is_int() && !v.is_bool()) throw JinjaError(what + ": '" + v.type_name() + "' object cannot be interpreted as an integer");
  return v.as_int();
}

char32_t fill_char(const Params& p, size_t i, const std::string& what) {
  if (!p.has(i)) return ' ';
  std::u32string f = py::decode(require_str(p.get(i), what));
  if (f.size() != 1) throw JinjaError("The fill character must be exactly one character long");
  return f[0];
}

bool all_code_points(const std::string& s, bool (*pred)(char32_t)) {
  std::u32string cps = py::decode(s);
  return !cps.empty() && std::all_of(cps.begin(), cps.end(), pred);
}

bool category_in(char32_t cp, std::initializer_list<utf8proc_category_t> cats) {
  auto c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return std::find(cats.begin(), cats.end(), c) != cats.end();
}
bool is_alpha(char32_t cp) {
  return category_in(cp, {UTF8PROC_CATEGORY_LU, UTF8PROC_CATEGORY_LL, UTF8PROC_CATEGORY_LT, UTF8PROC_CATEGORY_LM,
                          UTF8PROC_CATEGORY_LO});
}
bool is_decimal(char32_t cp) { return category_in(cp, {UTF8PROC_CATEGORY_ND}); }
bool is_numeric(char32_t cp) {
  return category_in(cp, {UTF8PROC_CATEGORY_ND, UTF8PROC_CATEGORY_NL, UTF8PROC_CATEGORY_NO});
}
bool is_alnum(char32_t cp) { return is_alpha(cp) || is_numeric(cp); }

// The [start:end] window of a str in code points, for startswith & co.
std::string window(const std::string& s, const Params& p, size_t start_index) {
  int64_t len = py::length(s), lo, hi;
  py::normalize_range(len, optional_index(p, start_index), optional_index(p, start_index + 1), lo, hi);
  if (lo > len) return "\x01";  // Python: start past the end never matches, even an empty prefix
  if (hi < lo) hi = lo;
  return py::encode(py::decode(s).substr(lo, hi - lo));
}

Value affix_test(const std::string& s, const std::string& method, const Params& p) {
  const Value& affix = p.get(0);
  std::string w = window(s, p, 1);
  if (w == "\x01") return Value(false);
  auto test = [&](const Value& a) {
    const std::string& t = require_str(a, method + " first arg");
    if (t.size() > w.size()) return false;
    return method == "startswith" ? w.compare(0, t.size(), t) == 0 : w.compare(w.size() - t.size(), t.size(), t) == 0;
  };
  if (affix.is_sequence() && affix.seq() == Value::Seq::Tuple) {
    for (const auto& a : affix.as_list())
      if (test(a)) return Value(true);
    return Value(false);
  }
  return Value(test(affix));
}

Value string_list(std::vector<std::string> parts) {
  ValueList out;
  out.reserve(parts.size());
  for (auto& p : parts) out.emplace_back(std::move(p));
  return Value::sequence(std::move(out));
}

Value str_method(const std::string& s, const std::string& name, const CallArgs& args) {
  const std::string what = "str." + name + "()";
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Params p(what, args, {"chars"});
    return Value(py::strip(s, optional_str(p, 0, name.c_str()), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    Params p(what, args, {"sep", "maxsplit"});
    auto sep = optional_str(p, 0, "sep");
    if (sep && sep->empty()) throw JinjaError("empty separator");
    int64_t maxsplit = p.has(1) ? require_int(p.get(1), "maxsplit") : -1;
    return string_list(name == "split" ? py::split(s, sep, maxsplit) : py::rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") {
    Params p(what, args, {"keepends"});
    return string_list(py::splitlines(s, p.has(0) && p.get(0).truthy()));
  }
  if (name == "startswith" || name == "endswith") return affix_test(s, name, Params(what, args, {"prefix", "start", "end"}));
  if (name == "replace") {
    Params p(what, args, {"old", "new", "count"});
    return Value(py::replace(s, require_str(p.get(0), "replace() argument 1"), require_str(p.get(1), "replace() argument 2"),
                             p.has(2) ? require_int(p.get(2), "count") : -1));
  }
  if (name == "upper" || name == "lower" || name == "casefold" || name == "title" || name == "capitalize" ||
      name == "swapcase") {
    Params p(what, args, {});
    if (name == "upper") return Value(py::upper(s));
    if (name == "title") return Value(py::title(s));
    if (name == "capitalize") return Value(py::capitalize(s));
    if (name == "swapcase") return Value(py::swapcase(s));
    return Value(py::lower(s));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Params p(what, args, {"sub", "start", "end"});
    const std::string& sub = require_str(p.get(0), "must be str, not");
    int64_t lo, hi;
    py::normalize_range(py::length(s), optional_index(p, 1), optional_index(p, 2), lo, hi);
    if (name == "count") return Value(py::count(s, sub, lo, hi));
    int64_t at = py::find(s, sub, lo, hi, name[0] == 'r');
    if (at < 0 && (name == "index" || name == "rindex")) throw JinjaError("substring not found");
    return Value(at);
  }
  if (name == "join") {
    Params p(what, args, {"iterable"});
    std::string out;
    ValueList items = iterate(p.get(0));
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string())
        throw JinjaError("sequence item " + std::to_string(i) + ": expected str instance, " + items[i].type_name() + " found");
      if (i) out += s;
      out += items[i].as_string();
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(str_format(s, args));
  if (name == "center" || name == "ljust" || name == "rjust") {
    Params p(what, args, {"width", "fillchar"});
    return Value(py::pad(s, require_int(p.get(0), what), fill_char(p, 1, what), name == "center" ? 0 : name == "ljust" ? -1 : 1));
  }
  if (name == "zfill") {
    Params p(what, args, {"width"});
    int64_t width = require_int(p.get(0), what);
    std::string sign = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? s.substr(0, 1) : "";
    std::string body = s.substr(sign.size());
    return Value(sign + py::pad(body, width - static_cast<int64_t>(sign.size()), '0', 1));
  }
  if (name == "partition" || name == "rpartition") {
    Params p(what, args, {"sep"});
    const std::string& sep = require_str(p.get(0), "sep");
    if (sep.empty()) throw JinjaError("empty separator");
    size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return name == "partition" ? Value::tuple({Value(s), Value(""), Value("")}) : Value::tuple({Value(""), Value(""), Value(s)});
    return Value::tuple({Value(s.substr(0, at)), Value(sep), Value(s.substr(at + sep.size()))});
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Params p(what, args, {"affix"});
    const std::string& a = require_str(p.get(0), what + " argument");
    if (name == "removeprefix") return Value(s.compare(0, a.size(), a) == 0 ? s.substr(a.size()) : s);
    bool ends = s.size() >= a.size() && s.compare(s.size() - a.size(), a.size(), a) == 0;
    return Value(ends ? s.substr(0, s.size() - a.size()) : s);
  }
  if (name.rfind("is", 0) == 0) {
    Params p(what, args, {});
    if (name == "isdigit" || name == "isdecimal") return Value(all_code_points(s, is_decimal));
    if (name == "isnumeric") return Value(all_code_points(s, is_numeric));
    if (name == "isalpha") return Value(all_code_points(s, is_alpha));
    if (name == "isalnum") return Value(all_code_points(s, is_alnum));
    if (name == "isspace") return Value(all_code_points(s, py::is_space));
    if (name == "isascii") return Value(py::is_ascii(s));
    if (name == "islower") return Value(py::is_lower(s));
    if (name == "isupper") return Value(py::is_upper(s));
  }
  throw JinjaError("the str method '" + name + "' is not supported");
}

[[noreturn]] void mutates(const Value& obj, const std::string& name) {
  throw JinjaError("access to attribute '" + name + "' of '" + obj.type_name() +
                   "' object is unsafe (the sandbox forbids modifying it)");
}

Value dict_method(const Value& obj, const std::string& name, const CallArgs& args) {
  const Dict& d = obj.as_dict();
  const std::string what = "dict." + name + "()";
  if (name == "items" || name == "keys" || name == "values") {
    Params p(what, args, {});
    ValueList out;
    for (const auto& [k, v] : d.entries()) {
      if (name == "items") out.push_back(Value::tuple({k, v}));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::sequence(std::move(out), name == "items" ? Value::Seq::DictItems
                                            : name == "keys" ? Value::Seq::DictKeys
                                                             : Value::Seq::DictValues);
  }
  if (name == "get") {
    Params p(what, args, {"key", "default"});
    const Value* v = d.find(p.get(0));
    return v ? *v : p.get_or(1, Value::none());
  }
  if (name == "copy") {
    Params p(what, args, {});
    return obj;
  }
  if (name == "fromkeys") throw JinjaError("the dict method 'fromkeys' is not supported");
  mutates(obj, name);
}

Value list_method(const Value& obj, const std::string& name, const CallArgs& args) {
  const std::string what = "list." + name + "()";
  if (name == "count") {
    Params p(what, args, {"value"});
    int64_t n = 0;
    for (const auto& e : obj.as_list()) n += py_equal(e, p.get(0));
    return Value(n);
  }
  if (name == "index") {
    Params p(what, args, {"value"});
    const auto& items = obj.as_list();
    for (size_t i = 0; i < items.size(); ++i)
      if (py_equal(items[i], p.get(0))) return Value(static_cast<int64_t>(i));
    throw JinjaError(p.get(0).repr() + " is not in list");
  }
  if (name == "copy" && obj.seq() == Value::Seq::List) {
    Params p(what, args, {});
    return obj;
  }
  if (name == "pop" || name == "clear")  // jinja's sandbox lets these through; lists here are immutable
    throw JinjaError("the list method '" + name + "' is not supported (it modifies the list)");
  mutates(obj, name);
}

}  // namespace

bool has_method(const Value& obj, const std::string& name) {
  switch (obj.type()) {
    case Value::Type::String: return str_methods().count(name) > 0;
    case Value::Type::Dict: return dict_methods().count(name) > 0;
    case Value::Type::Sequence:
      if (obj.seq() == Value::Seq::List) return list_methods().count(name) > 0;
      if (obj.seq() == Value::Seq::Tuple) return name == "count" || name == "index";
      return false;
    default: return false;
  }
}

Value call_method(const Value& obj, const std::string& name, const CallArgs& args) {
  switch (obj.type()) {
    case Value::Type::String: return str_method(obj.as_string(), name, args);
    case Value::Type::Dict: return dict_method(obj, name, args);
    case Value::Type::Sequence: return list_method(obj, name, args);
    default: throw JinjaError("'" + obj.type_name() + "' object has no attribute '" + name + "'");
  }
}

Value get_attr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (has_method(obj, name)) return bound_method(obj, name);
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(name);
    return v ? *v : no_attribute(obj, name);
  }
  if (obj.is_namespace()) {
    const Value* v = obj.namespace_attrs().find(name);
    return v ? *v : no_attribute(obj, name);
  }
  if (obj.is_group_tuple() && (name == "grouper" || name == "list")) return obj.as_list()[name == "grouper" ? 0 : 1];
  return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto fallback = [&]() -> Value {
    if (key.is_string()) {
      if (has_method(obj, key.as_string())) return bound_method(obj, key.as_string());
      if (obj.is_namespace() || obj.is_group_tuple()) return get_attr(obj, key.as_string());
      return no_attribute(obj, key.as_string());
    }
    return Value::undefined("'" + object_name(obj) + "' has no element " + key.repr());
  };
  if (obj.is_dict()) {
    const Value* v = obj.as_dict().find(key);
    return v ? *v : fallback();
  }
  if ((obj.is_indexable() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      std::u32string s = py::decode(obj.as_string());
      int64_t n = static_cast<int64_t>(s.size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return fallback();
      return Value(py::encode(s.substr(i, 1)));
    }
    const auto& items = obj.as_list();
    int64_t n = static_cast<int64_t>(items.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return fallback();
    return items[i];
  }
  return fallback();
}

}  // namespace grpo::tok::jinja
