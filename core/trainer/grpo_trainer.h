// grpo-host train: GRPO on one process — sample G completions per prompt
// through a sampler plugin, score them with reward plugins, and update the
// policy with the clipped, KL-regularised loss of grpo.md.
#pragma once

#include <deque>
#include <future>
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
#include "trainer/generation_batch.h"
#include "trainer/grpo_loss.h"
#include "trainer/importance_sampling.h"
#include "trainer/lr_schedule.h"
#include "trainer/micro_batches.h"
#include "trainer/prompt_source.h"
#include "trainer/run_log.h"
#include "trainer/weight_views.h"

namespace grpo::trainer {

using Metrics = std::map<std::string, double>;

// Per-micro-batch values averaged over the micro-batches that reported them.
struct MetricSums {
  Metrics sum;
  std::map<std::string, int> count;
  void add(const std::string& name, double v) { sum[name] += v, ++count[name]; }
};

// Throws config::ConfigError naming each flag this trainer does not support
// yet, with what to do instead.
void check_trainer_support(const config::Config& cfg);

class GrpoTrainer {
 public:
  explicit GrpoTrainer(const config::Config& cfg);
  void train();

 private:
  // grpo_trainer.cpp: the step.
  Metrics step();                               // one optimizer step
  void refill(Metrics& m, int64_t micro_done);  // the next generation batch, as micro-batches
  void accumulate(const MicroBatch& mb, Metrics& m, MetricSums& sums);  // policy log-probs, loss, backward
  void update(Metrics& m);                      // clip, AdamW; the sampler sees the new weights

  // trainer_sampling.cpp: generation batches and evaluation.
  GenerationBatch sample_batch(Metrics& m);     // dynamic_sample resamples zero-variance groups
  GenerationBatch generate(const std::vector<const Prompt*>& prompts, Metrics& m, const std::string& prefix,
                           int64_t generation);  // generation: the index its seeds derive from
  void score(GenerationBatch& batch, Metrics& m, const plugins::TrainerState& state);
  plugins::TrainerState trainer_state() const;
  Advantages advantages_of(const GenerationBatch& batch, Metrics& m, const std::string& prefix);
  Metrics evaluate();                           // eval_ metrics over the validation prompts

  // trainer_sampler.cpp: the sampler plugin, its weights, and async_generate
  // (the next batch samples while this one trains).
  void create_sampler(at::ScalarType dtype);
  struct PendingBatch {
    GenerationBatch batch;
    Metrics metrics;
  };
  GenerationBatch next_async_batch(Metrics& m);
  void launch_generation();             // on a background thread, with the sampler's current weights
  void sync_sampler_weights(Metrics& m);  // the policy's weights to the sampler (copy or push)
  void wait_for_generation();

  // trainer_state.cpp: checkpoints and resuming.
  void save_checkpoint();
  void resume_from(const std::string& dir);

  config::Config cfg_;
  std::string model_dir_, output_dir_;
  tok::Tokenizer tokenizer_;
  model::CausalLM policy_{nullptr}, reference_{nullptr};
  std::unique_ptr<PromptSource> prompts_, val_prompts_;
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
  std::deque<MicroBatch> queue_;  // micro-batches of the current generation batch, num_iterations passes
  bool needs_old_logp_ = false;   // the policy moves while a generation batch is still being trained on
  bool async_ = false, is_correction_ = false;
  IsCorrectionMode is_mode_ = IsCorrectionMode::SequenceMask;
  std::future<PendingBatch> pending_;          // async_generate: the batch being sampled
  model::CausalLM sampler_copy_{nullptr};      // async + in-process sampler: the weights it reads
  bool lora_ = false;
  std::map<std::string, at::Tensor> merged_;   // LoRA: W + scaling * B A of each adapted weight, for the sampler
  int64_t G_ = 0, prompts_per_generation_ = 0, micro_batch_ = 0, ga_ = 1, max_steps_ = 0, global_step_ = 0;
  int64_t generations_ = 0;       // generation batches sampled so far: part of every sampling seed
  int64_t step_active_tokens_ = 0;
};

}  // namespace grpo::trainer
