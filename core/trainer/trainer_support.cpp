// What the GRPO trainer refuses, and the flags it reads: a configuration that
// asks for something not built stops before any model is loaded, with a
// sentence per flag saying what to do instead.
#include <set>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "config/flag_table.h"
#include "trainer/grpo_trainer.h"

namespace grpo::trainer {

void check_trainer_support(const config::Config& cfg) {
  std::vector<std::string> problems;
  auto refuse = [&](bool bad, const std::string& why) {
    if (bad) problems.push_back(why);
  };
  refuse(cfg.get_bool("async_generate") && cfg.get_bool("dynamic_sample"),
         "--async_generate with --dynamic_sample is not supported: resampling needs the batch's rewards before the "
         "next batch starts; keep one of them");
  refuse(cfg.get_bool("sync_ref_model") && cfg.get_string("train_type") == "lora",
         "--sync_ref_model with --train_type lora: the LoRA reference is the base model itself (adapters "
         "disabled), which a sync would change; use --train_type full, or drop --sync_ref_model");
  refuse(cfg.get_bool("sync_ref_model") && cfg.get_double("beta") == 0.0,
         "--sync_ref_model needs a reference model, and --beta 0 loads none: set --beta > 0 or drop it");
  refuse(cfg.get_string("model").empty(), "training needs --model DIR (a Hugging Face model directory)");
  refuse(cfg.get_strings("dataset").empty(), "training needs --dataset rows.jsonl");
  refuse(cfg.get_strings("reward_funcs").empty(), "training needs --reward_funcs (e.g. accuracy format)");
  // Flags this trainer reads (directly, or as reward/sampler plugin options).
  static const std::set<std::string> kUsed = {
      "adam_beta1", "adam_beta2", "adam_epsilon", "beta", "dataset", "dataset_shuffle", "delta", "epsilon",
      "epsilon_high", "generation_batch_size", "gradient_accumulation_steps", "gradient_checkpointing",
      "importance_sampling_level", "learning_rate", "log_completions", "logging_steps", "loss_type",
      "lr_scheduler_type", "max_completion_length", "max_grad_norm", "max_steps", "min_p", "model", "num_generations",
      "num_threads", "num_train_epochs", "output_dir", "overlong_filter", "per_device_train_batch_size", "plugin_args",
      "plugins", "ref_model", "repetition_penalty", "report_to", "reward_funcs", "reward_weights", "sampler",
      "sampler_args", "save_steps", "save_total_limit", "scale_rewards", "seed", "steps_per_generation", "stop_words",
      "system", "temperature", "template", "top_k", "top_p", "torch_dtype", "train_type", "warmup_ratio",
      "warmup_steps", "weight_decay", "cosine_min_len_value_wrong", "cosine_max_len_value_wrong",
      "cosine_min_len_value_correct", "cosine_max_len_value_correct", "cosine_max_len", "repetition_n_grams",
      "repetition_max_penalty", "soft_max_length", "soft_cache_length", "rlhf_type", "use_vllm", "vllm_mode",
      "num_iterations", "dynamic_sample", "vllm_server_base_url", "vllm_server_host", "vllm_server_port",
      "vllm_server_timeout", "max_resample_times", "async_generate", "vllm_importance_sampling_correction",
      "vllm_importance_sampling_mode", "vllm_importance_sampling_clip_max", "resume_from_checkpoint",
      "val_dataset", "split_dataset_ratio", "eval_steps", "per_device_eval_batch_size", "max_length",
      "truncation_strategy", "skip_bad_rows", "lora_rank", "lora_alpha", "lora_dropout", "target_modules",
      "merge_lora", "sync_ref_model", "ref_model_sync_steps", "ref_model_mixup_alpha"};
  for (const config::FlagSpec& flag : config::flag_table())
    if (flag.availability == config::Availability::Available && cfg.is_set(flag.name) && !kUsed.count(flag.name))
      spdlog::warn("--{} is accepted but has no effect in this trainer yet", flag.name);
  if (!problems.empty()) {
    std::string msg = "this configuration asks for what the trainer does not do yet:";
    for (const auto& p : problems) msg += "\n  - " + p;
    throw config::ConfigError(msg);
  }
}

}  // namespace grpo::trainer
