// The one place that knows which LibTorch it is built against (1.13 on the
// build machine, 2.x with CUDA on the GPU machine).
#pragma once

#include <ATen/ATen.h>
#include <torch/version.h>

#include "model/cpu_kernels.h"

namespace grpo::model {

constexpr bool kTorch2 = TORCH_VERSION_MAJOR >= 2;

// softmax(q k^T * scale + mask) v with q: [B, H, T, D], k/v: [B, H, S, D],
// mask: additive [B, 1, T, S]. 2.x picks a fused kernel; 1.13 the plain path,
// or for decoding on the CPU (a few query rows per head, no gradient) a fused
// kernel: 1.13's CPU bmm runs one small gemm per (batch, head) through
// select(), and its 16-bit elementwise ops materialise every intermediate.
inline at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            double scale) {
#if TORCH_VERSION_MAJOR >= 2 && TORCH_VERSION_MINOR >= 1
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false, scale);
#else
  constexpr int64_t kDecodeRows = 8;
  if (q.size(2) <= kDecodeRows && cpu::applies({q, k, v, mask})) return cpu::decode_attention(q, k, v, mask, scale);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)).mul_(scale).add_(mask);  // [B, H, T, S]
  at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
  return at::matmul(probs, v);  // [B, H, T, D]
#endif
}

}  // namespace grpo::model
