#include "trainer/grpo_trainer.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <random>

#include <grpo/sampler.h>
#include <spdlog/spdlog.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/types.h>
#include <torch/utils.h>

#include "model/lora.h"
#include "model/threads.h"
#include "model/weights.h"
#include "plugins/plugin_error.h"
#include "trainer/checkpoint.h"
#include "trainer/importance_sampling.h"
#include "trainer/progress_line.h"
#include "util/clock.h"

namespace grpo::trainer {

using util::now_s;

namespace fs = std::filesystem;

namespace {

LossType loss_type_of(const std::string& s) {
  if (s == "bnpo") return LossType::Bnpo;
  if (s == "dr_grpo") return LossType::DrGrpo;
  if (s == "dapo") return LossType::Dapo;
  return LossType::Grpo;
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

// Training and validation prompts: --val_dataset, or a seeded random
// split_dataset_ratio of --dataset held out (at least one row).
std::pair<std::vector<data::Row>, std::vector<data::Row>> training_and_validation_rows(const config::Config& cfg,
                                                                                       data::BadRows& bad) {
  std::vector<data::Row> train = load_dataset_rows(cfg.get_strings("dataset"), &bad), val;
  if (!cfg.get_strings("val_dataset").empty()) return {train, load_dataset_rows(cfg.get_strings("val_dataset"), &bad)};
  const double ratio = cfg.get_double("split_dataset_ratio");
  if (ratio <= 0) return {train, val};
  std::vector<size_t> order(train.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(static_cast<uint64_t>(cfg.get_int("seed"))));
  const auto held = std::max<size_t>(1, static_cast<size_t>(std::lround(ratio * static_cast<double>(train.size()))));
  if (held >= train.size())
    throw config::ConfigError("--split_dataset_ratio " + std::to_string(ratio) + " leaves no training rows out of " +
                              std::to_string(train.size()) + ": lower it or give --val_dataset");
  std::vector<data::Row> kept;
  for (size_t i = 0; i < order.size(); ++i) (i < held ? val : kept).push_back(train[order[i]]);
  return {kept, val};
}

}  // namespace

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
  ga_ = cfg.get_int("gradient_accumulation_steps");
  prompts_per_generation_ = cfg.get_int("generation_batch_size") / G_;
  const int64_t steps_per_generation = cfg.get_int("steps_per_generation"), iterations = cfg.get_int("num_iterations");
  async_ = cfg.get_bool("async_generate");
  // Completions from other weights than the trainer's: correct for the
  // sampler's log-probs (on by default with async_generate, as TRL's is).
  is_correction_ = cfg.get_bool("vllm_importance_sampling_correction") ||
                   (async_ && !cfg.is_set("vllm_importance_sampling_correction"));
  // The policy changes while a generation batch is still in use: its ratio
  // needs the log-probs of the weights that sampled it (grpo.md §3).
  needs_old_logp_ = iterations > 1 || steps_per_generation > ga_ || async_ || is_correction_;
  const at::ScalarType dtype = dtype_of(cfg.get_string("torch_dtype"));
  const std::string resume = cfg.get_string("resume_from_checkpoint");
  lora_ = cfg.get_string("train_type") == "lora";
  policy_ = load_policy(cfg, dtype);
  policy_->train();
  policy_->set_gradient_checkpointing(cfg.get_bool("gradient_checkpointing"));
  // The reference: under LoRA the policy with its adapters disabled (no
  // second copy), else a frozen copy of the initial policy or --ref_model.
  if (cfg.get_double("beta") != 0.0 && (!lora_ || !cfg.get_string("ref_model").empty())) {
    reference_ = model::load_model(cfg.get_string("ref_model").empty() ? model_dir_ : cfg.get_string("ref_model"), dtype);
    for (auto& p : reference_->parameters()) p.set_requires_grad(false);
  }

  PromptFormat format{&tokenizer_, tok::chat_family_for(tokenizer_, cfg.get_string("template")),
                      data::load_system_prompt(cfg.get_string("system")),
                      cfg.is_null("max_length")
                          ? 0
                          : std::max<int64_t>(1, cfg.get_int("max_length") - cfg.get_int("max_completion_length")),
                      cfg.get_string("truncation_strategy")};
  data::BadRows bad{cfg.get_bool("skip_bad_rows")};
  auto [train_rows, val_rows] = training_and_validation_rows(cfg, bad);
  const auto seed = static_cast<uint64_t>(cfg.get_int("seed"));
  prompts_ = std::make_unique<PromptSource>(std::move(train_rows), format, cfg.get_bool("dataset_shuffle"), seed, &bad);
  if (!val_rows.empty())
    val_prompts_ = std::make_unique<PromptSource>(std::move(val_rows), format, false, seed, &bad, "validation");
  if (bad.count) spdlog::warn("skipped {} unusable dataset rows (--skip_bad_rows); the first: {}", bad.count, bad.first);
  if (prompts_->dropped())
    spdlog::warn("{} prompts longer than max_length - max_completion_length were dropped (truncation_strategy "
                 "delete)",
                 prompts_->dropped());
  // Optimizer steps: each generation batch feeds steps_per_generation
  // micro-batches, num_iterations times, GA micro-batches per step.
  const double generations_per_epoch =
      std::ceil(static_cast<double>(prompts_->size()) / static_cast<double>(prompts_per_generation_));
  const double steps_per_epoch =
      generations_per_epoch * static_cast<double>(steps_per_generation * iterations) / static_cast<double>(ga_);
  max_steps_ = cfg.is_null("max_steps")
                   ? std::max<int64_t>(1, static_cast<int64_t>(std::ceil(cfg.get_double("num_train_epochs") * steps_per_epoch)))
                   : cfg.get_int("max_steps");

  plugin_metrics_ = std::make_shared<plugins::MetricsSink>();
  rewards_ = std::make_unique<rewards::RewardSet>(registry_, cfg.get_strings("reward_funcs"),
                                                  cfg.get_doubles("reward_weights"), cfg.to_json(),
                                                  cfg.get_json("plugin_args"), plugin_metrics_,
                                                  static_cast<int>(cfg.get_int("num_threads")));

  create_sampler(dtype);  // trainer_sampler.cpp

  sample_options_.temperature = cfg.get_double("temperature");
  sample_options_.top_p = cfg.get_double("top_p");
  sample_options_.top_k = static_cast<int32_t>(cfg.get_int("top_k"));
  sample_options_.min_p = cfg.get_double("min_p");
  sample_options_.repetition_penalty = cfg.get_double("repetition_penalty");
  sample_options_.max_new_tokens = static_cast<int32_t>(cfg.get_int("max_completion_length"));
  sample_options_.stop_strings = cfg.get_strings("stop_words");

  is_mode_ = is_correction_mode(cfg.get_string("vllm_importance_sampling_mode"));
  loss_options_.loss_type = loss_type_of(cfg.get_string("loss_type"));
  loss_options_.level = cfg.get_string("importance_sampling_level") == "sequence" ? IsLevel::Sequence : IsLevel::Token;
  loss_options_.epsilon_low = cfg.get_double("epsilon");
  loss_options_.epsilon_high = cfg.get_double("epsilon_high");
  if (!cfg.is_null("delta")) loss_options_.delta = cfg.get_double("delta");
  loss_options_.beta = cfg.get_double("beta");
  loss_options_.gradient_accumulation_steps = ga_;
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
  spdlog::info("training {} for {} steps: {} prompts x {} completions per generation batch, {} rows{}", model_dir_,
               max_steps_, prompts_per_generation_, G_, prompts_->size(),
               val_prompts_ ? ", " + std::to_string(val_prompts_->size()) + " validation rows" : "");
}

namespace {

// Ctrl-C / SIGTERM: finish the current step, save a checkpoint, exit cleanly.
std::atomic<bool> g_stop_requested{false};
extern "C" void request_stop(int) { g_stop_requested = true; }

}  // namespace

void GrpoTrainer::train() {
  const int64_t logging_steps = std::max<int64_t>(1, cfg_.get_int("logging_steps"));
  const int64_t save_steps = cfg_.is_null("save_steps") ? 0 : cfg_.get_int("save_steps");
  const int64_t eval_steps = cfg_.is_null("eval_steps") ? 0 : cfg_.get_int("eval_steps");
  ProgressLine progress(max_steps_);
  auto previous_int = std::signal(SIGINT, request_stop), previous_term = std::signal(SIGTERM, request_stop);
  std::string plugin_failure;  // a sampler (e.g. a rollout server gone away) or reward plugin that failed
  while (global_step_ < max_steps_ && !g_stop_requested) {
    try {
      Metrics m = step();
      log_->add(m);
      progress.update(global_step_, m);
      if (global_step_ % logging_steps == 0 || global_step_ == max_steps_) {
        progress.clear();
        log_->flush(global_step_, max_steps_);
      }
      if (val_prompts_ && eval_steps > 0 && (global_step_ % eval_steps == 0 || global_step_ == max_steps_)) {
        progress.clear();
        log_->write(global_step_, evaluate());
      }
    } catch (const plugins::PluginError& e) {  // in a step or in evaluation
      plugin_failure = e.what();
      break;
    }
    if (save_steps > 0 && global_step_ % save_steps == 0 && global_step_ < max_steps_) save_checkpoint();
  }
  progress.clear();
  if (!plugin_failure.empty()) {
    // Finished steps are kept: the run continues from them once the plugin works again.
    log_->flush(global_step_, max_steps_);
    spdlog::error("stopped at step {}/{}: {}", global_step_, max_steps_, plugin_failure);
    std::string saved = "no step had finished, so there is no checkpoint";
    if (global_step_ > 0) {
      save_checkpoint();
      saved = "saved " + (fs::path(output_dir_) / ("checkpoint-" + std::to_string(global_step_))).string() +
              ": fix that and continue with --resume_from_checkpoint on it";
    }
    std::signal(SIGINT, previous_int);
    std::signal(SIGTERM, previous_term);
    throw std::runtime_error("training stopped at step " + std::to_string(global_step_) + "/" +
                             std::to_string(max_steps_) + " because a plugin failed (above); " + saved);
  }
  if (g_stop_requested) {
    log_->flush(global_step_, max_steps_);
    spdlog::warn("stopped by a signal at step {}/{}: saving a checkpoint", global_step_, max_steps_);
  }
  save_checkpoint();
  std::signal(SIGINT, previous_int);
  std::signal(SIGTERM, previous_term);
}

// One optimizer step, top to bottom: GA micro-batches, each taken from the
// current generation batch (sampled and scored when the last one is used up).
Metrics GrpoTrainer::step() {
  const double start = now_s();
  Metrics m;
  MetricSums sums;
  step_active_tokens_ = 0;
  for (int64_t k = 0; k < ga_; ++k) {
    if (queue_.empty()) refill(m, k);     // sample through the plugin, score, advantages, old/ref log-probs
    accumulate(queue_.front(), m, sums);  // policy log-probs, loss, backward
    queue_.pop_front();
  }
  for (const auto& [k, v] : sums.sum) m[k] = v / sums.count[k];
  update(m);  // clip, AdamW
  ++global_step_;
  // The new weights to the sampler (merge, copy or push), after the step is
  // counted: a failed push still leaves a checkpoint that holds this update.
  // Under async_generate this happens when the next batch is launched.
  if (!async_) sync_sampler_weights(m);
  m["global_step"] = static_cast<double>(global_step_);
  m["epoch"] = prompts_->epoch();
  m["step_time"] = now_s() - start;
  m["memory/rss_gb"] = rss_gb();
  for (const auto& [name, value] : plugin_metrics_->drain()) m[name] = value;
  return m;
}

void GrpoTrainer::refill(Metrics& m, int64_t micro_done) {
  const int64_t iterations = cfg_.get_int("num_iterations");
  GenerationBatch batch = async_ ? next_async_batch(m) : sample_batch(m);
  if (async_) {
    const auto parts = (static_cast<int64_t>(batch.size()) + micro_batch_ - 1) / micro_batch_;
    const int64_t still_needed = (max_steps_ - global_step_) * ga_ - micro_done - parts * iterations;
    sync_sampler_weights(m);
    if (still_needed > 0) launch_generation();  // the next batch samples while this one trains
  }
  const Advantages adv = advantages_of(batch, m, "");
  const bool overlong_filter = cfg_.get_bool("overlong_filter");
  std::vector<MicroBatch> parts = split_micro_batches(batch, adv.advantages, micro_batch_, 0, overlong_filter);
  // Constant across the iterations over this batch: computed once, no grad.
  const double t0 = now_s();
  const model::LogprobOptions lp{cfg_.get_double("temperature"), 256, /*entropy=*/false};
  torch::NoGradGuard no_grad;
  policy_->eval();  // the policy's own probabilities: no LoRA dropout in these passes
  MetricSums correction;
  for (MicroBatch& mb : parts) {
    if (needs_old_logp_) mb.old_logp = completion_logprobs(*policy_, mb.batch, lp).logprobs;
    if (reference_) {
      mb.ref_logp = completion_logprobs(*reference_, mb.batch, lp).logprobs;
    } else if (lora_ && loss_options_.beta != 0.0) {
      model::AdaptersDisabled base(*policy_);
      mb.ref_logp = completion_logprobs(*policy_, mb.batch, lp).logprobs;
    }
    if (is_correction_ && mb.old_logp.defined() && mb.sampler_logp.defined()) {
      Metrics c;
      mb.is_weight = importance_weights(mb.old_logp, mb.sampler_logp, mb.batch.completion_mask, is_mode_,
                                        cfg_.get_double("vllm_importance_sampling_clip_max"), c);
      for (const auto& [k, v] : c) correction.add(k, v);
    }
  }
  policy_->train();
  for (const auto& [k, v] : correction.sum) m[k] = v / correction.count[k];
  m["time/logprob"] += now_s() - t0;
  for (int64_t it = 0; it < iterations; ++it) queue_.insert(queue_.end(), parts.begin(), parts.end());
}

void GrpoTrainer::accumulate(const MicroBatch& mb, Metrics& m, MetricSums& sums) {
  const double t0 = now_s();
  const model::LogprobOptions lp{cfg_.get_double("temperature"), 256, /*entropy=*/true};
  model::TokenLogprobs logp = completion_logprobs(*policy_, mb.batch, lp);
  LossOptions options = loss_options_;
  options.dapo_active_tokens = mb.dapo_active_tokens;
  LossOutput out = grpo_loss(
      {logp.logprobs, mb.old_logp, mb.ref_logp, mb.advantages, mb.batch.completion_mask, mb.is_weight}, options);
  const double t1 = now_s();
  out.loss.backward();
  m["time/backward"] += now_s() - t1;
  m["time/logprob"] += t1 - t0;
  m["loss"] += out.loss.item<double>();  // each micro-batch's loss is already its share of the step's
  const at::Tensor& mask = mb.batch.completion_mask;
  if (mb.active_tokens > 0) sums.add("entropy", ((logp.entropy * mask).sum() / mask.sum()).item<double>());
  for (const auto& [k, v] : out.metrics) sums.add(k, v);
  step_active_tokens_ += mb.active_tokens;
}

void GrpoTrainer::update(Metrics& m) {
  const double t_opt = now_s();
  const double grad_norm = torch::nn::utils::clip_grad_norm_(policy_->parameters(), cfg_.get_double("max_grad_norm"));
  const double lr = schedule_->lr(global_step_);
  if (step_active_tokens_ > 0) {  // nothing carried loss (every row filtered): no update at all, not even weight decay
    set_learning_rate(*optimizer_, lr);
    optimizer_->step();
  }
  optimizer_->zero_grad();
  m["grad_norm"] = grad_norm;
  m["learning_rate"] = lr;
  m["time/optimizer"] = now_s() - t_opt;
  m.emplace("time/weight_sync", 0.0);  // logged even when nothing moves (in-process views)
  if (reference_ && cfg_.get_bool("sync_ref_model") && (global_step_ + 1) % cfg_.get_int("ref_model_sync_steps") == 0) {
    // TR-DPO's soft update, as TRL's SyncRefModelCallback does it.
    torch::NoGradGuard no_grad;
    const double alpha = cfg_.get_double("ref_model_mixup_alpha");
    auto ref = reference_->parameters(), pol = policy_->parameters();
    for (size_t i = 0; i < ref.size(); ++i) ref[i].mul_(1.0 - alpha).add_(pol[i], alpha);
  }
}

}  // namespace grpo::trainer
