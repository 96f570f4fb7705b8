// Python's arithmetic and slicing, as jinja evaluates `+`, `//`, `x[a:b:c]`...
#include <cmath>

#include "tokenizer/jinja/builtins.h"
#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

namespace {

bool int_like(const Value& v) { return v.is_int() || v.is_bool(); }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw JinjaError("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
}

[[noreturn]] void overflow() {
  throw JinjaError("integer overflow: the result does not fit in 128 bits");
}

PyInt floor_div(PyInt a, PyInt b) {
  if (a == kPyIntMin && b == -1) overflow();
  PyInt q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

PyInt floor_mod(PyInt a, PyInt b) {
  if (b == -1) return 0;
  PyInt m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

double float_mod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0) {
    if ((b < 0) != (m < 0)) m += b;
  } else {
    m = std::copysign(0.0, b);
  }
  return m;
}

// markupsafe's Markup.__add__ / __radd__: the plain string is escaped and
// the result stays safe. (`~` is a plain join when autoescape is off, as in
// transformers, and is not routed here.)
Value concat(const Value& a, const Value& b) {
  if (a.is_markup() == b.is_markup()) {
    Value out(a.as_string() + b.as_string());
    return a.is_markup() ? Value::markup(out.as_string()) : out;
  }
  std::string left = a.is_markup() ? a.as_string() : html_escape(a.as_string());
  std::string right = b.is_markup() ? b.as_string() : html_escape(b.as_string());
  return Value::markup(left + right);
}

Value repeat(const Value& seq, int64_t times) {
  if (seq.is_string()) {
    std::string out;
    for (int64_t i = 0; i < times; ++i) out += seq.as_string();
    return Value(std::move(out));
  }
  ValueList out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.as_list().begin(), seq.as_list().end());
  return Value::sequence(std::move(out), seq.seq());
}

Value int_pow(PyInt base, PyInt exp) {
  PyInt result = 1;
  while (exp > 0) {
    if (exp & 1) {
      if (__builtin_mul_overflow(result, base, &result)) overflow();
    }
    exp >>= 1;
    if (exp > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
  }
  return Value::integer(result);
}

}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
  bool ints = int_like(a) && int_like(b);
  bool nums = a.is_number() && b.is_number();
  if (op == "+") {
    if (ints) {
      PyInt r;
      if (__builtin_add_overflow(a.as_wide_int(), b.as_wide_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) return concat(a, b);
    if (a.is_indexable() && b.is_indexable() && a.seq() == b.seq()) {
      ValueList out = a.as_list();
      out.insert(out.end(), b.as_list().begin(), b.as_list().end());
      return Value::sequence(std::move(out), a.seq());
    }
    if (a.is_string() || a.is_indexable())
      throw JinjaError("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
    unsupported(op, a, b);
  }
  if (op == "-") {
    if (ints) {
      PyInt r;
      if (__builtin_sub_overflow(a.as_wide_int(), b.as_wide_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value(a.as_double() - b.as_double());
    unsupported(op, a, b);
  }
  if (op == "*") {
    if (ints) {
      PyInt r;
      if (__builtin_mul_overflow(a.as_wide_int(), b.as_wide_int(), &r)) overflow();
      return Value::integer(r);
    }
    if (nums) return Value(a.as_double() * b.as_double());
    if ((a.is_string() || a.is_indexable()) && int_like(b)) return repeat(a, b.as_int());
    if ((b.is_string() || b.is_indexable()) && int_like(a)) return repeat(b, a.as_int());
    throw JinjaError("can't multiply sequence by non-int of type '" +
                     ((a.is_string() || a.is_sequence()) ? b.type_name() : a.type_name()) + "'");
  }
  if (op == "/") {
    if (!nums) unsupported(op, a, b);
    if (b.as_double() == 0) throw JinjaError("division by zero");
    return Value(a.as_double() / b.as_double());
  }
  if (op == "//") {
    if (!nums) unsupported(op, a, b);
    if (ints) {
      if (b.as_wide_int() == 0) throw JinjaError("integer division or modulo by zero");
      return Value::integer(floor_div(a.as_wide_int(), b.as_wide_int()));
    }
    if (b.as_double() == 0) throw JinjaError("float floor division by zero");
    return Value(std::floor(a.as_double() / b.as_double()));
  }
  if (op == "%") {
    if (a.is_string()) return Value(percent_format(a.as_string(), b));
    if (!nums) unsupported(op, a, b);
    if (ints) {
      if (b.as_wide_int() == 0) throw JinjaError("integer division or modulo by zero");
      return Value::integer(floor_mod(a.as_wide_int(), b.as_wide_int()));
    }
    if (b.as_double() == 0) throw JinjaError("float modulo");
    return Value(float_mod(a.as_double(), b.as_double()));
  }
  if (op == "**") {
    if (!nums) unsupported("** or pow()", a, b);
    if (ints && b.as_wide_int() >= 0) return int_pow(a.as_wide_int(), b.as_wide_int());
    if (a.as_double() == 0 && b.as_double() < 0)
      throw JinjaError("0.0 cannot be raised to a negative power");
    return Value(std::pow(a.as_double(), b.as_double()));
  }
  throw JinjaError("unknown operator '" + op + "'");
}

Value unary_op(const std::string& op, const Value& a) {
  if (a.is_undefined()) fail_undefined(a);
  if (int_like(a)) {
    if (op == "+") return Value::integer(a.as_wide_int());
    if (a.as_wide_int() == kPyIntMin) overflow();
    return Value::integer(-a.as_wide_int());
  }
  if (a.is_float()) return Value(op == "-" ? -a.as_double() : a.as_double());
  throw JinjaError("bad operand type for unary " + op + ": '" + a.type_name() + "'");
}

Value slice(const Value& obj, const std::optional<Value>& start, const std::optional<Value>& stop,
            const std::optional<Value>& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  // jinja compiles a slice to a plain Python subscript, so its TypeErrors are raised (an index
  // is looked up leniently, a slice is not).
  auto bound = [](const std::optional<Value>& v) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (!int_like(*v)) throw JinjaError("slice indices must be integers or None or have an __index__ method");
    return v->as_int();
  };
  if (obj.is_dict()) throw JinjaError("unhashable type: 'slice'");
  if (!obj.is_string() && !obj.is_indexable()) throw JinjaError("'" + obj.type_name() + "' object is not subscriptable");
  std::optional<int64_t> lo = bound(start), hi = bound(stop), st = bound(step);
  int64_t s = st.value_or(1);
  if (s == 0) throw JinjaError("slice step cannot be zero");

  std::u32string text;
  if (obj.is_string()) text = py::decode(obj.as_string());
  int64_t len = obj.is_string() ? static_cast<int64_t>(text.size()) : static_cast<int64_t>(obj.as_list().size());
  // PySlice_AdjustIndices.
  int64_t lower = s > 0 ? 0 : -1, upper = s > 0 ? len : len - 1;
  auto adjust = [&](std::optional<int64_t> v, int64_t fallback) {
    if (!v) return fallback;
    int64_t x = *v;
    if (x < 0) {
      x += len;
      if (x < lower) x = lower;
    } else if (x > upper) {
      x = upper;
    }
    return x;
  };
  int64_t from = adjust(lo, s > 0 ? lower : upper);
  int64_t to = adjust(hi, s > 0 ? upper : lower);
  std::vector<int64_t> picks;
  for (int64_t i = from; s > 0 ? i < to : i > to; i += s) picks.push_back(i);
  if (obj.is_string()) {
    std::u32string out;
    for (int64_t i : picks) out.push_back(text[i]);
    return Value(py::encode(out));
  }
  ValueList out;
  for (int64_t i : picks) out.push_back(obj.as_list()[i]);
  return Value::sequence(std::move(out), obj.seq());
}

}  // namespace grpo::tok::jinja
