// The kernel of gpu::slot_attention (cuda_attention.cu, which launches it):
// a decoding step's attention over the slot cache, a block per (split, kv
// head, row). A header of its own so that the CPU's tests can run the same
// code on the host, block by block and thread by thread
// (tests/model/slot_attention_kernel_test.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "model/kernel_build.h"
#include "model/slot_attention_math.h"

// The block's dynamic shared memory, as floats (the host's tests define
// their own).
#ifndef GRPO_DYNAMIC_SHARED
#define GRPO_DYNAMIC_SHARED(name) extern __shared__ float name[]
#endif

namespace grpo::model::gpu::attention {
inline namespace GRPO_KERNEL_BUILD {

constexpr int kWarpSize = 32;
constexpr int kThreads = 128;
constexpr int kTile = static_cast<int>(math::kAttentionTile);
constexpr int kMaxRep = static_cast<int>(math::kAttentionMaxRep);
// Columns of the head one thread sums: D / kThreads rounded up, D <= kAttentionMaxHeadDim.
constexpr int kMaxCols = static_cast<int>((math::kAttentionMaxHeadDim + kThreads - 1) / kThreads);

struct Shape {
  int rep, D;
  int64_t span, chunk, splits, kv_heads;
  math::RopeShape rope;      // q's shape and strides over [b, Hq, 1, D], cos's and sin's
  int64_t kv_b, kv_h, kv_s;  // the caches' over [slots, H_kv, capacity, D] (keys' and values' alike)
  float scale;
  int groups;  // keys summed apart by kThreads / D threads each, joined at the end
};

__device__ inline int64_t smaller(int64_t a, int64_t b) { return a < b ? a : b; }

__device__ inline float warp_sum(float v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

__device__ inline float warp_max(float v) {
  for (int o = kWarpSize / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Shared memory: region A holds the query rows [rep, D] and a tile's scores
// [rep, kTile] while keys are read, then the parts' m, l and weights
// [3, rep, splits] while the last block joins them; then m, l and the tile's
// rescale factors [3, rep]; then the groups' sums [groups, rep, D].
inline int64_t region_a_floats(const Shape& s) {
  return std::max<int64_t>(int64_t{s.rep} * (s.D + kTile), 3 * int64_t{s.rep} * s.splits);
}

inline size_t shared_bytes(const Shape& s) {
  const int64_t floats = region_a_floats(s) + 3 * int64_t{s.rep} + int64_t{s.groups} * s.rep * s.D;
  return static_cast<size_t>(floats) * sizeof(float);
}

// grid (splits, kv heads, rows); block (split, head, row) reads keys
// [split chunk, (split + 1) chunk) of the row's own min(position + 1, span).
template <class T>
__global__ void __launch_bounds__(kThreads)
    slot_attention_kernel(const T* __restrict__ q, const T* __restrict__ cos, const T* __restrict__ sin,
                          const T* __restrict__ keys, const T* __restrict__ values,
                          const int64_t* __restrict__ positions, T* __restrict__ out, float* __restrict__ part_acc,
                          float* __restrict__ part_ml, unsigned int* __restrict__ counters, Shape s,
                          int64_t region_a) {
  GRPO_DYNAMIC_SHARED(smem);
  const int rep = s.rep, D = s.D, lane = threadIdx.x % kWarpSize, warp = threadIdx.x / kWarpSize;
  const int warps = kThreads / kWarpSize;
  const int64_t split = blockIdx.x, head = blockIdx.y, row = blockIdx.z;
  float* qs = smem;              // [rep, D]
  float* p = qs + rep * D;       // [rep, kTile]
  float* m = smem + region_a;    // [rep]
  float* l = m + rep;            // [rep]
  float* rescale = l + rep;      // [rep]
  float* sums = rescale + rep;   // [groups, rep, D]

  const int64_t seen = smaller(positions[row] + 1, s.span), keys_of_row = seen < 1 ? 1 : seen;  // as the CPU's
  const int64_t begin = split * s.chunk, end = smaller(begin + s.chunk, keys_of_row);
  // The query rows rotated as they are read, with rope()'s bits: element
  // (row, head rep + r, 0, d) of q in [b, Hq, 1, D] order.
  const int64_t first = (row * s.rope.H + head * rep) * D;
  for (int i = threadIdx.x; i < rep * D; i += kThreads)
    qs[i] = static_cast<float>(math::rope_value(q, cos, sin, s.rope, first + i));
  for (int r = threadIdx.x; r < rep; r += kThreads) m[r] = -INFINITY, l[r] = 0.0f;
  const T* k_head = keys + row * s.kv_b + head * s.kv_h;
  const T* v_head = values + row * s.kv_b + head * s.kv_h;

  // Thread t sums column t % D of keys g, g + groups, ... (g = t / D) when
  // D <= kThreads, else columns t, t + kThreads, ... of every key.
  const int g = s.groups > 1 ? static_cast<int>(threadIdx.x) / D : 0;
  const bool summing = g < s.groups;
  const int first_col = s.groups > 1 ? static_cast<int>(threadIdx.x) % D : static_cast<int>(threadIdx.x);
  // fn(c, d) for each column d this thread sums, c its place in acc.
  auto each_column = [&](auto fn) {
#pragma unroll
    for (int c = 0; c < kMaxCols; ++c)
      if (const int d = first_col + c * kThreads; d < D) fn(c, d);
  };
  float acc[kMaxCols][kMaxRep];
#pragma unroll
  for (int c = 0; c < kMaxCols; ++c)
#pragma unroll
    for (int r = 0; r < kMaxRep; ++r) acc[c][r] = 0.0f;
  __syncthreads();

  for (int64_t t0 = begin; t0 < end; t0 += kTile) {
    const int n = static_cast<int>(smaller(kTile, end - t0));
    // Scores, a warp per key (the whole warp takes the same keys, so its
    // shuffles see every lane), its lanes over the columns.
    for (int t = warp; t < n; t += warps) {
      const T* k_row = k_head + (t0 + t) * s.kv_s;
      float dots[kMaxRep];
#pragma unroll
      for (int r = 0; r < kMaxRep; ++r) dots[r] = 0.0f;
      for (int d = lane; d < D; d += kWarpSize) {
        const float kd = static_cast<float>(k_row[d]);
#pragma unroll
        for (int r = 0; r < kMaxRep; ++r)
          if (r < rep) dots[r] += qs[r * D + d] * kd;
      }
#pragma unroll
      for (int r = 0; r < kMaxRep; ++r)
        if (r < rep) {
          const float dot = warp_sum(dots[r]);
          if (lane == 0) p[r * kTile + t] = dot * s.scale;
        }
    }
    __syncthreads();
    // Each query row's running softmax, a warp per row.
    for (int r = warp; r < rep; r += warps) {
      float tile_max = -INFINITY;
      for (int t = lane; t < n; t += kWarpSize) tile_max = fmaxf(tile_max, p[r * kTile + t]);
      const math::RunningMax next = math::next_max(m[r], warp_max(tile_max));
      float sum = 0.0f;
      for (int t = lane; t < n; t += kWarpSize) {
        const float e = expf(p[r * kTile + t] - next.max);
        p[r * kTile + t] = e;
        sum += e;
      }
      sum = warp_sum(sum);
      if (lane == 0) rescale[r] = next.rescale, l[r] = l[r] * next.rescale + sum, m[r] = next.max;
    }
    __syncthreads();
    if (summing)
      each_column([&](int c, int d) {
#pragma unroll
        for (int r = 0; r < kMaxRep; ++r)
          if (r < rep) acc[c][r] *= rescale[r];
        for (int t = g; t < n; t += s.groups) {
          const float vd = static_cast<float>(v_head[(t0 + t) * s.kv_s + d]);
#pragma unroll
          for (int r = 0; r < kMaxRep; ++r)
            if (r < rep) acc[c][r] += p[r * kTile + t] * vd;
        }
      });
    __syncthreads();  // the next tile's scores overwrite p
  }

  if (summing)
    each_column([&](int c, int d) {
#pragma unroll
      for (int r = 0; r < kMaxRep; ++r)
        if (r < rep) sums[(g * rep + r) * D + d] = acc[c][r];
    });
  __syncthreads();
  const int64_t pair = row * s.kv_heads + head, width = int64_t{rep} * D;
  T* out_heads = out + row * s.kv_heads * width + head * width;  // out [b, 1, Hq D]: this kv head's query heads
  auto block_sum = [&](int i) {
    float a = 0.0f;
    for (int j = 0; j < s.groups; ++j) a += sums[j * width + i];
    return a;
  };
  if (s.splits == 1) {
    for (int i = threadIdx.x; i < width; i += kThreads) out_heads[i] = static_cast<T>(block_sum(i) / l[i / D]);
    return;
  }

  // This block's part; the row's last block to finish joins them all.
  float* my_acc = part_acc + (pair * s.splits + split) * width;
  for (int i = threadIdx.x; i < width; i += kThreads) my_acc[i] = block_sum(i);
  float* ml = part_ml + pair * 2 * rep * s.splits;  // [2, rep, splits]: m, then l
  for (int r = threadIdx.x; r < rep; r += kThreads) {
    ml[r * s.splits + split] = m[r];
    ml[(rep + r) * s.splits + split] = l[r];
  }
  __threadfence();  // the part is visible to every block before the count says it is there
  __syncthreads();
  // atomicInc counts to splits - 1 and wraps to 0 there: the last block
  // finds it at splits - 1 and leaves it at 0 for the next layer's launch.
  // Its fence orders the reads of the other parts after their count.
  __shared__ bool last;
  if (threadIdx.x == 0) {
    const auto top = static_cast<unsigned int>(s.splits - 1);
    last = atomicInc(&counters[pair], top) == top;
    if (last) __threadfence();
  }
  __syncthreads();
  if (!last) return;

  float* part_m = smem;  // region A again: [rep, splits] each
  float* part_l = part_m + rep * s.splits;
  float* weights = part_l + rep * s.splits;
  for (int64_t i = threadIdx.x; i < 2 * rep * s.splits; i += kThreads) part_m[i] = __ldcg(ml + i);
  __syncthreads();
  for (int r = threadIdx.x; r < rep; r += kThreads)
    math::part_weights(part_m + r * s.splits, part_l + r * s.splits, s.splits, weights + r * s.splits);
  __syncthreads();
  const float* parts = part_acc + pair * s.splits * width;
  for (int i = threadIdx.x; i < width; i += kThreads) {
    const float* w = weights + (i / D) * s.splits;
    float a = 0.0f;
    for (int64_t j = 0; j < s.splits; ++j) a += w[j] * __ldcg(parts + j * width + i);
    out_heads[i] = static_cast<T>(a);
  }
}


// What the launch passes the kernel for q [b, Hq, 1, D], cos/sin [b, 1, D]
// and caches [b, H_kv, capacity, D] (checked by the caller).
inline Shape shape_of(const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& keys,
                      int64_t span, double scale, const math::AttentionSplit& split) {
  const int64_t D = q.size(3), kv_heads = keys.size(1);
  return {static_cast<int>(q.size(1) / kv_heads), static_cast<int>(D), span, split.chunk, split.splits, kv_heads,
          math::rope_shape(q, cos, sin), keys.stride(0), keys.stride(1), keys.stride(2), static_cast<float>(scale),
          D <= kThreads ? static_cast<int>(kThreads / D) : 1};
}

}  // namespace GRPO_KERNEL_BUILD
}  // namespace grpo::model::gpu::attention
