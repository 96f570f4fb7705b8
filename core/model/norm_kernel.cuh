// The kernel of gpu::rms_norm and gpu::add_rms_norm (cuda_kernels.cu, which
// launches it): a row's RMSNorm, after the residual add where there is one,
// one block per row. A header of its own so that the CPU's tests can run the
// same code on the host, block by block and thread by thread
// (tests/model/norm_kernel_test.cpp).
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/cuda_common.cuh"
#include "model/cuda_kernel_math.h"
#include "model/kernel_build.h"

namespace grpo::model::gpu::norm {
inline namespace GRPO_KERNEL_BUILD {

using detail::Add;
using detail::block_reduce;
using detail::kWarp;

// Threads per block for rows of N: whole warps, enough for one element each
// up to 256 (a 0.5B model's 896 take 4 per thread).
inline int threads_for(int64_t N) { return static_cast<int>(std::min<int64_t>(256, (N + kWarp - 1) / kWarp * kWarp)); }

// Row blockIdx.x of N: out = rms_norm(x (+ residual)); with a residual,
// sum = x + residual, the row the normalisation reads.
template <class T>
__global__ void rms_norm_kernel(const T* __restrict__ x, const T* __restrict__ residual, const T* __restrict__ weight,
                                T* __restrict__ sum, T* __restrict__ out, int64_t N, float eps) {
  const int64_t offset = static_cast<int64_t>(blockIdx.x) * N;
  auto input = [&](int64_t i) {
    return residual ? math::add_value(x[offset + i], residual[offset + i]) : x[offset + i];
  };
  float squares = 0.0f;
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x) {
    const T h = input(i);
    if (sum) sum[offset + i] = h;
    const float v = static_cast<float>(h);
    squares = math::add_rn(squares, math::mul_rn(v, v));
  }
  // at:: takes the mean (the sum times the float 1/N), adds eps and takes
  // rsqrt in float32 (CUDA's rsqrtf).
  const float mean = math::mul_rn(block_reduce(squares, Add{}, 0.0f), 1.0f / static_cast<float>(N));
  const float inv = rsqrtf(math::add_rn(mean, eps));
  for (int64_t i = threadIdx.x; i < N; i += blockDim.x)
    out[offset + i] = math::rms_norm_value(input(i), weight[i], inv);
}

}  // namespace GRPO_KERNEL_BUILD
}  // namespace grpo::model::gpu::norm
