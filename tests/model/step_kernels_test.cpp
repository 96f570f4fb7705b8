// gpu::step_prelude's and gpu::record_step's kernels (model/step_kernels.cuh)
// run on the host, their own source, block by block and thread by thread
// (cuda_block_emulation.h): the prelude's element i lands in its row's cos,
// sin or mask, with the launch's grid and with a grid too small for one
// element per thread (its loop strides), against rope_cos_sin and the
// model's additive mask; the record takes each row once, rows in several
// blocks, the last one partial. The GPU's tests (gpu_kernels_test.cpp) run
// them on the device.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <limits>
#include <utility>

#include "model/model_config.h"
#include "model/rope.h"
// After every other header: it defines CUDA's keywords for the kernels' source.
#include "cuda_block_emulation.h"
#include "model/cuda_common.cuh"
#include "model/step_kernels.cuh"

using namespace grpo::model;
namespace emu = grpo::testing::cuda_emulation;
namespace step = grpo::model::gpu::step;

namespace {

TEST(StepKernels, ThePreludeIsTheRotationsCosAndSinAndTheMaskForEveryGrid) {
  ModelConfig c;
  c.head_dim = 64;
  const at::Tensor inv_freq = rope_inv_freq(c);
  const at::Tensor positions = at::tensor({0, 5, 77, 127, 128, 4095, 30001}, at::kLong);
  const int64_t b = positions.size(0), D = c.head_dim, span = 128, n = b * (D + span);
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const auto [want_cos, want_sin] = rope_cos_sin(inv_freq, positions.view({b, 1}), dtype);
    const double masked = dtype == at::kFloat ? std::numeric_limits<float>::lowest() : -1e4;
    const at::Tensor allowed = at::arange(span).view({1, span}) <= positions.view({b, 1});
    const at::Tensor want_mask =
        at::zeros({b, 1, 1, span}, dtype).masked_fill_(allowed.logical_not().view({b, 1, 1, span}), masked);
    // step_prelude's launch, then 2 blocks of 64 threads for 1,344 elements.
    const std::pair<unsigned int, int> launch{gpu::detail::blocks_for(n, 256), 256}, strided{2, 64};
    for (const auto& [blocks, threads] : {launch, strided}) {
      SCOPED_TRACE(::testing::Message() << dtype << ", " << blocks << " blocks of " << threads);
      at::Tensor cos = at::full({b, 1, D}, NAN, dtype), sin = at::full({b, 1, D}, NAN, dtype);
      at::Tensor mask = at::full({b, 1, 1, span}, NAN, dtype);
      AT_DISPATCH_FLOATING_TYPES_AND(at::kBFloat16, dtype, "emulated_step_prelude", [&] {
        emu::launch({blocks, 1, 1}, threads, 0, /*seed=*/9, step::step_prelude_kernel<scalar_t>,
                    positions.const_data_ptr<int64_t>(), inv_freq.const_data_ptr<float>(),
                    cos.mutable_data_ptr<scalar_t>(), sin.mutable_data_ptr<scalar_t>(),
                    mask.mutable_data_ptr<scalar_t>(), n, D, span);
      });
      EXPECT_TRUE(at::equal(mask, want_mask));
      // The host's cosf and sinf against LibTorch's CPU cos and sin: the same
      // angles, the functions within a rounding step of each other.
      const double steps = dtype == at::kFloat ? 0x1p-23 : 0x1p-7;
      for (const auto& [got, want] : {std::pair{cos, want_cos}, std::pair{sin, want_sin}})
        EXPECT_TRUE(at::allclose(got.to(at::kDouble), want.to(at::kDouble), steps, 1e-7))
            << "largest difference " << (got.to(at::kDouble) - want.to(at::kDouble)).abs().max().item<double>();
    }
  }
}

TEST(StepKernels, TheRecordTakesEachRowOnceAcrossBlocks) {
  const int64_t rows = 70, max_new = 4;  // 3 blocks of 32, the last with 6 rows
  const at::Tensor sampled = at::randint(0, 50, {rows}, at::kLong), logprob = -at::rand({rows});
  const at::Tensor budget = at::randint(1, 6, {rows}, at::kLong);
  const at::Tensor stop_ids = at::full({rows, 2}, -1, at::kLong);
  stop_ids.select(1, 0).fill_(7);
  const gpu::math::StepBooks books{max_new, max_new, 2, 2};
  struct Books {
    at::Tensor done, generated, positions, tokens, out_ids, out_logprobs;
  };
  const Books start{at::rand({rows}) < 0.2,
                    at::randint(0, 3, {rows}, at::kLong),
                    at::randint(10, 20, {rows}, at::kLong),
                    at::full({rows}, -1, at::kLong),
                    at::full({rows, max_new}, -1, at::kLong),
                    at::zeros({rows, max_new}, at::kFloat)};
  auto copy = [](const Books& s) {
    return Books{s.done.clone(), s.generated.clone(), s.positions.clone(),
                 s.tokens.clone(), s.out_ids.clone(), s.out_logprobs.clone()};
  };
  Books want = copy(start), got = copy(start);
  for (int64_t r = 0; r < rows; ++r)
    gpu::math::record_step_row(r, sampled.const_data_ptr<int64_t>(), logprob.const_data_ptr<float>(),
                               budget.const_data_ptr<int64_t>(), stop_ids.const_data_ptr<int64_t>(),
                               want.done.data_ptr<bool>(), want.generated.data_ptr<int64_t>(),
                               want.positions.data_ptr<int64_t>(), want.tokens.data_ptr<int64_t>(),
                               want.out_ids.data_ptr<int64_t>(), want.out_logprobs.data_ptr<float>(), books);
  emu::launch({3, 1, 1}, 32, 0, /*seed=*/4, step::record_step_kernel, sampled.const_data_ptr<int64_t>(),
              logprob.const_data_ptr<float>(), budget.const_data_ptr<int64_t>(), stop_ids.const_data_ptr<int64_t>(),
              got.done.data_ptr<bool>(), got.generated.data_ptr<int64_t>(), got.positions.data_ptr<int64_t>(),
              got.tokens.data_ptr<int64_t>(), got.out_ids.data_ptr<int64_t>(), got.out_logprobs.data_ptr<float>(),
              books, rows);
  EXPECT_TRUE(at::equal(got.done, want.done));
  EXPECT_TRUE(at::equal(got.generated, want.generated));
  EXPECT_TRUE(at::equal(got.positions, want.positions));
  EXPECT_TRUE(at::equal(got.tokens, want.tokens));
  EXPECT_TRUE(at::equal(got.out_ids, want.out_ids));
  EXPECT_TRUE(at::equal(got.out_logprobs, want.out_logprobs));
  EXPECT_FALSE(at::equal(got.generated, start.generated)) << "live rows counted their id";
  EXPECT_TRUE(at::equal(got.generated.masked_select(start.done), start.generated.masked_select(start.done)))
      << "done rows keep what they hold";
}

}  // namespace
