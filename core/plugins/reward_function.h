// A reward plugin instance as the trainer uses it: scores a batch, survives
// the plugin's failures.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpo/reward.h>
#include <nlohmann/json.hpp>

#include "plugins/host_services.h"
#include "plugins/plugin_registry.h"
#include "plugins/reward_input.h"
#include "plugins/reward_worker.h"
#include "plugins/sample.h"

namespace grpo::plugins {

class RewardFunction {
 public:
  // Creates the plugin's instance with `options` (a JSON object). Throws
  // PluginError with the plugin's own message when create() fails.
  static std::unique_ptr<RewardFunction> create(const ResolvedPlugin& plugin, const nlohmann::json& options,
                                                std::shared_ptr<MetricsSink> metrics,
                                                const std::string& run_config_json, int num_threads,
                                                TextServices text = {}, const Isolation& isolation = {});
  ~RewardFunction();
  RewardFunction(const RewardFunction&) = delete;
  RewardFunction& operator=(const RewardFunction&) = delete;

  const std::string& name() const { return plugin_.info.name; }
  const PluginInfo& info() const { return plugin_.info; }
  const std::string& file() const { return plugin_.info.file; }
  bool thread_safe() const;

  // One reward per input. NaN is "no opinion". When the plugin fails (error
  // status, exception, wrong count) the error is logged with the plugin's
  // name and file, counted in failures(), and the batch scores NaN: training
  // goes on with the other rewards. An infinite reward becomes NaN too, with
  // a warning, counted in nonfinite().
  std::vector<double> score(const std::vector<RewardInput>& inputs, const TrainerState& state);
  std::vector<double> score_samples(const std::vector<Sample>& samples, const TrainerState& state);
  std::vector<double> score_views(const std::vector<RewardView>& rows, const TrainerState& state);
  long failures() const { return failures_; }    // batches whose call failed, since create()
  long nonfinite() const { return nonfinite_; }  // infinite rewards turned into NaN, since create()

 private:
  RewardFunction() = default;
  std::vector<double> score_in_worker(const std::vector<RewardView>& rows, const TrainerState& state, bool* failed);
  std::vector<double> finish(std::vector<double>& rewards, bool failed);  // counts failures, Inf -> NaN
  bool score_range(const std::vector<grpo_reward_sample>& samples, size_t begin, size_t end,
                   const grpo_trainer_state& state, double* out, std::string* error);

  ResolvedPlugin plugin_;
  std::unique_ptr<HostServices> services_;
  struct Api;
  std::unique_ptr<Api> api_;
  void* instance_ = nullptr;
  int num_threads_ = 1;
  long failures_ = 0, nonfinite_ = 0;
  std::unique_ptr<RewardWorker> worker_;    // --plugin_isolation process: the instance is there
  std::shared_ptr<MetricsSink> metrics_;    // where the worker's metrics go
  double seconds_per_sample_ = 0;  // measured on single-threaded calls
};

}  // namespace grpo::plugins
