// The reward functions of a run and their weights: R[N, F] and the weighted
// total r = nansum(R * w) of grpo.md §2.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugins/plugin_registry.h"
#include "plugins/reward_function.h"

namespace grpo::rewards {

struct RewardMatrix {
  std::vector<std::string> names;         // F reward names
  std::vector<std::vector<double>> by_fn; // [F][N], NaN = no opinion
  std::vector<double> total;              // [N] weighted, NaN when every reward is NaN
};

// A reward the host computes itself: a reward model, or a multi-turn
// environment's own reward. Its column follows the plugins' columns.
class HostReward {
 public:
  virtual ~HostReward() = default;
  virtual const std::string& name() const = 0;
  virtual std::vector<double> score(const std::vector<Sample>& samples) = 0;  // NaN: no opinion
};

// The environment reward a multi-turn handler reported for each
// conversation (Sample::environment_reward), as a column named after it.
class EnvironmentReward : public HostReward {
 public:
  explicit EnvironmentReward(std::string handler) : name_(std::move(handler)) {}
  const std::string& name() const override { return name_; }
  std::vector<double> score(const std::vector<Sample>& samples) override;

 private:
  std::string name_;
};

class RewardSet {
 public:
  // Creates every reward in `names` from `registry`; `host_rewards` come
  // after them (reward models, then the environment's). Options come from
  // `run_config` (flag -> value) and `plugin_args` (name -> object).
  // `weights` empty means all 1.0; otherwise one per column, except that
  // an environment reward left out of them weighs 1.0.
  RewardSet(const plugins::PluginRegistry& registry, const std::vector<std::string>& names,
            std::vector<double> weights, const nlohmann::json& run_config, const nlohmann::json& plugin_args,
            std::shared_ptr<plugins::MetricsSink> metrics, int num_threads, plugins::TextServices text = {},
            const plugins::Isolation& isolation = {}, std::vector<std::unique_ptr<HostReward>> host_rewards = {});

  RewardMatrix score(const std::vector<plugins::RewardInput>& inputs, const plugins::TrainerState& state);
  RewardMatrix score(const std::vector<Sample>& samples, const plugins::TrainerState& state);
  const std::vector<double>& weights() const { return weights_; }
  const std::vector<std::unique_ptr<plugins::RewardFunction>>& functions() const { return functions_; }

 private:
  template <class Inputs>
  RewardMatrix score_all(const Inputs& inputs, const plugins::TrainerState& state);
  std::vector<std::unique_ptr<plugins::RewardFunction>> functions_;
  std::vector<std::unique_ptr<HostReward>> host_rewards_;
  std::vector<double> weights_;
};

// The weighted total of each completion, the one definition of it:
// sum over f of by_fn[f][i] * weights[f], skipping NaN; NaN when every
// function abstained (an abstaining function is not a 0 reward).
std::vector<double> weighted_total(const std::vector<std::vector<double>>& by_fn, const std::vector<double>& weights);

// Statistics that skip NaN. nanstd is Bessel-corrected; NaN with < 2 values.
double nanmean(const std::vector<double>& v);
double nanstd(const std::vector<double>& v);
size_t count_nan(const std::vector<double>& v);

}  // namespace grpo::rewards
