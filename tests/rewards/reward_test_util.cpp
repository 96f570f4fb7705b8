#include "rewards/reward_test_util.h"

#include <grpo/reward.h>

#include "plugins/builtin_plugins.h"
#include "plugins/plugin_options.h"

namespace grpo::testing {

std::unique_ptr<plugins::RewardFunction> builtin_reward(const std::string& name, const nlohmann::json& options) {
  plugins::ResolvedPlugin p = builtin_registry().require(name, GRPO_REWARD_INTERFACE);
  nlohmann::json resolved = plugins::resolve_plugin_options(p.info, nlohmann::json::object(), options);
  return plugins::RewardFunction::create(p, resolved, nullptr, "{}", 1);
}

std::vector<double> score(plugins::RewardFunction& fn, const std::vector<Completion>& completions) {
  std::vector<plugins::RewardInput> inputs;
  for (const Completion& c : completions) {
    plugins::RewardInput in;
    in.completion = c.text;
    in.completion_tokens = c.tokens;
    if (!c.ids.empty()) {
      in.completion_ids = c.ids;
      in.ids_known = true;
    }
    in.columns = plugins::RowColumns::from_json({{"solution", c.solution}});
    inputs.push_back(std::move(in));
  }
  return fn.score(inputs, {});
}

double score_one(plugins::RewardFunction& fn, const Completion& c) { return score(fn, {c}).at(0); }

}  // namespace grpo::testing
