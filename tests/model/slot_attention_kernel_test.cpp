// gpu::slot_attention's kernel (model/slot_attention_kernel.cuh) run on the
// host, its own source, block by block and thread by thread
// (cuda_block_emulation.h): against the model's unfused path (LibTorch's
// rotary ops, then masked attention in double) with rows split among blocks
// and not, grouped query heads, head dims of 40, 64 and 256, strided
// queries, rows at their first position and past the span; whichever block
// finishes last, the same bits; keys past a row's position never read; the
// counters left zero for the next launch. The GPU's tests
// (gpu_attention_test.cpp) run it on the device.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <limits>

#include "model/cpu_kernels.h"
#include "model/model_config.h"
#include "model/rope.h"
#include "model/slot_attention_math.h"
// After every other header: it defines CUDA's keywords for the kernel's source.
#include "cuda_block_emulation.h"
#include "model/slot_attention_kernel.cuh"

using namespace grpo::model;
namespace emu = grpo::testing::cuda_emulation;
namespace attention = grpo::model::gpu::attention;

namespace {

struct Launch {
  at::Tensor out, counters;
  int64_t splits = 0;
};

// The launch gpu::slot_attention makes, on the host: `multiprocessors` sets
// how the rows are split, `seed` the order the blocks run in.
Launch emulate(const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& keys,
            const at::Tensor& values, const at::Tensor& positions, int64_t span, double scale, int64_t multiprocessors,
            uint32_t seed = 0) {
  const int64_t b = q.size(0), kv_heads = keys.size(1), heads = q.size(1), D = q.size(3), rep = heads / kv_heads;
  const gpu::math::AttentionSplit split = gpu::math::attention_split(b, kv_heads, span, multiprocessors);
  const attention::Shape s = attention::shape_of(q, cos, sin, keys, span, scale, split);
  Launch run;
  run.splits = split.splits;
  run.out = at::full({b, 1, heads * D}, NAN, q.options());
  run.counters = at::zeros({b * kv_heads}, at::kInt);
  // Never-written parts read as NaN.
  at::Tensor part_acc = at::full({b * kv_heads * split.splits * rep * D}, NAN, at::kFloat);
  at::Tensor part_ml = at::full({b * kv_heads * 2 * rep * split.splits}, NAN, at::kFloat);
  const emu::Index grid{static_cast<unsigned int>(split.splits), static_cast<unsigned int>(kv_heads),
                        static_cast<unsigned int>(b)};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, q.scalar_type(), "emulated_slot_attention", [&] {
    emu::launch(grid, attention::kThreads, attention::shared_bytes(s), seed,
                attention::slot_attention_kernel<scalar_t>, q.const_data_ptr<scalar_t>(),
                cos.const_data_ptr<scalar_t>(), sin.const_data_ptr<scalar_t>(), keys.const_data_ptr<scalar_t>(),
                values.const_data_ptr<scalar_t>(), positions.const_data_ptr<int64_t>(),
                run.out.mutable_data_ptr<scalar_t>(), part_acc.mutable_data_ptr<float>(),
                part_ml.mutable_data_ptr<float>(), reinterpret_cast<unsigned int*>(run.counters.mutable_data_ptr<int>()),
                s, attention::region_a_floats(s));
  });
  return run;
}

// The model's unfused path in double: q rotated by LibTorch's ops, each kv
// head's query heads over its keys repeated, keys past a row's position (or
// the span) masked out.
at::Tensor unfused(const at::Tensor& q, const at::Tensor& cos, const at::Tensor& sin, const at::Tensor& keys,
                   const at::Tensor& values, const at::Tensor& positions, int64_t span, double scale) {
  const int64_t b = q.size(0), heads = q.size(1), rep = heads / keys.size(1), D = q.size(3);
  const at::Tensor rotated = apply_rope(q, cos, sin).to(at::kDouble);
  const at::Tensor k = keys.narrow(2, 0, span).to(at::kDouble).repeat_interleave(rep, 1);
  const at::Tensor v = values.narrow(2, 0, span).to(at::kDouble).repeat_interleave(rep, 1);
  const at::Tensor seen = at::arange(span).view({1, 1, 1, span}) <= positions.view({b, 1, 1, 1});
  at::Tensor scores = at::matmul(rotated, k.transpose(-2, -1)) * scale;
  scores = scores.masked_fill(seen.logical_not(), -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), v).view({b, 1, heads * D});
}

std::pair<at::Tensor, at::Tensor> step_rotation(const at::Tensor& positions, int64_t D, at::ScalarType dtype) {
  ModelConfig c;
  c.head_dim = D;
  c.rope_theta = 1000000;
  return rope_cos_sin(rope_inv_freq(c), positions.view({-1, 1}), dtype);
}

struct Case {
  int64_t b, kv_heads, rep, D, span, multiprocessors;
  bool split;
};

class SlotAttentionKernel : public ::testing::TestWithParam<at::ScalarType> {
 protected:
  void SetUp() override { torch::manual_seed(0); }
  at::Tensor randn(at::IntArrayRef sizes) { return at::randn(sizes).to(GetParam()); }
  double tolerance() const {
    return GetParam() == at::kFloat ? 2e-5 : GetParam() == at::kHalf ? 2e-3 : 1.6e-2;
  }
};

TEST_P(SlotAttentionKernel, IsTheRotationAndTheMaskedAttentionSplitOrNot) {
  // Kept small: every shuffle of the emulation is a meeting of 32 threads.
  // The unsplit rows of 300 keys take three tiles each: a running softmax.
  for (const Case c : {Case{2, 1, 3, 40, 300, 132, true}, Case{3, 2, 2, 64, 300, 1, false},
                       Case{1, 1, 4, 256, 200, 132, true}, Case{1, 1, 16, 16, 40, 132, false}}) {
    SCOPED_TRACE(::testing::Message() << "b " << c.b << " kv " << c.kv_heads << " rep " << c.rep << " D " << c.D
                                      << " span " << c.span);
    const int64_t capacity = c.span + 9, heads = c.kv_heads * c.rep;
    const at::Tensor keys = randn({c.b + 1, c.kv_heads, capacity, c.D}).narrow(0, 0, c.b);
    const at::Tensor values = randn({c.b + 1, c.kv_heads, capacity, c.D}).narrow(0, 0, c.b);
    // As the packed q/k/v product leaves q: a strided view, not yet rotated.
    const at::Tensor q = randn({c.b, 1, heads + 3, c.D}).narrow(2, 1, heads).transpose(1, 2);
    // The first row near its span's end, then rows at their first position and past the span.
    at::Tensor positions = at::randint(0, c.span, {c.b}, at::kLong);
    positions[0] = c.span - 3;
    if (c.b > 1) positions[1] = 0;
    if (c.b > 2) positions[2] = capacity - 1;
    const auto [cos, sin] = step_rotation(positions, c.D, GetParam());
    const double scale = 1.0 / std::sqrt(static_cast<double>(c.D));
    const Launch run = emulate(q, cos, sin, keys, values, positions, c.span, scale, c.multiprocessors);
    ASSERT_EQ(run.splits > 1, c.split);
    const at::Tensor want = unfused(q, cos, sin, keys, values, positions, c.span, scale);
    EXPECT_TRUE(at::allclose(run.out.to(at::kDouble), want, tolerance(), tolerance()))
        << "largest difference " << (run.out.to(at::kDouble) - want).abs().max().item<double>();
    EXPECT_EQ(run.counters.count_nonzero().item<int64_t>(), 0) << "the counters are left zero";
    // The CPU's counterpart, given the rotated queries.
    const at::Tensor cpu = cpu::slot_attention(apply_rope(q, cos, sin), keys, values, positions, c.span, scale);
    EXPECT_TRUE(at::allclose(cpu.to(at::kDouble), want, tolerance(), tolerance()));
  }
}

TEST_P(SlotAttentionKernel, WhicheverBlockFinishesLastTheRowsAreTheSame) {
  const at::Tensor keys = randn({1, 1, 400, 32}), values = randn({1, 1, 400, 32}), q = randn({1, 2, 1, 32});
  const at::Tensor positions = at::tensor({int64_t{390}});
  const auto [cos, sin] = step_rotation(positions, 32, GetParam());
  const Launch a = emulate(q, cos, sin, keys, values, positions, 400, 0.2, 132, /*seed=*/1);
  const Launch b = emulate(q, cos, sin, keys, values, positions, 400, 0.2, 132, /*seed=*/7);
  ASSERT_EQ(a.splits, 4);
  EXPECT_TRUE(at::equal(a.out, b.out));
}

TEST_P(SlotAttentionKernel, KeysPastARowsPositionAreNeverRead) {
  at::Tensor keys = randn({2, 1, 300, 16}), values = randn({2, 1, 300, 16});
  const at::Tensor clean_keys = keys.clone(), clean_values = values.clone();
  const at::Tensor positions = at::tensor({int64_t{200}, int64_t{5}});
  keys[0].narrow(1, 201, 99).fill_(NAN);
  values[0].narrow(1, 201, 99).fill_(NAN);
  keys[1].narrow(1, 6, 294).fill_(NAN);
  values[1].narrow(1, 6, 294).fill_(NAN);
  const at::Tensor q = randn({2, 2, 1, 16});
  const auto [cos, sin] = step_rotation(positions, 16, GetParam());
  const Launch run = emulate(q, cos, sin, keys, values, positions, 300, 0.25, 132);
  ASSERT_GT(run.splits, 1);
  EXPECT_TRUE(at::isfinite(run.out).all().item<bool>());
  EXPECT_TRUE(at::equal(run.out, emulate(q, cos, sin, clean_keys, clean_values, positions, 300, 0.25, 132).out));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SlotAttentionKernel, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

}  // namespace
