// The trainer's set-up and its loop over steps; the step itself is in
// grpo_step.cpp.
#include "trainer/grpo_trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/utils.h>

#include "dist/rank_env.h"
#include "model/device_memory.h"
#include "model/dtype.h"
#include "model/stop_ids.h"
#include "model/threads.h"
#include "model/weights.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_options.h"
#include "plugins/reward_worker.h"
#include "trainer/checkpoint.h"
#include "trainer/data_parallel.h"
#include "trainer/progress_line.h"
#include "trainer/reward_model.h"
#include "trainer/stop_signal.h"

namespace grpo::trainer {

namespace fs = std::filesystem;

namespace {

// Training and validation prompts: --val_dataset, or a seeded random
// split_dataset_ratio of --dataset held out (at least one row).
std::pair<std::vector<data::Row>, std::vector<data::Row>> training_and_validation_rows(const DataSettings& d,
                                                                                       uint64_t seed,
                                                                                       data::BadRows& bad) {
  std::vector<data::Row> train = load_dataset_rows(d.datasets, &bad), val;
  if (!d.val_datasets.empty()) return {train, load_dataset_rows(d.val_datasets, &bad)};
  if (d.split_ratio <= 0) return {train, val};
  std::vector<size_t> order(train.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(seed));
  const auto held =
      std::max<size_t>(1, static_cast<size_t>(std::lround(d.split_ratio * static_cast<double>(train.size()))));
  if (held >= train.size())
    throw config::ConfigError("--split_dataset_ratio " + std::to_string(d.split_ratio) +
                              " leaves no training rows out of " + std::to_string(train.size()) +
                              ": lower it or give --val_dataset");
  std::vector<data::Row> kept;
  for (size_t i = 0; i < order.size(); ++i) (i < held ? val : kept).push_back(train[order[i]]);
  return {kept, val};
}

// Optimizer steps: each generation batch feeds steps_per_generation
// micro-batches, num_iterations times, GA micro-batches per step.
int64_t total_steps(const BatchSettings& b, size_t prompts) {
  if (b.max_steps) return *b.max_steps;
  const double generations_per_epoch =
      std::ceil(static_cast<double>(prompts) / static_cast<double>(b.prompts_per_generation));
  const double steps_per_epoch = generations_per_epoch *
                                 static_cast<double>(b.steps_per_generation * b.iterations) /
                                 static_cast<double>(b.grad_accum);
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(b.epochs * steps_per_epoch)));
}

// The option names a plugin publishes that are also flags: the flags it reads.
void add_plugin_flags(std::set<std::string, std::less<>>& used, const plugins::PluginInfo& info) {
  for (const std::string& name : plugins::option_names(info))
    if (config::find_flag(name)) used.insert(config::find_flag(name)->name);
}

}  // namespace

GrpoTrainer::GrpoTrainer(GrpoSettings settings, dist::World& world)
    : s_(std::move(settings)),
      world_(world),
      tokenizer_(tok::Tokenizer::from_dir(s_.model.dir)),
      registry_(plugins::PluginRegistry::discover({s_.rewards.plugins, true, true, ""})) {
  torch::manual_seed(s_.seed);
  // The ranks on this machine share its cores.
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  model::configure_cpu_threads(s_.num_threads > 0 || world_.local_size() < 2
                                   ? s_.num_threads
                                   : static_cast<int>(std::max(1u, cores / static_cast<unsigned>(world_.local_size()))));
  if (world_.is_main()) {
    fs::create_directories(s_.checkpoint.output_dir);
    remove_unfinished_checkpoints(s_.checkpoint.output_dir);
    s_.run.config.write_args_yaml((fs::path(s_.checkpoint.output_dir) / "args.yaml").string());
  }
  const BatchSettings& b = s_.batch;
  // The policy changes while a generation batch is still in use: its ratio
  // needs the log-probs of the weights that sampled it (grpo.md §3).
  needs_old_logp_ =
      b.iterations > 1 || b.steps_per_generation > b.grad_accum || s_.sampling.async || s_.loss.is_correction;

  policy_.policy = load_policy(s_.model);
  policy_.policy->train();
  policy_.policy->set_gradient_checkpointing(s_.model.gradient_checkpointing);
  // The reference: under LoRA the policy with its adapters disabled (no
  // second copy), else a frozen copy of the initial policy or --ref_model.
  if (s_.loss.options.beta != 0.0 && (!s_.model.lora || !s_.model.ref_dir.empty())) {
    policy_.reference =
        model::load_model(s_.model.ref_dir.empty() ? s_.model.dir : s_.model.ref_dir, s_.model.dtype, s_.model.device);
    for (auto& p : policy_.reference->parameters()) p.set_requires_grad(false);
  }
  const int64_t model_vocab = policy_.policy->config().vocab_size;
  if (static_cast<int64_t>(tokenizer_.vocab_size()) > model_vocab)
    throw config::ConfigError(fmt::format(
        "{}: the tokenizer has ids up to {}, past the model's vocab_size {} (config.json); they would index past its "
        "embedding: use the tokenizer that came with these weights",
        s_.model.dir, tokenizer_.vocab_size() - 1, model_vocab));
  rollout_.stop_ids = model::stop_token_ids(tokenizer_, policy_.policy->config(), s_.model.dir);

  PromptFormat format = s_.prompts.format(tokenizer_, s_.loss.options.max_completion_length,
                                          policy_.policy->config().max_position_embeddings);
  load_plugins(format.family, format.max_prompt_tokens + s_.loss.options.max_completion_length);
  if (handler_) format.tools_json = handler_->tools_json();
  data::BadRows bad{s_.data.skip_bad_rows};
  auto [train_rows, val_rows] = training_and_validation_rows(s_.data, s_.seed, bad);
  prompts_ = std::make_unique<PromptSource>(std::move(train_rows), format, s_.data.shuffle, s_.seed, &bad);
  if (!val_rows.empty())
    val_prompts_ = std::make_unique<PromptSource>(std::move(val_rows), format, false, s_.seed, &bad, "validation");
  if (bad.count) spdlog::warn("skipped {} unusable dataset rows (--skip_bad_rows); the first: {}", bad.count, bad.first);
  const std::string limit = fmt::format("{} tokens ({} - max_completion_length)", format.max_prompt_tokens,
                                        s_.prompts.max_length ? "max_length" : "the model's max_position_embeddings");
  if (prompts_->dropped())
    spdlog::warn("{} prompts longer than {} were dropped (truncation_strategy delete)", prompts_->dropped(), limit);
  if (prompts_->truncated())
    spdlog::warn("{} prompts longer than {} were cut to it, keeping their {} (--truncation_strategy)",
                 prompts_->truncated(), limit, s_.prompts.truncation == Truncation::Right ? "start" : "end");
  max_steps_ = total_steps(b, prompts_->size());

  policy_.sync = std::make_unique<ParameterSync>(world_, trainable_parameters(*policy_.policy), s_.dist.zero_stage,
                                                 s_.dist.bucket_bytes);
  policy_.optimizer = make_adamw(s_.optimizer, policy_.sync->optimized());
  if (s_.dist.zero_stage > 0 && world_.size() < 2)
    spdlog::warn("ZeRO stage {} shards across processes; with one process it changes nothing", s_.dist.zero_stage);
  const OptimizerSettings& o = s_.optimizer;
  policy_.schedule =
      std::make_unique<LrSchedule>(o.scheduler, o.learning_rate, max_steps_, o.warmup_steps.value_or(-1), o.warmup_ratio);
  if (!s_.model.resume_from.empty()) resume_from(s_.model.resume_from);
  Metrics unlogged;
  park_optimizer_state(true, unlogged);  // --offload_optimizer: in host memory until the first update
  if ((s_.sampling.offload_model || s_.sampling.offload_optimizer) && !offloads())
    spdlog::info("--offload_model / --offload_optimizer move nothing on {}: everything is in host memory already",
                 s_.model.device.str());
  if (world_.is_main()) {
    log_ = std::make_unique<RunLog>(s_.checkpoint.output_dir, s_.logging.tensorboard);
    if (s_.logging.log_completions) completion_log_ = std::make_unique<CompletionLog>(s_.checkpoint.output_dir);
  }
  spdlog::info("training {} on {} in {} for {} steps: {} prompts x {} completions per generation batch, {} rows{}{}",
               s_.model.dir, s_.model.device.str(), model::weight_dtype_name(s_.model.dtype), max_steps_,
               b.prompts_per_generation, b.num_generations, prompts_->size(),
               val_prompts_ ? ", " + std::to_string(val_prompts_->size()) + " validation rows" : "",
               world_.distributed() ? fmt::format(", data parallel over {} process{}", world_.size(),
                                                  world_.size() == 1 ? " (a group of one)" : "es")
                                    : "");
}

// The run's reward plugins, its sampler and its multi-turn handler, with the
// options they get: their sections of plugin_args, their options given as
// flags (--unit token), and the flags of the table they publish; a flag that
// nothing reads is warned of.
void GrpoTrainer::load_plugins(tok::ChatFamily family, int64_t context) {
  std::vector<std::string> sectioned = s_.rewards.funcs;  // the plugins plugin_args may configure
  if (!s_.multi_turn.handler.empty()) sectioned.push_back(s_.multi_turn.handler);
  plugins::check_plugin_args_sections(s_.rewards.plugin_args, sectioned, s_.sampling.sampler, registry_.all());
  // Options of this run's plugins given as flags (--unit token): into the
  // configuration their options are filled from, as the flags of the table are.
  std::vector<plugins::PluginInfo> run_plugins;
  for (const std::string& name : s_.rewards.funcs)
    run_plugins.push_back(registry_.require(name, GRPO_REWARD_INTERFACE).info);
  run_plugins.push_back(registry_.require(s_.sampling.sampler, GRPO_SAMPLER_INTERFACE).info);
  if (!s_.multi_turn.handler.empty())
    run_plugins.push_back(registry_.require(s_.multi_turn.handler, GRPO_MULTITURN_INTERFACE).info);
  s_.run.plugin_flag_values = plugins::resolve_plugin_flags(s_.run.config.plugin_flags(), run_plugins);
  for (const auto& [name, value] : s_.run.plugin_flag_values.items()) s_.run.json[name] = value;
  plugin_metrics_ = std::make_shared<plugins::MetricsSink>();
  text_services_ = {&tokenizer_, family, s_.model.dir};
  if (!s_.multi_turn.handler.empty()) {
    handler_ = plugins::MultiturnHandler::for_run(registry_, s_.multi_turn.handler, s_.run.json, s_.rewards.plugin_args,
                                                 plugin_metrics_, text_services_, s_.multi_turn.timeout_s,
                                                 s_.num_threads);
    conversations_ = std::make_unique<ConversationRunner>(
        *handler_, tokenizer_, family,
        ConversationLimits{s_.multi_turn.max_turns, s_.loss.options.max_completion_length, s_.multi_turn.total_scope,
                           context});
  }
  // Reward models, then the environment's reward: the columns after the plugins'.
  std::vector<std::unique_ptr<rewards::HostReward>> host_rewards;
  for (const std::string& dir : s_.rewards.models)
    host_rewards.push_back(
        std::make_unique<RewardModel>(dir, s_.model.dtype, s_.model.device));
  if (handler_ && handler_->has_reward())
    host_rewards.push_back(std::make_unique<rewards::EnvironmentReward>(handler_->name()));
  // An isolated reward is waited for as a sampler call is (stop_signal.h):
  // kStopGrace after a stop signal its worker is killed and the batch dropped.
  plugins::Isolation isolation = s_.rewards.isolation;
  isolation.give_up = [stopped_at = std::make_shared<std::chrono::steady_clock::time_point>()] {
    if (!stop_requested()) return false;
    const auto now = std::chrono::steady_clock::now();
    if (*stopped_at == std::chrono::steady_clock::time_point{}) *stopped_at = now;
    return now - *stopped_at >= kStopGrace;
  };
  rewards_ = std::make_unique<rewards::RewardSet>(registry_, s_.rewards.funcs, s_.rewards.weights, s_.run.json,
                                                  s_.rewards.plugin_args, plugin_metrics_, s_.num_threads,
                                                  text_services_, isolation, std::move(host_rewards));
  create_sampler();  // sampler_weights.cpp

  // Flags the user set that neither the settings nor a loaded plugin read.
  std::set<std::string, std::less<>> used = s_.run.flags_read;
  if (handler_) add_plugin_flags(used, registry_.require(handler_->name(), GRPO_MULTITURN_INTERFACE).info);
  for (const auto& fn : rewards_->functions()) add_plugin_flags(used, fn->info());
  add_plugin_flags(used, registry_.require(s_.sampling.sampler, GRPO_SAMPLER_INTERFACE).info);
  config::warn_unused_flags(s_.run.config, used, "this trainer");
}

namespace {

// Every log line of a rank says which; ranks other than 0 print warnings and
// errors only (unless --log_level asks for more), as accelerate's do.
void label_log_lines(int rank) {
  spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [rank " + std::to_string(rank) + "] [%^%l%$] %v");
  if (rank != 0 && spdlog::get_level() == spdlog::level::info) spdlog::set_level(spdlog::level::warn);
}

}  // namespace

// Ctrl-C / SIGTERM: finish the current step, save a checkpoint, exit cleanly;
// while a sampler or server call is in flight, drop its batch instead of
// waiting for it (stop_signal.h).
void GrpoTrainer::train() {
  const LoggingSettings& l = s_.logging;
  const int64_t save_steps = l.save_steps.value_or(0), eval_steps = l.eval_steps.value_or(0);
  int64_t& step = policy_.global_step;
  ProgressLine progress(max_steps_, world_.is_main() ? -1 : 0);
  StopSignals signals;
  std::string failure, failed;  // what failed (a sampler or reward plugin, a collective) and the sentence for it
  std::string abandoned;        // the call a stop left running, if any
  bool weights_intact = true;   // false when a failure came in the middle of the optimizer's update
  bool stop = false;            // decided with each step's metrics, so that every rank stops after the same step
  while (step < max_steps_ && !stop) {
    try {
      Metrics m = this->step();
      stop = stop_requested();
      m = global_metrics(world_, m, stop, "the metrics of step " + std::to_string(step));
      if (log_) {
        log_->add(m);
        progress.update(step, m);
        if (step % l.logging_steps == 0 || step == max_steps_) {
          progress.clear();
          log_->flush(step, max_steps_);
        }
      }
      if (val_prompts_ && eval_steps > 0 && (step % eval_steps == 0 || step == max_steps_)) {
        progress.clear();
        Metrics eval = evaluate();
        if (log_) log_->write(step, eval);
      }
    } catch (const StopRequested& e) {
      abandoned = e.what();
      break;
    } catch (const plugins::PluginError& e) {  // in a step or in evaluation
      failure = e.what();
      failed = "a plugin failed";
      break;
    } catch (const dist::CollectiveError& e) {
      if (stop_requested() && world_.another_rank_stopped()) {  // it gave up its call on the same signal
        abandoned = "step " + std::to_string(step + 1) + ", which another rank left on the same signal (" +
                    std::string(e.what()) + ")";
        break;
      }
      failure = e.what();
      failed = "the training processes lost each other";
      break;
    } catch (const NonFiniteGradients& e) {  // the weights are still the last finite step's
      failure = e.what();
      failed = "its gradients stopped being finite";
      break;
    } catch (const OutOfDeviceMemory& e) {
      failure = e.what();
      failed = "the device ran out of memory";
      weights_intact = e.weights_intact();
      break;
    } catch (const LogWriteError& e) {
      failure = e.what();
      failed = "its log could not be written";
      log_.reset();  // not retried: the checkpoint below is what keeps the run
      break;
    }
    if (save_steps > 0 && step % save_steps == 0 && step < max_steps_) save_checkpoint();
  }
  progress.clear();
  if (!abandoned.empty()) stop_abandoning(abandoned);
  if (!failure.empty()) {
    // Finished steps are kept: the run continues from them once the cause is fixed.
    if (log_) log_->flush(step, max_steps_);
    spdlog::error("stopped at step {}/{}: {}", step, max_steps_, failure);
    std::string saved = "no step had finished, so there is no checkpoint";
    if (!s_.checkpoint.save) {
      saved = "--save_strategy no: no checkpoint is written";
    } else if (!weights_intact) {
      saved = "the update it was making is incomplete, so nothing is saved: continue from the newest checkpoint in " +
              s_.checkpoint.output_dir + " with --resume_from_checkpoint";
    } else if (step > 0 && world_.is_main()) {
      // After running out of device memory, saving (a LoRA merge allocates) needs what the failed phase
      // cached; the asynchronous sampler first, since freeing the cache while it captures a CUDA graph fails.
      wait_for_generation();
      model::release_cached_memory(s_.model.device);
      save_checkpoint(/*gather_shards=*/false);  // the other ranks may be gone: no collective
      saved = "saved " + (fs::path(s_.checkpoint.output_dir) / ("checkpoint-" + std::to_string(step))).string() +
              ": fix that and continue with --resume_from_checkpoint on it";
    } else if (step > 0) {
      saved = "rank 0 saves the checkpoint of the last finished step";
    }
    throw std::runtime_error("training stopped at step " + std::to_string(step) + "/" + std::to_string(max_steps_) +
                             " because " + failed + " (above); " + saved);
  }
  if (stop) {
    if (log_) log_->flush(step, max_steps_);
    spdlog::warn("stopped by a signal at step {}/{}{}", step, max_steps_,
                 s_.checkpoint.save ? ": saving a checkpoint" : " (--save_strategy no: no checkpoint)");
  }
  save_checkpoint();
  report_reward_failures();
}

// A stop arrived while `what` was running in a plugin: its batch is dropped,
// the last finished step saved (by rank 0 alone: the other ranks may be in
// the same state or waiting in a collective), and the process ends here,
// because the plugin cannot be destroyed while that call is still inside it.
void GrpoTrainer::stop_abandoning(const std::string& what) {
  if (log_) log_->flush(policy_.global_step, max_steps_);
  world_.announce_stop();  // the others' next collective fails: not because this rank died
  spdlog::warn("stopped by a signal at step {}/{} while {} was still running: that batch is dropped", policy_.global_step,
               max_steps_, what);
  if (policy_.global_step > 0 && world_.is_main()) save_checkpoint(/*gather_shards=*/false);
  spdlog::shutdown();
  std::fflush(nullptr);
  std::_Exit(0);
}

// A reward that failed is easy to miss in a long log: say it once more at the
// end, and exit non-zero unless the user accepted it.
void GrpoTrainer::report_reward_failures() const {
  std::string failed;
  for (const auto& fn : rewards_->functions()) {
    if (fn->failures() == 0) continue;
    spdlog::error("reward '{}' ({}) failed on {} batch(es) in this run; those rewards counted as no opinion (NaN)",
                  fn->name(), fn->file(), fn->failures());
    failed += (failed.empty() ? "" : ", ") + fn->name();
  }
  if (!failed.empty() && !s_.rewards.tolerate_errors)
    throw std::runtime_error("training finished, but reward plugin(s) " + failed +
                             " failed on some batches (above); fix them, or pass --tolerate_reward_errors true to "
                             "accept such runs");
}

void run_grpo(const GrpoSettings& settings) {
  model::make_current(settings.model.device);  // rank LOCAL_RANK's GPU, as torch.cuda.set_device
  std::unique_ptr<dist::World> world = std::make_unique<dist::World>();
  if (std::optional<dist::RankEnv> env = dist::rank_env_from_environment();
      env && (env->world_size > 1 || env->rendezvous)) {
    label_log_lines(env->rank);
    // Ranks on GPUs also join an NCCL group for their gradients, shards and metrics.
    world = dist::World::join(*env, std::chrono::milliseconds(static_cast<int64_t>(settings.dist.timeout_s * 1000)),
                              std::nullopt, settings.model.device, settings.dist.backend);
  }
  try {
    GrpoTrainer trainer(settings, *world);
    trainer.train();
  } catch (...) {
    // A collective given up on may still be pending on Gloo's threads, which
    // the group's destructor would wait for: the process is ending anyway.
    (void)world.release();
    throw;
  }
}

}  // namespace grpo::trainer
