// The kernel of gpu::sample_rows (cuda_step_kernels.cu, which launches it):
// inverse-CDF sampling of one row of logits per block. A header of its own
// so that the CPU's tests can run the same code on the host, block by block
// and thread by thread (tests/model/sample_kernel_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "model/cuda_common.cuh"
#include "model/cuda_kernel_math.h"
#include "model/kernel_build.h"

namespace grpo::model::gpu::sampling {
inline namespace GRPO_KERNEL_BUILD {

using detail::block_reduce;
using detail::kWarp;
using detail::Max;

constexpr int kSampleThreads = 1024;

// One block per row; warp w takes the row's w-th contiguous segment, its
// lanes reading it 32 ids at a time. Pass 1: the row's largest scaled logit
// m. Pass 2: each segment's sum of exp(scaled - m). Then every thread walks
// the 32 segment sums to the one where the cumulative sum passes u * total,
// and that segment's warp scans it, 32 ids a step, for the first id that
// passes it.
template <class T>
__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(const T* __restrict__ logits, int64_t stride, int64_t V, float inverse_temperature,
                  const float* __restrict__ draws, int64_t* __restrict__ tokens, float* __restrict__ logprobs) {
  __shared__ float segment_sum[kSampleThreads / kWarp];
  const int64_t row = blockIdx.x;
  const T* x = logits + row * stride;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = blockDim.x / kWarp;
  const int64_t length = (V + warps - 1) / warps;
  const int64_t begin = std::min<int64_t>(V, warp * length), end = std::min<int64_t>(V, begin + length);
  // logits / temperature as LibTorch's CUDA division by a scalar computes it:
  // times the scalar's float reciprocal.
  auto scaled = [&](int64_t i) { return math::mul_rn(static_cast<float>(x[i]), inverse_temperature); };
  float m = -INFINITY;
  for (int64_t i = begin + lane; i < end; i += kWarp) m = fmaxf(m, scaled(i));
  m = block_reduce(m, Max{}, -INFINITY);
  float sum = 0.0f;
  for (int64_t i = begin + lane; i < end; i += kWarp) sum += expf(scaled(i) - m);
  for (int o = kWarp / 2; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  if (lane == 0) segment_sum[warp] = sum;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < warps; ++w) total += segment_sum[w];
  const float target = draws[row] * total;
  float before = 0.0f;
  int crossing = -1;
  for (int w = 0; w < warps && crossing < 0; ++w) {
    if (before + segment_sum[w] > target) crossing = w;
    else before += segment_sum[w];
  }
  const float log_total = logf(total);
  if (crossing < 0) {  // u * total at or past the total (rounding): the last id, as searchsorted's clamp gives
    if (threadIdx.x == 0) {
      tokens[row] = V - 1;
      logprobs[row] = scaled(V - 1) - m - log_total;
    }
    return;
  }
  if (warp != crossing) return;
  float running = before;
  int64_t last_nonzero = end - 1;
  for (int64_t base = begin; base < end; base += kWarp) {
    const int64_t i = base + lane;
    const float e = i < end ? expf(scaled(i) - m) : 0.0f;
    const unsigned nonzero = __ballot_sync(0xffffffffu, e > 0.0f);
    if (nonzero != 0) last_nonzero = base + (kWarp - 1 - __clz(nonzero));
    float inclusive = e;
    for (int o = 1; o < kWarp; o <<= 1) {
      const float up = __shfl_up_sync(0xffffffffu, inclusive, o);
      if (lane >= o) inclusive += up;
    }
    const unsigned passed = __ballot_sync(0xffffffffu, i < end && running + inclusive > target);
    if (passed != 0) {
      if (lane == __ffs(passed) - 1) {
        tokens[row] = i;
        logprobs[row] = scaled(i) - m - log_total;
      }
      return;
    }
    running += __shfl_sync(0xffffffffu, inclusive, kWarp - 1);
  }
  // The scan's sums fell short of the segment's by rounding: its last id of
  // nonzero probability.
  if (lane == 0) {
    tokens[row] = last_nonzero;
    logprobs[row] = scaled(last_nonzero) - m - log_total;
  }
}

}  // namespace GRPO_KERNEL_BUILD
}  // namespace grpo::model::gpu::sampling
