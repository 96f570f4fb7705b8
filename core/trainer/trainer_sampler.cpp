// The sampler plugin's side of the trainer: creating it with views of the
// weights it samples from, keeping those weights current, and async_generate.
//
// async_generate (grpo.md §7): while the trainer works through generation
// batch k, batch k+1 is sampled and scored on a background thread with the
// weights as they were when it started — one step off-policy. The trainer
// recomputes `old` with its current weights and corrects for the sampler's
// own log-probs (importance_sampling.h).

#include <grpo/sampler.h>
#include <torch/types.h>

#include "model/lora.h"
#include "model/weights.h"
#include "plugins/plugin_options.h"
#include "trainer/grpo_trainer.h"
#include "util/clock.h"

namespace grpo::trainer {

using util::now_s;

void GrpoTrainer::create_sampler(at::ScalarType dtype) {
  const std::string resume = cfg_.get_string("resume_from_checkpoint");
  const std::string run_config = cfg_.to_json().dump();
  // The sampler gets the policy's parameters as views: in process it aliases
  // them, so every optimizer step is visible to the next generation for free;
  // out of process it gets their values now and after every update.
  plugins::ResolvedPlugin sampler = registry_.require(cfg_.get_string("sampler"), GRPO_SAMPLER_INTERFACE);
  // Filled only where the sampler declares these options; sampler_args win.
  const nlohmann::json run_values = {{"model", model_dir_},
                                     {"torch_dtype", cfg_.get_string("torch_dtype")},
                                     {"num_threads", cfg_.get_int("num_threads")}};
  sampler_ = plugins::SamplerClient::create(
      sampler, plugins::resolve_plugin_options(sampler.info, run_values, cfg_.get_json("sampler_args")),
      plugin_metrics_, run_config);
  if (lora_) {  // the sampler's model has no adapters: it reads W + scaling * B A, merged after each step
    merged_ = model::merged_weight_buffers(*policy_);
    model::merge_lora_into(*policy_, merged_);
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (const auto& p : policy_->named_parameters())
      if (!model::is_adapter_parameter(p.key()))
        named.emplace_back(p.key(), merged_.count(p.key()) ? merged_.at(p.key()) : p.value());
    views_ = std::make_unique<WeightViews>(named);
  } else {
    if (async_ && sampler_->in_process()) {  // it samples while the policy trains: give it its own copy
      sampler_copy_ = model::load_model(resume.empty() ? model_dir_ : resume, dtype);
      for (auto& p : sampler_copy_->parameters()) p.set_requires_grad(false);
    }
    views_ = std::make_unique<WeightViews>(sampler_copy_ ? *sampler_copy_ : *policy_);
  }
  sampler_->load_weights(views_->tensors(), (sampler_->in_process() ? GRPO_WEIGHTS_VIEW : 0u) |
                                                GRPO_WEIGHTS_LAST_BUCKET | (lora_ ? GRPO_WEIGHTS_MERGED_LORA : 0u));
}

void GrpoTrainer::launch_generation() {
  // Everything the background thread needs that the main thread changes is
  // taken here: the prompts, the seed index and the trainer state.
  std::vector<const Prompt*> prompts = prompts_->next(static_cast<size_t>(prompts_per_generation_));
  const int64_t generation = generations_++;
  const plugins::TrainerState state = trainer_state();
  pending_ = std::async(std::launch::async, [this, prompts, generation, state] {
    PendingBatch out;
    out.batch = generate(prompts, out.metrics, "", generation);
    score(out.batch, out.metrics, state);
    return out;
  });
}

GenerationBatch GrpoTrainer::next_async_batch(Metrics& m) {
  if (!pending_.valid()) launch_generation();  // the first batch has nothing to overlap with
  const double t0 = now_s();
  PendingBatch ready = pending_.get();  // rethrows what the background thread threw
  m["time/generate_wait"] += now_s() - t0;
  for (const auto& [k, v] : ready.metrics) m[k] += v;
  return std::move(ready.batch);
}

void GrpoTrainer::wait_for_generation() {
  if (pending_.valid()) pending_.wait();
}

void GrpoTrainer::sync_sampler_weights(Metrics& m) {
  if (sampler_->in_process() && !sampler_copy_ && !lora_) return;  // it aliases the policy: nothing moves
  const double t0 = now_s();
  if (lora_) model::merge_lora_into(*policy_, merged_);  // the merged buffers are what the sampler reads
  if (!sampler_->in_process()) {
    sampler_->load_weights(views_->tensors(), GRPO_WEIGHTS_LAST_BUCKET);
  } else if (sampler_copy_) {  // the sampler reads its own copy while the policy trains
    torch::NoGradGuard no_grad;
    auto from = policy_->parameters(), to = sampler_copy_->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  m["time/weight_sync"] += now_s() - t0;
}

}  // namespace grpo::trainer
