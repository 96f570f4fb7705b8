// LoRA's checkpoint files: PEFT's adapter directory (adapter_model.safetensors
// + adapter_config.json, which peft.PeftModel.from_pretrained and
// transformers' load_adapter read), and a full checkpoint with the adapters
// merged into the weights.
#pragma once

#include <stdexcept>
#include <string>

#include "model/lora.h"
#include "model/transformer.h"
#include "util/user_error.h"

namespace grpo::model {

inline constexpr const char* kAdapterWeightsName = "adapter_model.safetensors";
inline constexpr const char* kAdapterConfigName = "adapter_config.json";

// Messages name the file and, where one is at fault, the tensor or field.
class AdapterFileError : public ::grpo::UserError {
 public:
  using UserError::UserError;
};

// Writes the model's adapters as PEFT saves them: tensors named
// base_model.model.<parameter name> (e.g. base_model.model.model.layers.0.
// self_attn.q_proj.lora_A.weight) in their own dtype, and a LORA / CAUSAL_LM
// config with options' rank, alpha, dropout and the resolved target modules.
// base_model: the base model's directory or hub name, recorded as
// base_model_name_or_path. Files are written to temporary names and renamed.
void save_peft_adapter(CausalLMImpl& model, const LoraOptions& options, const std::string& dir,
                       const std::string& base_model);

// Reads a PEFT LoRA adapter directory into the model: attaches adapters as
// the config says when the model has none (otherwise they must have the same
// targets and rank), then copies every tensor, converting to the adapters'
// dtype. Every adapter parameter must be in the file and every tensor of the
// file must be an adapter parameter of the right shape. Returns the options
// read from the config (seed left at its default).
LoraOptions load_peft_adapter(CausalLMImpl& model, const std::string& dir);

// A model directory, or a PEFT adapter directory (a LoRA checkpoint) on top
// of the local base model its adapter_config.json names: the base loaded and
// the adapters attached, for inference (generate, evaluate). Errors name the
// directory and what is missing.
CausalLM load_model_or_adapter(const std::string& dir, at::ScalarType dtype = at::kFloat, at::Device device = at::kCPU);

// Writes a full Hugging Face checkpoint with W + scaling * B A in place of
// every adapted weight (no adapter tensors): transformers and vLLM load it as
// a plain model of the base architecture.
void save_merged_model(CausalLMImpl& model, const std::string& dir, const std::string& tokenizer_dir = "",
                       size_t max_shard_bytes = size_t(5) << 30);

}  // namespace grpo::model
