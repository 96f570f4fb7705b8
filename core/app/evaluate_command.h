// `grpo-host evaluate`: sample each row's prompt once (greedy by default) and
// score the completions with reward plugins — a model's accuracy, format rate
// and length on a held-out set, before and after training.
#pragma once

#include <string>
#include <vector>

namespace grpo::app {

int run_evaluate_command(const std::vector<std::string>& args);

}  // namespace grpo::app
