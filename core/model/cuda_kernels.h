// Fused CUDA kernels for inference (no autograd) in float32, bfloat16 and
// float16. A decoding step of one row runs a few dozen elementwise kernels
// per layer around its matrix-vector products: RMSNorm alone is eight
// (conversions, square, mean, add, rsqrt, two multiplies), rotary embeddings
// five per tensor. Each costs a launch of a few microseconds even inside a
// CUDA graph, more than the layer's weights take to stream at batch 1. These
// replace each such chain (and the residual add before a normalisation) by
// one kernel that computes in float32 registers and rounds where the unfused
// ops round: rope and the residual add give the at:: ops' bits, silu_mul and
// rms_norm agree within a rounding step of the dtype (exp's last bit; the sum
// of squares adds in another order). They are launched on the current
// stream, so a CUDA graph captures them.
#pragma once

#include <ATen/ATen.h>

#include <initializer_list>
#include <utility>

namespace grpo::model::gpu {

// True inside a FusedScope (fused_scope.h) when this is a CUDA build, the
// kernels are enabled, the tensors are all on a CUDA device in one supported
// dtype, and no gradient is wanted for any of them; otherwise the caller
// keeps the at:: ops.
bool applies(std::initializer_list<at::Tensor> tensors);

// Turns the kernels off (or on again) for the whole process, so that a test
// can run the same step on the at:: ops; on by default.
void set_enabled(bool on);

// weight * (x * rsqrt(mean(x^2) + eps)) over the last dim, the normalisation
// in float32 and rounded to x's dtype before the weight multiplies, as
// Hugging Face's RMSNorm does.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// (x + residual, rms_norm(x + residual)) in one kernel: a residual add and
// the normalisation after it; the sum as at::add rounds it.
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                               const at::Tensor& weight, double eps);

// silu(gate) * up, each rounded to the dtype as the two at:: ops would.
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

// x * cos + rotate_half(x) * sin for x [B, H, T, D] (any strides) and
// cos/sin [B or 1, T, D], rounded as those ops round; the result is
// contiguous.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace grpo::model::gpu
