// The build's own plugin directory, without GRPO_PLUGIN_PATH: what tests
// load real .so plugins from.
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "plugin_paths.h"
#include "plugins/plugin_registry.h"
#include "plugins/sampler_client.h"

namespace grpo::testing {

inline plugins::PluginRegistry builtin_registry() {
  plugins::PluginSources s;
  s.use_env = false;
  s.builtin_dir = PLUGIN_DIR;
  return plugins::PluginRegistry::discover(s);
}

// A built-in sampler plugin created with `options` as given.
inline std::unique_ptr<plugins::SamplerClient> builtin_sampler(const std::string& name, const nlohmann::json& options) {
  return plugins::SamplerClient::create(builtin_registry().require(name, GRPO_SAMPLER_INTERFACE), options, nullptr,
                                        "{}");
}

}  // namespace grpo::testing
