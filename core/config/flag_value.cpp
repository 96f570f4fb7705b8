// Turning what the user wrote (command-line words, YAML nodes, JSON from code) into a flag's typed
// value, and the checks every value passes whatever its source.

#include "config/config_internal.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace grpo::config::detail {
namespace {

using nlohmann::json;

// What the user wrote, before typing: nothing, one scalar, a list of scalars or a mapping.
struct Raw {
  enum class Kind { Null, Scalar, List, Map };
  Kind kind = Kind::Null;
  std::string text;            // Scalar
  bool quoted = false;         // Scalar written in quotes: never read as null
  std::vector<Raw> items;      // List
  json map;                    // Map
  std::string given;           // for messages
};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string quote(std::string_view s) { return "'" + std::string(s) + "'"; }

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

bool is_list_type(FlagType t) { return t == FlagType::StringList || t == FlagType::FloatList; }

std::optional<bool> parse_bool(std::string_view text) {
  const std::string t = lower(text);
  if (t == "true" || t == "yes" || t == "1" || t == "on") return true;
  if (t == "false" || t == "no" || t == "0" || t == "off") return false;
  return std::nullopt;
}

std::optional<int64_t> parse_int(std::string_view text) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(const std::string& text) {
  if (text.empty() || std::isspace(static_cast<unsigned char>(text.front()))) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

bool is_null_word(const Raw& raw) {
  if (raw.kind != Raw::Kind::Scalar || raw.quoted) return false;
  const std::string t = lower(raw.text);
  return t == "null" || t == "none" || t == "~";
}

[[noreturn]] void invalid(const FlagSpec& spec, const std::string& given) {
  throw ValueProblem{ValueProblem::Kind::Invalid, given, expectation(spec)};
}

const json* value_alias(const FlagSpec& spec, const std::string& text) {
  const std::string t = lower(text);
  for (const auto& [spelled, value] : spec.value_aliases)
    if (lower(spelled) == t) return &value;
  return nullptr;
}

// One scalar of the flag's (element) type.
json typed_scalar(const FlagSpec& spec, const Raw& raw, FlagType type) {
  if (const json* alias = value_alias(spec, raw.text)) return *alias;
  switch (type) {
    case FlagType::Bool:
      if (auto b = parse_bool(raw.text)) return *b;
      break;
    case FlagType::Int:
      if (auto i = parse_int(raw.text)) return *i;
      break;
    case FlagType::Float:
      if (auto d = parse_double(raw.text)) return *d;
      break;
    case FlagType::String:
      return raw.text;
    default:
      break;
  }
  invalid(spec, raw.given);
}

json typed(const FlagSpec& spec, const Raw& raw) {
  // `none` is a real value of some flags (scale_rewards, report_to), so it means null only for optionals.
  if (raw.kind == Raw::Kind::Null || (spec.nullable && is_null_word(raw))) {
    if (spec.nullable) return nullptr;
    if (is_list_type(spec.type)) return json::array();
    if (spec.type == FlagType::Map) return json::object();
    invalid(spec, raw.given.empty() ? "null" : raw.given);
  }
  if (spec.type == FlagType::Map) {
    if (raw.kind != Raw::Kind::Map) invalid(spec, raw.given);
    return raw.map;
  }
  if (is_list_type(spec.type)) {
    const FlagType element = spec.type == FlagType::StringList ? FlagType::String : FlagType::Float;
    json out = json::array();
    if (raw.kind == Raw::Kind::Scalar) {
      out.push_back(typed_scalar(spec, raw, element));
    } else if (raw.kind == Raw::Kind::List) {
      for (const Raw& item : raw.items) {
        if (item.kind != Raw::Kind::Scalar) invalid(spec, raw.given);
        Raw element_raw = item;
        element_raw.given = raw.given;
        out.push_back(typed_scalar(spec, element_raw, element));
      }
    } else {
      invalid(spec, raw.given);
    }
    return out;
  }
  if (raw.kind != Raw::Kind::Scalar) invalid(spec, raw.given);
  return typed_scalar(spec, raw, spec.type);
}

bool in_range(const FlagSpec& spec, double v) {
  if (spec.min && (spec.min_exclusive ? v <= *spec.min : v < *spec.min)) return false;
  if (spec.max && (spec.max_exclusive ? v >= *spec.max : v > *spec.max)) return false;
  return true;
}

void check_choice(const FlagSpec& spec, const std::string& value, const std::string& given) {
  for (const auto& [refused, why] : spec.refused_values)
    if (lower(refused) == lower(value)) throw ValueProblem{ValueProblem::Kind::Unavailable, given, why};
  if (spec.choices.empty()) return;
  if (std::find(spec.choices.begin(), spec.choices.end(), value) == spec.choices.end())
    invalid(spec, given);
}

// Choices, ranges, the flag's own rule, then availability.
json checked(const FlagSpec& spec, json value, const std::string& given) {
  if (value.is_string()) check_choice(spec, value.get<std::string>(), given);
  if (value.is_number() && !in_range(spec, value.get<double>())) invalid(spec, given);
  if (value.is_array()) {
    for (const json& item : value) {
      if (item.is_string()) check_choice(spec, item.get<std::string>(), given);
      if (item.is_number() && !in_range(spec, item.get<double>())) invalid(spec, given);
    }
  }
  if (spec.finish) {
    std::string problem = spec.finish(value);
    if (!problem.empty()) throw ValueProblem{ValueProblem::Kind::Invalid, given, problem};
  }
  if (spec.availability != Availability::Available && value != spec.default_value)
    throw ValueProblem{ValueProblem::Kind::Unavailable, given, spec.reason};
  return value;
}

json convert(const FlagSpec& spec, const Raw& raw) {
  json value;
  try {
    value = typed(spec, raw);
  } catch (const ValueProblem& problem) {
    // A flag that cannot be used at all says so, rather than how its value is malformed.
    if (spec.availability != Availability::Available)
      throw ValueProblem{ValueProblem::Kind::Unavailable, problem.given, spec.reason};
    throw;
  }
  return checked(spec, std::move(value), raw.given);
}

Raw scalar_raw(std::string text, bool quoted) {
  Raw raw;
  raw.kind = Raw::Kind::Scalar;
  raw.given = quote(text);
  raw.text = std::move(text);
  raw.quoted = quoted;
  return raw;
}

Raw raw_from_yaml(const YAML::Node& node) {
  Raw raw;
  if (!node.IsDefined() || node.IsNull()) {
    raw.given = "null";
    return raw;
  }
  if (node.IsScalar()) return scalar_raw(node.Scalar(), node.Tag() == "!");
  if (node.IsSequence()) {
    raw.kind = Raw::Kind::List;
    for (const YAML::Node& item : node) raw.items.push_back(raw_from_yaml(item));
  } else {
    raw.kind = Raw::Kind::Map;
    raw.map = yaml_to_json(node);
  }
  YAML::Emitter out;
  out << YAML::Flow << node;
  raw.given = out.c_str();
  return raw;
}

Raw raw_from_json(const json& value) {
  Raw raw;
  if (value.is_null()) {
    raw.given = "null";
  } else if (value.is_string()) {
    raw = scalar_raw(value.get<std::string>(), true);
  } else if (value.is_array()) {
    raw.kind = Raw::Kind::List;
    for (const json& item : value) raw.items.push_back(raw_from_json(item));
    raw.given = value.dump();
  } else if (value.is_object()) {
    raw.kind = Raw::Kind::Map;
    raw.map = value;
    raw.given = value.dump();
  } else {
    raw = scalar_raw(value.dump(), false);
  }
  return raw;
}

std::string range_text(const FlagSpec& spec) {
  std::string out;
  if (spec.min) out += std::string(spec.min_exclusive ? " > " : " >= ") + format_number(*spec.min);
  if (spec.min && spec.max) out += " and";
  if (spec.max) out += std::string(spec.max_exclusive ? " < " : " <= ") + format_number(*spec.max);
  return out;
}

std::string join_choices(const FlagSpec& spec) {
  std::string out;
  for (const std::string& c : spec.choices) out += (out.empty() ? "" : " | ") + c;
  return out;
}

}  // namespace

json value_from_words(const FlagSpec& spec, const std::vector<std::string>& words) {
  std::string given;
  for (const std::string& w : words) given += (given.empty() ? "" : " ") + w;
  if (words.empty()) {
    // A bare boolean flag means true; a bare list flag means an empty list.
    if (spec.type == FlagType::Bool) return convert(spec, scalar_raw("true", false));
    if (is_list_type(spec.type)) {
      Raw raw;
      raw.kind = Raw::Kind::List;
      raw.given = "(no value)";
      return convert(spec, raw);
    }
    invalid(spec, "(no value)");
  }
  if (words.size() == 1) {
    const std::string& word = words.front();
    // A map, or a list written in one word, is YAML flow / JSON: `'{"k": 1}'`, `'[1.0, 0.5]'`.
    const bool structured = !word.empty() && (word.front() == '{' || word.front() == '[');
    if (structured && (spec.type == FlagType::Map || is_list_type(spec.type))) {
      YAML::Node node;
      try {
        node = YAML::Load(word);
      } catch (const YAML::Exception&) {
        invalid(spec, quote(word));
      }
      Raw raw = raw_from_yaml(node);
      raw.given = quote(word);
      return convert(spec, raw);
    }
    if (spec.type == FlagType::Map) invalid(spec, quote(word));
    return convert(spec, scalar_raw(word, false));
  }
  if (!is_list_type(spec.type))
    throw ValueProblem{ValueProblem::Kind::Invalid, quote(given),
                       "one value (" + expectation(spec) + "), got " + std::to_string(words.size())};
  Raw raw;
  raw.kind = Raw::Kind::List;
  raw.given = quote(given);
  for (const std::string& w : words) raw.items.push_back(scalar_raw(w, false));
  return convert(spec, raw);
}

json value_from_yaml(const FlagSpec& spec, const YAML::Node& node) {
  return convert(spec, raw_from_yaml(node));
}

json value_from_json(const FlagSpec& spec, const json& value) {
  return convert(spec, raw_from_json(value));
}

json yaml_to_json(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return nullptr;
  if (node.IsScalar()) {
    const std::string& s = node.Scalar();
    if (node.Tag() == "!") return s;  // quoted: always a string
    const std::string t = lower(s);
    if (t == "true") return true;
    if (t == "false") return false;
    if (auto i = parse_int(s)) return *i;
    if (auto d = parse_double(s)) return *d;
    return s;
  }
  if (node.IsSequence()) {
    json out = json::array();
    for (const YAML::Node& item : node) out.push_back(yaml_to_json(item));
    return out;
  }
  json out = json::object();
  for (const auto& kv : node) {
    // JSON keys are strings: a list or mapping used as a key keeps its YAML text.
    const std::string key = kv.first.IsScalar() ? kv.first.Scalar() : YAML::Dump(kv.first);
    out[key] = yaml_to_json(kv.second);
  }
  return out;
}

std::string render(const json& value) {
  // Bytes that are not UTF-8 (from a command line) are shown as U+FFFD rather than failing the whole file.
  auto dump = [](const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); };
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    const bool plain = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
      return std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '/';
    });
    // A plain word that YAML would read as something else (true, null, 8) keeps its quotes.
    if (!plain) return dump(value);
    const bool ambiguous = parse_bool(s) || parse_double(s) || lower(s) == "null" || lower(s) == "none" ||
                           s.front() == '-';
    return ambiguous ? dump(value) : s;
  }
  if (value.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? ", " : "") + render(value[i]);
    return out + "]";
  }
  if (value.is_object()) {
    std::string out = "{";
    bool first = true;
    for (const auto& [k, v] : value.items()) {
      out += (first ? "" : ", ") + render(json(k)) + ": " + render(v);
      first = false;
    }
    return out + "}";
  }
  return dump(value);
}

std::string expectation(const FlagSpec& spec) {
  std::string out;
  switch (spec.type) {
    case FlagType::Bool: out = "true or false"; break;
    case FlagType::Int: out = "an integer" + range_text(spec); break;
    case FlagType::Float: out = "a number" + range_text(spec); break;
    case FlagType::String:
      out = spec.choices.empty() ? "a string" : "one of " + join_choices(spec);
      break;
    case FlagType::StringList:
      out = spec.choices.empty() ? "a list of strings" : "a list of " + join_choices(spec);
      break;
    case FlagType::FloatList: out = "a list of numbers" + range_text(spec); break;
    case FlagType::Map: out = "a mapping (a JSON object on the command line, e.g. '{\"key\": 1}')"; break;
  }
  if (spec.nullable) out += ", or null";
  if (!spec.choice_note.empty()) out += " " + spec.choice_note;
  return out;
}

std::string problem_message(const ValueProblem& problem, const Location& where) {
  constexpr size_t kShown = 120;  // a pasted blob should not bury the message
  const std::string given =
      problem.given.size() > kShown ? problem.given.substr(0, kShown) + "... (" +
                                          std::to_string(problem.given.size()) + " characters)"
                                    : problem.given;
  if (problem.kind == ValueProblem::Kind::Unavailable)
    return where.describe() + " is not accepted with the value " + given + ": " + problem.detail;
  return where.describe() + " has an invalid value " + given + ": expected " + problem.detail;
}

}  // namespace grpo::config::detail
