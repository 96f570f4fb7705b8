// Typed settings of the commands that load a model: each is built once from
// the resolved configuration, validated there, and is all that the command
// reads afterwards. A new flag is a row of config/flag_table.cpp and a field
// read in settings.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "dist/device_backend.h"
#include "config/settings_reader.h"
#include "data/dataset.h"
#include "model/lora.h"
#include "plugins/reward_worker.h"
#include "plugins/sampler_client.h"
#include "trainer/advantages.h"
#include "trainer/grpo_loss.h"
#include "trainer/importance_sampling.h"
#include "trainer/prompt_source.h"

namespace grpo::trainer {

// Log-probabilities are computed this many positions at a time, so that no
// [batch, length, vocabulary] tensor is built.
constexpr int64_t kLogprobChunk = 256;

struct ModelSettings {
  std::string dir;      // --model: a directory (a hub ORG/NAME is resolved to its snapshot)
  std::string ref_dir;  // --ref_model; "" = the initial policy
  at::Device device = at::kCPU;  // read_device: where the run's models, optimizer state and batches live
  at::ScalarType dtype = at::kFloat;
  bool lora = true;     // --train_type lora (else full)
  model::LoraOptions lora_options;
  bool merge_lora = false;
  bool gradient_checkpointing = true;
  std::string resume_from;  // --resume_from_checkpoint; "" = a new run
};

// How dataset rows become prompts.
struct PromptSettings {
  std::string template_name;  // "" = read from tokenizer_config.json
  std::string system;         // the system prompt's text (--system, or the file it names)
  std::optional<int64_t> max_length;
  Truncation truncation = Truncation::Left;
  // The format for `tokenizer`; prompts are cut at max_length (unset: the
  // model's max_position_embeddings) - max_completion_length. Refuses lengths
  // that leave no room for a prompt.
  PromptFormat format(const tok::Tokenizer& tokenizer, int64_t max_completion_length, int64_t model_max_length) const;
};

struct DataSettings {
  std::vector<data::DatasetSource> datasets, val_datasets;  // resolved: files, hub snapshots
  double split_ratio = 0;
  bool shuffle = true;
  bool skip_bad_rows = false;
};

// The batch geometry (grpo.md §1), per process.
struct BatchSettings {
  int64_t num_generations = 8;         // G
  int64_t micro_batch = 1;             // per_device_train_batch_size, completions
  int64_t grad_accum = 1;              // gradient_accumulation_steps
  int64_t prompts_per_generation = 1;  // generation_batch_size / G
  int64_t steps_per_generation = 1;
  int64_t iterations = 1;              // num_iterations
  int64_t eval_batch = 1;              // per_device_eval_batch_size, completions
  std::optional<int64_t> max_steps;
  double epochs = 1;
};

struct SamplingSettings {
  std::string sampler = "native";
  nlohmann::json sampler_args = nlohmann::json::object();
  plugins::SampleOptions options;  // temperature, top_p, ..., max_new_tokens, stop strings
  bool async = false;              // async_generate
  bool dynamic_sample = false;
  int64_t max_resample_times = 3;
  int64_t start_servers = 0;  // num_infer_workers: grpo-rollout servers the host starts and samples on (0: none)
  // The native sampler's decoding, under vLLM's names: rows decoded at once,
  // the share of device memory the process may fill, CUDA graphs off.
  int64_t max_num_seqs = 256;
  double gpu_memory_utilization = 0.9;
  bool enforce_eager = false;
  int64_t sleep_level = 0;  // >= 1: the native sampler frees its KV cache and graphs after each generation
  // What waits in host memory while it is not needed, on a GPU (trainer/offload.h).
  bool offload_model = false;      // the reference model and the gradients, while the sampler generates
  bool offload_optimizer = false;  // AdamW's moments, except while the optimizer steps
  bool gc_after_offload = false;   // gc_collect_after_offload: the freed blocks back to the driver
};

// Multi-turn rollouts (ms-swift's multi_turn_scheduler, max_turns,
// completion_length_limit_scope).
// Data parallel training over the ranks of the environment (dist/rank_env.h).
struct DistributedSettings {
  double timeout_s = 1800;                // ddp_timeout: how long a collective waits for the other ranks
  int64_t bucket_bytes = 25 << 20;        // ddp_bucket_cap_mb: gradients are averaged in buckets this large
  int zero_stage = 0;                     // --deepspeed zero1|zero2 or --zero_stage: 0 DDP, 1 optimizer state, 2 + gradients
  dist::DeviceBackend backend = dist::DeviceBackend::Auto;  // ddp_backend
};

struct MultiTurnSettings {
  std::string handler;               // the grpo.multiturn plugin; empty: single-turn
  std::optional<int64_t> max_turns;  // policy turns; unset: until the handler or the length ends it
  bool total_scope = false;          // max_completion_length bounds all turns together, not each
  double timeout_s = 60;             // a handler call past it is abandoned (0: no limit)
};

struct LossSettings {
  LossOptions options;  // loss_type, importance level, epsilons, delta, beta, GA, max_completion_length
  ScaleRewards scale = ScaleRewards::Group;
  bool overlong_filter = false;
  double temperature = 1.0;  // log-probs are of the distribution that was sampled
  bool is_correction = false;  // vllm_importance_sampling_correction (on by default with async)
  IsCorrectionMode is_mode = IsCorrectionMode::SequenceMask;
  double is_cap = 3.0;
};

struct RefSyncSettings {  // TR-DPO's soft reference update
  bool enabled = false;
  int64_t every = 512;
  double alpha = 0.6;
};

struct OptimizerSettings {
  double learning_rate = 1e-6, beta1 = 0.9, beta2 = 0.95, epsilon = 1e-8, weight_decay = 0.1;
  double max_grad_norm = 1.0;
  std::string scheduler = "cosine";
  std::optional<int64_t> warmup_steps;
  double warmup_ratio = 0.05;
};

struct CheckpointSettings {
  std::string output_dir = "output";
  bool save = true;  // --save_strategy: false for `no`, which writes no checkpoint at all
  std::optional<int64_t> save_total_limit;
  std::string base_model;  // what a LoRA checkpoint's adapter_config.json names as its base
  model::LoraOptions lora_options;
  bool merge_lora = false;
};

struct LoggingSettings {
  int64_t logging_steps = 5;
  std::optional<int64_t> save_steps, eval_steps;
  bool log_completions = false;
  bool tensorboard = true;
};

struct RewardSettings {
  std::vector<std::string> plugins;  // --plugins
  std::vector<std::string> funcs;
  std::vector<double> weights;  // empty: all 1.0
  std::vector<std::string> models;  // --reward_model directories, scored after funcs
  nlohmann::json plugin_args = nlohmann::json::object();
  bool tolerate_errors = false;  // a run whose rewards failed on some batches still exits 0
  plugins::Isolation isolation;  // --plugin_isolation, --reward_timeout
};

// The resolved configuration as the run keeps it: written to args.yaml, and
// handed to plugins, whose options may take flags' values.
struct RunConfig {
  config::Config config;
  nlohmann::json json;                               // config.to_json()
  std::set<std::string, std::less<>> flags_read;     // by the settings builder
  nlohmann::json plugin_flag_values = nlohmann::json::object();  // plugins' options given as flags, typed
};

struct GrpoSettings {
  ModelSettings model;
  PromptSettings prompts;
  DataSettings data;
  BatchSettings batch;
  SamplingSettings sampling;
  MultiTurnSettings multi_turn;
  LossSettings loss;
  RefSyncSettings ref_sync;
  OptimizerSettings optimizer;
  CheckpointSettings checkpoint;
  LoggingSettings logging;
  RewardSettings rewards;
  DistributedSettings dist;
  int num_threads = 0;
  uint64_t seed = 42;
  RunConfig run;

  // Throws config::ConfigError listing everything this trainer refuses in
  // `cfg`, before any model is loaded.
  static GrpoSettings from(const config::Config& cfg);
};

struct SftSettings {
  ModelSettings model;
  PromptSettings prompts;
  std::vector<data::DatasetSource> datasets;
  bool shuffle = true;
  int64_t micro_batch = 1, grad_accum = 1;
  std::optional<int64_t> max_steps;
  double epochs = 1;
  OptimizerSettings optimizer;
  CheckpointSettings checkpoint;
  LoggingSettings logging;
  int num_threads = 0;
  uint64_t seed = 42;
  RunConfig run;

  static SftSettings from(const config::Config& cfg);
};

// grpo-host evaluate and generate: a model, prompts and sampling.
struct EvaluateSettings {
  std::string model_dir;
  at::Device device = at::kCPU;       // read_device
  at::ScalarType dtype = at::kFloat;  // torch_dtype: what the weights are computed in
  std::vector<data::DatasetSource> datasets;
  PromptSettings prompts;
  plugins::SampleOptions sampling;
  RewardSettings rewards;
  MultiTurnSettings multi_turn;
  int num_threads = 0;
  uint64_t seed = 42;
  RunConfig run;

  // `needs_data`: evaluate needs --dataset and --reward_funcs; generate does not.
  static EvaluateSettings from(const config::Config& cfg, bool needs_data);
};

// The parts several commands share, read through `r`.
// The process's device (model/device.h): LOCAL_RANK's visible GPU, or the
// CPU with --use_cpu or without a GPU.
at::Device read_device(config::SettingsReader& r);
// --torch_dtype; unset: bfloat16 on a GPU (as ms-swift loads models there),
// float32 on the CPU.
at::ScalarType read_weight_dtype(config::SettingsReader& r, at::Device device);
ModelSettings read_model_settings(config::SettingsReader& r);
PromptSettings read_prompt_settings(config::SettingsReader& r);
plugins::SampleOptions read_sample_options(config::SettingsReader& r);
OptimizerSettings read_optimizer_settings(config::SettingsReader& r);
CheckpointSettings read_checkpoint_settings(config::SettingsReader& r, const ModelSettings& model);
LoggingSettings read_logging_settings(config::SettingsReader& r);
RewardSettings read_reward_settings(config::SettingsReader& r);
MultiTurnSettings read_multi_turn_settings(config::SettingsReader& r);

}  // namespace grpo::trainer
