// GRPO checkpoints: everything a resumed run needs to continue exactly — the
// weights (the checkpoint's model), AdamW's moments, the step, the prompt
// order, the sampling-seed counter and the random state.
#include <filesystem>
#include <fstream>

#include <spdlog/spdlog.h>
#include <torch/serialize.h>

#include "trainer/checkpoint.h"
#include "trainer/grpo_trainer.h"

namespace grpo::trainer {

namespace fs = std::filesystem;

void GrpoTrainer::save_checkpoint() {
  if (!world_.is_main()) return;  // every rank holds the same weights and optimizer state
  if (rollout_.pending.valid()) spdlog::warn("checkpoint at step {}: the batch being sampled in the background is not part "
                                     "of it; a resumed run samples it again", policy_.global_step);
  if (!rollout_.queue.empty())  // mid generation batch (steps_per_generation > GA or num_iterations > 1)
    spdlog::warn("checkpoint at step {} falls inside a generation batch: a run resumed from it samples a new batch "
                 "instead of finishing this one ({} micro-batches)",
                 policy_.global_step, rollout_.queue.size());
  trainer::save_checkpoint(
      *policy_.policy, s_.checkpoint, policy_.global_step, s_.model.dir,
      {{"global_step", policy_.global_step},
       {"max_steps", max_steps_},
       {"epoch", prompts_->epoch()},
       {"generations", rollout_.generations},
       {"prompts", prompts_->state()}},
      [&](const std::string& tmp) {
        torch::save(*policy_.optimizer, (fs::path(tmp) / "optimizer.pt").string());
        // LoRA dropout draws from the default generator: resume its sequence too.
        torch::save(at::globalContext().defaultGenerator(at::kCPU).get_state(), (fs::path(tmp) / "rng_state.pt").string());
      });
}

void GrpoTrainer::resume_from(const std::string& dir) {
  const fs::path state_path = fs::path(dir) / "trainer_state.json", optimizer_path = fs::path(dir) / "optimizer.pt";
  if (!fs::exists(state_path) || !fs::exists(optimizer_path))
    throw config::ConfigError("--resume_from_checkpoint " + dir +
                              ": not a training checkpoint (needs trainer_state.json and optimizer.pt)");
  nlohmann::json state = nlohmann::json::parse(std::ifstream(state_path));
  policy_.global_step = state.at("global_step").get<int64_t>();
  rollout_.generations = state.value("generations", policy_.global_step);
  prompts_->restore(state.at("prompts"));
  torch::load(*policy_.optimizer, optimizer_path.string());
  if (fs::exists(fs::path(dir) / "rng_state.pt")) {
    at::Tensor rng;
    torch::load(rng, (fs::path(dir) / "rng_state.pt").string());
    at::Generator generator = at::globalContext().defaultGenerator(at::kCPU);  // a handle to the same generator
    generator.set_state(rng);
  }
  spdlog::info("resumed from {} at step {}", dir, policy_.global_step);
}

}  // namespace grpo::trainer
