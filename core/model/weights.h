// Moving weights between Hugging Face checkpoint files and a CausalLM.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

#include "model/checkpoint_files.h"
#include "model/safetensors.h"
#include "model/transformer.h"

namespace grpo::model {

at::ScalarType to_scalar_type(DType dtype);
DType to_dtype(at::ScalarType type);

// A view of the file's bytes as a CPU tensor: read-only memory, so copy or
// convert it before writing.
at::Tensor tensor_view(const TensorView& view);

// The view a writer reads `t` through, on any device: its bytes are copied
// into the writer's buffer when it is written (TensorView::read), so a model
// on a GPU is saved without a host copy of all of it at once. `t` is kept
// alive by the view.
TensorView writable_view(std::string name, const at::Tensor& t);

// Checks every expected tensor (name, shape) and copies it into the model's
// parameters, converting to the parameters' dtype. Throws naming the tensor
// and the file on a missing tensor or a wrong shape. LoRA adapters are not
// part of a base checkpoint: they keep their values.
void load_weights(CausalLMImpl& model, const CheckpointFiles& files);

// The model of `config` with uninitialised parameters of `dtype` on
// `device`, no value drawn (model/skip_init.h): for a caller that fills every
// parameter next.
CausalLM build_empty(const ModelConfig& config, const at::Device& device, at::ScalarType dtype);

// Loads a Hugging Face model directory (config.json + safetensors).
// dtype: the parameters' dtype (the checkpoint's is converted); device: where
// they live (the files are read straight into them, no value drawn first).
CausalLM load_model(const std::string& dir, at::ScalarType dtype = at::kFloat, at::Device device = at::kCPU);

// A model of its own holding a copy of `model`'s base weights (LoRA adapters
// left out): no storage shared, no gradients, same dtype and device. What a
// sampler reads while the original trains, without reading the files again.
CausalLM copy_model(CausalLMImpl& model);

// Writes config.json and model.safetensors (sharded beyond max_shard_bytes)
// so that Hugging Face transformers and vLLM load the directory; the
// tokenizer files of `tokenizer_dir` (when given) are copied beside them.
// LoRA adapters are left out: this is the base model (save_peft_adapter
// writes the adapters, save_merged_model merges them in).
void save_model(CausalLMImpl& model, const std::string& dir, const std::string& tokenizer_dir = "",
                size_t max_shard_bytes = size_t(5) << 30);

// save_model for tensors given by Hugging Face name (e.g. merged weights):
// config.json from `config`, torch_dtype from the first tensor.
void save_model_tensors(const ModelConfig& config, const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                        const std::string& dir, const std::string& tokenizer_dir = "",
                        size_t max_shard_bytes = size_t(5) << 30);

// Copies tokenizer.json, tokenizer_config.json and the other files a
// tokenizer or generation settings live in, those that exist.
void copy_tokenizer_files(const std::string& from_dir, const std::string& to_dir);

}  // namespace grpo::model
