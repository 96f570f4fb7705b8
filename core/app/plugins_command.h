// `grpo-host plugins [--describe NAME]`: what plugins are found, and their options.
#pragma once

#include <string>
#include <vector>

namespace grpo::app {

int run_plugins_command(const std::vector<std::string>& args);

}  // namespace grpo::app
