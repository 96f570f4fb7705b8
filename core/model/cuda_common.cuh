// What the fused CUDA kernels' files (cuda_kernels.cu: a layer's kernels;
// cuda_step_kernels.cu: a decoding step's, around the layers) share: block
// reductions, grid sizes and the device check every entry makes. Included by
// .cu files and by the kernels' headers that the host's tests compile too
// (sample_kernel.cuh, through tests/model/cuda_block_emulation.h).
#pragma once

#include "model/kernel_build.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

namespace grpo::model::gpu::detail {
inline namespace GRPO_KERNEL_BUILD {

constexpr int kWarp = 32;

// `op` over every thread's v in the block (blockDim.x a multiple of 32),
// `identity` standing in for the warps the block does not have.
template <class Op>
__device__ float block_reduce(float v, Op op, float identity) {
  __shared__ float partial[kWarp];
  __shared__ float total;
  for (int o = kWarp / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < static_cast<int>(blockDim.x / kWarp) ? partial[lane] : identity;
    for (int o = kWarp / 2; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) total = v;
  }
  __syncthreads();
  return total;
}

struct Add {
  __device__ float operator()(float a, float b) const { return a + b; }
};
struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Blocks for a grid-stride loop over n elements.
inline unsigned int blocks_for(int64_t n, int threads) {
  const int64_t most = int64_t{65535} * 16;
  return static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>((n + threads - 1) / threads, most)));
}

// Every tensor on x's device: a tensor elsewhere would be read as a device
// address of this one.
inline void check_on_device_of(const at::Tensor& x, std::initializer_list<at::Tensor> others, const char* what) {
  TORCH_CHECK(x.is_cuda(), what, ": x is on ", x.device(), ", not a GPU");
  for (const at::Tensor& t : others)
    TORCH_CHECK(!t.defined() || t.device() == x.device(), what, ": a tensor on ", t.device(), " beside x on ",
                x.device());
}

}  // namespace GRPO_KERNEL_BUILD
}  // namespace grpo::model::gpu::detail
