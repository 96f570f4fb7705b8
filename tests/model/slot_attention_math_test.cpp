// How gpu::slot_attention shares a row's keys among blocks and joins their
// parts (slot_attention_math.h), run on the host: every key in exactly one
// split, the splits filling the GPU only when rows do not, and parts computed
// over the splits (and over tiles within them, as a block walks its keys)
// joining to softmax attention over all the keys. The kernel itself runs in
// slot_attention_kernel_test.cpp (on the host) and gpu_attention_test.cpp.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <vector>

#include "model/slot_attention_math.h"

namespace math = grpo::model::gpu::math;

namespace {

TEST(SlotAttentionMath, SplitsCoverTheSpanAndFillTheGpuOnlyWhenRowsDoNot) {
  for (int64_t rows : {1, 2, 16, 64, 256})
    for (int64_t span : {1, 2, 127, 128, 129, 1000, 8192, 40000}) {
      const math::AttentionSplit s = math::attention_split(rows, 2, span, 132);
      SCOPED_TRACE(::testing::Message() << rows << " rows over " << span);
      EXPECT_GE(s.splits, 1);
      EXPECT_LE(s.splits, math::kAttentionMaxSplits);
      EXPECT_GE(s.splits * s.chunk, span) << "every key in a split";
      EXPECT_LT((s.splits - 1) * s.chunk, span) << "no split past the span";
      if (s.splits > 1) EXPECT_GE(s.chunk, math::kAttentionTile / 2) << "a split holds half a tile at least";
    }
  // 256 rows x 2 kv heads fill 132 multiprocessors twice: one block each.
  EXPECT_EQ(math::attention_split(256, 2, 4096, 132).splits, 1);
  // One row of 2 kv heads over 4,096 keys: as many blocks as fill the GPU twice, at most the cap.
  EXPECT_EQ(math::attention_split(1, 2, 4096, 132).splits, 32);
  EXPECT_EQ(math::attention_split(1, 2, 40000, 132).splits, math::kAttentionMaxSplits);
}

// softmax(scores) v for one query row, in double.
std::vector<double> softmax_attention(const at::Tensor& scores, const at::Tensor& v) {
  const at::Tensor out = at::matmul(at::softmax(scores.to(at::kDouble), 0), v.to(at::kDouble));
  return std::vector<double>(out.data_ptr<double>(), out.data_ptr<double>() + out.numel());
}

TEST(SlotAttentionMath, PartsOverSplitsAndTilesJoinToSoftmaxAttention) {
  torch::manual_seed(0);
  const int64_t D = 8;
  for (int64_t keys : {1, 5, 130, 700}) {
    for (int64_t splits : {1, 3, 7}) {
      // Scores of a wide range, as real ones have: the join must not overflow.
      const at::Tensor scores = at::randn({keys}) * 30, v = at::randn({keys, D});
      const int64_t chunk = (keys + splits - 1) / splits;
      std::vector<float> m(splits), l(splits), acc(splits * D, 0.0f);
      for (int64_t p = 0; p < splits; ++p) {
        // As a block walks its split: tile after tile, a running max and sum.
        float running = -INFINITY, sum = 0.0f;
        for (int64_t t0 = p * chunk; t0 < std::min(keys, (p + 1) * chunk); t0 += 16) {
          const int64_t n = std::min<int64_t>({16, keys - t0, (p + 1) * chunk - t0});
          const at::Tensor tile = scores.narrow(0, t0, n);
          const math::RunningMax next = math::next_max(running, tile.max().item<float>());
          sum *= next.rescale;
          for (int64_t d = 0; d < D; ++d) acc[p * D + d] *= next.rescale;
          for (int64_t t = 0; t < n; ++t) {
            const float e = std::exp(tile[t].item<float>() - next.max);
            sum += e;
            for (int64_t d = 0; d < D; ++d) acc[p * D + d] += e * v[t0 + t][d].item<float>();
          }
          running = next.max;
        }
        m[p] = running, l[p] = sum;  // a split past the keys: -inf and 0
      }
      std::vector<float> weights(splits);
      math::part_weights(m.data(), l.data(), splits, weights.data());
      const std::vector<double> want = softmax_attention(scores, v);
      for (int64_t d = 0; d < D; ++d) {
        double got = 0;
        for (int64_t p = 0; p < splits; ++p) got += weights[p] * acc[p * D + d];
        EXPECT_NEAR(got, want[d], 1e-5 * (1 + std::abs(want[d]))) << keys << " keys, " << splits << " splits, " << d;
      }
    }
  }
}

TEST(SlotAttentionMath, AnEmptyPartWeighsNothing) {
  const float m[] = {2.0f, -INFINITY, 5.0f}, l[] = {3.0f, 0.0f, 1.0f};
  float w[3];
  math::part_weights(m, l, 3, w);
  EXPECT_EQ(w[1], 0.0f);
  const double total = 3.0 * std::exp(-3.0) + 1.0;
  EXPECT_NEAR(w[0], std::exp(-3.0) / total, 1e-7);
  EXPECT_NEAR(w[2], 1.0 / total, 1e-7);
  EXPECT_EQ(math::next_max(-INFINITY, 4.0f).rescale, 0.0f) << "nothing summed yet";
  EXPECT_NEAR(math::next_max(1.0f, 3.0f).rescale, std::exp(-2.0), 1e-7);
  EXPECT_EQ(math::next_max(3.0f, 1.0f).max, 3.0f);
}

}  // namespace
