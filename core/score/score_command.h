// `grpo-host score`: score logged completions with any set of reward plugins.
#pragma once

#include <string>
#include <vector>

namespace grpo::score {

// args: everything after `score`. Returns the process exit code.
int run_score_command(const std::vector<std::string>& args);

}  // namespace grpo::score
