// The options a plugin receives: its published option names filled from the
// run configuration (swift's flag names), then overridden by plugin_args.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugins/plugin_library.h"

namespace grpo::plugins {

// `run_config`: the resolved configuration (flag name -> value).
// `plugin_args`: the user's section for this plugin (may be null).
// Throws PluginError on a plugin_args key the plugin does not publish, with
// the closest published name.
nlohmann::json resolve_plugin_options(const PluginInfo& plugin, const nlohmann::json& run_config,
                                      const nlohmann::json& plugin_args);

// The option names `plugin` publishes (none when its schema is not an array).
std::vector<std::string> option_names(const PluginInfo& plugin);

}  // namespace grpo::plugins
