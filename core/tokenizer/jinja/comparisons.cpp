// Python's comparisons, membership, iteration and len() over template
// values, as jinja2 evaluates `==`, `<`, `in`, `for` and `|length`.
#include "tokenizer/jinja/value.h"

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

[[noreturn]] void fail_undefined(const Value& v) {
  throw JinjaError(v.undefined_hint().empty() ? "a value is undefined" : v.undefined_hint());
}

bool py_equal(const Value& a, const Value& b) {
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_wide_int() == b.as_wide_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::Undefined:
    case T::None: return true;
    case T::String: return a.as_string() == b.as_string();
    case T::Sequence: {
      bool comparable = (a.seq() == Value::Seq::List || a.seq() == Value::Seq::Tuple) && a.seq() == b.seq();
      if (!comparable) return a.same_object(b);
      const auto& x = a.as_list();
      const auto& y = b.as_list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!py_equal(x[i], y[i])) return false;
      return true;
    }
    case T::Dict: {
      const auto& x = a.as_dict();
      const auto& y = b.as_dict();
      if (x.size() != y.size()) return false;
      for (const auto& [k, v] : x.entries()) {
        const Value* other = y.find(k);
        if (!other || !py_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.same_object(b);
  }
}

bool py_less(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() < b.as_double();
    return a.as_wide_int() < b.as_wide_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();  // UTF-8 order is code-point order
  if (a.is_indexable() && b.is_indexable() && a.seq() == b.seq()) {
    const auto& x = a.as_list();
    const auto& y = b.as_list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!py_equal(x[i], y[i])) return py_less(x[i], y[i]);
    return x.size() < y.size();
  }
  throw JinjaError("'<' not supported between instances of '" + a.type_name() + "' and '" + b.type_name() + "'");
}

bool py_contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case Value::Type::String:
      if (!item.is_string())
        throw JinjaError("'in <string>' requires string as left operand, not " + item.type_name());
      return container.as_string().find(item.as_string()) != std::string::npos;
    case Value::Type::Sequence:
      for (const auto& e : container.as_list())
        if (py_equal(e, item)) return true;
      return false;
    case Value::Type::Dict: return container.as_dict().find(item) != nullptr;
    case Value::Type::Undefined: return false;  // iterating jinja's Undefined yields nothing
    default: throw JinjaError("argument of type '" + container.type_name() + "' is not iterable");
  }
}

ValueList iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined: return {};
    case Value::Type::String: {
      ValueList out;
      for (char32_t cp : py::decode(v.as_string())) {
        std::string s;
        py::append_utf8(s, cp);
        out.emplace_back(std::move(s));
      }
      return out;
    }
    case Value::Type::Sequence: return v.as_list();
    case Value::Type::Dict: {
      ValueList out;
      for (const auto& kv : v.as_dict().entries()) out.push_back(kv.first);
      return out;
    }
    default: throw JinjaError("'" + v.type_name() + "' object is not iterable");
  }
}

int64_t py_len(const Value& v) {
  switch (v.type()) {
    case Value::Type::Undefined: return 0;
    case Value::Type::String: return py::length(v.as_string());
    case Value::Type::Sequence:
      if (v.seq() == Value::Seq::Iterator) throw JinjaError("object of type 'generator' has no len()");
      return static_cast<int64_t>(v.as_list().size());
    case Value::Type::Dict: return static_cast<int64_t>(v.as_dict().size());
    default: throw JinjaError("object of type '" + v.type_name() + "' has no len()");
  }
}

}  // namespace grpo::tok::jinja
