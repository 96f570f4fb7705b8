#include "plugins/plugin_options.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <grpo/sampler.h>
#include <spdlog/spdlog.h>

#include "config/config.h"
#include "config/flag_table.h"
#include "plugins/plugin_error.h"
#include "util/suggest.h"

namespace grpo::plugins {

namespace {

// Whether `value` is of the schema's `type` (unknown types are not checked);
// "" when it is, else what was expected.
std::string type_problem(const std::string& type, const nlohmann::json& value) {
  if (value.is_null()) return "";
  if (type == "bool" && !value.is_boolean()) return "true or false";
  if (type == "int" && !(value.is_number_integer() ||
                         (value.is_number_float() && std::nearbyint(value.get<double>()) == value.get<double>())))
    return "an integer";
  if (type == "float" && !value.is_number()) return "a number";
  if (type == "string" && !value.is_string()) return "a string";
  if (type == "strings" && !(value.is_array() && std::all_of(value.begin(), value.end(),
                                                             [](const auto& x) { return x.is_string(); })))
    return "a list of strings";
  return "";
}

// A published option, as the schema (a JSON array of objects) declares it.
struct OptionDecl {
  std::string name, type;
  nlohmann::json default_value;
};

// The schema's options (entries without a string name are skipped); nullopt
// when the schema is not a JSON array.
std::optional<std::vector<OptionDecl>> declared_options(const PluginInfo& plugin) {
  const nlohmann::json schema = nlohmann::json::parse(plugin.options_json, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_array()) return std::nullopt;
  std::vector<OptionDecl> out;
  for (const auto& o : schema)
    if (o.is_object() && o.contains("name") && o["name"].is_string())
      out.push_back({o["name"], o.value("type", ""), o.value("default", nlohmann::json())});
  return out;
}

}  // namespace

nlohmann::json resolve_plugin_options(const PluginInfo& plugin, const nlohmann::json& run_config,
                                      const nlohmann::json& plugin_args, const std::string& section) {
  const std::optional<std::vector<OptionDecl>> declared = declared_options(plugin);
  if (!declared)
    throw PluginError(fmt::format("plugin '{}' ({}) publishes an options schema that is not a JSON array; "
                                  "report this to its author",
                                  plugin.name, plugin.file));
  const std::string where = section == "sampler_args" ? section : section + "." + plugin.name;
  nlohmann::json options = nlohmann::json::object();
  std::vector<std::string> names;
  std::map<std::string, std::string> types;
  for (const OptionDecl& opt : *declared) {
    const std::string& name = opt.name;
    names.push_back(name);
    types[name] = opt.type;
    // The plugin's default, filled by the host so that every plugin sees the
    // same complete set (a C plugin need not repeat its defaults); then the
    // run's flag of that name; then its own section (below).
    if (!opt.default_value.is_null()) options[name] = opt.default_value;
    if (run_config.is_object() && run_config.contains(name) && !run_config[name].is_null())
      options[name] = run_config[name];
  }
  if (plugin_args.is_null()) return options;
  if (!plugin_args.is_object())
    throw PluginError(fmt::format("{} must be a mapping of option names to values", where));
  for (const auto& [key, value] : plugin_args.items()) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      std::string hint = util::closest_name(key, names);
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw PluginError(fmt::format("{}.{}: plugin '{}' has no option '{}'{}; its options are: {} "
                                    "(`grpo-host plugins --describe {}`)",
                                    where, key, plugin.name, key,
                                    hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint),
                                    list.empty() ? "none" : list, plugin.name));
    }
    const std::string expected = type_problem(types[key], value);
    if (!expected.empty())
      throw PluginError(fmt::format("{}.{}: plugin '{}' takes {} (its option is of type {}), got {}", where, key,
                                    plugin.name, expected, types[key], value.dump()));
    options[key] = value;
  }
  return options;
}

void check_plugin_args_sections(const nlohmann::json& plugin_args, const std::vector<std::string>& rewards,
                                const std::string& sampler, const std::vector<PluginInfo>& known) {
  if (!plugin_args.is_object()) return;
  for (const auto& item : plugin_args.items()) {
    const std::string& name = item.key();  // not a structured binding: the lambda below captures it
    if (std::find(rewards.begin(), rewards.end(), name) != rewards.end()) continue;
    const auto found = std::find_if(known.begin(), known.end(), [&](const PluginInfo& p) { return p.name == name; });
    const bool is_sampler = (!sampler.empty() && name == sampler) ||
                            (found != known.end() && found->interface_id == GRPO_SAMPLER_INTERFACE);
    if (is_sampler)
      throw PluginError(fmt::format("plugin_args.{}: '{}' is a sampler; its options go in --sampler_args "
                                    "(YAML: sampler_args), e.g. --sampler_args '{}'",
                                    name, name, nlohmann::json{{"option", "value"}}.dump()));
    if (found != known.end()) {  // a YAML shared between runs may hold sections for other rewards
      spdlog::warn("plugin_args.{}: '{}' is not in --reward_funcs, so its options are not used in this run", name,
                   name);
      continue;
    }
    std::vector<std::string> names = rewards;
    for (const PluginInfo& p : known) names.push_back(p.name);
    const std::string hint = util::closest_name(name, names);
    throw PluginError(fmt::format("plugin_args.{}: no plugin called '{}' is loaded (--reward_funcs: {}){}; "
                                  "`grpo-host plugins` lists the ones found",
                                  name, name, fmt::join(rewards, ", "),
                                  hint.empty() ? "" : fmt::format("; did you mean '{}'?", hint)));
  }
}

std::vector<std::string> option_names(const PluginInfo& plugin) {
  std::vector<std::string> names;
  for (const OptionDecl& o : declared_options(plugin).value_or(std::vector<OptionDecl>{})) names.push_back(o.name);
  return names;
}

nlohmann::json resolve_plugin_flags(const std::map<std::string, config::Config::PluginFlag>& flags,
                                    const std::vector<PluginInfo>& plugins) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [name, flag] : flags) {
    const std::vector<std::string>& words = flag.words;
    std::string type;
    const PluginInfo* owner = nullptr;
    std::vector<std::string> known;
    for (const PluginInfo& p : plugins)
      for (const OptionDecl& o : declared_options(p).value_or(std::vector<OptionDecl>{})) {
        known.push_back(o.name);
        if (o.name == name && !owner) owner = &p, type = o.type.empty() ? "string" : o.type;
      }
    if (!owner) {
      for (const config::FlagSpec& f : config::flag_table()) known.push_back(f.name);
      const std::string near = util::closest_name(name, known);
      const bool is_flag = flag.where.rfind("--", 0) == 0;
      throw config::ConfigError(fmt::format("unknown {}{}", is_flag ? "flag " + flag.where : flag.where,
                                            near.empty() ? " (grpo-host --help lists the flags; `grpo-host plugins "
                                                           "--describe NAME` a plugin's options)"
                                                         : " — did you mean " + (is_flag ? "--" + near : "'" + near + "'") + "?"));
    }
    const std::string text = fmt::format("{}", fmt::join(words, " "));
    const std::string where = fmt::format("{} (an option of plugin '{}', type {})", flag.where, owner->name, type);
    if (words.size() != 1) throw config::ConfigError(where + " takes one value, got '" + text + "'");
    nlohmann::json value;
    if (type == "bool") {
      if (text == "true" || text == "True") value = true;
      else if (text == "false" || text == "False") value = false;
      else throw config::ConfigError(where + " takes true or false, got '" + text + "'");
    } else if (type == "int" || type == "float") {
      value = nlohmann::json::parse(text, nullptr, false);
      if (!value.is_number() || (type == "int" && !value.is_number_integer()))
        throw config::ConfigError(where + " takes " + (type == "int" ? "an integer" : "a number") + ", got '" +
                                  text + "'");
    } else {
      value = text;
    }
    out[name] = value;
  }
  return out;
}

Isolation read_isolation(config::SettingsReader& r) {
  Isolation i;
  i.process = r.choice<bool>("plugin_isolation", {{"none", false}, {"process", true}});
  i.timeout_s = r.real("reward_timeout");
  return i;
}

}  // namespace grpo::plugins
