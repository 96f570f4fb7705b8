// The values a template computes with, following Python's semantics as
// jinja2 exposes them: undefined (jinja's Undefined), None, bool, int,
// float, str, the sequence types (list, tuple, iterators, dict views), dict
// (insertion-ordered, as Python's), jinja's namespace() objects, and
// callables (globals, bound methods, macros).
//
// Lists and dicts are immutable once built and shared between copies (a
// sandboxed template cannot mutate them); a namespace is shared and mutable,
// which is what `{% set ns.attr = ... %}` relies on.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace grpo::tok::jinja {

class Value;
// Python's ints are unbounded; 128 bits hold every integer a JSON schema or a
// template's arithmetic needs (a uint64 `maximum`, `2 ** 64`) exactly, and
// arithmetic past them raises instead of wrapping.
__extension__ typedef __int128 PyInt;
// std::numeric_limits knows __int128 only in GNU mode.
inline constexpr PyInt kPyIntMin = static_cast<PyInt>(static_cast<unsigned __int128>(1) << 127);
inline constexpr PyInt kPyIntMax = ~kPyIntMin;
using ValueList = std::vector<Value>;

// The arguments of a call, as Python passes them.
struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};
using NativeFunction = std::function<Value(const CallArgs&)>;

// An insertion-ordered mapping with Python key equality (1 == 1.0 == True).
class Dict {
 public:
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  // Replaces the value of an existing key in place, as Python does.
  void set(const Value& key, Value value);
  const std::vector<std::pair<Value, Value>>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<Value, Value>> entries_;
};

class Value {
 public:
  enum class Type : uint8_t { Undefined, None, Bool, Int, Float, String, Sequence, Dict, Namespace, Function };
  // The Python type behind a Sequence: they print differently, and only
  // lists and tuples can be indexed or measured before being listed.
  enum class Seq : uint8_t { List, Tuple, Iterator, DictKeys, DictValues, DictItems };

  Value() = default;  // undefined
  static Value undefined(std::string hint = {});
  static Value none();
  Value(bool b);
  Value(int i) : Value(static_cast<int64_t>(i)) {}
  Value(int64_t i);
  Value(double d);
  Value(std::string s);
  Value(const char* s) : Value(std::string(s)) {}
  // Named rather than a constructor so that no argument converts to it by surprise.
  static Value integer(PyInt i);
  // A string jinja has marked safe (markupsafe's Markup, from |safe or |escape):
  // a plain string added to it is HTML-escaped first.
  static Value markup(std::string s);
  static Value sequence(ValueList items, Seq kind = Seq::List);
  static Value tuple(ValueList items) { return sequence(std::move(items), Seq::Tuple); }
  // groupby's (grouper, list) pair: a tuple whose items are also the
  // attributes `grouper` and `list` (jinja's _GroupTuple namedtuple).
  static Value group_tuple(Value grouper, ValueList items);
  bool is_group_tuple() const { return is_indexable() && seq_ == Seq::Tuple && safe_; }
  static Value dict(Dict d);
  static Value make_namespace(Dict attrs);
  static Value function(std::string name, NativeFunction fn);

  static Value from_json(const nlohmann::ordered_json& j);
  static Value from_json(const nlohmann::json& j);
  // Throws JinjaError for what JSON cannot hold (undefined, callables).
  nlohmann::ordered_json to_json() const;

  Type type() const { return type_; }
  Seq seq() const { return seq_; }
  bool is_undefined() const { return type_ == Type::Undefined; }
  bool is_none() const { return type_ == Type::None; }
  bool is_bool() const { return type_ == Type::Bool; }
  bool is_int() const { return type_ == Type::Int; }
  bool is_float() const { return type_ == Type::Float; }
  // int, float or bool: the numbers of Python's numeric tower.
  bool is_number() const { return type_ == Type::Int || type_ == Type::Float || type_ == Type::Bool; }
  bool is_string() const { return type_ == Type::String; }
  bool is_markup() const { return type_ == Type::String && safe_; }
  bool is_sequence() const { return type_ == Type::Sequence; }
  // A list or tuple: indexable, sliceable, with a length.
  bool is_indexable() const { return type_ == Type::Sequence && (seq_ == Seq::List || seq_ == Seq::Tuple); }
  bool is_dict() const { return type_ == Type::Dict; }
  bool is_namespace() const { return type_ == Type::Namespace; }
  bool is_function() const { return type_ == Type::Function; }

  bool as_bool() const { return bool_; }
  // Throws JinjaError for an int past 64 bits (Python's OverflowError where
  // an index or count is needed).
  int64_t as_int() const;
  PyInt as_wide_int() const { return type_ == Type::Bool ? (bool_ ? 1 : 0) : int_; }
  double as_double() const;
  const std::string& as_string() const { return str_; }
  const ValueList& as_list() const { return *list_; }
  const Dict& as_dict() const { return *dict_; }
  Dict& namespace_attrs() const { return *ns_; }
  const std::string& function_name() const { return str_; }
  Value call(const CallArgs& args) const { return (*fn_)(args); }
  // Why an undefined value is undefined, e.g. "'foo' is undefined".
  const std::string& undefined_hint() const { return str_; }
  // Whether two values are the same object (Python's `is`).
  bool same_object(const Value& other) const;

  bool truthy() const;
  std::string str() const;   // Python str()
  std::string repr() const;  // Python repr()
  std::string type_name() const;  // Python's name of the type, for messages

 private:
  Type type_ = Type::Undefined;
  Seq seq_ = Seq::List;
  bool bool_ = false;
  bool safe_ = false;  // a str: Markup; a tuple: groupby's _GroupTuple
  PyInt int_ = 0;
  double float_ = 0;
  std::string str_;
  std::shared_ptr<const ValueList> list_;
  std::shared_ptr<const Dict> dict_;
  std::shared_ptr<Dict> ns_;
  std::shared_ptr<const NativeFunction> fn_;
};

// Python's str() of an int.
std::string int_text(PyInt i);
// Python's ==.
bool py_equal(const Value& a, const Value& b);
// Python's <; throws JinjaError for unorderable operands.
bool py_less(const Value& a, const Value& b);
// Python's `item in container`.
bool py_contains(const Value& container, const Value& item);
// The elements that iterating the value yields (a dict yields its keys, a
// str its characters, undefined nothing); throws for what is not iterable.
ValueList iterate(const Value& v);
// len(); throws for what has no length.
int64_t py_len(const Value& v);
// The error jinja raises when an undefined value is used.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace grpo::tok::jinja
