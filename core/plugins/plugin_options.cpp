#include "plugins/plugin_options.h"

#include <fmt/format.h>

#include "plugins/plugin_error.h"
#include "util/suggest.h"

namespace grpo::plugins {

nlohmann::json resolve_plugin_options(const PluginInfo& plugin, const nlohmann::json& run_config,
                                      const nlohmann::json& plugin_args) {
  nlohmann::json schema = nlohmann::json::parse(plugin.options_json, nullptr, /*allow_exceptions=*/false);
  if (!schema.is_array())
    throw PluginError(fmt::format("plugin '{}' ({}) publishes an options schema that is not a JSON array; "
                                  "report this to its author",
                                  plugin.name, plugin.file));
  nlohmann::json options = nlohmann::json::object();
  std::vector<std::string> names;
  for (const auto& opt : schema) {
    if (!opt.is_object() || !opt.contains("name") || !opt["name"].is_string()) continue;
    std::string name = opt["name"];
    names.push_back(name);
    if (run_config.is_object() && run_config.contains(name) && !run_config[name].is_null())
      options[name] = run_config[name];
  }
  if (plugin_args.is_null()) return options;
  if (!plugin_args.is_object())
    throw PluginError(fmt::format("plugin_args.{} must be a mapping of option names to values", plugin.name));
  for (const auto& [key, value] : plugin_args.items()) {
    if (std::find(names.begin(), names.end(), key) == names.end()) {
      std::string hint = util::closest_name(key, names);
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      throw PluginError(fmt::format("plugin_args.{}.{}: plugin '{}' has no option '{}'{}; its options are: {} "
                                    "(`grpo-host plugins --describe {}`)",
                                    plugin.name, key, plugin.name, key,
                                    hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint),
                                    list.empty() ? "none" : list, plugin.name));
    }
    options[key] = value;
  }
  return options;
}

std::vector<std::string> option_names(const PluginInfo& plugin) {
  const nlohmann::json schema = nlohmann::json::parse(plugin.options_json, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> names;
  if (!schema.is_array()) return names;
  for (const auto& opt : schema)
    if (opt.is_object() && opt.contains("name") && opt["name"].is_string()) names.push_back(opt["name"]);
  return names;
}

}  // namespace grpo::plugins
