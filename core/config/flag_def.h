// How one row of the flag table is declared: a fluent builder, so that each
// flag reads on a few lines of flag_table.cpp. Internal to the table.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/flag_table.h"

namespace grpo::config::flag_def {

using nlohmann::json;

// Fluent construction keeps each table row on a few lines.
struct Def {
  FlagSpec s;
  Def& hint(std::string h) { s.value_hint = std::move(h); return *this; }
  Def& nullable() { s.nullable = true; return *this; }
  Def& alias(std::string a) { s.aliases.push_back(std::move(a)); return *this; }
  Def& choices(std::vector<std::string> c) { s.choices = std::move(c); return *this; }
  Def& means(std::string spelled, json value) {
    s.value_aliases.emplace_back(std::move(spelled), std::move(value));
    return *this;
  }
  Def& refuse_value(std::string value, std::string why) {
    s.refused_values.emplace_back(std::move(value), std::move(why));
    return *this;
  }
  Def& note(std::string n) { s.choice_note = std::move(n); return *this; }
  Def& at_least(double v) { s.min = v; s.min_exclusive = false; return *this; }
  Def& above(double v) { s.min = v; s.min_exclusive = true; return *this; }
  Def& at_most(double v) { s.max = v; s.max_exclusive = false; return *this; }
  Def& below(double v) { s.max = v; s.max_exclusive = true; return *this; }
  Def& not_built(std::string why) {
    s.availability = Availability::NotBuilt;
    s.reason = std::move(why);
    return *this;
  }
  Def& refused(std::string why) {
    s.availability = Availability::Refused;
    s.reason = std::move(why);
    return *this;
  }
  Def& finish(std::function<std::string(json&)> f) { s.finish = std::move(f); return *this; }
};

inline Def make(std::string name, FlagType type, json def, std::string help, std::string hint) {
  Def d;
  d.s.name = std::move(name);
  d.s.type = type;
  d.s.nullable = def.is_null();
  d.s.default_value = std::move(def);
  d.s.help = std::move(help);
  d.s.value_hint = std::move(hint);
  return d;
}

inline Def boolean(std::string n, bool def, std::string help) {
  return make(std::move(n), FlagType::Bool, def, std::move(help), "BOOL");
}
inline Def integer(std::string n, json def, std::string help) {
  return make(std::move(n), FlagType::Int, std::move(def), std::move(help), "N");
}
inline Def real(std::string n, json def, std::string help) {
  return make(std::move(n), FlagType::Float, std::move(def), std::move(help), "X");
}
inline Def text(std::string n, json def, std::string help) {
  return make(std::move(n), FlagType::String, std::move(def), std::move(help), "TEXT");
}
inline Def texts(std::string n, json def, std::string help) {
  return make(std::move(n), FlagType::StringList, std::move(def), std::move(help), "NAME...");
}
inline Def reals(std::string n, json def, std::string help) {
  return make(std::move(n), FlagType::FloatList, std::move(def), std::move(help), "X...");
}
inline Def mapping(std::string n, std::string help) {
  return make(std::move(n), FlagType::Map, json::object(), std::move(help), "JSON");
}

}  // namespace grpo::config::flag_def
