// grpo-host train: GRPO — sample G completions per prompt through a sampler
// plugin, score them with reward plugins, and update the policy with the
// clipped, KL-regularised loss of grpo.md; on one process or data parallel
// over the ranks of a dist::World (each samples and trains on its share).
#pragma once

#include <deque>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <torch/optim/adamw.h>

#include "dist/world.h"
#include "model/transformer.h"
#include "plugins/multiturn_handler.h"
#include "plugins/plugin_registry.h"
#include "plugins/sampler_client.h"
#include "rewards/reward_set.h"
#include "tokenizer/tokenizer.h"
#include "trainer/completion_log.h"
#include "trainer/conversations.h"
#include "trainer/data_parallel.h"
#include "trainer/device_metrics.h"
#include "trainer/generation_batch.h"
#include "trainer/local_rollout_servers.h"
#include "trainer/lr_schedule.h"
#include "trainer/micro_batches.h"
#include "trainer/offload.h"
#include "trainer/prompt_source.h"
#include "trainer/run_log.h"
#include "trainer/settings.h"
#include "trainer/step_phase.h"
#include "trainer/weight_views.h"

namespace grpo::trainer {

using Metrics = std::map<std::string, double>;

// Steps in a row whose gradients were not finite, after which the run stops:
// one such step (a batch that overflowed) is skipped, as a loss scaler skips
// it; three mean the weights, the data or the settings are broken.
constexpr int64_t kMaxNonFiniteSteps = 3;

class NonFiniteGradients : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What the optimizer changes: the policy (with its LoRA adapters), the
// frozen reference, AdamW and its schedule.
struct PolicyState {
  model::CausalLM policy{nullptr};
  model::CausalLM reference{nullptr};  // null under LoRA (adapters disabled) or with beta 0
  std::unique_ptr<ParameterSync> sync;             // how the ranks' gradients and weights meet (DDP, ZeRO)
  std::unique_ptr<torch::optim::AdamW> optimizer;  // this rank's share of the parameters under ZeRO
  std::unique_ptr<LrSchedule> schedule;
  int64_t global_step = 0;
  int64_t step_active_tokens = 0;  // tokens that carried loss in the current step
  int64_t nonfinite_steps = 0;     // consecutive steps whose gradient norm was NaN or infinite (not applied)
};

// What sampling keeps between steps: the sampler and the weights it reads,
// the current generation batch's micro-batches, and async_generate's batch
// in flight.
struct RolloutState {
  std::unique_ptr<LocalRolloutServers> servers;  // --num_infer_workers: stopped after the sampler is gone
  std::unique_ptr<plugins::SamplerClient> sampler;
  std::unique_ptr<WeightViews> views;          // what the sampler was handed
  std::map<std::string, at::Tensor> merged;    // LoRA: W + scaling * B A per adapted weight
  model::CausalLM sampler_copy{nullptr};       // async + in-process sampler: the weights it samples with
  std::vector<int32_t> stop_ids;               // model::stop_token_ids of the policy's model
  std::deque<MicroBatch> queue;                // the current generation batch, num_iterations passes
  struct Pending {
    GenerationBatch batch;
    Metrics metrics;
  };
  std::future<Pending> pending;                // async_generate: the batch being sampled
  int64_t generations = 0;                     // generation batches sampled so far: part of every seed
};

class GrpoTrainer {
 public:
  GrpoTrainer(GrpoSettings settings, dist::World& world);
  void train();

 private:
  // Rewards, the sampler, the multi-turn handler, with their options; `context`: prompt + completion tokens.
  void load_plugins(tok::ChatFamily family, int64_t context);

  // grpo_step.cpp: the step, phase by phase.
  Metrics step();
  std::vector<MicroBatch> micro_batches_of(const GenerationBatch& batch, Metrics& m);  // advantages, split
  void add_constant_logprobs(std::vector<MicroBatch>& parts, Metrics& m,
                             MetricAccumulator& on_device);                    // old, reference, IS correction
  void accumulate(const MicroBatch& mb, Metrics& m, MetricAccumulator& on_device);  // policy log-probs, loss, backward
  void update(Metrics& m);                                                 // clip, AdamW, reference sync
  std::string phase_sizes(StepPhase phase) const;  // what a phase computes, for its out-of-memory error
  // The host clock once this thread's queued device work has run: on a GPU the
  // host runs ahead of its kernels, and a phase's time (time/*) is the device's.
  double settled_now() const;

  // generation.cpp: generation batches — sample, score, resample (dynamic_sample).
  GenerationBatch next_generation_batch(Metrics& m, int64_t micro_done);
  GenerationBatch sample_and_score(Metrics& m);
  // Sampling purpose: the seed series and metric names differ for evaluation.
  enum class Purpose { Training, Evaluation };
  // This rank's share sampled and scored, then the whole batch gathered from
  // every rank; `generation`: the index its seeds derive from.
  GenerationBatch rollout(const std::vector<const Prompt*>& prompts, Metrics& m, Purpose purpose, int64_t generation,
                          const plugins::TrainerState& state);
  GenerationBatch generate(const std::vector<const Prompt*>& prompts, Metrics& m, Purpose purpose,
                           int64_t generation);  // this rank's share of the completions
  void score(GenerationBatch& batch, Metrics& m, const plugins::TrainerState& state);
  void completion_metrics(const GenerationBatch& batch, Metrics& m, const std::string& prefix) const;
  plugins::TrainerState trainer_state() const;
  Advantages advantages_of(const GenerationBatch& batch, Metrics& m, Purpose purpose);

  // evaluation.cpp
  Metrics evaluate();  // eval_ metrics over the validation prompts

  // sampler_weights.cpp: the sampler plugin, the weights it reads, async_generate.
  void create_sampler();
  std::vector<std::string> start_local_servers();  // --num_infer_workers: their URLs, on every rank
  GenerationBatch next_async_batch(Metrics& m);
  void launch_generation();               // on a background thread, with the sampler's current weights
  void sync_sampler_weights(Metrics& m);  // the policy's weights to the sampler (merge, copy or push)
  void push_weights_to_server(uint32_t flags, const std::string& what);  // rank 0 pushes, every rank waits
  void wait_for_generation();

  void report_reward_failures() const;  // the end-of-run summary; throws unless tolerated

  // grpo_offload.cpp: --offload_model and --offload_optimizer on a GPU (trainer/offload.h).
  AwayForSampling offload_for_sampling(bool gradients_zero, Metrics& m);  // nothing unless --offload_model
  void bring_back(AwayForSampling& away, Metrics& m);
  void park_optimizer_state(bool parked, Metrics& m);  // nothing unless --offload_optimizer
  bool offloads() const { return s_.model.device.is_cuda(); }  // on the CPU everything is in host memory already

  // grpo_checkpoint.cpp: checkpoints and resuming.
  // Collective under ZeRO (every rank's optimizer shard goes to rank 0),
  // unless `gather_shards` is false: then rank 0 keeps only its own.
  void save_checkpoint(bool gather_shards = true);
  void resume_from(const std::string& dir);
  [[noreturn]] void stop_abandoning(const std::string& what);

  GrpoSettings s_;
  dist::World& world_;  // this process's rank; one process: a world of one
  int64_t max_steps_ = 0;
  bool needs_old_logp_ = false;  // the policy moves while a generation batch is still being trained on
  OffloadArenas offload_arenas_;  // host memory of --offload_model / --offload_optimizer, reused every step
  tok::Tokenizer tokenizer_;
  plugins::PluginRegistry registry_;
  std::unique_ptr<PromptSource> prompts_, val_prompts_;
  std::unique_ptr<rewards::RewardSet> rewards_;
  std::unique_ptr<plugins::MultiturnHandler> handler_;    // null for single-turn rollouts
  std::unique_ptr<ConversationRunner> conversations_;     // drives handler_
  std::shared_ptr<plugins::MetricsSink> plugin_metrics_;
  plugins::TextServices text_services_;  // the run's tokenizer and chat format, for plugins
  std::unique_ptr<RunLog> log_;                    // rank 0 only
  std::unique_ptr<CompletionLog> completion_log_;  // rank 0 only, with log_completions
  PolicyState policy_;
  RolloutState rollout_;
};

// grpo-host train with `settings`, to the end (or a stop signal); one rank of
// a data parallel run when the environment says so (RANK, WORLD_SIZE, ...).
void run_grpo(const GrpoSettings& settings);

}  // namespace grpo::trainer
