#include "plugins/reward_function.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <deque>
#include <limits>
#include <thread>

#include <fmt/format.h>
#include <grpo/reward.h>
#include <spdlog/spdlog.h>

#include "plugins/crash_guard.h"
#include "plugins/plugin_error.h"
#include "plugins/plugin_text.h"
#include "plugins/reward_worker.h"

namespace grpo::plugins {

struct RewardFunction::Api {
  grpo_reward_api table{};  // zero-filled beyond what the plugin provides
};

namespace {

grpo_str as_str(std::string_view s) { return grpo_str{s.data(), s.size()}; }

// Starting a thread costs tens of microseconds: a thread only pays off with
// at least this much scoring work to do.
constexpr double kMinSecondsPerThread = 200e-6;

}  // namespace

std::shared_ptr<const RowColumns> RowColumns::from_json(const nlohmann::json& row) {
  auto cols = std::make_shared<RowColumns>();
  cols->json = row.dump();
  if (row.is_object()) {
    for (const auto& [key, value] : row.items()) {
      std::string json = value.dump();
      std::string text = value.is_string() ? value.get<std::string>() : json;
      cols->columns.push_back({key, std::move(json), std::move(text)});
    }
  }
  return cols;
}

std::unique_ptr<RewardFunction> RewardFunction::create(const ResolvedPlugin& plugin, const nlohmann::json& options,
                                                       std::shared_ptr<MetricsSink> metrics,
                                                       const std::string& run_config_json, int num_threads,
                                                       TextServices text, const Isolation& isolation) {
  install_crash_handlers();
  std::unique_ptr<RewardFunction> fn(new RewardFunction());
  fn->plugin_ = plugin;
  fn->num_threads_ = std::max(1, num_threads);
  fn->api_ = std::make_unique<Api>();
  const auto* table = static_cast<const grpo_reward_api*>(plugin.library->factory(plugin.info.name, GRPO_REWARD_INTERFACE));
  if (!table)
    throw PluginError(fmt::format("plugin '{}' ({}) lists itself as a reward but provides no {} table",
                                  plugin.info.name, plugin.info.file, GRPO_REWARD_INTERFACE));
  std::memcpy(&fn->api_->table, table, std::min<size_t>(table->struct_size, sizeof(grpo_reward_api)));
  const grpo_reward_api& api = fn->api_->table;
  if (!api.create || !api.score || !api.destroy)
    throw PluginError(fmt::format("reward plugin '{}' ({}) lacks create, score or destroy; rebuild it against the "
                                  "grpo SDK",
                                  plugin.info.name, plugin.info.file));

  if (isolation.process) {  // the instance lives in a child process; a crash there costs one batch
    fn->metrics_ = std::move(metrics);
    fn->worker_ = std::make_unique<RewardWorker>(plugin.info, options, run_config_json, isolation,
                                                 text.tokenizer ? text.tokenizer_dir : "", text.family);
    return fn;
  }
  fn->services_ = std::make_unique<HostServices>(plugin.info.name, std::move(metrics), run_config_json, text, options);
  std::string config = options.dump();
  grpo_error err{};
  grpo_reward_instance* instance = nullptr;
  grpo_status status;
  try {
    PluginCallScope scope(plugin.info.name.c_str(), plugin.info.file.c_str(), "create");
    status = api.create(fn->services_->api(), as_str(config), &instance, &err);
  } catch (const std::exception& e) {
    throw PluginError(fmt::format("reward plugin '{}' ({}) threw from create(): {}", plugin.info.name,
                                  plugin.info.file, e.what()));
  }
  if (status != GRPO_OK || !instance)
    throw PluginError(fmt::format("reward plugin '{}' ({}) could not be created: {}", plugin.info.name,
                                  plugin.info.file, status != GRPO_OK ? error_text(err) : "it returned no instance"));
  fn->instance_ = instance;
  return fn;
}

RewardFunction::~RewardFunction() {
  if (instance_) {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "destroy");
    api_->table.destroy(static_cast<grpo_reward_instance*>(instance_));
  }
}

bool RewardFunction::thread_safe() const { return (api_->table.flags & GRPO_REWARD_THREAD_SAFE) != 0; }

bool RewardFunction::score_range(const std::vector<grpo_reward_sample>& samples, size_t begin, size_t end,
                                 const grpo_trainer_state& state, double* out, std::string* error) {
  grpo_reward_batch batch{GRPO_REWARD_BATCH_STRUCT_SIZE, end - begin, samples.data() + begin, sizeof(grpo_reward_sample),
                          &state};
  grpo_reward_output output{GRPO_REWARD_OUTPUT_STRUCT_SIZE, out + begin, end - begin, 0};
  grpo_error err{};
  grpo_status status;
  try {
    PluginCallScope scope(plugin_.info.name.c_str(), plugin_.info.file.c_str(), "score");
    status = api_->table.score(static_cast<grpo_reward_instance*>(instance_), &batch, &output, &err);
  } catch (const std::exception& e) {
    *error = fmt::format("an exception escaped score(): {}", e.what());
    return false;
  } catch (...) {
    *error = "an unknown exception escaped score()";
    return false;
  }
  if (status != GRPO_OK) {
    *error = fmt::format("score() failed (status {}): {}", status, error_text(err));
    return false;
  }
  if (output.count != end - begin) {
    *error = fmt::format("score() returned {} rewards for {} completions", output.count, end - begin);
    return false;
  }
  return true;
}

namespace {

// The ColumnsView of each row of a batch, one per run of rows with the same
// dataset row: the G completions of a prompt come together and share theirs.
class ColumnViews {
 public:
  const ColumnsView* of(const RowColumns* cols) {
    if (!cols) return nullptr;
    if (cols != last_) store_.push_back(view_of(*cols)), last_ = cols;
    return &store_.back();
  }

 private:
  std::deque<ColumnsView> store_;  // stable addresses
  const RowColumns* last_ = nullptr;
};

// Known ids are never a null pointer, even when there are none.
const int32_t* known_ids(const std::vector<int32_t>& ids, size_t begin) {
  static const int32_t kNone = 0;
  return begin < ids.size() ? ids.data() + begin : &kNone;
}

}  // namespace

std::vector<double> RewardFunction::score(const std::vector<RewardInput>& inputs, const TrainerState& state) {
  ColumnViews columns;
  std::vector<RewardView> rows;
  rows.reserve(inputs.size());
  for (const RewardInput& in : inputs)
    rows.push_back({in.prompt_messages_json, in.completion, in.conversation_json,
                    in.ids_known ? known_ids(in.completion_ids, 0) : nullptr, in.ids_known ? in.completion_ids.size() : 0,
                    in.ids_known ? static_cast<int64_t>(in.completion_ids.size()) : in.completion_tokens,
                    in.is_truncated, in.prompt_index, columns.of(in.columns.get())});
  return score_views(rows, state);
}

std::vector<double> RewardFunction::score_samples(const std::vector<Sample>& samples, const TrainerState& state) {
  static const std::string kNoMessages = "[]";
  // A multi-turn rollout is scored on its last turn (`completion` is its
  // text): those ids, a suffix of the sample's.
  ColumnViews columns;
  std::vector<RewardView> rows;
  rows.reserve(samples.size());
  for (const Sample& s : samples) {
    const size_t begin = std::min(s.last_turn_begin, s.ids.size());
    const size_t n = s.ids.size() - begin;
    rows.push_back({s.prompt ? s.prompt->messages_json : kNoMessages, s.text, s.conversation_json,
                    known_ids(s.ids, begin), n, static_cast<int64_t>(n),
                    // an aborted completion did not end as the policy chose either
                    s.finish != FinishReason::Stop, static_cast<int64_t>(s.request),
                    columns.of(s.prompt ? s.prompt->columns.get() : nullptr)});
  }
  return score_views(rows, state);
}

std::vector<double> RewardFunction::score_in_worker(const std::vector<RewardView>& inputs, const TrainerState& state,
                                                    bool* failed) {
  WireReply reply = worker_->score(inputs, state);
  for (const auto& [name, value] : reply.metrics)
    if (metrics_) metrics_->add(name, value);
  if (!reply.failed && reply.rewards.size() != inputs.size())
    reply.failed = true, reply.error = fmt::format("{} rewards for {} completions", reply.rewards.size(), inputs.size());
  if (reply.failed) {
    *failed = true;
    spdlog::error("reward '{}' ({}): {}; its rewards for this batch count as no opinion (NaN) and training goes on",
                  name(), file(), reply.error);
    return std::vector<double>(inputs.size(), std::numeric_limits<double>::quiet_NaN());
  }
  return reply.rewards;
}

std::vector<double> RewardFunction::score_views(const std::vector<RewardView>& inputs, const TrainerState& state) {
  const size_t n = inputs.size();
  std::vector<double> rewards(n, std::numeric_limits<double>::quiet_NaN());
  if (n == 0) return rewards;
  bool failed = false;
  if (worker_) {
    rewards = score_in_worker(inputs, state, &failed);
    return finish(rewards, failed);
  }

  std::vector<grpo_reward_sample> samples(n);
  for (size_t i = 0; i < n; ++i) {
    const RewardView& in = inputs[i];
    grpo_reward_sample& s = samples[i];
    s.struct_size = GRPO_REWARD_SAMPLE_STRUCT_SIZE;
    s.prompt_messages_json = as_str(in.messages_json);
    s.completion = as_str(in.completion);
    s.conversation_json = as_str(in.conversation);
    s.completion_ids = in.ids;
    s.n_completion_ids = in.ids ? in.n_ids : 0;
    s.completion_tokens = in.tokens;
    s.is_truncated = in.truncated ? 1 : 0;
    s.prompt_index = in.prompt_index;
    if (in.columns) {
      s.columns = in.columns->columns.data();
      s.n_columns = in.columns->columns.size();
      s.columns_json = as_str(in.columns->json);
    }
  }

  grpo_trainer_state st{GRPO_TRAINER_STATE_STRUCT_SIZE, state.global_step, state.max_steps, state.epoch};
  // Threads only when the plugin allows it and the last measured cost per
  // sample says the batch is worth splitting (the first batch runs on one
  // thread and measures).
  size_t threads = 1;
  if (thread_safe() && seconds_per_sample_ > 0) {
    const double work_s = seconds_per_sample_ * static_cast<double>(n);
    threads = std::clamp<size_t>(static_cast<size_t>(work_s / kMinSecondsPerThread), 1, static_cast<size_t>(num_threads_));
  }
  const auto start = std::chrono::steady_clock::now();

  std::vector<std::string> errors(threads);
  std::vector<char> ok(threads, 0);
  if (threads == 1) {
    ok[0] = score_range(samples, 0, n, st, rewards.data(), &errors[0]);
  } else {
    std::vector<std::thread> workers;
    for (size_t t = 0; t < threads; ++t) {
      size_t begin = n * t / threads, end = n * (t + 1) / threads;
      workers.emplace_back([&, t, begin, end] { ok[t] = score_range(samples, begin, end, st, rewards.data(), &errors[t]); });
    }
    for (auto& w : workers) w.join();
  }
  if (threads == 1) {
    seconds_per_sample_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / static_cast<double>(n);
  }
  for (size_t t = 0; t < threads; ++t) {
    if (ok[t]) continue;
    failed = true;
    spdlog::error("reward '{}' ({}): {}; its rewards for this batch count as no opinion (NaN) and training goes on",
                  name(), file(), errors[t]);
    size_t begin = n * t / threads, end = n * (t + 1) / threads;
    for (size_t i = begin; i < end; ++i) rewards[i] = std::numeric_limits<double>::quiet_NaN();
  }
  return finish(rewards, failed);
}

std::vector<double> RewardFunction::finish(std::vector<double>& rewards, bool failed) {
  const size_t n = rewards.size();
  if (failed) ++failures_;
  // +-Inf would zero its group's advantages (inf - inf): it is no opinion too.
  size_t nonfinite = 0;
  for (double& r : rewards)
    if (std::isinf(r)) r = std::numeric_limits<double>::quiet_NaN(), ++nonfinite;
  if (nonfinite > 0) {
    nonfinite_ += static_cast<long>(nonfinite);
    spdlog::warn("reward '{}' ({}) returned {} infinite value(s) of {}; they count as no opinion (NaN)", name(), file(),
                 nonfinite, n);
  }
  return rewards;
}

}  // namespace grpo::plugins
