// The template's global functions: range, dict, namespace, joiner, and the two
// transformers adds, raise_exception and strftime_now.
#include "tokenizer/jinja/globals.h"

#include <ctime>
#include <memory>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"

namespace grpo::tok::jinja {
namespace {

std::string format_time(const std::string& format, const std::tm& tm) {
  if (format.empty()) return "";
  std::vector<char> buf(256);
  while (true) {
    size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &tm);
    if (n > 0 || buf.size() > 65536) return std::string(buf.data(), n);
    buf.resize(buf.size() * 4);
  }
}

// dict(*args, **kwargs) as Python builds it, for dict() and namespace().
Dict build_dict(const std::string& what, const CallArgs& args) {
  if (args.positional.size() > 1) throw JinjaError(what + " expected at most 1 argument, got " + std::to_string(args.positional.size()));
  Dict d;
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_dict()) {
      d = src.as_dict();
    } else if (src.is_namespace()) {
      d = src.namespace_attrs();
    } else {
      for (const auto& pair : iterate(src)) {
        ValueList kv = iterate(pair);
        if (kv.size() != 2) throw JinjaError("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        d.set(kv[0], kv[1]);
      }
    }
  }
  for (const auto& [k, v] : args.keyword) d.set(Value(k), v);
  return d;
}

}  // namespace

std::vector<std::pair<std::string, Value>> global_functions(const RenderOptions& render_options) {
  std::vector<std::pair<std::string, Value>> out;
  out.emplace_back("range", Value::function("range", [](const CallArgs& a) {
    if (!a.keyword.empty()) throw JinjaError("range() takes no keyword arguments");
    if (a.positional.empty() || a.positional.size() > 3)
      throw JinjaError("range expected 1 to 3 arguments, got " + std::to_string(a.positional.size()));
    for (const auto& v : a.positional)
      if (!v.is_int() && !v.is_bool())
        throw JinjaError("'" + v.type_name() + "' object cannot be interpreted as an integer");
    int64_t start = 0, stop, step = 1;
    if (a.positional.size() == 1) {
      stop = a.positional[0].as_int();
    } else {
      start = a.positional[0].as_int();
      stop = a.positional[1].as_int();
      if (a.positional.size() == 3) step = a.positional[2].as_int();
    }
    if (step == 0) throw JinjaError("range() arg 3 must not be zero");
    ValueList out;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (out.size() >= 100000)  // jinja's sandbox limit (MAX_RANGE)
        throw JinjaError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
      out.emplace_back(i);
    }
    return Value::sequence(std::move(out));
  }));
  out.emplace_back("dict", Value::function("dict", [](const CallArgs& a) { return Value::dict(build_dict("dict", a)); }));
  out.emplace_back("namespace", Value::function("namespace", [](const CallArgs& a) {
    return Value::make_namespace(build_dict("namespace", a));
  }));
  out.emplace_back("joiner", Value::function("joiner", [](const CallArgs& a) {
    Params p("joiner()", a, {"sep"});
    std::string sep = p.has(0) ? p.get(0).str() : ", ";
    auto used = std::make_shared<bool>(false);
    return Value::function("joiner", [sep, used](const CallArgs&) {
      if (!*used) {
        *used = true;
        return Value("");
      }
      return Value(sep);
    });
  }));
  out.emplace_back("raise_exception", Value::function("raise_exception", [](const CallArgs& a) -> Value {
    Params p("raise_exception()", a, {"message"});
    throw JinjaError(p.get(0).str(), 0, true);
  }));
  // The clock is copied: the functions outlive the options they were made from.
  out.emplace_back("strftime_now", Value::function("strftime_now", [now = render_options.now](const CallArgs& a) {
    Params p("strftime_now()", a, {"format"});
    std::tm tm{};
    if (now) {
      tm = now();
    } else {
      std::time_t t = std::time(nullptr);
      localtime_r(&t, &tm);
    }
    return Value(format_time(p.get(0).str(), tm));
  }));
  return out;
}

}  // namespace grpo::tok::jinja
