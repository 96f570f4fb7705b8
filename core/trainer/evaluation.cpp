// Evaluation during training: the validation prompts, sampled and scored as
// in training, with nothing trained.
#include <spdlog/spdlog.h>

#include "trainer/grpo_trainer.h"
#include "util/clock.h"

namespace grpo::trainer {

using util::now_s;

// per_device_eval_batch_size completions (G per prompt) per process at a time.
Metrics GrpoTrainer::evaluate() {
  wait_for_generation();  // the sampler takes one call at a time
  const double start = now_s();
  const auto G = static_cast<size_t>(s_.batch.num_generations);
  const size_t per_batch = std::max<size_t>(1, static_cast<size_t>(s_.batch.eval_batch * world_.size()) / G);
  std::vector<const Prompt*> all = val_prompts_->next(val_prompts_->size());
  GenerationBatch whole;
  Metrics per_batch_metrics;  // only eval_num_tokens adds up across batches; the rest is recomputed on `whole`
  AwayForSampling away = offload_for_sampling(/*gradients_zero=*/true, per_batch_metrics);  // between steps
  for (size_t b = 0; b < all.size(); b += per_batch) {
    std::vector<const Prompt*> part(all.begin() + static_cast<std::ptrdiff_t>(b),
                                    all.begin() + static_cast<std::ptrdiff_t>(std::min(all.size(), b + per_batch)));
    GenerationBatch batch =
        rollout(part, per_batch_metrics, Purpose::Evaluation, rollout_.generations++, trainer_state());
    for (size_t g = 0; g < batch.size() / G; ++g) whole.append_group(batch, g, G);
  }
  bring_back(away, per_batch_metrics);
  Metrics m;
  advantages_of(whole, m, Purpose::Evaluation);
  m["eval_num_tokens"] = per_batch_metrics["eval_num_tokens"];
  m["eval_completions/mean_length"] = m["eval_num_tokens"] / static_cast<double>(whole.size());
  m["eval_runtime"] = now_s() - start;
  plugin_metrics_->drain();  // the rewards' own metrics of evaluation are not the next training step's
  spdlog::info("eval at step {}: reward {:.4f} over {} prompts", policy_.global_step, m["eval_reward"], all.size());
  return m;
}

}  // namespace grpo::trainer
