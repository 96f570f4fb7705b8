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
#include <tuple>
#include <utility>

namespace grpo::model::gpu {

// True inside a FusedScope (fused_scope.h) when this is a CUDA build, the
// kernels are enabled, the tensors are all on a CUDA device in one supported
// dtype, and no gradient is wanted for any of them; otherwise the caller
// keeps the at:: ops.
bool applies(std::initializer_list<at::Tensor> tensors);

// Whether the kernels are on (a CUDA build, and not turned off below).
bool enabled();

// Turns the kernels off (or on again) for the whole process, so that a test
// can run the same step on the at:: ops; on unless the environment has
// GRPO_FUSED_KERNELS=0.
void set_enabled(bool on);

// weight * (x * rsqrt(mean(x^2) + eps)) over the last dim, the normalisation
// in float32 and rounded to x's dtype before the weight multiplies, as
// Hugging Face's RMSNorm does.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

// (x + residual, rms_norm(x + residual)) in one kernel: a residual add and
// the normalisation after it; the sum as at::add rounds it.
std::pair<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& residual,
                                               const at::Tensor& weight, double eps);

// silu(gate) * up, each rounded to the dtype as the two at:: ops would; the
// result is contiguous. Inputs whose rows each have one stride (row_layout.h:
// the halves of a packed gate/up product) are read in place, others copied.
at::Tensor silu_mul(const at::Tensor& gate, const at::Tensor& up);

// x * cos + rotate_half(x) * sin for x [B, H, T, D] (any strides) and
// cos/sin [B or 1, T, D], rounded as those ops round; the result is
// contiguous.
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

// A decoding step's keys k and values v [b, H_kv, 1, D] (any strides), k
// rotated as rope() rotates it (cos/sin [b, 1, D]), written into the first b
// slots of keys/values [slots, H_kv, capacity, D] at positions [b] (int64 on
// the device): the rotary embedding and both cache writes in one kernel.
void rope_into_slots(const at::Tensor& k, const at::Tensor& v, const at::Tensor& cos, const at::Tensor& sin,
                     const at::Tensor& positions, const at::Tensor& keys, const at::Tensor& values);

// A decoding step's attention over the slots (cuda_attention.cu):
// softmax(q' k^T * scale) v for q [b, Hq, 1, D] (any strides; a view of the
// packed q/k/v product) rotated as rope() rotates it by cos/sin [b, 1, D]
// (q', to the bit), over keys/values [b, H_kv, capacity, D] (the first b
// slots, last dim contiguous), row i over its keys 0..min(positions[i],
// span - 1) (positions [b] int64 on the device), each kv head serving its
// Hq / H_kv query heads (at most math::kAttentionMaxRep, D at most
// math::kAttentionMaxHeadDim: slot_attention_math.h). Scores and sums in
// float32. counters: int32 zeros on the device, one per row and kv head,
// left zero. Returns o_proj's input [b, 1, Hq D] in q's dtype.
at::Tensor slot_attention(const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& keys,
                          const at::Tensor& values, const at::Tensor& positions, int64_t span, double scale,
                          const at::Tensor& counters);

// Whether slot_attention takes these tensors: applies() holds for them and
// their shapes are ones the kernel serves (else the caller keeps LibTorch's
// attention).
bool slot_attention_applies(const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& keys,
                            const at::Tensor& values);

// What a decoding step in slots computes before its first layer, for rows at
// positions [b] (int64 on the device) attending over `span` keys, with the
// rotary frequencies inv_freq [D/2] (float32, on the device): cos and sin
// [b, 1, D] and the additive mask [b, 1, 1, span] in `dtype`, each to the bit
// of what rope_cos_sin and the model's additive mask give — one kernel
// instead of about a dozen. (The bits of cos and sin rest on our nvcc's
// cosf/sinf being those LibTorch's CUDA build calls: the GPU's tests check.)
std::tuple<at::Tensor, at::Tensor, at::Tensor> step_prelude(const at::Tensor& positions, const at::Tensor& inv_freq,
                                                            int64_t span, at::ScalarType dtype);

// Inverse-CDF sampling of every row of logits [B, V] (float32, bfloat16 or
// float16, last dim contiguous) at `temperature`, each with its draw u
// (draws [B] float32 on the device): the first id whose cumulative
// probability exceeds u times the row's total (the last id if none does),
// and its log-probability. What sample_with_draws computes with softmax,
// cumsum and searchsorted, in one kernel reading the logits three times;
// the sums add in another order, so an id can differ only where a draw lies
// within rounding of a boundary. Like the CPU's fused sampler it needs no
// FusedScope: sampling is never part of a pass whose bits training compares.
// Returns tokens [B] int64, logprobs [B] float32.
std::pair<at::Tensor, at::Tensor> sample_rows(const at::Tensor& logits, double temperature, const at::Tensor& draws);

// A decoding step's record in slots, one thread per row (math::record_step_row):
// what SlotDecoder::step does with a dozen and a half at:: ops. sampled [b]
// int64 and logprobs [b] float32 are the step's draw; budget, generated,
// positions, tokens [b] int64, done [b] bool, stop_ids [b, W] int64 and the
// record out_ids [b, max_new] int64, out_logprobs [b, max_new] float32 are the
// first b slots' (last dim contiguous), updated in place.
void record_step(const at::Tensor& sampled, const at::Tensor& logprobs, const at::Tensor& budget,
                 const at::Tensor& stop_ids, const at::Tensor& done, const at::Tensor& generated,
                 const at::Tensor& positions, const at::Tensor& tokens, const at::Tensor& out_ids,
                 const at::Tensor& out_logprobs);

}  // namespace grpo::model::gpu
