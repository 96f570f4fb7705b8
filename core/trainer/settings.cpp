#include "trainer/settings.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "data/dataset.h"
#include "dist/rank_env.h"
#include "hub/hub_cache.h"
#include "model/device.h"
#include "model/dtype.h"
#include "plugins/plugin_options.h"
#include "tokenizer/chat_prompt.h"

namespace grpo::trainer {

namespace {

RunConfig run_config(const config::Config& cfg, const config::SettingsReader& r) {
  return {cfg, cfg.to_json(), r.used()};
}

// Every problem at once, one per line, as the configuration reports its own.
void refuse(const std::vector<std::string>& problems) {
  if (problems.empty()) return;
  std::string msg = "this configuration asks for what the trainer does not do yet:";
  for (const auto& p : problems) msg += "\n  - " + p;
  throw config::ConfigError(msg);
}

hub::Options read_hub_options(config::SettingsReader& r) {
  hub::Options o;
  o.use_hf = hub::use_hf_from(r.flag("use_hf"));
  return o;
}

std::vector<data::DatasetSource> read_datasets(config::SettingsReader& r, std::string_view flag) {
  const hub::Options hub = read_hub_options(r);
  std::vector<data::DatasetSource> out;
  for (const std::string& spec : r.texts(flag)) {
    try {
      out.push_back(data::resolve_dataset(spec, hub));
    } catch (const data::DataError& e) {  // the flag that named it, for a spec in a YAML list or a launcher's line
      throw data::DataError(fmt::format("--{}: {}", flag, e.what()));
    }
  }
  return out;
}

}  // namespace

PromptFormat PromptSettings::format(const tok::Tokenizer& tokenizer, int64_t max_completion_length,
                                    int64_t model_max_length) const {
  if (max_length && *max_length <= max_completion_length)
    throw config::ConfigError(fmt::format(
        "--max_length {} leaves no room for a prompt: it counts prompt + completion tokens, and "
        "--max_completion_length is {}; raise max_length above it (e.g. {}) or lower max_completion_length",
        *max_length, max_completion_length, max_completion_length + 512));
  if (!max_length && model_max_length <= max_completion_length)
    throw config::ConfigError(fmt::format(
        "--max_completion_length {} leaves no room for a prompt in the model's {} positions "
        "(max_position_embeddings in its config.json): lower it",
        max_completion_length, model_max_length));
  const int64_t total = max_length.value_or(model_max_length);
  return {&tokenizer, tok::chat_family_for(tokenizer, template_name), system, total - max_completion_length,
          truncation};
}

at::Device read_device(config::SettingsReader& r) {
  const std::optional<dist::RankEnv> env = dist::rank_env_from_environment();
  try {
    return model::choose_device(r.flag("use_cpu"), env ? env->local_rank : 0, model::visible_gpus());
  } catch (const std::invalid_argument& e) {
    throw config::ConfigError(e.what());
  }
}

at::ScalarType read_weight_dtype(config::SettingsReader& r, at::Device device) {
  const std::string name = r.text("torch_dtype");
  if (name.empty()) return device.is_cuda() ? at::kBFloat16 : at::kFloat;
  try {
    return model::weight_dtype_from_name(name, "--torch_dtype");
  } catch (const std::invalid_argument& e) {
    throw config::ConfigError(e.what());
  }
}

ModelSettings read_model_settings(config::SettingsReader& r) {
  ModelSettings m;
  hub::Options hub = read_hub_options(r);
  m.ref_dir = hub::resolve_model(r.text("ref_model"), hub, "--ref_model");
  hub.revision = r.text("model_revision");
  m.dir = hub::resolve_model(r.text("model"), hub, "--model");
  m.device = read_device(r);
  m.dtype = read_weight_dtype(r, m.device);
  m.lora = r.choice<bool>("train_type", {{"lora", true}, {"full", false}});
  m.lora_options.rank = r.integer("lora_rank");
  m.lora_options.alpha = static_cast<double>(r.integer("lora_alpha"));
  m.lora_options.dropout = r.real("lora_dropout");
  m.lora_options.target_modules = r.texts("target_modules");
  m.lora_options.seed = static_cast<uint64_t>(r.integer("seed"));
  m.merge_lora = r.flag("merge_lora");
  m.gradient_checkpointing = r.flag("gradient_checkpointing");
  m.resume_from = r.text("resume_from_checkpoint");
  return m;
}

PromptSettings read_prompt_settings(config::SettingsReader& r) {
  PromptSettings p;
  p.template_name = r.text("template");
  p.system = data::load_system_prompt(r.text("system"));
  p.max_length = r.optional_integer("max_length");
  p.truncation = r.choice<Truncation>(
      "truncation_strategy",
      {{"left", Truncation::Left}, {"right", Truncation::Right}, {"delete", Truncation::Delete}});
  return p;
}

plugins::SampleOptions read_sample_options(config::SettingsReader& r) {
  plugins::SampleOptions o;
  o.temperature = r.real("temperature");
  o.top_p = r.real("top_p");
  o.top_k = static_cast<int32_t>(r.integer("top_k"));
  o.min_p = r.real("min_p");
  o.repetition_penalty = r.real("repetition_penalty");
  o.max_new_tokens = static_cast<int32_t>(r.integer("max_completion_length"));
  o.stop_strings = r.texts("stop_words");
  return o;
}

OptimizerSettings read_optimizer_settings(config::SettingsReader& r) {
  OptimizerSettings o;
  o.learning_rate = r.real("learning_rate");
  o.beta1 = r.real("adam_beta1");
  o.beta2 = r.real("adam_beta2");
  o.epsilon = r.real("adam_epsilon");
  o.weight_decay = r.real("weight_decay");
  o.max_grad_norm = r.real("max_grad_norm");
  o.scheduler = r.text("lr_scheduler_type");  // LrSchedule refuses a name it does not know
  o.warmup_steps = r.optional_integer("warmup_steps");
  o.warmup_ratio = r.real("warmup_ratio");
  return o;
}

CheckpointSettings read_checkpoint_settings(config::SettingsReader& r, const ModelSettings& model) {
  CheckpointSettings c;
  c.output_dir = r.text("output_dir");
  c.save = r.text("save_strategy") != "no";
  c.save_total_limit = r.optional_integer("save_total_limit");
  c.base_model = model.dir;
  c.lora_options = model.lora_options;
  c.merge_lora = model.merge_lora;
  return c;
}

LoggingSettings read_logging_settings(config::SettingsReader& r) {
  LoggingSettings l;
  l.logging_steps = std::max<int64_t>(1, r.integer("logging_steps"));
  l.save_steps = r.optional_integer("save_steps");
  l.eval_steps = r.optional_integer("eval_steps");
  l.log_completions = r.flag("log_completions");
  const auto report_to = r.texts("report_to");
  l.tensorboard = std::find(report_to.begin(), report_to.end(), "tensorboard") != report_to.end();
  return l;
}

RewardSettings read_reward_settings(config::SettingsReader& r) {
  RewardSettings s;
  s.plugins = r.texts("plugins");
  s.funcs = r.texts("reward_funcs");
  s.weights = r.reals("reward_weights");
  for (const std::string& m : r.texts("reward_model"))
    s.models.push_back(hub::resolve_model(m, read_hub_options(r), "--reward_model"));
  s.plugin_args = r.json("plugin_args");
  s.tolerate_errors = r.flag("tolerate_reward_errors");
  s.isolation = plugins::read_isolation(r);
  return s;
}

MultiTurnSettings read_multi_turn_settings(config::SettingsReader& r) {
  MultiTurnSettings m;
  m.handler = r.text("multi_turn_scheduler");
  m.max_turns = r.optional_integer("max_turns");
  m.total_scope = r.choice<bool>("completion_length_limit_scope", {{"per_round", false}, {"total", true}});
  m.timeout_s = r.real("multi_turn_timeout");
  return m;
}

GrpoSettings GrpoSettings::from(const config::Config& cfg) {
  config::SettingsReader r(cfg);
  GrpoSettings s;
  s.model = read_model_settings(r);
  s.prompts = read_prompt_settings(r);
  s.seed = static_cast<uint64_t>(r.integer("seed"));
  s.num_threads = static_cast<int>(r.integer("num_threads"));

  s.data.datasets = read_datasets(r, "dataset");
  s.data.val_datasets = read_datasets(r, "val_dataset");
  s.data.split_ratio = r.real("split_dataset_ratio");
  s.data.shuffle = r.flag("dataset_shuffle");
  s.data.skip_bad_rows = r.flag("skip_bad_rows");

  BatchSettings& b = s.batch;
  b.num_generations = r.integer("num_generations");
  b.micro_batch = r.integer("per_device_train_batch_size");
  b.grad_accum = r.integer("gradient_accumulation_steps");
  b.prompts_per_generation = r.integer("generation_batch_size") / b.num_generations;
  b.steps_per_generation = r.integer("steps_per_generation");
  b.iterations = r.integer("num_iterations");
  b.eval_batch = r.integer("per_device_eval_batch_size");
  b.max_steps = r.optional_integer("max_steps");
  b.epochs = r.real("num_train_epochs");

  SamplingSettings& sm = s.sampling;
  sm.sampler = r.text("sampler");
  sm.sampler_args = r.json("sampler_args");
  // The configuration leaves the servers' address out exactly when the host starts them.
  const std::optional<int64_t> workers = r.optional_integer("num_infer_workers");
  const bool has_address = sm.sampler_args.contains("base_url") || sm.sampler_args.contains("base_urls");
  sm.start_servers = workers && sm.sampler == "external_server" && !has_address ? *workers : 0;
  r.mark_used("log_level");  // applied when the configuration is parsed
  // The configuration resolves these into `sampler` and `sampler_args`.
  for (const char* flag : {"use_vllm", "vllm_mode", "vllm_server_base_url", "vllm_server_host", "vllm_server_port",
                           "vllm_server_timeout", "rlhf_type"})
    r.mark_used(flag);
  sm.options = read_sample_options(r);
  sm.async = r.flag("async_generate");
  sm.max_num_seqs = r.integer("vllm_max_num_seqs");
  sm.gpu_memory_utilization = r.real("vllm_gpu_memory_utilization");
  sm.enforce_eager = r.flag("vllm_enforce_eager");
  sm.sleep_level = r.integer("sleep_level");
  sm.offload_model = r.flag("offload_model");
  sm.offload_optimizer = r.flag("offload_optimizer");
  sm.gc_after_offload = r.flag("gc_collect_after_offload");
  sm.dynamic_sample = r.flag("dynamic_sample");
  sm.max_resample_times = r.integer("max_resample_times");

  LossSettings& l = s.loss;
  l.options.loss_type = r.choice("loss_type", loss_type_names());
  l.options.level = r.choice<IsLevel>("importance_sampling_level", {{"token", IsLevel::Token}, {"sequence", IsLevel::Sequence}});
  l.options.epsilon_low = r.real("epsilon");
  l.options.epsilon_high = r.real("epsilon_high");
  if (auto delta = r.optional_real("delta")) l.options.delta = *delta;
  l.options.beta = r.real("beta");
  l.options.gradient_accumulation_steps = b.grad_accum;
  l.options.max_completion_length = r.integer("max_completion_length");
  l.scale = r.choice("scale_rewards", scale_rewards_names());
  l.overlong_filter = r.flag("overlong_filter");
  l.temperature = sm.options.temperature;
  // Completions from other weights than the trainer's: correct for the
  // sampler's log-probs (on by default with async_generate, as TRL's is).
  l.is_correction = r.flag("vllm_importance_sampling_correction") ||
                    (sm.async && !r.is_set("vllm_importance_sampling_correction"));
  l.is_mode = r.choice("vllm_importance_sampling_mode", is_correction_mode_names());
  l.is_cap = r.real("vllm_importance_sampling_clip_max");

  s.multi_turn = read_multi_turn_settings(r);
  s.ref_sync.enabled = r.flag("sync_ref_model");
  s.ref_sync.every = r.integer("ref_model_sync_steps");
  s.ref_sync.alpha = r.real("ref_model_mixup_alpha");
  s.optimizer = read_optimizer_settings(r);
  s.checkpoint = read_checkpoint_settings(r, s.model);
  s.logging = read_logging_settings(r);
  s.rewards = read_reward_settings(r);
  s.dist.timeout_s = static_cast<double>(r.integer("ddp_timeout"));
  s.dist.bucket_bytes = r.integer("ddp_bucket_cap_mb") << 20;
  s.dist.zero_stage = static_cast<int>(r.integer("zero_stage"));
  if (r.is_set("ddp_backend"))
    s.dist.backend = r.choice<dist::DeviceBackend>("ddp_backend", {{"nccl", dist::DeviceBackend::Nccl},
                                                                  {"gloo", dist::DeviceBackend::Gloo}});
  if (const std::string ds = r.text("deepspeed"); !ds.empty()) {  // zeroN, as the flag's check wrote it
    const int stage = ds.back() - '0';
    if (r.is_set("zero_stage") && stage != s.dist.zero_stage)
      throw config::ConfigError("--deepspeed " + ds + " and --zero_stage " + std::to_string(s.dist.zero_stage) +
                                " disagree: give one of them");
    s.dist.zero_stage = stage;
  }
  s.run = run_config(cfg, r);

  std::vector<std::string> problems;
  auto check = [&](bool bad, const std::string& why) {
    if (bad) problems.push_back(why);
  };
  check(sm.async && sm.dynamic_sample,
        "--async_generate with --dynamic_sample is not supported: resampling needs the batch's rewards before the "
        "next batch starts; keep one of them");
  check(s.dist.backend == dist::DeviceBackend::Nccl && !s.model.device.is_cuda(),
        "--ddp_backend nccl needs the ranks on GPUs, and this run trains on " + s.model.device.str() +
            ": drop it (the CPU's ranks use Gloo)");
  check(sm.async && sm.gc_after_offload,
        "--gc_collect_after_offload with --async_generate: emptying the GPU's cache while the sampler generates "
        "(and captures CUDA graphs) on its own thread is not safe; drop one of them");
  check(sm.async && sm.offload_model,
        "--offload_model with --async_generate: the reference model and the gradients leave the GPU while the "
        "sampler generates, and under async_generate it generates while training reads them; keep one of them "
        "(--offload_optimizer works with both)");
  check(s.ref_sync.enabled && s.model.lora,
        "--sync_ref_model with --train_type lora: the LoRA reference is the base model itself (adapters "
        "disabled), which a sync would change; use --train_type full, or drop --sync_ref_model");
  check(s.ref_sync.enabled && l.options.beta == 0.0,
        "--sync_ref_model needs a reference model, and --beta 0 loads none: set --beta > 0 or drop it");
  check(s.model.dir.empty(), "training needs --model DIR (a Hugging Face model directory)");
  check(s.data.datasets.empty(), "training needs --dataset rows.jsonl");
  check(s.rewards.funcs.empty() && s.rewards.models.empty(),
        "training needs --reward_funcs (e.g. accuracy format) or --reward_model DIR");
  refuse(problems);
  return s;
}

SftSettings SftSettings::from(const config::Config& cfg) {
  config::SettingsReader r(cfg);
  SftSettings s;
  s.model = read_model_settings(r);
  if (s.model.dir.empty()) throw config::ConfigError("sft needs --model DIR");
  s.prompts = read_prompt_settings(r);
  s.datasets = read_datasets(r, "dataset");
  if (s.datasets.empty()) throw config::ConfigError("sft needs --dataset rows.jsonl");
  if (!s.model.resume_from.empty())
    throw config::ConfigError("sft does not resume a run: start a new one from the checkpoint with --model DIR "
                              "(of a LoRA checkpoint, its merged/ directory, written with --merge_lora true)");
  s.model.dtype = at::kFloat;  // the warm start trains in float32 whatever torch_dtype says
  s.shuffle = r.flag("dataset_shuffle");
  s.micro_batch = r.integer("per_device_train_batch_size");
  s.grad_accum = r.integer("gradient_accumulation_steps");
  s.max_steps = r.optional_integer("max_steps");
  s.epochs = r.real("num_train_epochs");
  s.optimizer = read_optimizer_settings(r);
  s.checkpoint = read_checkpoint_settings(r, s.model);
  s.logging = read_logging_settings(r);
  s.num_threads = static_cast<int>(r.integer("num_threads"));
  s.seed = static_cast<uint64_t>(r.integer("seed"));
  s.run = run_config(cfg, r);
  return s;
}

EvaluateSettings EvaluateSettings::from(const config::Config& cfg, bool needs_data) {
  config::SettingsReader r(cfg);
  EvaluateSettings s;
  hub::Options hub = read_hub_options(r);
  hub.revision = r.text("model_revision");
  s.model_dir = hub::resolve_model(r.text("model"), hub, "--model");
  if (s.model_dir.empty())
    throw config::ConfigError(std::string(needs_data ? "evaluate" : "generate") +
                              " needs --model DIR (a Hugging Face model directory)");
  s.device = read_device(r);
  s.dtype = read_weight_dtype(r, s.device);
  s.datasets = read_datasets(r, "dataset");
  if (needs_data && s.datasets.empty()) throw config::ConfigError("evaluate needs --dataset rows.jsonl");
  s.prompts = read_prompt_settings(r);
  s.sampling = read_sample_options(r);
  s.rewards = read_reward_settings(r);
  s.multi_turn = read_multi_turn_settings(r);
  s.num_threads = static_cast<int>(r.integer("num_threads"));
  s.seed = static_cast<uint64_t>(r.integer("seed"));
  s.run = run_config(cfg, r);
  return s;
}

}  // namespace grpo::trainer
