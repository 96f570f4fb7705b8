// How a decoding step's attention over the slot cache (gpu::slot_attention,
// cuda_attention.cu) shares one row's keys among blocks and joins their
// parts, as functions the host compiles too: the CPU's tests check the split
// and the join against softmax attention; the GPU's tests check the kernel.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "model/cuda_kernel_math.h"

namespace grpo::model::gpu::math {

// Keys a block scores per pass (their scores for every query row it serves
// sit in shared memory), the most query heads per kv head and the largest
// head dim the kernel takes (others keep LibTorch's attention), and the most
// blocks one row's kv head is split among.
constexpr int64_t kAttentionTile = 128;
constexpr int64_t kAttentionMaxRep = 16;
constexpr int64_t kAttentionMaxHeadDim = 256;
constexpr int64_t kAttentionMaxSplits = 64;

inline bool attention_fits(int64_t rep, int64_t head_dim) {
  return rep >= 1 && rep <= kAttentionMaxRep && head_dim >= 1 && head_dim <= kAttentionMaxHeadDim;
}

// Each (row, kv head) is `splits` blocks, block i taking keys [i chunk,
// (i + 1) chunk) of the step's span: one block each when rows x kv heads
// fill the GPU twice over, otherwise as many as fill it, at most one per
// tile of keys (so each holds half a tile at least). Every split holds a key
// of the span, so a row's first split (keys from 0) is never empty.
struct AttentionSplit {
  int64_t splits, chunk;
};

inline AttentionSplit attention_split(int64_t rows, int64_t kv_heads, int64_t span, int64_t multiprocessors) {
  const int64_t pairs = std::max<int64_t>(1, rows * kv_heads), keys = std::max<int64_t>(1, span);
  const int64_t wanted = (2 * multiprocessors + pairs - 1) / pairs;
  const int64_t most = std::min(kAttentionMaxSplits, (keys + kAttentionTile - 1) / kAttentionTile);
  int64_t splits = std::clamp<int64_t>(wanted, 1, most);
  const int64_t chunk = (keys + splits - 1) / splits;
  splits = (keys + chunk - 1) / chunk;  // a rounded-up chunk may leave the last split nothing
  return {splits, chunk};
}

// One query row's parts over disjoint spans of keys: part i holds m[i], the
// largest score of its span (-inf when the span is empty), and l[i], the sum
// of exp(score - m[i]) over it. weights[i] becomes the factor of part i's
// sum of exp(score - m[i]) v in the softmax over every key: exp(m[i] - M) / L,
// M the largest m, L the sum of l[i] exp(m[i] - M). At least one part holds a key.
GRPO_HOST_DEVICE void part_weights(const float* m, const float* l, int64_t parts, float* weights) {
  float top = -INFINITY;
  for (int64_t i = 0; i < parts; ++i) top = m[i] > top ? m[i] : top;
  float total = 0.0f;
  for (int64_t i = 0; i < parts; ++i) {
    weights[i] = m[i] == -INFINITY ? 0.0f : expf(m[i] - top);
    total += l[i] * weights[i];
  }
  for (int64_t i = 0; i < parts; ++i) weights[i] /= total;
}

// A running softmax after another tile of scores whose largest is
// tile_max: the new largest score and the factor that rescales what was
// summed against the old one (0 when nothing was).
struct RunningMax {
  float max, rescale;
};

GRPO_HOST_DEVICE RunningMax next_max(float running, float tile_max) {
  const float top = tile_max > running ? tile_max : running;
  return {top, running == -INFINITY ? 0.0f : expf(running - top)};
}

}  // namespace grpo::model::gpu::math
