// The checks of `grpo-host plugins --check` that call into a plugin, each run
// by grpo-plugin-worker in a process of its own (conformance.h). The host and
// the worker name a check by its plugin and step; both derive the line the
// user sees from them, so a check whose process died is still named.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugins/conformance.h"
#include "plugins/plugin_library.h"

namespace grpo::plugins {

// Steps: "load" (plugin ""), then per plugin: a reward's "create", "score 0",
// "score 1", "score 64", "edges", "concurrent", "destroy"; a sampler's
// "sampler table"; a multi-turn handler's "create", "tools", "conversations",
// "destroy".
std::string step_check_name(const std::string& plugin, const std::string& step);

// Runs one step in this process: loads the library, creates the plugin with
// `args` (its plugin_args section) unless the step is the load, and checks.
// Returns the step's results (none for "concurrent" on a plugin that is not
// thread-safe, or "tools" on a handler without tools); "load" fills
// `plugins`. Nothing is destroyed or unloaded but by "destroy".
std::vector<CheckResult> run_check_step(const std::string& path, const std::string& plugin, const std::string& step,
                                        const nlohmann::json& args, std::vector<PluginInfo>* plugins);

}  // namespace grpo::plugins
