// What every trainer shares: AdamW from the run's flags, and checkpoints
// written under a temporary name, renamed, and pruned to save_total_limit.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>
#include <torch/optim/adamw.h>

#include "model/lora.h"
#include "model/transformer.h"
#include "trainer/settings.h"

namespace grpo::trainer {

// The parameters that train (under LoRA: the adapters only).
std::vector<at::Tensor> trainable_parameters(model::CausalLMImpl& model);

// AdamW over trainable_parameters(model).
std::unique_ptr<torch::optim::AdamW> make_adamw(const OptimizerSettings& settings, model::CausalLMImpl& model);
// ... over `params` (under ZeRO: this rank's share of them).
std::unique_ptr<torch::optim::AdamW> make_adamw(const OptimizerSettings& settings, std::vector<at::Tensor> params);

// The policy as --train_type says: a full model, or the base with LoRA
// adapters (fresh, or read from a checkpoint's PEFT files when resuming).
model::CausalLM load_policy(const ModelSettings& settings);

// Sets the learning rate of every parameter group.
void set_learning_rate(torch::optim::AdamW& optimizer, double lr);

// Writes output_dir/checkpoint-<step>: the model as Hugging Face loads it
// (under LoRA: PEFT's adapter files, plus the merged model in merged/ when
// --merge_lora),
// the tokenizer files of tokenizer_dir, trainer_state.json = state, and
// whatever `extra` writes into the temporary directory before it is renamed.
// Returns the checkpoint's directory.
// A write that fails (a full disk) throws CheckpointWriteError naming the
// folder and the free space, and leaves earlier checkpoints as they were.
std::string save_checkpoint(model::CausalLMImpl& model, const CheckpointSettings& settings, int64_t step,
                            const std::string& tokenizer_dir, const nlohmann::json& state,
                            const std::function<void(const std::string& tmp_dir)>& extra = {});

class CheckpointWriteError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Removes output_dir/.checkpoint-N.tmp folders that a killed run left behind;
// returns how many.
size_t remove_unfinished_checkpoints(const std::string& output_dir);

}  // namespace grpo::trainer
