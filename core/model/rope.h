// Rotary position embeddings (RoPE), with Llama 3's frequency scaling.
#pragma once

#include <ATen/ATen.h>

#include "model/model_config.h"

namespace grpo::model {

// inv_freq: [head_dim / 2], float32.
at::Tensor rope_inv_freq(const ModelConfig& config);

// cos, sin: [B, T, head_dim] in `dtype` for position_ids [B, T].
std::pair<at::Tensor, at::Tensor> rope_cos_sin(const at::Tensor& inv_freq, const at::Tensor& position_ids,
                                               at::ScalarType dtype);

// x: [B, H, T, D] rotated by cos/sin: [B, T, D] (the halves layout of Hugging Face).
at::Tensor apply_rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace grpo::model
