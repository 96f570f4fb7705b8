#include "tokenizer/jinja/value.h"

#include "tokenizer/jinja/error.h"
#include "tokenizer/jinja/pystr.h"

namespace grpo::tok::jinja {

std::string int_text(PyInt i) {
  if (i >= INT64_MIN && i <= INT64_MAX) return std::to_string(static_cast<int64_t>(i));
  // Digits from the magnitude, which for the most negative value only an unsigned type holds.
  unsigned __int128 m = i < 0 ? -static_cast<unsigned __int128>(i) : static_cast<unsigned __int128>(i);
  std::string digits;
  for (; m; m /= 10) digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(m % 10)));
  return (i < 0 ? "-" : "") + digits;
}

// --- Dict ---------------------------------------------------------------------

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(key.as_string());
  for (const auto& [k, v] : entries_)
    if (py_equal(k, key)) return &v;
  return nullptr;
}

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : entries_)
    if (k.is_string() && k.as_string() == key) return &v;
  return nullptr;
}

void Dict::set(const Value& key, Value value) {
  for (auto& [k, v] : entries_) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries_.emplace_back(key, std::move(value));
}

// --- Construction -------------------------------------------------------------

Value Value::undefined(std::string hint) {
  Value v;
  v.str_ = std::move(hint);
  return v;
}

Value Value::none() {
  Value v;
  v.type_ = Type::None;
  return v;
}

Value::Value(bool b) : type_(Type::Bool), bool_(b) {}
Value::Value(int64_t i) : type_(Type::Int), int_(i) {}
Value::Value(double d) : type_(Type::Float), float_(d) {}
Value::Value(std::string s) : type_(Type::String), str_(std::move(s)) {}

Value Value::integer(PyInt i) {
  Value v;
  v.type_ = Type::Int;
  v.int_ = i;
  return v;
}

Value Value::group_tuple(Value grouper, ValueList items) {
  Value v = tuple({std::move(grouper), sequence(std::move(items))});
  v.safe_ = true;
  return v;
}

Value Value::markup(std::string s) {
  Value v(std::move(s));
  v.safe_ = true;
  return v;
}

Value Value::sequence(ValueList items, Seq kind) {
  Value v;
  v.type_ = Type::Sequence;
  v.seq_ = kind;
  v.list_ = std::make_shared<const ValueList>(std::move(items));
  return v;
}

Value Value::dict(Dict d) {
  Value v;
  v.type_ = Type::Dict;
  v.dict_ = std::make_shared<const Dict>(std::move(d));
  return v;
}

Value Value::make_namespace(Dict attrs) {
  Value v;
  v.type_ = Type::Namespace;
  v.ns_ = std::make_shared<Dict>(std::move(attrs));
  return v;
}

Value Value::function(std::string name, NativeFunction fn) {
  Value v;
  v.type_ = Type::Function;
  v.str_ = std::move(name);
  v.fn_ = std::make_shared<const NativeFunction>(std::move(fn));
  return v;
}

namespace {

template <typename Json>
Value convert_json(const Json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return Value::none();
    case nlohmann::json::value_t::boolean:
      return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      // Tool schemas write uint64 bounds (`"maximum": 18446744073709551615`).
      return Value::integer(j.template get<uint64_t>());
    }
    case nlohmann::json::value_t::number_float:
      return Value(j.template get<double>());
    case nlohmann::json::value_t::string:
      return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      ValueList items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(convert_json(e));
      return Value::sequence(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(Value(it.key()), convert_json(it.value()));
      return Value::dict(std::move(d));
    }
    default:
      throw JinjaError("a JSON value of this kind (binary) cannot be passed to a template");
  }
}

}  // namespace

Value Value::from_json(const nlohmann::ordered_json& j) { return convert_json(j); }
Value Value::from_json(const nlohmann::json& j) { return convert_json(j); }

nlohmann::ordered_json Value::to_json() const {
  switch (type_) {
    case Type::None: return nullptr;
    case Type::Bool: return bool_;
    case Type::Int:
      if (int_ >= INT64_MIN && int_ <= INT64_MAX) return static_cast<int64_t>(int_);
      if (int_ >= 0 && int_ <= static_cast<PyInt>(UINT64_MAX)) return static_cast<uint64_t>(int_);
      throw JinjaError("the integer " + int_text(int_) + " does not fit in a JSON number");
    case Type::Float: return float_;
    case Type::String: return str_;
    case Type::Sequence: {
      auto arr = nlohmann::ordered_json::array();
      for (const auto& e : *list_) arr.push_back(e.to_json());
      return arr;
    }
    case Type::Dict: {
      auto obj = nlohmann::ordered_json::object();
      for (const auto& [k, v] : dict_->entries()) obj[k.is_string() ? k.as_string() : k.str()] = v.to_json();
      return obj;
    }
    default:
      throw JinjaError("a value of type '" + type_name() + "' cannot be converted to JSON");
  }
}

// --- Inspection ---------------------------------------------------------------

int64_t Value::as_int() const {
  if (type_ == Type::Bool) return bool_ ? 1 : 0;
  if (int_ < INT64_MIN || int_ > INT64_MAX)
    throw JinjaError("Python int too large to convert to a 64-bit integer: " + int_text(int_));
  return static_cast<int64_t>(int_);
}

double Value::as_double() const {
  switch (type_) {
    case Type::Float: return float_;
    case Type::Int: return static_cast<double>(int_);
    case Type::Bool: return bool_ ? 1.0 : 0.0;
    default: return 0.0;
  }
}

bool Value::same_object(const Value& other) const {
  if (type_ != other.type_) return false;
  switch (type_) {
    case Type::Undefined:
    case Type::None: return true;
    case Type::Bool: return bool_ == other.bool_;
    case Type::Int: return int_ == other.int_;  // CPython caches small ints; close enough for `sameas`
    case Type::Float: return false;
    case Type::String: return str_ == other.str_;
    case Type::Sequence: return list_ == other.list_;
    case Type::Dict: return dict_ == other.dict_;
    case Type::Namespace: return ns_ == other.ns_;
    case Type::Function: return fn_ == other.fn_;
  }
  return false;
}

bool Value::truthy() const {
  switch (type_) {
    case Type::Undefined:
    case Type::None: return false;
    case Type::Bool: return bool_;
    case Type::Int: return int_ != 0;
    case Type::Float: return float_ != 0.0;
    case Type::String: return !str_.empty();
    case Type::Sequence: return seq_ == Seq::Iterator || !list_->empty();  // a generator is always true
    case Type::Dict: return dict_->size() != 0;
    default: return true;
  }
}

std::string Value::type_name() const {
  switch (type_) {
    case Type::Undefined: return "Undefined";
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int: return "int";
    case Type::Float: return "float";
    case Type::String: return "str";
    case Type::Sequence:
      switch (seq_) {
        case Seq::List: return "list";
        case Seq::Tuple: return "tuple";
        case Seq::Iterator: return "generator";
        case Seq::DictKeys: return "dict_keys";
        case Seq::DictValues: return "dict_values";
        case Seq::DictItems: return "dict_items";
      }
      return "list";
    case Type::Dict: return "dict";
    case Type::Namespace: return "Namespace";
    case Type::Function: return "function";
  }
  return "object";
}

namespace {

std::string join_repr(const ValueList& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    out += items[i].repr();
  }
  return out;
}

std::string dict_repr(const Dict& d) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : d.entries()) {
    if (!first) out += ", ";
    first = false;
    out += k.repr() + ": " + v.repr();
  }
  return out + "}";
}

}  // namespace

std::string Value::str() const {
  switch (type_) {
    case Type::Undefined: return "";
    case Type::String: return str_;
    default: return repr();
  }
}

std::string Value::repr() const {
  switch (type_) {
    case Type::Undefined: return "Undefined";
    case Type::None: return "None";
    case Type::Bool: return bool_ ? "True" : "False";
    case Type::Int: return int_text(int_);
    case Type::Float: return py::float_repr(float_);
    case Type::String: return py::repr(str_);
    case Type::Sequence:
      switch (seq_) {
        case Seq::List: return "[" + join_repr(*list_) + "]";
        case Seq::Tuple: return "(" + join_repr(*list_) + (list_->size() == 1 ? ",)" : ")");
        case Seq::DictKeys: return "dict_keys([" + join_repr(*list_) + "])";
        case Seq::DictValues: return "dict_values([" + join_repr(*list_) + "])";
        case Seq::DictItems: return "dict_items([" + join_repr(*list_) + "])";
        case Seq::Iterator:
          // Python prints the generator's address; there is nothing to match.
          throw JinjaError("printing a generator (the result of a filter such as select or map) is not supported; "
                           "apply |list first");
      }
      return "";
    case Type::Dict: return dict_repr(*dict_);
    case Type::Namespace: return "<Namespace " + dict_repr(*ns_) + ">";
    case Type::Function: return "<function " + str_ + ">";
  }
  return "";
}

}  // namespace grpo::tok::jinja
