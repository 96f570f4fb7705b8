// LoRA on a CausalLM: adapters on the projection linears of the decoder
// layers, the base frozen, the base model recovered by disabling the adapters
// (the KL reference needs no second copy of the weights), and the merged
// weights W + scaling * B A for samplers and full checkpoints.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/proj.h"
#include "model/transformer.h"

namespace grpo::model {

struct LoraOptions {
  int64_t rank = 8;
  double alpha = 32.0;  // scaling = alpha / rank
  double dropout = 0.05;
  // Projection names, or "all-linear": every projection linear of the decoder
  // layers and not lm_head, as PEFT and ms-swift read it.
  std::vector<std::string> target_modules = {"all-linear"};
  uint64_t seed = 42;  // draws the A factors

  double scaling() const { return alpha / static_cast<double>(rank); }
};

// The projection names a target list may hold, in layer order.
const std::vector<std::string>& lora_module_names();

// The projection names `target_modules` selects (sorted, unique). Throws
// naming an unknown entry and listing the valid ones.
std::vector<std::string> resolve_target_modules(const std::vector<std::string>& target_modules);

// Attaches an adapter to every targeted projection (A kaiming-uniform as
// PEFT initialises it, B zero, so the model's output is unchanged) and freezes
// every other parameter: afterwards only adapter parameters require grad.
// The adapters take the device of the weights they adapt, and float32 (float64
// under a float64 base). Throws on invalid options or if adapters are attached.
void apply_lora(CausalLMImpl& model, const LoraOptions& options);

// The projections of the decoder layers by qualified name
// ("model.layers.0.self_attn.q_proj"), those with an adapter when adapted_only.
std::vector<std::pair<std::string, std::shared_ptr<ProjImpl>>> projections(CausalLMImpl& model,
                                                                           bool adapted_only = true);
bool has_adapters(CausalLMImpl& model);

// Empty when the model's adapters are the ones `options` describes (same
// rank, scaling and resolved target modules), else a sentence saying how they
// differ.
std::string adapter_mismatch(CausalLMImpl& model, const LoraOptions& options);

// True for a parameter of an adapter (".lora_A." / ".lora_B." in its name).
bool is_adapter_parameter(const std::string& name);

// The parameters to hand the optimizer under LoRA.
std::vector<at::Tensor> adapter_parameters(CausalLMImpl& model);

void set_adapters_enabled(CausalLMImpl& model, bool enabled);

// Disables the adapters for its lifetime (the KL reference pass), then
// restores each projection's previous state.
class AdaptersDisabled {
 public:
  explicit AdaptersDisabled(CausalLMImpl& model);
  ~AdaptersDisabled();
  AdaptersDisabled(const AdaptersDisabled&) = delete;
  AdaptersDisabled& operator=(const AdaptersDisabled&) = delete;

 private:
  std::vector<std::pair<std::shared_ptr<ProjImpl>, bool>> saved_;
};

// One tensor per adapted projection's weight ("model.layers.0.self_attn.q_proj.weight"),
// shaped, typed and placed like the weight: allocate once, then merge_lora_into
// after every optimizer step.
std::map<std::string, at::Tensor> merged_weight_buffers(CausalLMImpl& model);

// Writes W + scaling * B A into out[name] for every adapted projection (out
// holds a tensor for each, as merged_weight_buffers makes them). No
// [out, in]-sized temporary is allocated. Throws naming a missing or
// mis-shaped buffer.
void merge_lora_into(CausalLMImpl& model, std::map<std::string, at::Tensor>& out);

// Every parameter a Hugging Face checkpoint of the base architecture holds,
// the adapted weights merged: what a rollout server or a merged checkpoint
// needs. Fresh tensors for the adapted weights, the model's own for the rest.
std::vector<std::pair<std::string, at::Tensor>> merged_state(CausalLMImpl& model);

}  // namespace grpo::model
