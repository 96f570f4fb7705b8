// What every trainer shares: AdamW from the run's flags, and checkpoints
// written under a temporary name, renamed, and pruned to save_total_limit.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include "config/config.h"
#include "model/transformer.h"

namespace grpo::trainer {

std::unique_ptr<torch::optim::AdamW> make_adamw(const config::Config& cfg, model::CausalLMImpl& model);

// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::AdamW& optimizer, double lr);

// Writes output_dir/checkpoint-<step>: the model as Hugging Face loads it,
// the tokenizer files of tokenizer_dir, trainer_state.json = state, and
// whatever `extra` writes into the temporary directory before it is renamed.
// Returns the checkpoint's directory.
std::string save_checkpoint(model::CausalLMImpl& model, const config::Config& cfg, int64_t step,
                            const std::string& tokenizer_dir, const nlohmann::json& state,
                            const std::function<void(const std::string& tmp_dir)>& extra = {});

}  // namespace grpo::trainer
