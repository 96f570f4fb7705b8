// Generation batches: prompts through the sampler plugin into samples,
// samples through the reward plugins, scores into group-relative advantages;
// dynamic_sample resamples groups whose rewards are all equal. Data
// parallel, each rank samples and scores its share and every rank then holds
// the whole batch (batch_exchange.h).
#include <spdlog/spdlog.h>

#include "model/sampling.h"
#include "plugins/reward_worker.h"
#include "trainer/batch_exchange.h"
#include "trainer/grpo_trainer.h"
#include "trainer/stop_signal.h"
#include "util/clock.h"

namespace grpo::trainer {

using util::now_s;

GenerationBatch GrpoTrainer::next_generation_batch(Metrics& m, int64_t micro_done) {
  if (!s_.sampling.async) return sample_and_score(m);
  GenerationBatch batch = next_async_batch(m);
  const int64_t micro = s_.batch.micro_batch;
  const auto parts = (static_cast<int64_t>(batch.size()) + micro - 1) / micro;
  const int64_t still_needed =
      (max_steps_ - policy_.global_step) * s_.batch.grad_accum - micro_done - parts * s_.batch.iterations;
  sync_sampler_weights(m);
  if (still_needed > 0) launch_generation();  // the next batch samples while this one trains
  return batch;
}

GenerationBatch GrpoTrainer::sample_and_score(Metrics& m) {
  const auto wanted = static_cast<size_t>(s_.batch.prompts_per_generation);
  const auto G = static_cast<size_t>(s_.batch.num_generations);
  GenerationBatch batch = rollout(prompts_->next(wanted), m, Purpose::Training, rollout_.generations++, trainer_state());
  if (!s_.sampling.dynamic_sample) return batch;
  // DAPO: only groups whose rewards differ train anything; resample to fill.
  auto group_std = [&](const GenerationBatch& b) {
    return group_advantages(at::tensor(b.rewards.total, at::kDouble), s_.batch.num_generations, s_.loss.scale)
        .group_std;
  };
  GroupCollector groups(wanted, G);
  groups.add(batch, group_std(batch));
  int64_t resamples = 0;
  Metrics extra;  // the resamples' generation metrics are not this batch's
  for (; !groups.full() && resamples < s_.sampling.max_resample_times; ++resamples) {
    GenerationBatch more =
        rollout(prompts_->next(groups.next_request()), extra, Purpose::Training, rollout_.generations++, trainer_state());
    groups.add(more, group_std(more));
  }
  if (!groups.full())
    spdlog::warn("dynamic_sample: {} of {} groups still have equal rewards after {} resamples; they are kept with "
                 "advantage 0 (raise --max_resample_times or check the rewards)",
                 groups.missing(), wanted, resamples);
  m["dynamic_sample/resample_count"] = static_cast<double>(resamples);
  for (const auto& [k, v] : extra)  // the resamples' times and reward failures count; their completions do not
    if (k.rfind("time/", 0) == 0 || k.find("internal_errors") != std::string::npos) m[k] += v;
  return groups.take();
}

// Runs on a background thread under async_generate: reads only what the
// main thread does not change while it runs.
GenerationBatch GrpoTrainer::rollout(const std::vector<const Prompt*>& prompts, Metrics& m, Purpose purpose,
                                     int64_t generation, const plugins::TrainerState& state) {
  GenerationBatch batch = generate(prompts, m, purpose, generation);
  score(batch, m, state);
  if (world_.distributed()) {
    const double start = now_s();
    std::vector<std::string> names = batch.rewards.names;
    batch = unpack_shares(world_.all_gather(pack_share(batch, prompts), dist::Channel::Rollout,
                                            "the samples of generation batch " + std::to_string(generation)),
                          prompts);
    batch.rewards.names = std::move(names);
    m["time/gather"] += now_s() - start;
  }
  completion_metrics(batch, m, purpose == Purpose::Evaluation ? "eval_" : "");
  return batch;
}

GenerationBatch GrpoTrainer::generate(const std::vector<const Prompt*>& prompts, Metrics& m, Purpose purpose,
                                      int64_t generation) {
  const double start = now_s();
  const auto G = static_cast<size_t>(s_.batch.num_generations);
  // This rank's completions of the batch; copy k of prompt p is the same
  // completion whichever rank samples it (model::seed_of_copies).
  const Share share = share_of(prompts.size() * G, world_.rank(), world_.size());
  std::vector<plugins::SampleRequest> requests;
  std::vector<size_t> group_of;  // each request's prompt in `prompts`
  for (size_t p = 0; p < prompts.size(); ++p) {
    const size_t first = std::max(share.begin, p * G), end = std::min(share.end, (p + 1) * G);
    if (first >= end) continue;
    plugins::SampleRequest r;
    r.prompt_ids = prompts[p]->ids;
    r.prompt_text = prompts[p]->text;
    r.messages_json = prompts[p]->messages_json;
    r.n = static_cast<uint32_t>(end - first);
    r.first_copy = static_cast<uint32_t>(first - p * G);
    // Never the same seed twice in a run; evaluation has its own series.
    const uint64_t group_seed = s_.seed * 1000003u + static_cast<uint64_t>(generation) * 65537u + p +
                                (purpose == Purpose::Evaluation ? 1u << 31 : 0u);
    r.seed = model::seed_of_copies(group_seed, r.first_copy);
    r.stop_ids = rollout_.stop_ids;
    r.prompt = prompts[p];
    requests.push_back(std::move(r));
    group_of.push_back(p);
  }
  GenerationBatch out;
  const std::string what = "the sampling of generation batch " + std::to_string(generation);
  if (conversations_) {  // multi-turn: the runner decodes each turn itself
    const std::string prefix = purpose == Purpose::Evaluation ? "eval_" : "";
    const plugins::TrainerState state = trainer_state();
    auto turn_metrics = std::make_shared<Metrics>(m);  // outlives this call if a stop abandons it
    out.samples = run_interruptible<std::vector<Sample>>(
        [this, requests, state, turn_metrics, prefix] {
          return conversations_->run(*rollout_.sampler, requests, s_.sampling.options, state, *turn_metrics, prefix);
        },
        what, s_.model.device);
    m = *turn_metrics;
  } else {
    out.samples = run_interruptible<std::vector<Sample>>(
        [this, requests] { return rollout_.sampler->generate(requests, s_.sampling.options); }, what,
        s_.model.device);
    // What was sampled is the ids: rewards score their decoding by the run's
    // tokenizer, whatever text the sampler sent (or did not).
    for (Sample& c : out.samples) c.text = tokenizer_.decode_sampled(c.ids, /*skip_special_tokens=*/true);
  }
  for (Sample& c : out.samples) c.request = group_of[c.request];  // rewards see the prompt's place in the batch
  m["time/generate"] += now_s() - start;
  return out;
}

// Over the whole batch, whichever rank sampled what.
void GrpoTrainer::completion_metrics(const GenerationBatch& batch, Metrics& m, const std::string& prefix) const {
  double lengths = 0, terminated = 0, terminated_len = 0, truncated = 0, aborted = 0, non_tokens = 0;
  double min_len = 1e30, max_len = 0;
  double turns = 0, max_turns = 0, calls = 0, failures = 0;
  for (const Sample& c : batch.samples) {
    const auto len = static_cast<double>(c.ids.size());
    lengths += len;
    min_len = std::min(min_len, len);
    max_len = std::max(max_len, len);
    if (c.finish == FinishReason::Length) ++truncated;
    else if (c.finish == FinishReason::Abort) ++aborted;
    else ++terminated, terminated_len += len;
    non_tokens += static_cast<double>(tokenizer_.count_non_tokens(c.ids));
    turns += c.turns;
    max_turns = std::max(max_turns, static_cast<double>(c.turns));
    calls += c.tool_calls;
    failures += c.tool_failures;
  }
  const auto n = static_cast<double>(std::max<size_t>(1, batch.size()));
  m[prefix + "completions/mean_length"] = lengths / n;
  m[prefix + "completions/min_length"] = min_len;
  m[prefix + "completions/max_length"] = max_len;
  m[prefix + "completions/clipped_ratio"] = truncated / n;  // truncated by length, not PPO clipping
  m[prefix + "completions/mean_terminated_length"] = terminated ? terminated_len / terminated : 0.0;
  if (aborted > 0) {
    // The sampler gave up on these: they stay in their groups for the reward
    // statistics, but none of their tokens carries loss.
    m[prefix + "completions/aborted_ratio"] = aborted / n;
    spdlog::warn("the sampler aborted {} of {} completions: they carry no loss", aborted, n);
  }
  // Sampled ids that are embedding rows but no token: decoded to nothing.
  if (non_tokens > 0) m[prefix + "completions/non_token_ids"] = non_tokens;
  m[prefix + "num_tokens"] += lengths;
  if (conversations_) {  // the runner's own figures are this rank's share only
    m[prefix + "turns/mean"] = turns / n;
    m[prefix + "turns/max"] = max_turns;
    m[prefix + "tools/call_frequency"] = calls / n;
    m[prefix + "tools/failure_frequency"] = calls > 0 ? failures / calls : 0.0;
  }
}

plugins::TrainerState GrpoTrainer::trainer_state() const {
  return {policy_.global_step, max_steps_, prompts_->epoch()};
}

void GrpoTrainer::score(GenerationBatch& batch, Metrics& m, const plugins::TrainerState& state) {
  const double start = now_s();
  std::vector<long> failed_before;
  for (const auto& fn : rewards_->functions()) failed_before.push_back(fn->failures());
  try {
    batch.rewards = rewards_->score(batch.samples, state);
  } catch (const plugins::ScoreInterrupted& e) {  // a stop signal: the worker is killed, the batch dropped
    throw StopRequested(e.what());
  }
  for (size_t f = 0; f < failed_before.size(); ++f) {
    const plugins::RewardFunction& fn = *rewards_->functions()[f];
    m["rewards/" + fn.name() + "/internal_errors"] += static_cast<double>(fn.failures() - failed_before[f]);
  }
  m["time/reward"] += now_s() - start;
}

Advantages GrpoTrainer::advantages_of(const GenerationBatch& batch, Metrics& m, Purpose purpose) {
  const std::string prefix = purpose == Purpose::Evaluation ? "eval_" : "";
  const rewards::RewardMatrix& R = batch.rewards;
  for (size_t f = 0; f < R.names.size(); ++f) {
    m[prefix + "rewards/" + R.names[f] + "/mean"] = rewards::nanmean(R.by_fn[f]);
    m[prefix + "rewards/" + R.names[f] + "/std"] = rewards::nanstd(R.by_fn[f]);
    m[prefix + "rewards/" + R.names[f] + "/nan_frac"] =
        static_cast<double>(rewards::count_nan(R.by_fn[f])) / static_cast<double>(std::max<size_t>(1, batch.size()));
  }
  Advantages adv = group_advantages(at::tensor(R.total, at::kDouble), s_.batch.num_generations, s_.loss.scale);
  if (adv.all_nan_rows > 0)
    spdlog::warn("{} of {} completions got no reward from any function (all NaN): their advantage is 0",
                 adv.all_nan_rows, batch.size());
  if (completion_log_ && purpose == Purpose::Training)
    completion_log_->write(policy_.global_step + 1, batch.samples, R, adv.advantages);
  m[prefix + "reward"] = rewards::nanmean(R.total);
  m[prefix + "reward_std"] = rewards::nanstd(R.total);
  m[prefix + "frac_reward_zero_std"] = adv.frac_zero_std;
  return adv;
}

}  // namespace grpo::trainer
