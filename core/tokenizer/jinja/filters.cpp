// jinja2's builtin filters (3.1 semantics), with transformers' tojson.
// Filters jinja has but chat templates have no use for (urlize, wordwrap,
// xmlattr, ...) raise JinjaError naming the filter.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/filter_sequences.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pyjson.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

namespace {

using Filter = std::function<Value(const Value&, const CallArgs&)>;
using namespace sequences;

// Python's round(x, ndigits): round half to even on the exact binary value.
double round_half_even(double x, int64_t digits) {
  if (!std::isfinite(x)) return x;
  if (digits >= 0) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::min<int64_t>(digits, 300)), x);
    return std::strtod(buf, nullptr);
  }
  double scale = std::pow(10.0, static_cast<double>(-digits));
  return std::nearbyint(x / scale) * scale;
}

Value tojson(const Value& v, const CallArgs& args) {
  // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
  Params p(what("tojson"), args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = p.has(0) && p.get(0).truthy();
  if (p.has(1) && !p.get(1).is_none()) {
    const Value& indent = p.get(1);
    if (indent.is_string()) o.indent = indent.as_string();
    else if (indent.is_int() || indent.is_bool()) o.indent = std::string(static_cast<size_t>(std::max<int64_t>(indent.as_int(), 0)), ' ');
    else throw JinjaError("tojson: indent must be an int or a str");
  }
  if (p.has(2) && !p.get(2).is_none()) {
    const Value& sep = p.get(2);
    if (!sep.is_indexable() || sep.as_list().size() != 2 || !sep.as_list()[0].is_string() || !sep.as_list()[1].is_string())
      throw JinjaError("tojson: separators must be a pair of strings");
    o.item_separator = sep.as_list()[0].as_string();
    o.key_separator = sep.as_list()[1].as_string();
  }
  o.sort_keys = p.has(3) && p.get(3).truthy();
  return Value(json_dumps(v, o));
}

Value indent(const Value& v, const CallArgs& args) {
  Params p(what("indent"), args, {"width", "first", "blank"});
  std::string pad;
  Value width = p.get_or(0, Value(4));
  if (width.is_string()) pad = width.as_string();
  else pad = std::string(static_cast<size_t>(std::max<int64_t>(width.as_int(), 0)), ' ');
  bool first = p.has(1) && p.get(1).truthy();
  bool blank = p.has(2) && p.get(2).truthy();
  std::vector<std::string> lines = py::splitlines(v.str() + "\n", false);
  std::string out;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) out += (i ? "\n" + pad : "") + lines[i];
  } else {
    out = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) out += "\n" + (lines[i].empty() ? "" : pad + lines[i]);
  }
  if (first) out = pad + out;
  return Value(std::move(out));
}

Value truncate(const Value& v, const CallArgs& args) {
  Params p(what("truncate"), args, {"length", "killwords", "end", "leeway"});
  std::u32string s = py::decode(v.str());
  int64_t length = p.has(0) ? p.get(0).as_int() : 255;
  bool killwords = p.has(1) && p.get(1).truthy();
  std::u32string end = py::decode(p.has(2) ? p.get(2).str() : "...");
  int64_t leeway = p.has(3) && !p.get(3).is_none() ? p.get(3).as_int() : 5;
  if (length < static_cast<int64_t>(end.size())) throw JinjaError("expected length >= " + std::to_string(end.size()));
  if (leeway < 0) throw JinjaError("expected leeway >= 0");
  if (static_cast<int64_t>(s.size()) <= length + leeway) return Value(py::encode(s));
  std::u32string head = s.substr(0, static_cast<size_t>(length) - end.size());
  if (!killwords) {
    size_t space = head.rfind(U' ');
    if (space != std::u32string::npos) head = head.substr(0, space);
  }
  return Value(py::encode(head + end));
}

Value round_filter(const Value& v, const CallArgs& args) {
  Params p(what("round"), args, {"precision", "method"});
  int64_t precision = p.has(0) ? p.get(0).as_int() : 0;
  std::string method = p.has(1) ? p.get(1).str() : "common";
  if (method != "common" && method != "ceil" && method != "floor")
    throw JinjaError("method must be common, ceil or floor");
  if (!v.is_number()) throw JinjaError("type " + v.type_name() + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_float()) return Value(round_half_even(v.as_double(), precision));
    if (precision >= 0) return Value(v.as_int());
    return Value(static_cast<int64_t>(round_half_even(static_cast<double>(v.as_int()), precision)));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = v.as_double() * scale;
  return Value((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

// int(x) of a float; Python's ints are unbounded, these are 64-bit.
int64_t float_to_int(double d) {
  if (!(d > -9223372036854775808.0 && d < 9223372036854775808.0))
    throw JinjaError("integer overflow: " + py::float_repr(d) + " does not fit in 64 bits");
  return static_cast<int64_t>(d);
}

Value int_filter(const Value& v, const CallArgs& args) {
  Params p(what("int"), args, {"default", "base"});
  Value fallback = p.get_or(0, Value(0));
  int base = p.has(1) ? static_cast<int>(p.get(1).as_int()) : 10;
  if (v.is_int() || v.is_bool()) return Value::integer(v.as_wide_int());
  if (v.is_float()) {
    if (!std::isfinite(v.as_double())) throw JinjaError("cannot convert float infinity or NaN to integer");
    return Value(float_to_int(v.as_double()));
  }
  if (v.is_string()) {
    if (auto i = py::parse_int(v.as_string(), base)) return Value::integer(*i);
    if (auto d = py::parse_float(v.as_string()); d && std::isfinite(*d)) return Value(float_to_int(*d));
  }
  return fallback;
}

Value float_filter(const Value& v, const CallArgs& args) {
  Params p(what("float"), args, {"default"});
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string())
    if (auto d = py::parse_float(v.as_string())) return Value(*d);
  return p.get_or(0, Value(0.0));
}

// jinja's title filter: each run after whitespace, dashes and opening brackets
// starts upper-case; the rest is lower-cased (unlike str.title()).
std::string jinja_title(const std::string& s) {
  std::string out;
  bool word_start = true;
  for (char32_t cp : py::decode(s)) {
    bool separator = py::is_space(cp) || cp == '-' || cp == '(' || cp == '{' || cp == '[' || cp == '<';
    std::string one;
    py::append_utf8(one, cp);
    if (separator) {
      out += one;
      word_start = true;
    } else {
      out += word_start ? py::upper(one) : py::lower(one);
      word_start = false;
    }
  }
  return out;
}

int64_t word_count(const std::string& s) {
  int64_t n = 0;
  bool in_word = false;
  for (char32_t cp : py::decode(s)) {
    bool word = cp == '_' || (cp < 0x80 ? std::isalnum(static_cast<int>(cp)) != 0 : !py::is_space(cp) && cp > 0xBF);
    if (word && !in_word) ++n;
    in_word = word;
  }
  return n;
}

const std::map<std::string, Filter>& filters() {
  static const std::map<std::string, Filter> table = [] {
    std::map<std::string, Filter> t;
    t["abs"] = [](const Value& v, const CallArgs& a) {
      Params p(what("abs"), a, {});
      if (v.is_int() || v.is_bool()) return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
      if (v.is_float()) return Value(std::fabs(v.as_double()));
      throw JinjaError("bad operand type for abs(): '" + v.type_name() + "'");
    };
    t["attr"] = [](const Value& v, const CallArgs& a) {
      Params p(what("attr"), a, {"name"});
      std::string name = p.get(0).str();
      if (v.is_undefined()) fail_undefined(v);
      if (has_method(v, name) || v.is_namespace()) return get_attr(v, name);
      return Value::undefined("'" + v.type_name() + " object' has no attribute '" + name + "'");
    };
    t["batch"] = [](const Value& v, const CallArgs& a) {
      Params p(what("batch"), a, {"linecount", "fill_with"});
      int64_t n = p.get(0).as_int();
      if (n <= 0) throw JinjaError("filter 'batch': linecount must be positive");
      ValueList out, row;
      for (const auto& item : iterate(v)) {
        row.push_back(item);
        if (static_cast<int64_t>(row.size()) == n) out.push_back(Value::sequence(std::move(row))), row.clear();
      }
      if (!row.empty()) {
        if (p.has(1) && !p.get(1).is_none())
          while (static_cast<int64_t>(row.size()) < n) row.push_back(p.get(1));
        out.push_back(Value::sequence(std::move(row)));
      }
      return iterator(std::move(out));
    };
    t["capitalize"] = [](const Value& v, const CallArgs& a) {
      Params p(what("capitalize"), a, {});
      return Value(py::capitalize(v.str()));
    };
    t["center"] = [](const Value& v, const CallArgs& a) {
      Params p(what("center"), a, {"width"});
      return Value(py::pad(v.str(), p.has(0) ? p.get(0).as_int() : 80, ' ', 0));
    };
    t["length"] = t["count"] = [](const Value& v, const CallArgs& a) {
      Params p(what("length"), a, {});
      return Value(py_len(v));
    };
    t["default"] = t["d"] = [](const Value& v, const CallArgs& a) {
      Params p(what("default"), a, {"default_value", "boolean"});
      bool boolean = p.has(1) && p.get(1).truthy();
      if (v.is_undefined() || (boolean && !v.truthy())) return p.get_or(0, Value(""));
      return v;
    };
    t["dictsort"] = [](const Value& v, const CallArgs& a) {
      Params p(what("dictsort"), a, {"case_sensitive", "by", "reverse"});
      if (!v.is_dict()) throw JinjaError("filter 'dictsort' needs a mapping");
      std::string by = p.has(1) ? p.get(1).str() : "key";
      if (by != "key" && by != "value") throw JinjaError("You can only sort by either 'key' or 'value'");
      ValueList pairs;
      for (const auto& [k, val] : v.as_dict().entries()) pairs.push_back(Value::tuple({k, val}));
      return Value::sequence(sorted(Value::sequence(std::move(pairs)), p.has(2) && p.get(2).truthy(),
                                    p.has(0) && p.get(0).truthy(), Value(by == "key" ? 0 : 1)));
    };
    t["escape"] = t["e"] = [](const Value& v, const CallArgs& a) {
      Params p(what("escape"), a, {});
      // markupsafe.escape leaves a Markup as it is: escaping twice would show "&amp;lt;".
      return v.is_markup() ? v : Value::markup(html_escape(v.str()));
    };
    t["forceescape"] = [](const Value& v, const CallArgs& a) {
      Params p(what("forceescape"), a, {});
      return Value::markup(html_escape(v.str()));
    };
    t["first"] = [](const Value& v, const CallArgs& a) {
      Params p(what("first"), a, {});
      ValueList items = iterate(v);
      return items.empty() ? Value::undefined("No first item, sequence was empty.") : items[0];
    };
    t["last"] = [](const Value& v, const CallArgs& a) {
      Params p(what("last"), a, {});
      if (v.is_sequence() && v.seq() == Value::Seq::Iterator) throw JinjaError("'generator' object is not reversible");
      ValueList items = iterate(v);
      return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
    };
    t["float"] = float_filter;
    t["int"] = int_filter;
    t["format"] = [](const Value& v, const CallArgs& a) {
      if (!a.positional.empty() && !a.keyword.empty())
        throw JinjaError("can't handle positional and keyword arguments at the same time");
      if (!a.keyword.empty()) {
        Dict d;
        for (const auto& [k, val] : a.keyword) d.set(Value(k), val);
        return Value(percent_format(v.str(), Value::dict(std::move(d))));
      }
      return Value(percent_format(v.str(), Value::tuple(a.positional)));
    };
    t["indent"] = indent;
    t["items"] = [](const Value& v, const CallArgs& a) {
      Params p(what("items"), a, {});
      if (v.is_undefined()) return iterator({});
      if (!v.is_dict()) throw JinjaError("Can only get item pairs from a mapping.");
      ValueList out;
      for (const auto& [k, val] : v.as_dict().entries()) out.push_back(Value::tuple({k, val}));
      return iterator(std::move(out));
    };
    t["join"] = [](const Value& v, const CallArgs& a) {
      Params p(what("join"), a, {"d", "attribute"});
      std::string sep = p.has(0) ? p.get(0).str() : "";
      std::vector<Value> path;
      if (p.has(1) && !p.get(1).is_none()) path = attribute_path(p.get(1));
      std::string out;
      ValueList items = iterate(v);
      for (size_t i = 0; i < items.size(); ++i) out += (i ? sep : "") + lookup_path(items[i], path).str();
      return Value(std::move(out));
    };
    t["list"] = [](const Value& v, const CallArgs& a) {
      Params p(what("list"), a, {});
      return Value::sequence(iterate(v));
    };
    t["lower"] = [](const Value& v, const CallArgs& a) {
      Params p(what("lower"), a, {});
      return Value(py::lower(v.str()));
    };
    t["upper"] = [](const Value& v, const CallArgs& a) {
      Params p(what("upper"), a, {});
      return Value(py::upper(v.str()));
    };
    t["map"] = map_filter;
    t["groupby"] = groupby;
    t["max"] = [](const Value& v, const CallArgs& a) { return min_max(v, a, true, "max"); };
    t["min"] = [](const Value& v, const CallArgs& a) { return min_max(v, a, false, "min"); };
    t["select"] = [](const Value& v, const CallArgs& a) { return select_or_reject("select", v, a, false, true); };
    t["reject"] = [](const Value& v, const CallArgs& a) { return select_or_reject("reject", v, a, false, false); };
    t["selectattr"] = [](const Value& v, const CallArgs& a) { return select_or_reject("selectattr", v, a, true, true); };
    t["rejectattr"] = [](const Value& v, const CallArgs& a) { return select_or_reject("rejectattr", v, a, true, false); };
    t["replace"] = [](const Value& v, const CallArgs& a) {
      Params p(what("replace"), a, {"old", "new", "count"});
      int64_t count = p.has(2) && !p.get(2).is_none() ? p.get(2).as_int() : -1;
      return Value(py::replace(v.str(), p.get(0).str(), p.get(1).str(), count));
    };
    t["reverse"] = [](const Value& v, const CallArgs& a) {
      Params p(what("reverse"), a, {});
      return reverse(v);
    };
    t["round"] = round_filter;
    t["safe"] = [](const Value& v, const CallArgs& a) {
      Params p(what("safe"), a, {});
      return Value::markup(v.str());
    };
    t["sort"] = [](const Value& v, const CallArgs& a) {
      Params p(what("sort"), a, {"reverse", "case_sensitive", "attribute"});
      std::optional<Value> attribute;
      if (p.has(2)) attribute = p.get(2);
      return Value::sequence(sorted(v, p.has(0) && p.get(0).truthy(), p.has(1) && p.get(1).truthy(), attribute));
    };
    t["string"] = [](const Value& v, const CallArgs& a) {
      Params p(what("string"), a, {});
      return v.is_markup() ? v : Value(v.str());  // soft_str keeps a Markup
    };
    t["sum"] = [](const Value& v, const CallArgs& a) {
      Params p(what("sum"), a, {"attribute", "start"});
      std::vector<Value> path;
      if (p.has(0) && !p.get(0).is_none()) path = attribute_path(p.get(0));
      Value total = p.get_or(1, Value(0));
      for (const auto& item : iterate(v)) total = binary_op("+", total, lookup_path(item, path));
      return total;
    };
    t["title"] = [](const Value& v, const CallArgs& a) {
      Params p(what("title"), a, {});
      return Value(jinja_title(v.str()));
    };
    t["tojson"] = tojson;
    t["trim"] = [](const Value& v, const CallArgs& a) {
      Params p(what("trim"), a, {"chars"});
      std::optional<std::string> chars;
      if (p.has(0) && !p.get(0).is_none()) chars = p.get(0).str();
      return Value(py::strip(v.str(), chars, true, true));
    };
    t["truncate"] = truncate;
    t["unique"] = unique;
    t["wordcount"] = [](const Value& v, const CallArgs& a) {
      Params p(what("wordcount"), a, {});
      return Value(word_count(v.str()));
    };
    return t;
  }();
  return table;
}

// jinja2 filters that are deliberately left out.
const std::set<std::string>& unsupported_filters() {
  static const std::set<std::string> names = {"filesizeformat", "pprint", "random", "slice", "striptags",
                                              "urlencode", "urlize", "wordwrap", "xmlattr"};
  return names;
}

}  // namespace

bool filter_exists(const std::string& name) { return filters().count(name) > 0 || unsupported_filters().count(name) > 0; }

Value apply_filter(const std::string& name, const Value& subject, const CallArgs& args) {
  auto it = filters().find(name);
  if (it != filters().end()) return it->second(subject, args);
  if (unsupported_filters().count(name)) throw JinjaError("the filter '" + name + "' is not supported");
  throw JinjaError("no filter named '" + name + "'");
}

}  // namespace grpo::tok::jinja
