// What templates call on values: jinja's filters and tests, Python's
// operators, attribute and item access as jinja's sandbox performs them,
// and the str / dict / list methods templates call.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "tokenizer/jinja/value.h"

namespace grpo::tok::jinja {

// Binds a call's arguments to named parameters, as Python binds a builtin's:
// positional first, then keywords; throws JinjaError for unknown keywords,
// too many arguments, or one given twice.
class Params {
 public:
  Params(const std::string& what, const CallArgs& args, std::initializer_list<const char*> names);
  bool has(size_t i) const { return values_[i].has_value(); }
  const Value& get(size_t i) const;  // throws when missing
  Value get_or(size_t i, Value fallback) const { return has(i) ? *values_[i] : std::move(fallback); }
  // Positional arguments beyond the named ones (for *args parameters).
  const std::vector<Value>& rest() const { return rest_; }
  const std::vector<std::pair<std::string, Value>>& extra_keywords() const { return extra_keywords_; }

  // Allows extra positional / keyword arguments instead of rejecting them.
  static Params variadic(const std::string& what, const CallArgs& args, std::initializer_list<const char*> names,
                         bool extra_positional, bool extra_keywords);

 private:
  Params() = default;
  void bind(const CallArgs& args, std::initializer_list<const char*> names, bool extra_positional, bool extra_keywords);
  std::string what_;
  std::vector<std::string> names_;
  std::vector<std::optional<Value>> values_;
  std::vector<Value> rest_;
  std::vector<std::pair<std::string, Value>> extra_keywords_;
};

// --- Operators (operators.cpp) ---------------------------------------------------
// + - * / // % ** on Python semantics; `%` on a str formats it.
Value binary_op(const std::string& op, const Value& a, const Value& b);
// -x and +x.
Value unary_op(const std::string& op, const Value& a);
// obj[start:stop:step]; absent parts are Python's None.
Value slice(const Value& obj, const std::optional<Value>& start, const std::optional<Value>& stop,
            const std::optional<Value>& step);

// --- Attributes, items and methods (methods.cpp) ----------------------------------
// jinja's getattr: a method or attribute first, then the item; undefined when neither.
Value get_attr(const Value& obj, const std::string& name);
// jinja's getitem: the item first, then (for a str key) the attribute.
Value get_item(const Value& obj, const Value& key);
// Whether `obj.name` is a Python method of obj's type.
bool has_method(const Value& obj, const std::string& name);
// obj.name(args) for a method of obj's type.
Value call_method(const Value& obj, const std::string& name, const CallArgs& args);

// --- Formatting (format.cpp) -------------------------------------------------------
// text % args (printf-style), as the `%` operator and the format filter apply it.
std::string percent_format(const std::string& text, const Value& args);
// str.format(*args, **kwargs).
std::string str_format(const std::string& text, const CallArgs& args);

// --- Filters and tests (filters.cpp, tests.cpp) --------------------------------------
Value apply_filter(const std::string& name, const Value& subject, const CallArgs& args);
bool apply_test(const std::string& name, const Value& subject, const CallArgs& args);
bool filter_exists(const std::string& name);
bool test_exists(const std::string& name);
// markupsafe's escape of a plain string (& < > " ').
std::string html_escape(const std::string& s);

}  // namespace grpo::tok::jinja
