// Scores completions through a real built-in reward plugin (.so).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugins/reward_function.h"

namespace grpo::testing {

struct Completion {
  std::string text;
  int64_t tokens = -1;              // generated token count; -1 unknown
  std::vector<int32_t> ids = {};    // when non-empty, the generated ids
  std::string solution = "";
};

// The built-in plugin `name` created with `options` (plugin_args style).
std::unique_ptr<plugins::RewardFunction> builtin_reward(const std::string& name,
                                                        const nlohmann::json& options = nlohmann::json::object());

std::vector<double> score(plugins::RewardFunction& fn, const std::vector<Completion>& completions);
double score_one(plugins::RewardFunction& fn, const Completion& c);

}  // namespace grpo::testing
