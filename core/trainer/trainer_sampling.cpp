// Generation batches: prompts through the sampler plugin, completions through
// the reward plugins, scores into group-relative advantages; and evaluation,
// which does the same on the validation prompts without training.

#include <spdlog/spdlog.h>

#include "trainer/grpo_trainer.h"
#include "util/clock.h"

namespace grpo::trainer {

using util::now_s;

namespace {

ScaleRewards scale_of(const std::string& s) {
  if (s == "batch") return ScaleRewards::Batch;
  if (s == "none") return ScaleRewards::None;
  return ScaleRewards::Group;
}

}  // namespace

GenerationBatch GrpoTrainer::sample_batch(Metrics& m) {
  const auto wanted = static_cast<size_t>(prompts_per_generation_);
  GenerationBatch batch = generate(prompts_->next(wanted), m, "", generations_++);
  score(batch, m, trainer_state());
  if (!cfg_.get_bool("dynamic_sample")) return batch;
  // DAPO: only groups whose rewards differ train anything; resample to fill.
  GroupCollector groups(wanted, static_cast<size_t>(G_));
  const auto weights = rewards_->weights();
  const ScaleRewards scale = scale_of(cfg_.get_string("scale_rewards"));
  groups.add(batch, compute_advantages(reward_tensor(batch.rewards), weights, G_, scale).group_std);
  int64_t resamples = 0;
  Metrics extra;  // the resamples' generation metrics are not this batch's
  for (; !groups.full() && resamples < cfg_.get_int("max_resample_times"); ++resamples) {
    GenerationBatch more = generate(prompts_->next(groups.next_request()), extra, "", generations_++);
    score(more, m, trainer_state());
    groups.add(more, compute_advantages(reward_tensor(more.rewards), weights, G_, scale).group_std);
  }
  if (!groups.full())
    spdlog::warn("dynamic_sample: {} of {} groups still have equal rewards after {} resamples; they are kept with "
                 "advantage 0 (raise --max_resample_times or check the rewards)",
                 groups.missing(), wanted, resamples);
  m["dynamic_sample/resample_count"] = static_cast<double>(resamples);
  m["time/generate"] += extra["time/generate"];
  return groups.take();
}

// Runs on a background thread under async_generate: reads only what the
// main thread does not change while it runs.
GenerationBatch GrpoTrainer::generate(const std::vector<const Prompt*>& prompts, Metrics& m, const std::string& prefix,
                                      int64_t generation) {
  const double start = now_s();
  std::vector<plugins::SampleRequest> requests;
  const auto seed = static_cast<uint64_t>(cfg_.get_int("seed"));
  for (size_t p = 0; p < prompts.size(); ++p) {
    plugins::SampleRequest r;
    r.prompt_ids = prompts[p]->ids;
    r.messages_json = prompts[p]->messages_json;
    r.n = static_cast<uint32_t>(G_);
    // Never the same seed twice in a run; evaluation (prefix) has its own series.
    r.seed = seed * 1000003u + static_cast<uint64_t>(generation) * 65537u + p + (prefix.empty() ? 0u : 1u << 31);
    if (auto eos = tokenizer_.eos_id()) r.stop_ids.push_back(*eos);
    requests.push_back(std::move(r));
  }
  std::vector<plugins::SampledCompletion> done = sampler_->generate(requests, sample_options_);
  GenerationBatch out;
  double lengths = 0, terminated = 0, terminated_len = 0, truncated = 0;
  double min_len = 1e30, max_len = 0;
  for (auto& c : done) {
    const Prompt& prompt = *prompts[c.request];
    out.sequences.push_back({prompt.ids, c.ids, c.truncated});
    out.sampler_logprobs.push_back(std::move(c.logprobs));
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
  m[prefix + "completions/mean_length"] = lengths / n;
  m[prefix + "completions/min_length"] = min_len;
  m[prefix + "completions/max_length"] = max_len;
  m[prefix + "completions/clipped_ratio"] = truncated / n;  // truncated by length, not PPO clipping
  m[prefix + "completions/mean_terminated_length"] = terminated ? terminated_len / terminated : 0.0;
  m[prefix + "num_tokens"] += lengths;
  m["time/generate"] += now_s() - start;
  return out;
}

plugins::TrainerState GrpoTrainer::trainer_state() const { return {global_step_, max_steps_, prompts_->epoch()}; }

void GrpoTrainer::score(GenerationBatch& batch, Metrics& m, const plugins::TrainerState& state) {
  const double start = now_s();
  batch.rewards = rewards_->score(batch.reward_inputs, state);
  m["time/reward"] += now_s() - start;
}

Advantages GrpoTrainer::advantages_of(const GenerationBatch& batch, Metrics& m, const std::string& prefix) {
  const rewards::RewardMatrix& R = batch.rewards;
  for (size_t f = 0; f < R.names.size(); ++f) {
    m[prefix + "rewards/" + R.names[f] + "/mean"] = rewards::nanmean(R.by_fn[f]);
    m[prefix + "rewards/" + R.names[f] + "/std"] = rewards::nanstd(R.by_fn[f]);
  }
  Advantages adv =
      compute_advantages(reward_tensor(R), rewards_->weights(), G_, scale_of(cfg_.get_string("scale_rewards")));
  if (adv.all_nan_rows > 0)
    spdlog::warn("{} of {} completions got no reward from any function (all NaN): their advantage is 0",
                 adv.all_nan_rows, batch.size());
  if (completion_log_ && prefix.empty())
    completion_log_->write(global_step_ + 1, batch.reward_inputs, R, adv.advantages);
  m[prefix + "reward"] = rewards::nanmean(R.total);
  m[prefix + "reward_std"] = rewards::nanstd(R.total);
  m[prefix + "frac_reward_zero_std"] = adv.frac_zero_std;
  return adv;
}

// The validation prompts, per_device_eval_batch_size completions (G per
// prompt) at a time, sampled and scored as in training; nothing is trained.
Metrics GrpoTrainer::evaluate() {
  wait_for_generation();  // the sampler takes one call at a time
  const double start = now_s();
  const size_t per_batch = std::max<size_t>(1, static_cast<size_t>(cfg_.get_int("per_device_eval_batch_size") / G_));
  std::vector<const Prompt*> all = val_prompts_->next(val_prompts_->size());
  GenerationBatch whole;
  Metrics per_batch_metrics;  // only eval_num_tokens adds up across batches; the rest is recomputed on `whole`
  for (size_t b = 0; b < all.size(); b += per_batch) {
    std::vector<const Prompt*> part(all.begin() + static_cast<std::ptrdiff_t>(b),
                                    all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), b + per_batch)));
    GenerationBatch batch = generate(part, per_batch_metrics, "eval_", generations_++);
    score(batch, per_batch_metrics, trainer_state());
    for (size_t g = 0; g < batch.size() / static_cast<size_t>(G_); ++g)
      whole.append_group(batch, g, static_cast<size_t>(G_));
  }
  Metrics m;
  advantages_of(whole, m, "eval_");
  m["eval_num_tokens"] = per_batch_metrics["eval_num_tokens"];
  m["eval_completions/mean_length"] = m["eval_num_tokens"] / static_cast<double>(whole.size());
  m["eval_runtime"] = now_s() - start;
  plugin_metrics_->drain();  // the rewards' own metrics of evaluation are not the next training step's
  spdlog::info("eval at step {}: reward {:.4f} over {} prompts", global_step_, m["eval_reward"], all.size());
  return m;
}

}  // namespace grpo::trainer
