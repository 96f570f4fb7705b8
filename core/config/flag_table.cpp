#include "config/flag_table.h"
#include "config/flag_def.h"
#include "config/zero_flags.h"

#include "trainer/loss_type.h"
#include "util/suggest.h"

#include <algorithm>
#include <cctype>
#include <cmath>

namespace grpo::config {
namespace {

using nlohmann::json;
using namespace flag_def;

// report_to: `none` alone means no integration; it cannot be combined with one.
std::string finish_report_to(json& v) {
  if (!v.is_array()) return "";
  bool has_none = std::find(v.begin(), v.end(), json("none")) != v.end();
  if (!has_none) return "";
  if (v.size() > 1) return "'none' cannot be combined with other report_to values";
  v = json::array();
  return "";
}

// Ports and counts given as a list of numbers: each a whole number, kept as an integer.
std::string finish_whole_numbers(json& v) {
  for (json& x : v) {
    const double d = x.get<double>();
    if (d != std::floor(d)) return "expected whole numbers, got " + x.dump();
    x = static_cast<int64_t>(d);
  }
  return "";
}

std::string finish_sampler(json& v) {
  const std::string& s = v.get_ref<const std::string&>();
  bool ok = !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
  return ok ? "" : "expected a sampler name: native, external_server or one registered by a plugin";
}

std::vector<FlagSpec> build_table() {
  std::vector<FlagSpec> t;
  FlagGroup group = FlagGroup::ModelData;
  auto add = [&](Def d) {
    d.s.group = group;
    t.push_back(std::move(d.s));
  };
  // ---- Model and data ----
  group = FlagGroup::ModelData;
  add(text("model", nullptr, "Hugging Face model directory, or ORG/NAME from the ModelScope / Hugging Face cache")
          .hint("PATH|ID"));
  add(text("model_revision", nullptr, "branch, tag or commit of a model from the Hugging Face cache (unset: main)"));
  add(boolean("use_hf", false, "look ORG/NAME up in the Hugging Face cache first, not ModelScope's (env USE_HF)"));
  add(text("model_type", nullptr, "model architecture; read from config.json when unset"));
  add(text("torch_dtype", nullptr, "bfloat16 | float16 | float32 (unset: bfloat16 on GPU, float32 on CPU)")
          .hint("DTYPE")
          .choices({"bfloat16", "float16", "float32"})
          .means("auto", nullptr).means("bf16", "bfloat16").means("fp16", "float16")
          .means("half", "float16").means("fp32", "float32").means("float", "float32"));
  add(text("train_type", "lora", "full | lora").hint("TYPE").alias("tuner_type")
          .choices({"full", "lora"})
          .note("(ms-swift's other tuners, e.g. qlora or adalora, are not built)"));
  add(integer("lora_rank", 8, "LoRA rank").at_least(1));
  add(integer("lora_alpha", 32, "LoRA alpha (scale = alpha / rank)").at_least(1));
  add(real("lora_dropout", 0.05, "dropout on the LoRA input").at_least(0).below(1));
  add(texts("target_modules", json::array({"all-linear"}), "modules LoRA adapts: all-linear or a list of names"));
  add(boolean("merge_lora", false, "LoRA: also write each checkpoint's merged model (checkpoint-N/merged)"));
  add(texts("dataset", json::array(), "JSONL/JSON/Parquet/CSV files, directories or ORG/NAME[:SUBSET]; `#N` takes "
            "N rows").hint("PATH..."));
  add(texts("val_dataset", json::array(), "validation data, same form as dataset").hint("PATH..."));
  add(real("split_dataset_ratio", 0.0, "fraction of dataset held out for validation when val_dataset is empty")
          .at_least(0).below(1));
  add(boolean("dataset_shuffle", true, "shuffle the training prompts"));
  add(boolean("skip_bad_rows", false,
              "skip (and count) dataset rows that cannot be used instead of stopping at the first one"));
  add(text("system", nullptr, "system prompt, or the path of a file that holds it (args.yaml records its text)"));
  add(text("template", nullptr,
           "chat format: chatml | qwen2 | qwen2_5 | qwen3 | llama3 | llama3_1 | jinja (the model's own template; unset: read from tokenizer_config.json)")
          .hint("NAME"));
  add(integer("max_length", nullptr, "limit on prompt + completion tokens (unset: the model's limit)")
          .at_least(1));
  add(text("truncation_strategy", "left", "left | right | delete: how a prompt over max_length is cut (delete skips the row)")
          .hint("HOW").choices({"left", "right", "delete"}));
  add(integer("seed", 42, "random seed (sampling seeds differ per completion)").at_least(0));
  add(boolean("use_cpu", false, "compute on the CPU even where a GPU is visible (else process LOCAL_RANK's GPU)"));
  add(text("output_dir", "output", "directory for checkpoints, logs and args.yaml").hint("PATH"));
  add(text("resume_from_checkpoint", nullptr, "checkpoint-<step> directory to continue from").hint("PATH"));
  add(boolean("gradient_checkpointing", true, "recompute activations in backward to save memory"));

  // ---- GRPO ----
  group = FlagGroup::Grpo;
  add(integer("num_generations", 8, "completions sampled per prompt (G)").at_least(2));
  add(integer("max_completion_length", 512, "most tokens sampled per completion").at_least(1));
  add(integer("per_device_train_batch_size", 1, "completions (not prompts) per process per micro-batch")
          .at_least(1));
  add(integer("per_device_eval_batch_size", 1, "completions per process per evaluation batch").at_least(1));
  add(integer("gradient_accumulation_steps", 1, "micro-batches per optimizer step").at_least(1));
  add(integer("steps_per_generation", nullptr,
              "micro-batches one generation batch is split into (unset: gradient_accumulation_steps; "
              "exclusive with generation_batch_size)").at_least(1));
  add(integer("generation_batch_size", nullptr,
              "completions per generation batch over all processes (unset: per_device_train_batch_size "
              "x world size x steps_per_generation)").at_least(1));
  add(integer("num_iterations", 1, "optimisation passes over each generation batch").at_least(1));
  add(real("beta", 0.04, "KL coefficient; 0 loads no reference model").at_least(0));
  add(real("epsilon", 0.2, "lower clipping range of the ratio").above(0));
  add(real("epsilon_high", nullptr, "upper clipping range (unset: epsilon; DAPO uses 0.28)").above(0));
  add(real("delta", nullptr, "upper cap on the unclipped ratio (two-sided clipping); > 1").above(1));
  add(text("loss_type", "grpo", "grpo | bnpo | dr_grpo | dapo").hint("TYPE")
          .choices(trainer::loss_type_spellings()));
  add(text("importance_sampling_level", "token", "token | sequence (GSPO)").hint("LEVEL")
          .choices({"token", "sequence"}));
  add(text("scale_rewards", "group", "group | batch | none (true = group, false = none)").hint("HOW")
          .choices({"group", "batch", "none"})
          .means("true", "group").means("false", "none"));
  add(real("temperature", 0.9, "sampling temperature").above(0));
  add(real("top_p", 0.9, "nucleus sampling mass").above(0).at_most(1));
  add(integer("top_k", 50, "sample among the k most likely tokens (0 or -1: off)").at_least(-1));
  add(real("min_p", 0.0, "drop tokens below min_p x the top probability").at_least(0).at_most(1));
  add(real("repetition_penalty", 1.0, "penalty on tokens already present (1: off)").above(0));
  add(texts("stop_words", json::array(), "strings that end a completion").hint("TEXT..."));
  add(boolean("dynamic_sample", false, "DAPO: keep only groups whose rewards differ, resampling prompts"));
  add(integer("max_resample_times", 3, "most resampling rounds for dynamic_sample").at_least(0));
  add(boolean("overlong_filter", false, "DAPO: no loss on truncated completions"));
  add(text("ref_model", nullptr, "reference model directory or ORG/NAME (unset: the initial policy)").hint("PATH"));
  add(boolean("sync_ref_model", false,
              "every ref_model_sync_steps, ref = alpha * policy + (1 - alpha) * ref (TR-DPO; full training)"));
  add(integer("ref_model_sync_steps", 512, "steps between reference-model syncs").at_least(1));
  add(real("ref_model_mixup_alpha", 0.6, "mixing weight of a reference-model sync").at_least(0).at_most(1));

  // ---- Rewards ----
  group = FlagGroup::Rewards;
  add(texts("reward_funcs", json::array(),
            "reward functions: accuracy, format, cosine, repetition, soft_overlong or a plugin's name"));
  add(reals("reward_weights", nullptr, "one weight per reward function, reward models last (unset: all 1.0)"));
  add(boolean("tolerate_reward_errors", false, "exit 0 even when a reward plugin failed on some batches"));
  add(texts("reward_model", json::array(), "reward model directories or ORG/NAMEs (sequence classification)").hint("PATH..."));
  add(real("cosine_min_len_value_wrong", -0.5, "cosine reward of a wrong answer at length 0"));
  add(real("cosine_max_len_value_wrong", 0.0, "cosine reward of a wrong answer at cosine_max_len"));
  add(real("cosine_min_len_value_correct", 1.0, "cosine reward of a right answer at length 0"));
  add(real("cosine_max_len_value_correct", 0.5, "cosine reward of a right answer at cosine_max_len"));
  add(integer("cosine_max_len", nullptr, "length scale of the cosine reward (unset: max_completion_length)")
          .at_least(1));
  add(integer("repetition_n_grams", 3, "n-gram size of the repetition penalty").at_least(1));
  add(real("repetition_max_penalty", -1.0, "most negative repetition penalty").at_most(0));
  add(integer("soft_max_length", nullptr, "soft_overlong L_max (unset: max_completion_length)").at_least(1));
  add(integer("soft_cache_length", nullptr, "soft_overlong L_cache: length of the penalty ramp; required with soft_overlong")
          .at_least(1));

  // ---- Plugins ----
  group = FlagGroup::Plugins;
  add(texts("plugins", json::array(), "plugin .so files to load").hint("PATH...").alias("external_plugins"));
  add(text("multi_turn_scheduler", nullptr, "multi-turn handler plugin: math_tip_trick, calculator or a plugin's name")
          .hint("NAME").alias("multi_turn_func"));
  add(integer("max_turns", nullptr, "most policy turns of a multi-turn rollout (unset: until it ends)").at_least(1));
  add(text("completion_length_limit_scope", "per_round", "multi-turn: max_completion_length per turn or in total")
          .hint("SCOPE").choices({"per_round", "total"}));
  add(real("multi_turn_timeout", 60.0, "seconds a multi-turn handler call may take (0: no limit)").at_least(0));
  add(mapping("plugin_args", "per-plugin options keyed by plugin name, e.g. '{\"my_reward\": {\"threshold\": 1024}}'"));
  add(text("sampler", "native", "sampler plugin: native (in-process) or external_server (rollout server over HTTP)")
          .hint("NAME").finish(finish_sampler));
  add(mapping("sampler_args", "options of the sampler, e.g. '{\"base_url\": \"http://127.0.0.1:8000\"}'"));
  add(text("plugin_isolation", "none", "none | process: score each reward plugin in a child process that may crash")
          .hint("HOW").choices({"none", "process"}));
  add(real("reward_timeout", 0.0, "isolated rewards: seconds a score() call may take (0: no limit)").at_least(0));

  // ---- Sampling backend and memory ----
  group = FlagGroup::Sampling;
  add(boolean("use_vllm", false,
              "fast sampling: sampler external_server when a server address is given, else native"));
  add(text("vllm_mode", "colocate", "colocate (sample in the training process) | server").hint("MODE")
          .choices({"colocate", "server"}));
  add(texts("vllm_server_base_url", json::array(),
            "rollout server URLs, e.g. http://10.0.0.2:8000; with several, each generation batch is spread over "
            "them and the weights go to all").hint("URL..."));
  add(texts("vllm_server_host", json::array(), "rollout server hosts (several: as vllm_server_base_url)")
          .hint("HOST..."));
  add(reals("vllm_server_port", json::array({8000}), "rollout server ports: one per host, or one for all")
          .at_least(1).at_most(65535).hint("PORT...").finish(finish_whole_numbers));
  add(integer("num_infer_workers", nullptr,
              "with --use_vllm true --vllm_mode server and no server address: start this many grpo-rollout "
              "servers and sample on them (ms-swift's separate inference workers; processes on this node)")
          .at_least(1).at_most(64));
  add(real("vllm_server_timeout", 240.0, "seconds to wait for the rollout server").above(0).hint("SECONDS"));
  add(real("vllm_gpu_memory_utilization", 0.9,
           "share of the GPU's memory the process may hold once the native sampler's KV cache is allocated")
          .above(0).at_most(1));
  add(integer("vllm_max_model_len", nullptr, "longest prompt + completion the sampler holds (unset: max_length)")
          .at_least(1));
  add(boolean("vllm_enable_prefix_caching", true, "reuse the KV cache of a prompt across its G completions"));
  add(integer("vllm_tensor_parallel_size", 1, "devices one sampler spans").alias("tensor_parallel_size")
          .not_built("tensor-parallel sampling is not built yet: every process samples on its own device; "
                     "leave it at 1"));
  add(integer("sleep_level", 0,
              "1 or 2: the native sampler frees its KV cache and CUDA graphs after each generation, for training "
              "(its weights are the policy's own: there is nothing more to free); 0: keeps them for the next")
          .at_least(0).at_most(2));
  add(boolean("offload_model", false,
              "on a GPU: the reference model and the gradient buffers wait in host memory while the sampler "
              "generates (the policy stays: the native sampler reads its weights)"));
  add(boolean("offload_optimizer", false,
              "on a GPU: AdamW's moments wait in host memory (pinned) except while the optimizer steps"));
  add(integer("move_model_batches", nullptr, "batches in which weights move to the sampler").at_least(1)
          .not_built("moving weights to the sampler in layer batches (ZeRO-3 style gathering) is not "
                     "built yet; drop this flag"));
  add(boolean("async_generate", false, "generate the next batch while training on this one (one step off-policy)"));
  add(boolean("vllm_importance_sampling_correction", false,
              "correct for the sampler's own log-probs (truncated importance sampling)"));
  add(text("vllm_importance_sampling_mode", "sequence_mask",
           "token_truncate | token_mask | sequence_truncate | sequence_mask").hint("MODE")
          .choices({"token_truncate", "token_mask", "sequence_truncate", "sequence_mask"}));
  add(real("vllm_importance_sampling_clip_max", 3.0, "cap of the importance ratio").above(0));

  // ---- Optimisation, logging, saving ----
  group = FlagGroup::Optimisation;
  add(real("learning_rate", 1e-6, "AdamW learning rate").at_least(0));
  add(real("weight_decay", 0.1, "AdamW weight decay").at_least(0));
  add(real("adam_beta1", 0.9, "AdamW beta1").at_least(0).below(1));
  add(real("adam_beta2", 0.95, "AdamW beta2").at_least(0).below(1));
  add(real("adam_epsilon", 1e-8, "AdamW epsilon").above(0));
  add(real("max_grad_norm", 1.0, "gradient clipping norm (0: no clipping)").at_least(0));
  add(text("lr_scheduler_type", "cosine", "cosine | linear | constant | constant_with_warmup").hint("TYPE")
          .choices({"cosine", "linear", "constant", "constant_with_warmup"}));
  add(real("warmup_ratio", 0.05, "fraction of the steps spent warming up").at_least(0).at_most(1));
  add(integer("warmup_steps", nullptr, "warm-up steps; overrides warmup_ratio").at_least(0));
  add(real("num_train_epochs", 1.0, "passes over the training prompts").above(0));
  add(integer("max_steps", nullptr, "optimizer steps to run; overrides num_train_epochs (-1: unset)")
          .at_least(1).means("-1", nullptr));
  add(integer("logging_steps", 5, "optimizer steps between log lines").at_least(1));
  add(integer("eval_steps", nullptr, "optimizer steps between evaluations (unset: save_steps)").at_least(1));
  add(integer("save_steps", 500, "optimizer steps between checkpoints (null: only at the end)").at_least(1));
  add(text("save_strategy", "steps",
           "steps: a checkpoint every save_steps, at the end and when a run stops | no: none (Hugging Face's flag)")
          .hint("WHEN").choices({"steps", "no"}));
  add(integer("save_total_limit", nullptr, "checkpoints kept; the oldest are deleted (unset: all)").at_least(1));
  add(boolean("log_completions", false, "write every completion to completions.jsonl"));
  add(text("log_level", "info", "trace | debug | info | warn | error (also GRPO_LOG_LEVEL)").hint("LEVEL")
          .choices({"trace", "debug", "info", "warn", "error"}));
  const std::string python_trackers =
      "is a Python service; grpo-host writes TensorBoard event files (report_to tensorboard) and "
      "logging.jsonl, which other tools can import";
  add(texts("report_to", json::array({"tensorboard"}), "tensorboard | none").hint("WHERE...")
          .choices({"tensorboard", "none"}).means("all", "tensorboard")
          .refuse_value("wandb", "Weights & Biases " + python_trackers)
          .refuse_value("swanlab", "SwanLab " + python_trackers)
          .refuse_value("mlflow", "MLflow " + python_trackers)
          .refuse_value("comet_ml", "Comet " + python_trackers)
          .refuse_value("neptune", "Neptune " + python_trackers)
          .refuse_value("clearml", "ClearML " + python_trackers)
          .finish(finish_report_to));
  // Kept for ms-swift scripts; no command reads them yet, and warn_unused_flags says so when one is given.
  add(integer("dataloader_num_workers", 1, "accepted, no effect yet: batches are built in the training loop")
          .at_least(0));
  add(integer("dataset_num_proc", 1, "accepted, no effect yet: prompts are tokenised once at start-up").at_least(1));
  add(integer("num_threads", 0, "CPU threads for compute (0: one per core)").at_least(0));

  // ---- Flags of ms-swift scripts ----
  group = FlagGroup::Compat;
  add(text("rlhf_type", "grpo", "accepted: grpo is the only mode").hint("TYPE").choices({"grpo"})
          .note("(grpo-host trains GRPO only; use ms-swift for DPO, KTO, PPO and the others)"));
  add(integer("ddp_timeout", 1800, "seconds a collective waits for the other processes").at_least(1).hint("SECONDS"));
  add(integer("ddp_bucket_cap_mb", 25, "MB per bucket of gradients averaged over the processes").at_least(1).hint("MB"));
  add(text("ddp_backend", nullptr,
           "nccl | gloo: what carries the ranks' device tensors (unset: NCCL when every rank has a GPU of its own, "
           "else Gloo; host-side traffic is always Gloo's)")
          .choices({"nccl", "gloo"}));
  add(text("loss_scale", nullptr, "accepted: last_round and default both put loss on exactly the sampled tokens")
          .hint("NAME").choices({"last_round", "default"}));
  add(text("deepspeed", nullptr, "ZeRO by DeepSpeed's name: zero0, zero1 (optimizer state sharded), zero2 (and "
           "gradients), or a DeepSpeed JSON config").hint("CONFIG").finish(finish_deepspeed));
  add(integer("zero_stage", 0, "ZeRO stage: 0 none, 1 optimizer state, 2 and gradients").finish(finish_zero_stage));
  add(text("attn_impl", nullptr, "refused").hint("NAME").refused("grpo-host picks its attention kernel itself for "
      "the device it runs on; drop --attn_impl"));
  add(boolean("padding_free", false, "refused").refused("padding_free is a transformers/flash-attn option; grpo-host "
      "lays out its batches itself, drop it"));
  add(boolean("use_liger_kernel", false, "refused").refused("Liger kernels are Python/Triton; grpo-host already "
      "computes log-probs in chunks so no [batch, length, vocab] tensor is built, drop it"));
  add(boolean("load_from_cache_file", false, "refused").refused("grpo-host keeps no dataset cache between runs "
      "(prompts are tokenised at start-up); drop it"));
  add(boolean("dataloader_drop_last", true, "refused when false").refused(
      "GRPO always drops an incomplete last generation batch so that every prompt keeps its "
      "num_generations completions; drop this flag"));
  add(boolean("ds3_gather_for_generation", true, "refused when false").refused(
      "there is no ZeRO-3 in grpo-host: every process holds the full weights it samples with; drop this flag"));
  add(integer("sequence_parallel_size", 1, "not built").not_built(
      "sequence parallelism is not built yet; leave it at 1 (for long sequences lower "
      "max_completion_length or keep gradient_checkpointing on)"));
  add(boolean("gc_collect_after_offload", false,
              "after offload_model / offload_optimizer: the GPU blocks they free go back to the driver (for "
              "another process on the GPU) instead of staying in the allocator's cache"));
  add(texts("vllm_device", json::array({"auto"}), "refused").refused(
      "grpo-host samples on each process's own device, or on a rollout server (--vllm_mode server); "
      "drop --vllm_device"));
  add(integer("vllm_max_num_seqs", 256,
              "rows the native sampler decodes at once on a GPU; more wait for a finished row's slot").at_least(1));
  add(boolean("vllm_enforce_eager", false, "the native sampler on a GPU decodes without CUDA graphs"));
  add(text("vllm_limit_mm_per_prompt", nullptr, "refused").refused("multimodal inputs are not supported by grpo-host; drop this flag"));
  add(boolean("use_lmdeploy", false, "refused").refused(
      "LMDeploy is a Python engine (and left ms-swift in 3.5); grpo-host uses its native sampler or a "
      "rollout server, drop --use_lmdeploy"));
  add(integer("mini_batch_size", nullptr, "refused").refused(
      "mini_batch_size left ms-swift in 3.4; for several optimizer steps per generation set "
      "--steps_per_generation to a multiple of --gradient_accumulation_steps"));
  add(integer("num_completions_to_print", nullptr, "refused").refused(
      "printing completions is a wandb/rich feature; use --log_completions true and read completions.jsonl"));
  add(boolean("wandb_log_unique_prompts", false, "refused").refused(
      "wandb is not supported; use --log_completions true and read completions.jsonl"));
  return t;
}

std::string normalise(std::string_view name) {
  std::string out(name);
  std::replace(out.begin(), out.end(), '-', '_');
  return out;
}

}  // namespace

const std::vector<FlagSpec>& flag_table() {
  static const std::vector<FlagSpec> table = build_table();
  return table;
}

const FlagSpec* find_flag(std::string_view name) {
  const std::string key = normalise(name);
  for (const FlagSpec& spec : flag_table()) {
    if (spec.name == key) return &spec;
    for (const std::string& a : spec.aliases)
      if (a == key) return &spec;
  }
  return nullptr;
}

std::string closest_flag_name(std::string_view name) {
  std::vector<std::string> names;
  for (const FlagSpec& spec : flag_table()) {
    names.push_back(spec.name);
    names.insert(names.end(), spec.aliases.begin(), spec.aliases.end());
  }
  return util::closest_name(normalise(name), names);
}

std::string_view group_title(FlagGroup group) {
  switch (group) {
    case FlagGroup::ModelData: return "Model and data";
    case FlagGroup::Grpo: return "GRPO";
    case FlagGroup::Rewards: return "Rewards";
    case FlagGroup::Plugins: return "Plugins";
    case FlagGroup::Sampling: return "Sampling backend and memory";
    case FlagGroup::Optimisation: return "Optimisation, logging, saving";
    case FlagGroup::Compat: return "Flags of ms-swift scripts (accepted where grpo-host has an equivalent)";
  }
  return "";
}

}  // namespace grpo::config
