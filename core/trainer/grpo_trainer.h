// grpo-host train: GRPO on one process — sample G completions per prompt
// through a sampler plugin, score them with reward plugins, and update the
// policy with the clipped, KL-regularised loss of grpo.md.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/adamw.h>

#include "config/config.h"
#include "model/transformer.h"
#include "plugins/plugin_registry.h"
#include "plugins/sampler_client.h"
#include "rewards/reward_set.h"
#include "tokenizer/tokenizer.h"
#include "trainer/advantages.h"
#include "trainer/completion_log.h"
#include "trainer/grpo_loss.h"
#include "trainer/lr_schedule.h"
#include "trainer/prompt_source.h"
#include "trainer/rollout_batch.h"
#include "trainer/run_log.h"
#include "trainer/weight_views.h"

namespace grpo::trainer {

using Metrics = std::map<std::string, double>;

// Throws config::ConfigError naming each flag this trainer does not support
// yet, with what to do instead.
void check_trainer_support(const config::Config& cfg);

// One generation batch as sampled: what the rewards and the loss need.
struct Rollout {
  std::vector<RolloutSequence> sequences;        // N = prompts x G, the G copies consecutive
  std::vector<plugins::RewardInput> reward_inputs;
};

class GrpoTrainer {
 public:
  explicit GrpoTrainer(const config::Config& cfg);
  void train();

 private:
  Metrics step();  // one optimizer step: sample, score, advantages, loss, update
  Rollout generate(const std::vector<const Prompt*>& prompts, Metrics& m);
  Advantages score(const Rollout& rollout, Metrics& m);  // also writes completions.jsonl when asked
  void optimize(const Rollout& rollout, const Advantages& adv, Metrics& m);
  void save_checkpoint();
  void resume_from(const std::string& dir);

  config::Config cfg_;
  std::string model_dir_, output_dir_;
  tok::Tokenizer tokenizer_;
  model::CausalLM policy_{nullptr}, reference_{nullptr};
  std::unique_ptr<PromptSource> prompts_;
  plugins::PluginRegistry registry_;
  std::unique_ptr<rewards::RewardSet> rewards_;
  std::shared_ptr<plugins::MetricsSink> plugin_metrics_;
  std::unique_ptr<plugins::SamplerClient> sampler_;
  std::unique_ptr<WeightViews> views_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<RunLog> log_;
  std::unique_ptr<CompletionLog> completion_log_;  // null unless log_completions
  LossOptions loss_options_;
  plugins::SampleOptions sample_options_;
  int64_t G_ = 0, prompts_per_step_ = 0, micro_batch_ = 0, max_steps_ = 0, global_step_ = 0;
};

}  // namespace grpo::trainer
