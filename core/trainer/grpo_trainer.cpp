#include "trainer/grpo_trainer.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <grpo/sampler.h>
#include <spdlog/spdlog.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/serialize.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/threads.h"
#include "model/weights.h"
#include "plugins/plugin_options.h"
#include "trainer/checkpoint.h"

namespace grpo::trainer {

namespace fs = std::filesystem;

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

LossType loss_type_of(const std::string& s) {
  if (s == "bnpo") return LossType::Bnpo;
  if (s == "dr_grpo") return LossType::DrGrpo;
  if (s == "dapo") return LossType::Dapo;
  return LossType::Grpo;
}

ScaleRewards scale_of(const std::string& s) {
  if (s == "batch") return ScaleRewards::Batch;
  if (s == "none") return ScaleRewards::None;
  return ScaleRewards::Group;
}

at::ScalarType dtype_of(const std::string& s) {
  if (s == "bfloat16") return at::kBFloat16;
  if (s == "float16") return at::kHalf;
  return at::kFloat;  // the CPU default
}

double rss_gb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);
}

}  // namespace

void check_trainer_support(const config::Config& cfg) {
  std::vector<std::string> problems;
  auto refuse = [&](bool bad, const std::string& why) {
    if (bad) problems.push_back(why);
  };
  refuse(cfg.get_string("train_type") != "full",
         "--train_type lora is not built yet: train with --train_type full (LoRA comes with the next trainer release)");
  refuse(cfg.get_int("num_iterations") != 1, "--num_iterations > 1 is not built yet (needs old log-probs): use 1");
  refuse(cfg.get_int("steps_per_generation") != cfg.get_int("gradient_accumulation_steps"),
         "--steps_per_generation / --generation_batch_size other than one optimizer step per generation batch are "
         "not built yet: leave them unset");
  refuse(cfg.get_bool("dynamic_sample"), "--dynamic_sample is not built yet: drop it");
  refuse(cfg.get_bool("async_generate"), "--async_generate is not built yet: drop it");
  refuse(!cfg.get_strings("val_dataset").empty() || cfg.get_double("split_dataset_ratio") > 0,
         "evaluation (--val_dataset, --split_dataset_ratio) is not built yet: drop them");
  refuse(cfg.get_string("sampler") != "native",
         "--sampler " + cfg.get_string("sampler") + " is not built yet: the native sampler is (drop --use_vllm server "
         "settings)");
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
      "num_iterations", "dynamic_sample", "async_generate", "resume_from_checkpoint", "val_dataset",
      "split_dataset_ratio", "max_length", "truncation_strategy"};
  for (const config::FlagSpec& flag : config::flag_table())
    if (flag.availability == config::Availability::Available && cfg.is_set(flag.name) && !kUsed.count(flag.name))
      spdlog::warn("--{} is accepted but has no effect in this trainer yet", flag.name);
  // Defaults that ms-swift turns on: said out loud rather than refused.
  if (cfg.get_bool("gradient_checkpointing"))
    spdlog::warn("gradient_checkpointing: not built yet, activations are kept (use --gradient_checkpointing false "
                 "to silence this)");
  if (!problems.empty()) {
    std::string msg = "this configuration asks for what the trainer does not do yet:";
    for (const auto& p : problems) msg += "\n  - " + p;
    throw config::ConfigError(msg);
  }
}

GrpoTrainer::GrpoTrainer(const config::Config& cfg)
    : cfg_((check_trainer_support(cfg), cfg)),  // refuse what is not built before loading anything
      model_dir_(cfg.get_string("model")),
      output_dir_(cfg.get_string("output_dir")),
      tokenizer_(tok::Tokenizer::from_dir(cfg.get_string("model"))),
      registry_(plugins::PluginRegistry::discover({cfg.get_strings("plugins"), true, true, ""})) {
  torch::manual_seed(static_cast<uint64_t>(cfg.get_int("seed")));
  model::configure_cpu_threads(static_cast<int>(cfg.get_int("num_threads")));
  fs::create_directories(output_dir_);
  cfg.write_args_yaml((fs::path(output_dir_) / "args.yaml").string());

  G_ = cfg.get_int("num_generations");
  micro_batch_ = cfg.get_int("per_device_train_batch_size");
  prompts_per_step_ = cfg.get_int("generation_batch_size") / G_;
  const at::ScalarType dtype = dtype_of(cfg.get_string("torch_dtype"));
  const std::string resume = cfg.get_string("resume_from_checkpoint");
  policy_ = model::load_model(resume.empty() ? model_dir_ : resume, dtype);
  policy_->train();
  if (cfg.get_double("beta") != 0.0) {  // a frozen copy of the initial policy
    reference_ = model::load_model(cfg.get_string("ref_model").empty() ? model_dir_ : cfg.get_string("ref_model"), dtype);
    for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  }

  const tok::ChatFamily family = tok::chat_family_for(tokenizer_, cfg.get_string("template"));
  prompts_ = std::make_unique<PromptSource>(cfg.get_strings("dataset"), tokenizer_, family,
                                            data::load_system_prompt(cfg.get_string("system")),
                                            cfg.get_bool("dataset_shuffle"), static_cast<uint64_t>(cfg.get_int("seed")),
                                            cfg.is_null("max_length")
                                                ? 0
                                                : std::max<int64_t>(1, cfg.get_int("max_length") -
                                                                           cfg.get_int("max_completion_length")),
                                            cfg.get_string("truncation_strategy"));
  if (prompts_->dropped())
    spdlog::warn("{} prompts longer than max_length - max_completion_length were dropped (truncation_strategy "
                 "delete)",
                 prompts_->dropped());
  const int64_t steps_per_epoch =
      (static_cast<int64_t>(prompts_->size()) + prompts_per_step_ - 1) / prompts_per_step_;
  max_steps_ = cfg.is_null("max_steps") ? static_cast<int64_t>(std::ceil(cfg.get_double("num_train_epochs") *
                                                                          static_cast<double>(steps_per_epoch)))
                                        : cfg.get_int("max_steps");

  plugin_metrics_ = std::make_shared<plugins::MetricsSink>();
  const std::string run_config = cfg.to_json().dump();
  rewards_ = std::make_unique<rewards::RewardSet>(registry_, cfg.get_strings("reward_funcs"),
                                                  cfg.get_doubles("reward_weights"), cfg.to_json(),
                                                  cfg.get_json("plugin_args"), plugin_metrics_,
                                                  static_cast<int>(cfg.get_int("num_threads")));

  // The sampler gets the policy's parameters as views: in process it aliases
  // them, so every optimizer step is visible to the next generation for free.
  plugins::ResolvedPlugin sampler = registry_.require(cfg.get_string("sampler"), GRPO_SAMPLER_INTERFACE);
  nlohmann::json sampler_args = cfg.get_json("sampler_args");
  sampler_args["model"] = model_dir_;
  sampler_args["torch_dtype"] = cfg.get_string("torch_dtype");
  sampler_args["num_threads"] = cfg.get_int("num_threads");
  sampler_ = plugins::SamplerClient::create(sampler, plugins::resolve_plugin_options(sampler.info, {}, sampler_args),
                                            plugin_metrics_, run_config);
  views_ = std::make_unique<WeightViews>(*policy_);
  sampler_->load_weights(views_->tensors(), GRPO_WEIGHTS_VIEW | GRPO_WEIGHTS_LAST_BUCKET);

  sample_options_.temperature = cfg.get_double("temperature");
  sample_options_.top_p = cfg.get_double("top_p");
  sample_options_.top_k = static_cast<int32_t>(cfg.get_int("top_k"));
  sample_options_.min_p = cfg.get_double("min_p");
  sample_options_.repetition_penalty = cfg.get_double("repetition_penalty");
  sample_options_.max_new_tokens = static_cast<int32_t>(cfg.get_int("max_completion_length"));
  sample_options_.stop_strings = cfg.get_strings("stop_words");

  loss_options_.loss_type = loss_type_of(cfg.get_string("loss_type"));
  loss_options_.level = cfg.get_string("importance_sampling_level") == "sequence" ? IsLevel::Sequence : IsLevel::Token;
  loss_options_.epsilon_low = cfg.get_double("epsilon");
  loss_options_.epsilon_high = cfg.get_double("epsilon_high");
  if (!cfg.is_null("delta")) loss_options_.delta = cfg.get_double("delta");
  loss_options_.beta = cfg.get_double("beta");
  loss_options_.gradient_accumulation_steps = cfg.get_int("gradient_accumulation_steps");
  loss_options_.max_completion_length = cfg.get_int("max_completion_length");

  optimizer_ = make_adamw(cfg, *policy_);
  schedule_ = std::make_unique<LrSchedule>(cfg.get_string("lr_scheduler_type"), cfg.get_double("learning_rate"),
                                           max_steps_, cfg.is_null("warmup_steps") ? -1 : cfg.get_int("warmup_steps"),
                                           cfg.get_double("warmup_ratio"));
  const auto report_to = cfg.get_strings("report_to");
  if (!resume.empty()) resume_from(resume);
  log_ = std::make_unique<RunLog>(output_dir_,
                                  std::find(report_to.begin(), report_to.end(), "tensorboard") != report_to.end());
  if (cfg.get_bool("log_completions")) completion_log_ = std::make_unique<CompletionLog>(output_dir_);
  spdlog::info("training {} for {} steps: {} prompts x {} completions per step, {} rows", model_dir_, max_steps_,
               prompts_per_step_, G_, prompts_->size());
}

namespace {

// Ctrl-C / SIGTERM: finish the current step, save a checkpoint, exit cleanly.
std::atomic<bool> g_stop_requested{false};
extern "C" void request_stop(int) { g_stop_requested = true; }

}  // namespace

void GrpoTrainer::train() {
  const int64_t logging_steps = std::max<int64_t>(1, cfg_.get_int("logging_steps"));
  const int64_t save_steps = cfg_.is_null("save_steps") ? 0 : cfg_.get_int("save_steps");
  auto previous_int = std::signal(SIGINT, request_stop), previous_term = std::signal(SIGTERM, request_stop);
  while (global_step_ < max_steps_ && !g_stop_requested) {
    log_->add(step());
    if (global_step_ % logging_steps == 0 || global_step_ == max_steps_) log_->flush(global_step_, max_steps_);
    if (save_steps > 0 && global_step_ % save_steps == 0 && global_step_ < max_steps_) save_checkpoint();
  }
  if (g_stop_requested) {
    log_->flush(global_step_, max_steps_);
    spdlog::warn("stopped by a signal at step {}/{}: saving a checkpoint", global_step_, max_steps_);
  }
  save_checkpoint();
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
}

// One GRPO step, top to bottom.
Metrics GrpoTrainer::step() {
  const double start = now_s();
  Metrics m;
  std::vector<const Prompt*> prompts = prompts_->next(static_cast<size_t>(prompts_per_step_));
  Rollout rollout = generate(prompts, m);  // G completions per prompt, through the sampler plugin
  Advantages adv = score(rollout, m);      // reward plugins -> group-relative advantages
  optimize(rollout, adv, m);               // log-probs, loss, backward, clip, AdamW (the sampler sees it in place)
  ++global_step_;
  m["global_step"] = static_cast<double>(global_step_);
  m["epoch"] = prompts_->epoch();
  m["step_time"] = now_s() - start;
  m["memory/rss_gb"] = rss_gb();
  for (const auto& [name, value] : plugin_metrics_->drain()) m[name] = value;
  return m;
}

Rollout GrpoTrainer::generate(const std::vector<const Prompt*>& prompts, Metrics& m) {
  const double start = now_s();
  std::vector<plugins::SampleRequest> requests;
  const auto seed = static_cast<uint64_t>(cfg_.get_int("seed"));
  for (size_t p = 0; p < prompts.size(); ++p) {
    plugins::SampleRequest r;
    r.prompt_ids = prompts[p]->ids;
    r.messages_json = prompts[p]->messages_json;
    r.n = static_cast<uint32_t>(G_);
    r.seed = seed * 1000003u + static_cast<uint64_t>(global_step_) * 65537u + p;  // never the same twice
    if (auto eos = tokenizer_.eos_id()) r.stop_ids.push_back(*eos);
    requests.push_back(std::move(r));
  }
  std::vector<plugins::SampledCompletion> done = sampler_->generate(requests, sample_options_);
  Rollout out;
  double lengths = 0, terminated = 0, terminated_len = 0, truncated = 0;
  double min_len = 1e30, max_len = 0;
  for (const auto& c : done) {
    const Prompt& prompt = *prompts[c.request];
    out.sequences.push_back({prompt.ids, c.ids, c.truncated});
    plugins::RewardInput in;
    in.prompt_messages_json = prompt.messages_json;
    in.completion = c.text;
    in.completion_ids = c.ids;
    in.ids_known = true;
    in.is_truncated = c.truncated;
    in.prompt_index = static_cast<int64_t>(c.request);
    in.columns = prompt.columns;
    out.reward_inputs.push_back(std::move(in));
    const auto len = static_cast<double>(c.ids.size());
    lengths += len;
    min_len = std::min(min_len, len);
    max_len = std::max(max_len, len);
    if (c.truncated) ++truncated;
    else ++terminated, terminated_len += len;
  }
  const auto n = static_cast<double>(done.size());
  m["completions/mean_length"] = lengths / n;
  m["completions/min_length"] = min_len;
  m["completions/max_length"] = max_len;
  m["completions/clipped_ratio"] = truncated / n;  // truncated by length, not PPO clipping
  m["completions/mean_terminated_length"] = terminated ? terminated_len / terminated : 0.0;
  m["num_tokens"] = lengths;
  m["time/generate"] = now_s() - start;
  return out;
}

Advantages GrpoTrainer::score(const Rollout& rollout, Metrics& m) {
  const double start = now_s();
  plugins::TrainerState state{global_step_, max_steps_, prompts_->epoch()};
  rewards::RewardMatrix R = rewards_->score(rollout.reward_inputs, state);
  const auto N = static_cast<int64_t>(rollout.reward_inputs.size()), F = static_cast<int64_t>(R.names.size());
  at::Tensor rnf = at::empty({N, F}, at::kDouble);
  for (int64_t f = 0; f < F; ++f) {
    for (int64_t i = 0; i < N; ++i) rnf[i][f] = R.by_fn[static_cast<size_t>(f)][static_cast<size_t>(i)];
    m["rewards/" + R.names[static_cast<size_t>(f)] + "/mean"] = rewards::nanmean(R.by_fn[static_cast<size_t>(f)]);
    m["rewards/" + R.names[static_cast<size_t>(f)] + "/std"] = rewards::nanstd(R.by_fn[static_cast<size_t>(f)]);
  }
  Advantages adv = compute_advantages(rnf, rewards_->weights(), G_, scale_of(cfg_.get_string("scale_rewards")));
  if (adv.all_nan_rows > 0)
    spdlog::warn("{} of {} completions got no reward from any function (all NaN): their advantage is 0",
                 adv.all_nan_rows, N);
  if (completion_log_) completion_log_->write(global_step_ + 1, rollout.reward_inputs, R, adv.advantages);
  m["reward"] = rewards::nanmean(R.total);
  m["reward_std"] = rewards::nanstd(R.total);
  m["frac_reward_zero_std"] = adv.frac_zero_std;
  m["time/reward"] = now_s() - start;
  return adv;
}

void GrpoTrainer::optimize(const Rollout& rollout, const Advantages& adv, Metrics& m) {
  double logprob_s = 0, backward_s = 0;
  const auto N = static_cast<int64_t>(rollout.sequences.size());
  const bool overlong_filter = cfg_.get_bool("overlong_filter");
  // dapo normalises by the active tokens of the whole generation batch.
  double active = 0;
  for (const auto& s : rollout.sequences)
    if (!(overlong_filter && s.truncated)) active += static_cast<double>(s.completion_ids.size());
  loss_options_.dapo_active_tokens = active;
  const model::LogprobOptions lp{cfg_.get_double("temperature"), 256, /*entropy=*/true};
  at::Tensor advantages = adv.advantages.to(at::kFloat);
  Metrics sums;
  double micro_batches = 0;
  for (int64_t b0 = 0; b0 < N; b0 += micro_batch_) {
    const int64_t n = std::min(micro_batch_, N - b0);
    std::vector<RolloutSequence> part(rollout.sequences.begin() + b0, rollout.sequences.begin() + b0 + n);
    RolloutBatch batch = make_rollout_batch(part, 0, overlong_filter);
    double t0 = now_s();
    model::TokenLogprobs logp = completion_logprobs(*policy_, batch, lp);
    at::Tensor ref;
    if (reference_) {
      torch::NoGradGuard no_grad;
      ref = completion_logprobs(*reference_, batch, lp).logprobs;
    }
    // On-policy: old = logp.detach() (ratio 1; the loss is near 0 but its gradient is not).
    LossOutput out = grpo_loss({logp.logprobs, {}, ref, advantages.narrow(0, b0, n), batch.completion_mask}, loss_options_);
    double t1 = now_s();
    out.loss.backward();
    backward_s += now_s() - t1;
    logprob_s += t1 - t0;
    sums["loss"] += out.loss.item<double>();
    at::Tensor mask = batch.completion_mask;
    if (mask.sum().item<double>() > 0)
      sums["entropy"] += ((logp.entropy * mask).sum() / mask.sum()).item<double>();
    for (const auto& [k, v] : out.metrics) sums[k] += v;
    ++micro_batches;
  }
  const double t_opt = now_s();
  double grad_norm = torch::nn::utils::clip_grad_norm_(policy_->parameters(), cfg_.get_double("max_grad_norm"));
  const double lr = schedule_->lr(global_step_);
  if (active > 0) {  // nothing carried loss (every row filtered): no update at all, not even weight decay
    set_learning_rate(*optimizer_, lr);
    optimizer_->step();
  }
  optimizer_->zero_grad();
  for (const auto& [k, v] : sums) m[k] = k == "loss" ? v : v / micro_batches;  // the loss is already / GA
  m["grad_norm"] = grad_norm;
  m["learning_rate"] = lr;
  m["time/logprob"] = logprob_s;
  m["time/backward"] = backward_s;
  m["time/optimizer"] = now_s() - t_opt;
  m["time/weight_sync"] = 0;  // the in-process sampler aliases the weights
}

// Everything a resumed run needs to continue exactly: the weights (the
// checkpoint's model), AdamW's moments, the step, and the prompt order.
void GrpoTrainer::save_checkpoint() {
  const std::string dir = trainer::save_checkpoint(
      *policy_, cfg_, global_step_, model_dir_,
      {{"global_step", global_step_}, {"max_steps", max_steps_}, {"epoch", prompts_->epoch()},
       {"prompts", prompts_->state()}},
      [&](const std::string& tmp) { torch::save(*optimizer_, (fs::path(tmp) / "optimizer.pt").string()); });
  (void)dir;
}

void GrpoTrainer::resume_from(const std::string& dir) {
  const fs::path state_path = fs::path(dir) / "trainer_state.json", optimizer_path = fs::path(dir) / "optimizer.pt";
  if (!fs::exists(state_path) || !fs::exists(optimizer_path))
    throw config::ConfigError("--resume_from_checkpoint " + dir +
                              ": not a training checkpoint (needs trainer_state.json and optimizer.pt)");
  nlohmann::json state = nlohmann::json::parse(std::ifstream(state_path));
  global_step_ = state.at("global_step").get<int64_t>();
  prompts_->restore(state.at("prompts"));
  torch::load(*optimizer_, optimizer_path.string());
  spdlog::info("resumed from {} at step {}", dir, global_step_);
}

}  // namespace grpo::trainer
