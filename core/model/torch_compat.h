// The one place that knows which LibTorch it is built against (1.13 on the
// build machine, 2.x with CUDA on the GPU machine).
#pragma once

#include <ATen/ATen.h>
#include <torch/version.h>

namespace grpo::model {

constexpr bool kTorch2 = TORCH_VERSION_MAJOR >= 2;

// softmax(q k^T * scale + mask) v with q: [B, H, T, D], k/v: [B, H, S, D],
// mask: additive [B, 1, T, S]. 2.x picks a fused kernel; 1.13 the plain path.
inline at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            double scale) {
#if TORCH_VERSION_MAJOR >= 2 && TORCH_VERSION_MINOR >= 1
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, scale);
#else
  if (q.size(2) <= 4) {
    // Decoding: a handful of query rows per head. 1.13's CPU bmm runs one
    // small gemm per (batch, head) through select() — slower than reading the
    // keys once with a broadcast multiply-add.
    at::Tensor scores = (q.unsqueeze(3) * k.unsqueeze(2)).sum(-1).mul_(scale).add_(mask);  // [B, H, T, S]
    at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    return (probs.unsqueeze(-1) * v.unsqueeze(2)).sum(3);  // [B, H, T, D]
  }
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale).add_(mask);  // [B, H, T, S]
  at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  return at::matmul(probs, v);  // [B, H, T, D]
#endif
}

}  // namespace grpo::model
