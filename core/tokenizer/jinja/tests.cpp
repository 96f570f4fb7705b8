// jinja2's builtin tests: `x is defined`, `x is string`, `x is divisibleby 3`...
#include <functional>
#include <map>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

namespace {

using Test = std::function<bool(const Value&, const CallArgs&)>;

// A test of the value alone.
Test unary(const char* name, bool (*f)(const Value&)) {
  return [name, f](const Value& v, const CallArgs& a) {
    Params p(std::string("test '") + name + "'", a, {});
    return f(v);
  };
}

// A test comparing the value with one argument.
Test binary(const char* name, bool (*f)(const Value&, const Value&)) {
  return [name, f](const Value& v, const CallArgs& a) {
    Params p(std::string("test '") + name + "'", a, {"other"});
    return f(v, p.get(0));
  };
}

bool modulo_is(const Value& v, int64_t divisor, int64_t remainder) {
  return py_equal(binary_op("%", v, Value(divisor)), Value(remainder));
}

const std::map<std::string, Test>& tests() {
  static const std::map<std::string, Test> table = [] {
    std::map<std::string, Test> t;
    t["defined"] = unary("defined", [](const Value& v) { return !v.is_undefined(); });
    t["undefined"] = unary("undefined", [](const Value& v) { return v.is_undefined(); });
    t["none"] = unary("none", [](const Value& v) { return v.is_none(); });
    t["boolean"] = unary("boolean", [](const Value& v) { return v.is_bool(); });
    t["true"] = unary("true", [](const Value& v) { return v.is_bool() && v.as_bool(); });
    t["false"] = unary("false", [](const Value& v) { return v.is_bool() && !v.as_bool(); });
    t["integer"] = unary("integer", [](const Value& v) { return v.is_int(); });
    t["float"] = unary("float", [](const Value& v) { return v.is_float(); });
    t["number"] = unary("number", [](const Value& v) { return v.is_number(); });
    t["string"] = unary("string", [](const Value& v) { return v.is_string(); });
    t["mapping"] = unary("mapping", [](const Value& v) { return v.is_dict(); });
    t["callable"] = unary("callable", [](const Value& v) { return v.is_function() || v.is_undefined(); });
    t["escaped"] = unary("escaped", [](const Value&) { return false; });
    // Undefined iterates as empty and has a length, so jinja counts it as both.
    t["iterable"] = unary("iterable", [](const Value& v) {
      return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_dict();
    });
    t["sequence"] = unary("sequence", [](const Value& v) {
      return v.is_undefined() || v.is_string() || v.is_indexable() || v.is_dict();
    });
    t["lower"] = unary("lower", [](const Value& v) { return py::is_lower(v.str()); });
    t["upper"] = unary("upper", [](const Value& v) { return py::is_upper(v.str()); });
    t["even"] = unary("even", [](const Value& v) { return modulo_is(v, 2, 0); });
    t["odd"] = unary("odd", [](const Value& v) { return modulo_is(v, 2, 1); });
    t["divisibleby"] = [](const Value& v, const CallArgs& a) {
      Params p("test 'divisibleby'", a, {"num"});
      return py_equal(binary_op("%", v, p.get(0)), Value(0));
    };
    t["sameas"] = binary("sameas", [](const Value& v, const Value& o) { return v.same_object(o); });
    t["eq"] = t["equalto"] = t["=="] = binary("eq", [](const Value& v, const Value& o) { return py_equal(v, o); });
    t["ne"] = t["!="] = binary("ne", [](const Value& v, const Value& o) { return !py_equal(v, o); });
    t["lt"] = t["lessthan"] = t["<"] = binary("lt", [](const Value& v, const Value& o) { return py_less(v, o); });
    t["gt"] = t["greaterthan"] = t[">"] = binary("gt", [](const Value& v, const Value& o) { return py_less(o, v); });
    t["le"] = t["<="] = binary("le", [](const Value& v, const Value& o) { return !py_less(o, v); });
    t["ge"] = t[">="] = binary("ge", [](const Value& v, const Value& o) { return !py_less(v, o); });
    t["in"] = binary("in", [](const Value& v, const Value& o) { return py_contains(o, v); });
    t["filter"] = unary("filter", [](const Value& v) { return v.is_string() && filter_exists(v.as_string()); });
    t["test"] = unary("test", [](const Value& v) { return v.is_string() && test_exists(v.as_string()); });
    return t;
  }();
  return table;
}

}  // namespace

bool test_exists(const std::string& name) { return tests().count(name) > 0; }

bool apply_test(const std::string& name, const Value& subject, const CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw JinjaError("no test named '" + name + "'");
  return it->second(subject, args);
}

}  // namespace grpo::tok::jinja
