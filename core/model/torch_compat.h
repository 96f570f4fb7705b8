// What the model needs of LibTorch that is spelled differently across 2.x
// releases (the project builds against 2.1 and later; the pinned wheel is 2.11).
#pragma once

#include <ATen/ATen.h>

namespace grpo::model {

// softmax(q k^T * scale + mask) v with q: [B, H, T, D], k/v: [B, H, S, D],
// mask: additive [B, 1, T, S]. LibTorch picks the fused kernel for the device
// and the mask (memory-efficient on CUDA, flash on the CPU). The result may be
// laid out [B, T, H, D] underneath: callers reshape, never view.
inline at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            double scale) {
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, scale);
}

}  // namespace grpo::model
