// gpu::slot_attention (label `gpu`; skipped without a GPU) against the
// model's unfused path: the queries rotated by LibTorch's ops, then the
// masked attention, in float32, bfloat16 and float16; one block per row and
// kv head and rows split among blocks, grouped query heads, rows at their
// first position or past the span, keys past a row's position never read,
// its counters left zero, and the same on the CPU's counterpart; under a
// captured CUDA graph its replays follow new positions; the slot cache hands
// it the shapes it serves and keeps LibTorch's attention for the others.
#include <gtest/gtest.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#include <torch/types.h>
#include <torch/utils.h>

#include <cmath>
#include <limits>
#include <utility>

#include "model/cpu_kernels.h"
#include "model/cuda_kernels.h"
#include "model/fused_scope.h"
#include "model/model_config.h"
#include "model/rope.h"
#include "model/slot_attention_math.h"

using namespace grpo::model;

namespace {

// The masked path in double: each kv head's query heads over its keys
// repeated, keys past a row's position (or the span) masked out.
at::Tensor masked_attention(const at::Tensor& q, const at::Tensor& keys, const at::Tensor& values,
                            const at::Tensor& positions, int64_t span, double scale) {
  const int64_t b = q.size(0), heads = q.size(1), rep = heads / keys.size(1), D = q.size(3);
  const at::Tensor k = keys.narrow(2, 0, span).to(at::kCPU, at::kDouble).repeat_interleave(rep, 1);
  const at::Tensor v = values.narrow(2, 0, span).to(at::kCPU, at::kDouble).repeat_interleave(rep, 1);
  const at::Tensor seen = at::arange(span).view({1, 1, 1, span}) <= positions.to(at::kCPU).view({b, 1, 1, 1});
  at::Tensor scores = at::matmul(q.to(at::kCPU, at::kDouble), k.transpose(-2, -1)) * scale;
  scores = scores.masked_fill(seen.logical_not(), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), v).view({b, 1, heads * D});
}

double tolerance(at::ScalarType t) { return t == at::kFloat ? 2e-5 : t == at::kHalf ? 2e-3 : 1.6e-2; }

// A step's rotary cos/sin [b, 1, D] for rows at `positions`, as the model makes them.
std::pair<at::Tensor, at::Tensor> step_rotation(const at::Tensor& positions, int64_t D, at::ScalarType dtype) {
  ModelConfig c;
  c.head_dim = D;
  c.rope_theta = 1000000;
  return rope_cos_sin(rope_inv_freq(c).to(positions.device()), positions.view({-1, 1}), dtype);
}

int multiprocessors() { return at::cuda::getCurrentDeviceProperties()->multiProcessorCount; }

class GpuAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  }
  torch::NoGradGuard no_grad_;
};

TEST_F(GpuAttention, SlotAttentionIsTheRotationAndTheMaskedAttentionSplitOrNot) {
  const at::TensorOptions longs = at::TensorOptions().device(at::kCUDA).dtype(at::kLong);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf}) {
    const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    // (rows, kv heads, query heads per kv head, head dim, span): Qwen2.5-0.5B's
    // heads for one long row and for many rows over a tile of keys (one block
    // each), 7B's, the most query heads per kv head with the largest head dim,
    // a head dim of 40; then blocks that walk several tiles (a running
    // softmax): many rows of 600 keys unsplit, one row of 40,000 keys split
    // 64 ways.
    struct Case {
      int64_t b, kv_heads, rep, D, span;
      bool split;
    };
    const int64_t many = multiprocessors();  // x 2 kv heads: fills the GPU twice, no split
    for (const Case c : {Case{1, 2, 7, 64, 3000, true}, Case{many, 2, 7, 64, 128, false},
                         Case{3, 4, 7, 128, 1500, true}, Case{2, 1, 16, 256, 700, true}, Case{5, 3, 1, 40, 129, true},
                         Case{4, 2, 7, 64, 100, false}, Case{many, 2, 4, 32, 600, false},
                         Case{1, 2, 7, 64, 40000, true}}) {
      SCOPED_TRACE(::testing::Message() << dtype << " b " << c.b << " kv " << c.kv_heads << " rep " << c.rep << " D "
                                        << c.D << " span " << c.span);
      ASSERT_EQ(gpu::math::attention_split(c.b, c.kv_heads, c.span, multiprocessors()).splits > 1, c.split);
      const int64_t capacity = c.span + 17, heads = c.kv_heads * c.rep;
      const at::Tensor keys = at::randn({c.b + 1, c.kv_heads, capacity, c.D}, on).narrow(0, 0, c.b);
      const at::Tensor values = at::randn({c.b + 1, c.kv_heads, capacity, c.D}, on).narrow(0, 0, c.b);
      // q as the packed q/k/v product leaves it: a strided view, not yet rotated.
      const at::Tensor q = at::randn({c.b, 1, heads + 3, c.D}, on).narrow(2, 1, heads).transpose(1, 2);
      // One long row near the end of its span; otherwise rows at every stage:
      // the first position, the span's last key, past it, and anywhere.
      at::Tensor positions = at::randint(0, c.span, {c.b}, longs);
      if (c.b == 1) positions[0] = c.span - 5;
      if (c.b > 1) positions[0] = 0;
      if (c.b > 2) {
        positions[1] = c.span - 1;
        positions[c.b - 1] = capacity - 1;
      }
      const auto [cos, sin] = step_rotation(positions, c.D, dtype);
      const at::Tensor counters = at::zeros({c.b * c.kv_heads}, on.dtype(at::kInt));
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
      const at::Tensor got = gpu::slot_attention(q, cos, sin, keys, values, positions, c.span, scale, counters);
      const at::Tensor rotated = apply_rope(q, cos, sin);  // LibTorch's ops: outside a FusedScope
      const at::Tensor want = masked_attention(rotated, keys, values, positions, c.span, scale);
      ASSERT_EQ(got.sizes(), want.sizes());
      EXPECT_TRUE(at::allclose(got.to(at::kCPU, at::kDouble), want, tolerance(dtype), tolerance(dtype)))
          << "largest difference " << (got.to(at::kCPU, at::kDouble) - want).abs().max().item<double>();
      EXPECT_EQ(counters.count_nonzero().item<int64_t>(), 0) << "the counters are left zero";
      // The CPU's counterpart computes the same.
      const at::Tensor cpu =
          cpu::slot_attention(rotated.cpu(), keys.cpu(), values.cpu(), positions.cpu(), c.span, scale);
      EXPECT_TRUE(at::allclose(cpu.to(at::kDouble), want, tolerance(dtype), tolerance(dtype)));
    }
  }
}

TEST_F(GpuAttention, AppliesToTheShapesItServesInsideAFusedScope) {
  const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  // rows b, kv heads, query heads, head dim: q [b, heads, 1, D] over caches [b, kv, 64, D].
  auto applies = [&](int64_t b, int64_t kv, int64_t heads, int64_t D, at::TensorOptions options) {
    const at::Tensor q = at::randn({b, heads, 1, D}, options), cos = at::randn({b, 1, D}, options);
    const at::Tensor keys = at::randn({b, kv, 64, D}, options), values = at::randn({b, kv, 64, D}, options);
    return gpu::slot_attention_applies(q, cos, cos, keys, values);
  };
  EXPECT_FALSE(applies(2, 2, 14, 64, on)) << "outside a FusedScope";
  const FusedScope fused;
  EXPECT_TRUE(applies(2, 2, 14, 64, on)) << "Qwen2.5-0.5B's heads";
  EXPECT_TRUE(applies(3, 1, 16, 256, on)) << "the most query heads per kv head, the largest head dim";
  EXPECT_FALSE(applies(2, 1, 17, 64, on)) << "17 query heads per kv head";
  EXPECT_FALSE(applies(2, 1, 8, 288, on)) << "a head dim past 256";
  EXPECT_FALSE(applies(2, 2, 14, 64, on.device(at::kCPU))) << "on the CPU";
  const at::Tensor q = at::randn({2, 14, 2, 64}, on), cos = at::randn({2, 2, 64}, on);
  const at::Tensor keys = at::randn({2, 2, 64, 64}, on);
  EXPECT_FALSE(gpu::slot_attention_applies(q, cos, cos, keys, keys)) << "two queries per row (a prefill)";
}

TEST_F(GpuAttention, KeysPastARowsPositionAreNeverRead) {
  const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const int64_t b = 2, capacity = 2000, D = 64;
  at::Tensor keys = at::randn({b, 2, capacity, D}, on), values = at::randn({b, 2, capacity, D}, on);
  const at::Tensor clean_keys = keys.clone(), clean_values = values.clone();
  const at::Tensor positions = at::tensor({int64_t{900}, int64_t{10}}).to(at::kCUDA);
  keys[0].narrow(1, 901, capacity - 901).fill_(NAN);
  values[0].narrow(1, 901, capacity - 901).fill_(NAN);
  keys[1].narrow(1, 11, capacity - 11).fill_(NAN);
  values[1].narrow(1, 11, capacity - 11).fill_(NAN);
  const at::Tensor q = at::randn({b, 14, 1, D}, on);
  const auto [cos, sin] = step_rotation(positions, D, at::kBFloat16);
  const at::Tensor counters = at::zeros({b * 2}, on.dtype(at::kInt));
  const at::Tensor got = gpu::slot_attention(q, cos, sin, keys, values, positions, capacity, 0.125, counters);
  EXPECT_TRUE(at::isfinite(got).all().item<bool>());
  EXPECT_TRUE(
      at::equal(got, gpu::slot_attention(q, cos, sin, clean_keys, clean_values, positions, capacity, 0.125, counters)));
}

TEST_F(GpuAttention, ReplaysOfACapturedGraphFollowNewPositions) {
  const at::TensorOptions on = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const int64_t b = 2, capacity = 1024, D = 64, span = 1024;
  const at::Tensor keys = at::randn({b, 2, capacity, D}, on), values = at::randn({b, 2, capacity, D}, on);
  const at::Tensor q = at::randn({b, 14, 1, D}, on);
  at::Tensor positions = at::tensor({int64_t{5}, int64_t{700}}).to(at::kCUDA);
  const at::Tensor counters = at::zeros({b * 2}, on.dtype(at::kInt));
  ASSERT_GT(gpu::math::attention_split(b, 2, span, multiprocessors()).splits, 1) << "the graph holds split rows";
  // cos/sin live in buffers the graph reads, refilled before each replay as the model's step refills its own.
  auto [cos, sin] = step_rotation(positions, D, at::kBFloat16);
  const c10::cuda::CUDAStream stream = c10::cuda::getStreamFromPool();
  at::Tensor out;
  at::cuda::CUDAGraph graph;
  torch::cuda::synchronize();  // what the default stream wrote (the counters' zeros) before the pool stream reads it
  {
    const c10::cuda::CUDAStreamGuard guard(stream);
    gpu::slot_attention(q, cos, sin, keys, values, positions, span, 0.125, counters);  // warm up outside the capture
    stream.synchronize();
    graph.capture_begin();
    out = gpu::slot_attention(q, cos, sin, keys, values, positions, span, 0.125, counters);
    graph.capture_end();
  }
  for (const auto& [first, second] : {std::pair<int64_t, int64_t>{5, 700}, {1000, 0}, {63, 64}}) {
    positions.copy_(at::tensor({first, second}));
    const auto [next_cos, next_sin] = step_rotation(positions, D, at::kBFloat16);
    cos.copy_(next_cos);
    sin.copy_(next_sin);
    graph.replay();
    torch::cuda::synchronize();
    const at::Tensor want = masked_attention(apply_rope(q, cos, sin), keys, values, positions, span, 0.125);
    EXPECT_TRUE(at::allclose(out.to(at::kCPU, at::kDouble), want, 1.6e-2, 1.6e-2)) << first << ", " << second;
    EXPECT_EQ(counters.count_nonzero().item<int64_t>(), 0);
  }
}

}  // namespace
