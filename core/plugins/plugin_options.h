// The options a plugin receives: its published option names filled from the
// run configuration (swift's flag names), then overridden by plugin_args.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "config/settings_reader.h"
#include "plugins/plugin_library.h"
#include "plugins/reward_worker.h"

namespace grpo::plugins {

// Each published option gets the plugin's default, then the run's flag of
// the same name, then the user's value from its section.
// `run_config`: the resolved configuration (flag name -> value).
// `plugin_args`: the user's section for this plugin (may be null), named in
// messages as `section` ("plugin_args" -> plugin_args.NAME, or "sampler_args").
// Throws PluginError on a key the plugin does not publish (with the closest
// published name) and on a value whose type is not the schema's.
nlohmann::json resolve_plugin_options(const PluginInfo& plugin, const nlohmann::json& run_config,
                                      const nlohmann::json& plugin_args, const std::string& section = "plugin_args");

// Each section of plugin_args names a reward of the run (`rewards`). One
// that names a sampler (`sampler`, or a sampler among `known`) is an error —
// its options belong in sampler_args — and so is one that names no plugin at
// all (with a did-you-mean); one for a known reward the run does not use
// gets a warning.
void check_plugin_args_sections(const nlohmann::json& plugin_args, const std::vector<std::string>& rewards,
                                const std::string& sampler, const std::vector<PluginInfo>& known);

// Flags no table row knows (Config::plugin_flags) as options of `plugins`:
// each must be published by one of them, and its words are typed by that
// option's schema. Returns name -> value, to merge into the run
// configuration the options are filled from. Throws config::ConfigError for
// a flag no plugin publishes ("unknown flag", with a did-you-mean over the
// flags and the options) and for a value of the wrong type.
nlohmann::json resolve_plugin_flags(const std::map<std::string, config::Config::PluginFlag>& flags,
                                    const std::vector<PluginInfo>& plugins);

// The option names `plugin` publishes (none when its schema is not an array).
std::vector<std::string> option_names(const PluginInfo& plugin);

// --plugin_isolation and --reward_timeout, as every command that scores
// (train, evaluate, score) reads them.
Isolation read_isolation(config::SettingsReader& r);

}  // namespace grpo::plugins
