// The kernels of gpu::silu_mul, gpu::rope and gpu::rope_into_slots
// (cuda_kernels.cu, which launches them): one element per thread in a loop
// that strides over the grid, each element's math in cuda_kernel_math.h. A
// header of their own so that the CPU's tests can run the same code on the
// host, with the strides the model hands them (tests/model/pointwise_kernels_test.cpp).
#pragma once

#include <cstdint>

#include "model/cuda_kernel_math.h"
#include "model/kernel_build.h"

namespace grpo::model::gpu::pointwise {
inline namespace GRPO_KERNEL_BUILD {

// out [n / cols, cols] = silu(gate) * up, gate's and up's rows `gate_stride`
// and `up_stride` apart (the halves of a packed gate/up product, read in place).
template <class T>
__global__ void silu_mul_kernel(const T* __restrict__ gate, const T* __restrict__ up, T* __restrict__ out, int64_t n,
                                int64_t cols, int64_t gate_stride, int64_t up_stride) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    if (gate_stride == cols && up_stride == cols) {  // contiguous: no division (the branch is the grid's)
      out[i] = math::silu_mul_value(gate[i], up[i]);
      continue;
    }
    const int64_t r = i / cols, c = i - r * cols;
    out[i] = math::silu_mul_value(gate[r * gate_stride + c], up[r * up_stride + c]);
  }
}

template <class T>
__global__ void rope_kernel(const T* __restrict__ x, const T* __restrict__ cos, const T* __restrict__ sin,
                            T* __restrict__ out, math::RopeShape s, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[i] = math::rope_value(x, cos, sin, s, i);
}

template <class T>
__global__ void rope_into_slots_kernel(const T* __restrict__ k, const T* __restrict__ v, const T* __restrict__ cos,
                                       const T* __restrict__ sin, const int64_t* __restrict__ positions,
                                       T* __restrict__ keys, T* __restrict__ values, math::SlotWrite w, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    math::write_slot_element(k, v, cos, sin, positions, keys, values, w, i);
}

}  // namespace GRPO_KERNEL_BUILD
}  // namespace grpo::model::gpu::pointwise
