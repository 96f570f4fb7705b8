// Fused CPU kernels for inference (no autograd) in float32, bfloat16 and
// float16. LibTorch 1.13's CPU kernels for 16-bit types convert element by
// element and materialise every intermediate; at decode shapes (a few rows
// per sequence) that cost more than the matmuls. These compute in float32
// registers and round where the unfused ops round, so results agree with the
// at:: ops they replace to within a rounding step or two of the dtype
// (attention: to float32 accuracy, probabilities are not rounded to 16 bits).
#pragma once

#include <ATen/ATen.h>

#include "model/fused_scope.h"

namespace grpo::model::cpu {

// True inside a FusedScope when the tensors (at least one) are on the CPU,
// all of one supported dtype, and no gradient is wanted for any of them;
// otherwise the caller keeps the at:: ops (which promote mixed dtypes).
bool applies(std::initializer_list<at::Tensor> tensors);

// weight * (x * rsqrt(mean(x^2) + eps)) over the last dim, the normalisation
// in float32 and rounded to x's dtype before the weight multiplies, as
// Hugging Face's RMSNorm does.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// silu(gate) * up, each rounded to the dtype as the two at:: ops would; the
// result is contiguous. Inputs whose rows each have one stride (row_layout.h:
// the halves of a packed gate/up product) are read in place, others copied.
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

// x * cos + rotate_half(x) * sin for x [B, H, T, D] (last dim contiguous) and
// cos/sin broadcastable to [B, T, D], rounded as those ops round; the result
// is contiguous.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// A decoding step's attention over the slots (gpu::slot_attention's
// counterpart): softmax(q k^T * scale) v for q [b, Hq, 1, D] over
// keys/values [b, H_kv, capacity, D] (the first b slots, last dim
// contiguous), row i over its keys 0..min(positions[i], span - 1), each kv
// head serving its Hq / H_kv query heads; keys and values read once per
// (row, kv head), only a row's own; scores and sums in float32. Returns
// o_proj's input [b, 1, Hq D].
at::Tensor slot_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                          const at::Tensor& positions, int64_t span, double scale);

}  // namespace grpo::model::cpu
