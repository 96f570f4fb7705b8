// What the fused CUDA kernels (cuda_kernels.cu, cuda_step_kernels.cu)
// compute for one element, as functions the host compiles too: the CPU's
// tests run them over whole tensors against LibTorch's ops, so the indexing
// and the rounding are checked on machines without a GPU; only the launches
// and block sums are left to the GPU's tests.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define GRPO_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define GRPO_HOST_DEVICE inline
#endif

namespace grpo::model::gpu::math {

// Products and sums rounded once each, never contracted into a fused
// multiply-add: the at:: ops they stand for round each result.
GRPO_HOST_DEVICE float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

GRPO_HOST_DEVICE float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

GRPO_HOST_DEVICE float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// v rounded to T and back: where an unfused op would store its result.
template <class T>
GRPO_HOST_DEVICE float round_to(float v) {
  return static_cast<float>(static_cast<T>(v));
}

// x + residual, rounded to T as at::add rounds it.
template <class T>
GRPO_HOST_DEVICE T add_value(T x, T residual) {
  return static_cast<T>(add_rn(static_cast<float>(x), static_cast<float>(residual)));
}

// RMSNorm's last step for one element, given inv = rsqrt(mean(x^2) + eps):
// the normalised value rounded to T, then times the weight (Hugging Face's order).
template <class T>
GRPO_HOST_DEVICE T rms_norm_value(T x, T weight, float inv) {
  return static_cast<T>(mul_rn(static_cast<float>(weight), round_to<T>(mul_rn(static_cast<float>(x), inv))));
}

// silu(gate) rounded to T, times up.
template <class T>
GRPO_HOST_DEVICE T silu_mul_value(T gate, T up) {
  const float g = static_cast<float>(gate);
  return static_cast<T>(mul_rn(round_to<T>(div_rn(g, add_rn(1.0f, expf(-g)))), static_cast<float>(up)));
}

struct RopeShape {
  int64_t H, T, D;
  int64_t xs[4];  // x's strides over [B, H, T, D]
  int64_t cs[3];  // cos's over [B, T, D] (0 where it broadcasts)
  int64_t ss[3];  // sin's
};

// Element i (in [B, H, T, D] order) of x * cos + rotate_half(x) * sin, each
// product rounded to T and then their sum, as at::mul and at::add round them.
template <class T>
GRPO_HOST_DEVICE T rope_value(const T* x, const T* cos, const T* sin, const RopeShape& s, int64_t i) {
  const int64_t half = s.D / 2, d = i % s.D;
  int64_t r = i / s.D;
  const int64_t t = r % s.T;
  r /= s.T;
  const int64_t h = r % s.H, b = r / s.H;
  const T* row = x + b * s.xs[0] + h * s.xs[1] + t * s.xs[2];
  const float v = static_cast<float>(row[d * s.xs[3]]);
  const float rotated =
      d < half ? -static_cast<float>(row[(d + half) * s.xs[3]]) : static_cast<float>(row[(d - half) * s.xs[3]]);
  const float c = static_cast<float>(cos[b * s.cs[0] + t * s.cs[1] + d * s.cs[2]]);
  const float sn = static_cast<float>(sin[b * s.ss[0] + t * s.ss[1] + d * s.ss[2]]);
  return static_cast<T>(add_rn(round_to<T>(mul_rn(v, c)), round_to<T>(mul_rn(rotated, sn))));
}

// The shape of x [B, H, T, D] and cos/sin [B or 1, T, D] (checked by the caller).
inline RopeShape rope_shape(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  return {x.size(1), x.size(2), x.size(3), {x.stride(0), x.stride(1), x.stride(2), x.stride(3)},
          {cos.size(0) == 1 ? 0 : cos.stride(0), cos.stride(1), cos.stride(2)},
          {sin.size(0) == 1 ? 0 : sin.stride(0), sin.stride(1), sin.stride(2)}};
}

// A decoding step's keys k [b, H, 1, D] (not yet rotated) and values v of the
// same shape, written at each row's position into slot caches
// [slots, H, capacity, D] (the first b slots).
struct SlotWrite {
  RopeShape k;       // k's shape and strides, cos's and sin's
  int64_t vs[4];     // v's strides
  int64_t cs[4];     // the caches' strides (keys' and values' alike)
  int64_t capacity;  // positions per slot
};

// Element i (in [b, H, 1, D] order) of the step: its key rotated as
// rope_value rotates it, and its value, at row i / (H D)'s position; a
// position outside the slot writes nothing.
template <class T>
GRPO_HOST_DEVICE void write_slot_element(const T* k, const T* v, const T* cos, const T* sin, const int64_t* positions,
                                         T* keys, T* values, const SlotWrite& w, int64_t i) {
  const int64_t H = w.k.H, D = w.k.D, d = i % D, h = (i / D) % H, row = i / (D * H);
  const int64_t position = positions[row];
  if (position < 0 || position >= w.capacity) return;
  const int64_t at = row * w.cs[0] + h * w.cs[1] + position * w.cs[2] + d * w.cs[3];
  keys[at] = rope_value(k, cos, sin, w.k, i);
  values[at] = v[row * w.vs[0] + h * w.vs[1] + d * w.vs[3]];
}

// The write of k, v into `keys` (and `values`, of the same layout).
inline SlotWrite slot_write(const at::Tensor& k, const at::Tensor& v, const at::Tensor& cos, const at::Tensor& sin,
                            const at::Tensor& keys) {
  return {rope_shape(k, cos, sin),
          {v.stride(0), v.stride(1), v.stride(2), v.stride(3)},
          {keys.stride(0), keys.stride(1), keys.stride(2), keys.stride(3)},
          keys.size(2)};
}

// A decoding step's inputs before the first layer (gpu::step_prelude), for a
// row at `position`: the rotary angle of column j of D = 2 half (position
// times inv_freq[j mod half], the float32 product rope_cos_sin takes the
// cosine and sine of), and the additive mask of key `key` (0 up to the
// position, past it the mask value the model's additive masks use: float's
// lowest, -1e4 in the 16-bit types).
GRPO_HOST_DEVICE float rope_angle(int64_t position, const float* inv_freq, int64_t half, int64_t j) {
  return mul_rn(static_cast<float>(position), inv_freq[j % half]);
}

template <class T>
GRPO_HOST_DEVICE T step_mask_value(int64_t position, int64_t key) {
  constexpr float kMasked = sizeof(T) == sizeof(float) ? -3.40282347e+38f : -1e4f;
  return static_cast<T>(key <= position ? 0.0f : kMasked);
}

// The record a decoding step in slots keeps (SlotDecoder::step): per row, its
// ids and log-probabilities so far ([rows, max_new], row stride `record`),
// its stop ids ([rows, stop_width], -1 padding, row stride `stops`).
struct StepBooks {
  int64_t max_new, record, stop_width, stops;
};

// Row r's share of a step: a live row (not done) records the id it sampled
// and its log-probability in the column of its count (the last column once
// full), counts it, moves to the next position, feeds the id next, and is
// done when the id is one of its stop ids or its budget is spent. A done row
// keeps everything as it is.
GRPO_HOST_DEVICE void record_step_row(int64_t r, const int64_t* sampled, const float* logprob, const int64_t* budget,
                                      const int64_t* stop_ids, bool* done, int64_t* generated, int64_t* positions,
                                      int64_t* tokens, int64_t* out_ids, float* out_logprobs, const StepBooks& s) {
  if (done[r]) return;
  const int64_t token = sampled[r], count = generated[r];
  const int64_t column = count < s.max_new - 1 ? count : s.max_new - 1;
  out_ids[r * s.record + column] = token;
  out_logprobs[r * s.record + column] = logprob[r];
  bool hit = false;
  for (int64_t j = 0; j < s.stop_width; ++j) hit = hit || stop_ids[r * s.stops + j] == token;
  generated[r] = count + 1;
  positions[r] += 1;
  tokens[r] = token;
  if (hit || count + 1 >= budget[r]) done[r] = true;
}

}  // namespace grpo::model::gpu::math
