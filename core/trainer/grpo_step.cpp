// One GRPO optimizer step, phase by phase (grpo.md): the next generation
// batch (sample, score), group-relative advantages, micro-batches, the
// constant old and reference log-probs, then per micro-batch the policy's
// log-probs, the clipped loss and backward, and finally the update.
#include <sys/resource.h>

#include <cmath>

#include <torch/types.h>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "model/device_memory.h"
#include "model/lora.h"
#include "trainer/checkpoint.h"
#include "trainer/data_parallel.h"
#include "trainer/grpo_trainer.h"
#include "trainer/step_phase.h"
#include "util/clock.h"

namespace grpo::trainer {

using util::now_s;

namespace {

double rss_gb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);
}

}  // namespace

Metrics GrpoTrainer::step() {
  const double start = now_s();
  const at::Device device = s_.model.device;
  Metrics m;
  MetricAccumulator on_device;  // the micro-batches' metrics, read once below
  policy_.step_active_tokens = 0;
  for (int64_t k = 0; k < s_.batch.grad_accum; ++k) {
    if (rollout_.queue.empty()) {
      GenerationBatch batch;
      // --offload_model: the reference and the gradients leave the GPU while the sampler runs (before the
      // phase, whose peak then shows what that saves).
      AwayForSampling away = offload_for_sampling(/*gradients_zero=*/k == 0, m);
      run_phase(StepPhase::Generation, device, m, phase_sizes(StepPhase::Generation),
                [&] { batch = next_generation_batch(m, k); });             // sample, score
      std::vector<MicroBatch> parts = micro_batches_of(batch, m);         // advantages, split
      run_phase(StepPhase::Logprobs, device, m, phase_sizes(StepPhase::Logprobs), [&] {
        bring_back(away, m);
        add_constant_logprobs(parts, m, on_device);                       // old, reference, IS correction
      });
      for (int64_t it = 0; it < s_.batch.iterations; ++it)
        rollout_.queue.insert(rollout_.queue.end(), parts.begin(), parts.end());
    }
    if (k + 1 == s_.batch.grad_accum)  // its backward makes the gradients final: reduced while it runs
      policy_.sync->before_last_backward("the gradients of step " + std::to_string(policy_.global_step + 1));
    run_phase(StepPhase::Backward, device, m, phase_sizes(StepPhase::Backward),
              [&] { accumulate(rollout_.queue.front(), m, on_device); });  // policy log-probs, loss, backward
    rollout_.queue.pop_front();
  }
  for (const auto& [k, v] : on_device.read()) m[k] = v;  // the step's one wait for the device before clipping
  run_phase(StepPhase::Optimizer, device, m, phase_sizes(StepPhase::Optimizer),
            [&] { update(m); });  // clip, AdamW, reference sync
  ++policy_.global_step;
  // The new weights to the sampler (merge, copy or push), after the step is
  // counted: a failed push still leaves a checkpoint that holds this update.
  // Under async_generate this happens when the next batch is launched.
  if (!s_.sampling.async) sync_sampler_weights(m);
  if (policy_.nonfinite_steps >= kMaxNonFiniteSteps)
    throw NonFiniteGradients(fmt::format(
        "the gradients of the last {} steps were not finite (NaN or infinite), so none of them was applied: check "
        "the rewards and the reference model for NaN or infinite values, lower --learning_rate or --max_grad_norm, "
        "or train in --torch_dtype float32",
        kMaxNonFiniteSteps));
  m["global_step"] = static_cast<double>(policy_.global_step);
  m["epoch"] = prompts_->epoch();
  m["step_time"] = now_s() - start;
  m["memory/rss_gb"] = rss_gb();
  if (const auto memory = model::device_memory(device)) {
    m["memory/allocated_gb"] = memory->allocated_gb;
    m["memory/reserved_gb"] = memory->reserved_gb;
  }
  for (const auto& [name, value] : plugin_metrics_->drain()) m[name] = value;
  return m;
}

// A stream synchronize costs microseconds; the step waits for its metrics once anyway.
double GrpoTrainer::settled_now() const {
  model::wait_for_stream(s_.model.device);
  return now_s();
}

std::string GrpoTrainer::phase_sizes(StepPhase phase) const {
  const BatchSettings& b = s_.batch;
  const int64_t completion = s_.loss.options.max_completion_length;
  switch (phase) {
    case StepPhase::Generation:
      return fmt::format("{} prompt(s) x {} completions of up to {} tokens", b.prompts_per_generation,
                         b.num_generations, completion);
    case StepPhase::Logprobs:
    case StepPhase::Backward:
      return fmt::format("micro-batches of {} completion(s) of up to {} tokens after their prompt", b.micro_batch,
                         completion);
    case StepPhase::Optimizer:
      return fmt::format("AdamW state {:.2f} GiB", static_cast<double>(optimizer_state_bytes(*policy_.optimizer)) /
                                                       (1024.0 * 1024.0 * 1024.0));
  }
  return "";
}

std::vector<MicroBatch> GrpoTrainer::micro_batches_of(const GenerationBatch& batch, Metrics& m) {
  const Advantages adv = advantages_of(batch, m, Purpose::Training);
  return split_micro_batches(batch, adv.advantages, s_.batch.micro_batch, 0, s_.loss.overlong_filter, world_.rank(),
                             world_.size(), s_.model.device);
}

// Constant across the iterations over a generation batch: computed once,
// without gradient, with the policy's own probabilities (no LoRA dropout).
void GrpoTrainer::add_constant_logprobs(std::vector<MicroBatch>& parts, Metrics& m, MetricAccumulator& on_device) {
  const double t0 = now_s();
  const model::LogprobOptions lp{s_.loss.temperature, kLogprobChunk, /*entropy=*/false};
  model::CausalLMImpl& policy = *policy_.policy;
  torch::NoGradGuard no_grad;
  policy.eval();
  for (MicroBatch& mb : parts) {
    if (needs_old_logp_) mb.old_logp = completion_logprobs(policy, mb.batch, lp).logprobs;
    if (policy_.reference) {
      mb.ref_logp = completion_logprobs(*policy_.reference, mb.batch, lp).logprobs;
    } else if (s_.model.lora && s_.loss.options.beta != 0.0) {
      model::AdaptersDisabled base(policy);
      mb.ref_logp = completion_logprobs(policy, mb.batch, lp).logprobs;
    }
    if (s_.loss.is_correction && mb.old_logp.defined() && mb.sampler_logp.defined()) {
      MetricTensors c;
      mb.is_weight = importance_weights(mb.old_logp, mb.sampler_logp, mb.batch.completion_mask, s_.loss.is_mode,
                                        s_.loss.is_cap, c);
      on_device.mean(c);
    }
  }
  policy.train();
  m["time/logprob"] += settled_now() - t0;
}

void GrpoTrainer::accumulate(const MicroBatch& mb, Metrics& m, MetricAccumulator& on_device) {
  const double t0 = now_s();
  const model::LogprobOptions lp{s_.loss.temperature, kLogprobChunk, /*entropy=*/true};
  model::TokenLogprobs logp = completion_logprobs(*policy_.policy, mb.batch, lp);
  LossOptions options = s_.loss.options;
  // Over the ranks' average of gradients: the whole batch's count per rank.
  options.dapo_active_tokens = mb.dapo_active_tokens / world_.size();
  LossOutput out = grpo_loss(
      {logp.logprobs, mb.old_logp, mb.ref_logp, mb.advantages, mb.batch.completion_mask, mb.is_weight}, options);
  const double t1 = settled_now();
  out.loss.backward();
  m["time/backward"] += settled_now() - t1;
  m["time/logprob"] += t1 - t0;
  on_device.sum("loss", out.loss.detach());  // each micro-batch's loss is already its share of the step's
  const at::Tensor& mask = mb.batch.completion_mask;
  if (mb.active_tokens > 0) on_device.mean("entropy", (logp.entropy * mask).sum() / mask.sum());
  on_device.mean(out.metrics);
  policy_.step_active_tokens += mb.active_tokens;
}

void GrpoTrainer::update(Metrics& m) {
  const double t_opt = now_s();
  PolicyState& p = policy_;
  // Until AdamW's step the weights are the last finished step's (step_phase.h).
  const std::string sizes = phase_sizes(StepPhase::Optimizer);
  // Every rank's gradients combined (averaged, or on their ZeRO owners);
  // whether anything carried loss is decided over all of them.
  const std::string what = "the gradients of step " + std::to_string(p.global_step + 1);
  const int64_t active = before_the_update(s_.model.device, sizes, [&] {
    return p.sync->combine_gradients(p.step_active_tokens, what);
  });
  const double t_clip = settled_now();
  m["time/grad_sync"] = t_clip - t_opt;
  const double grad_norm = before_the_update(s_.model.device, sizes, [&] {
    return p.sync->clip(s_.optimizer.max_grad_norm, what);
  });
  const double lr = p.schedule->lr(p.global_step);
  // A NaN or infinite gradient would make every weight NaN: that update is
  // not applied (the step still counts, as a loss scaler's skipped step does).
  const bool finite = std::isfinite(grad_norm);
  p.nonfinite_steps = finite ? 0 : p.nonfinite_steps + 1;
  if (!finite)
    spdlog::warn("step {}: the gradient norm is {} (the loss was {}); its update is skipped, the weights are those of "
                 "the step before ({} such step(s) in a row; the run stops at {})",
                 p.global_step + 1, std::isnan(grad_norm) ? "NaN" : "infinite", m.count("loss") ? m.at("loss") : 0.0,
                 p.nonfinite_steps, kMaxNonFiniteSteps);
  if (active > 0 && finite) {  // nothing carried loss (every row filtered): no update at all, not even weight decay
    set_learning_rate(*p.optimizer, lr);
    // --offload_optimizer: the moments are on the GPU for the step alone.
    before_the_update(s_.model.device, sizes, [&] { park_optimizer_state(false, m); });
    p.optimizer->step();
    park_optimizer_state(true, m);
  }
  p.optimizer->zero_grad(/*set_to_none=*/false);  // the next backward adds into these tensors: see make_adamw
  p.sync->after_step("the weights of step " + std::to_string(p.global_step + 1));  // ZeRO: from their owners
  m["grad_norm"] = grad_norm;
  m["memory/optimizer_state_mb"] = static_cast<double>(optimizer_state_bytes(*p.optimizer)) / (1 << 20);
  m["learning_rate"] = lr;
  m["time/optimizer"] = settled_now() - t_clip;
  m.emplace("time/weight_sync", 0.0);  // logged even when nothing moves (in-process views)
  if (p.reference && s_.ref_sync.enabled && (p.global_step + 1) % s_.ref_sync.every == 0) {
    // TR-DPO's soft update, as TRL's SyncRefModelCallback does it.
    torch::NoGradGuard no_grad;
    const double alpha = s_.ref_sync.alpha;
    auto ref = p.reference->parameters(), pol = p.policy->parameters();
    for (size_t i = 0; i < ref.size(); ++i) ref[i].mul_(1.0 - alpha).add_(pol[i], alpha);
  }
}

}  // namespace grpo::trainer
