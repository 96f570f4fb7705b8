#include "rewards/reward_set.h"

#include <cmath>
#include <limits>

#include <fmt/format.h>
#include <grpo/reward.h>

#include "plugins/plugin_error.h"
#include "plugins/plugin_options.h"

namespace grpo::rewards {

RewardSet::RewardSet(const plugins::PluginRegistry& registry, const std::vector<std::string>& names,
                     std::vector<double> weights, const nlohmann::json& run_config, const nlohmann::json& plugin_args,
                     std::shared_ptr<plugins::MetricsSink> metrics, int num_threads, plugins::TextServices text,
                     const plugins::Isolation& isolation, std::vector<std::unique_ptr<HostReward>> host_rewards)
    : host_rewards_(std::move(host_rewards)), weights_(std::move(weights)) {
  std::vector<std::string> columns = names;
  for (const auto& h : host_rewards_) columns.push_back(h->name());
  if (columns.empty())
    throw plugins::PluginError("no reward functions: give --reward_funcs (e.g. accuracy format) or --reward_model");
  const bool environment_last =
      !host_rewards_.empty() && dynamic_cast<const EnvironmentReward*>(host_rewards_.back().get()) != nullptr;
  if (weights_.empty()) weights_.assign(columns.size(), 1.0);
  if (environment_last && weights_.size() + 1 == columns.size()) weights_.push_back(1.0);
  if (weights_.size() != columns.size())
    throw plugins::PluginError(fmt::format("--reward_weights has {} values but there are {} rewards ({}); give one "
                                           "weight per reward function, reward models after them",
                                           weights_.size(), columns.size(), fmt::join(columns, ", ")));
  const std::string config_text = run_config.dump();
  for (const std::string& name : names) {
    plugins::ResolvedPlugin plugin = registry.require(name, GRPO_REWARD_INTERFACE);
    nlohmann::json args = plugin_args.is_object() && plugin_args.contains(name) ? plugin_args[name] : nlohmann::json();
    // `isolate` in a reward's section is the host's, not the plugin's: this
    // one reward in a child process (or, false, in-process) whatever
    // --plugin_isolation says.
    plugins::Isolation own = isolation;
    if (args.is_object() && args.contains("isolate")) {
      if (!args["isolate"].is_boolean())
        throw plugins::PluginError(fmt::format("plugin_args.{}.isolate takes true or false, got {}", name,
                                               args["isolate"].dump()));
      own.process = args["isolate"].get<bool>();
      args.erase("isolate");
    }
    nlohmann::json options = plugins::resolve_plugin_options(plugin.info, run_config, args);
    functions_.push_back(plugins::RewardFunction::create(plugin, options, metrics, config_text, num_threads, text, own));
  }
}

std::vector<double> EnvironmentReward::score(const std::vector<Sample>& samples) {
  std::vector<double> out;
  out.reserve(samples.size());
  for (const Sample& s : samples) out.push_back(s.environment_reward);
  return out;
}

namespace {

std::vector<double> score_with(plugins::RewardFunction& fn, const std::vector<plugins::RewardInput>& inputs,
                               const plugins::TrainerState& state) {
  return fn.score(inputs, state);
}

std::vector<double> score_with(plugins::RewardFunction& fn, const std::vector<Sample>& samples,
                               const plugins::TrainerState& state) {
  return fn.score_samples(samples, state);
}

}  // namespace

template <class Inputs>
RewardMatrix RewardSet::score_all(const Inputs& inputs, const plugins::TrainerState& state) {
  RewardMatrix m;
  for (const auto& fn : functions_) {
    m.names.push_back(fn->name());
    m.by_fn.push_back(score_with(*fn, inputs, state));
  }
  return m;  // the total is the caller's, once every column is in
}

RewardMatrix RewardSet::score(const std::vector<plugins::RewardInput>& inputs, const plugins::TrainerState& state) {
  RewardMatrix m = score_all(inputs, state);
  m.total = weighted_total(m.by_fn, weights_);
  return m;
}

RewardMatrix RewardSet::score(const std::vector<Sample>& samples, const plugins::TrainerState& state) {
  RewardMatrix m = score_all(samples, state);
  for (const auto& h : host_rewards_) {
    m.names.push_back(h->name());
    m.by_fn.push_back(h->score(samples));
  }
  // A conversation its multi-turn handler failed on scores nothing.
  for (size_t i = 0; i < samples.size(); ++i)
    if (samples[i].handler_failed)
      for (auto& column : m.by_fn) column[i] = std::numeric_limits<double>::quiet_NaN();
  m.total = weighted_total(m.by_fn, weights_);
  return m;
}

std::vector<double> weighted_total(const std::vector<std::vector<double>>& by_fn, const std::vector<double>& weights) {
  const size_t n = by_fn.empty() ? 0 : by_fn[0].size();
  std::vector<double> total(n, 0.0);
  std::vector<bool> any(n, false);
  for (size_t f = 0; f < by_fn.size(); ++f)
    for (size_t i = 0; i < n; ++i) {
      const double r = by_fn[f][i];
      if (std::isnan(r)) continue;
      total[i] += r * weights[f];
      any[i] = true;
    }
  for (size_t i = 0; i < n; ++i)
    if (!any[i]) total[i] = std::numeric_limits<double>::quiet_NaN();
  return total;
}

double nanmean(const std::vector<double>& v) {
  double sum = 0;
  size_t k = 0;
  for (double x : v)
    if (!std::isnan(x)) sum += x, ++k;
  return k ? sum / static_cast<double>(k) : std::numeric_limits<double>::quiet_NaN();
}

double nanstd(const std::vector<double>& v) {
  double mean = nanmean(v), ss = 0;
  size_t k = 0;
  for (double x : v)
    if (!std::isnan(x)) ss += (x - mean) * (x - mean), ++k;
  return k >= 2 ? std::sqrt(ss / static_cast<double>(k - 1)) : std::numeric_limits<double>::quiet_NaN();
}

size_t count_nan(const std::vector<double>& v) {
  size_t k = 0;
  for (double x : v) k += std::isnan(x) ? 1 : 0;
  return k;
}

}  // namespace grpo::rewards
