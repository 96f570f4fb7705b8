// The kernels of gpu::step_prelude and gpu::record_step
// (cuda_step_kernels.cu, which launches them): a decoding step's inputs
// before its first layer and its record after sampling. A header of their own
// so that the CPU's tests can run the same code on the host
// (tests/model/step_kernels_test.cpp).
#pragma once

#include <cmath>
#include <cstdint>

#include "model/cuda_kernel_math.h"
#include "model/kernel_build.h"

namespace grpo::model::gpu::step {
inline namespace GRPO_KERNEL_BUILD {

// Element i of the step's inputs, row r = i / (D + span): columns below D
// are its cos and sin, the rest its mask.
template <class T>
__global__ void step_prelude_kernel(const int64_t* __restrict__ positions, const float* __restrict__ inv_freq,
                                    T* __restrict__ cos, T* __restrict__ sin, T* __restrict__ mask, int64_t n,
                                    int64_t D, int64_t span) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / (D + span), c = i - r * (D + span), position = positions[r];
    if (c < D) {
      // cosf/sinf as LibTorch's float32 cos and sin call them (no fast math), rounded to T after.
      const float angle = math::rope_angle(position, inv_freq, D / 2, c);
      cos[r * D + c] = static_cast<T>(cosf(angle));
      sin[r * D + c] = static_cast<T>(sinf(angle));
    } else {
      mask[r * span + (c - D)] = math::step_mask_value<T>(position, c - D);
    }
  }
}

// static: a function of a header, each file that includes it has its own.
static __global__ void record_step_kernel(const int64_t* __restrict__ sampled, const float* __restrict__ logprob,
                                          const int64_t* __restrict__ budget, const int64_t* __restrict__ stop_ids,
                                          bool* done, int64_t* generated, int64_t* positions, int64_t* tokens,
                                          int64_t* out_ids, float* out_logprobs, math::StepBooks books,
                                          int64_t rows) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r < rows)
    math::record_step_row(r, sampled, logprob, budget, stop_ids, done, generated, positions, tokens, out_ids,
                          out_logprobs, books);
}

}  // namespace GRPO_KERNEL_BUILD
}  // namespace grpo::model::gpu::step
