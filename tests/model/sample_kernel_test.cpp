// gpu::sample_rows's kernel (model/sample_kernel.cuh) run on the host, its
// own source, block by block and thread by thread (cuda_block_emulation.h):
// each row's id is the one whose span of the cumulative distribution holds
// its draw times the row's total, with that id's log-probability, for
// vocabularies smaller and larger than the block's segments, temperatures,
// masked (-inf) ids, and draws of 0 and just under 1. The GPU's tests
// (gpu_kernels_test.cpp) run it on the device against softmax + cumsum +
// searchsorted.
#include <gtest/gtest.h>
#include <ATen/ATen.h>
#include <torch/types.h>

#include <cmath>
#include <limits>
#include <vector>

#include "model/cuda_kernel_math.h"
// After every other header: it defines CUDA's keywords for the kernel's source.
#include "cuda_block_emulation.h"
#include "model/sample_kernel.cuh"

namespace emu = grpo::testing::cuda_emulation;
namespace sampling = grpo::model::gpu::sampling;

namespace {

// The launch sample_rows makes, on the host; `threads` per block (the
// kernel takes any multiple of 32: the device's 1024 cost the host an OS
// thread each).
std::pair<std::vector<int64_t>, std::vector<float>> emulate(const at::Tensor& logits, double temperature,
                                                            const at::Tensor& draws, int threads) {
  const int64_t B = logits.size(0), V = logits.size(1);
  std::vector<int64_t> tokens(B, -1);
  std::vector<float> logprobs(B, NAN);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, logits.scalar_type(), "emulated_sample_rows", [&] {
    emu::launch({static_cast<unsigned int>(B), 1, 1}, threads, 0, /*seed=*/3,
                sampling::sample_kernel<scalar_t>, logits.const_data_ptr<scalar_t>(), logits.stride(0), V,
                1.0f / static_cast<float>(temperature), draws.const_data_ptr<float>(), tokens.data(),
                logprobs.data());
  });
  return {tokens, logprobs};
}

class SampleKernel : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(SampleKernel, EachRowsIdHoldsItsDrawInTheCumulativeDistribution) {
  torch::manual_seed(0);
  for (int64_t V : {int64_t{37}, int64_t{5000}}) {
    for (double temperature : {1.0, 0.7}) {
      SCOPED_TRACE(::testing::Message() << GetParam() << " V " << V << " temperature " << temperature);
      const int64_t B = 4;
      at::Tensor logits = (at::randn({B, V}) * 3).to(GetParam());
      logits[0].narrow(0, 0, V / 2).fill_(-std::numeric_limits<float>::infinity());  // masked ids
      at::Tensor draws = at::rand({B});
      draws[1] = 0.0f;
      draws[2] = 0.99999994f;
      // The device's block for the small vocabulary (most segments empty), a quarter of it for the larger.
      const auto [tokens, logprobs] = emulate(logits, temperature, draws, V < 100 ? sampling::kSampleThreads : 256);
      // In double: the scaled logits as the kernel scales them (times the
      // float reciprocal), their distribution, and where each draw falls.
      const at::Tensor scaled = logits.to(at::kFloat) * (1.0f / static_cast<float>(temperature));
      const at::Tensor probs = at::softmax(scaled.to(at::kDouble), -1), cdf = probs.cumsum(-1);
      for (int64_t r = 0; r < B; ++r) {
        const int64_t id = tokens[r];
        ASSERT_TRUE(id >= 0 && id < V) << "row " << r << ": " << id;
        const double u = draws[r].item<double>(), before = id > 0 ? cdf[r][id - 1].item<double>() : 0.0;
        const double through = cdf[r][id].item<double>();
        EXPECT_GT(probs[r][id].item<double>(), 0.0) << "row " << r << " drew an id of no probability";
        EXPECT_LE(before, u + 1e-5) << "row " << r << ": an earlier id's span holds the draw";
        EXPECT_GE(through, std::min(u, 1.0 - 1e-5)) << "row " << r << ": a later id's span holds the draw";
        EXPECT_NEAR(logprobs[r], std::log(probs[r][id].item<double>()), 1e-4) << "row " << r;
      }
      EXPECT_GE(tokens[0], V / 2) << "a masked id was drawn";
      EXPECT_EQ(tokens[1], 0) << "a draw of 0: the first id";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, SampleKernel, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return std::string(c10::toString(info.param)); });

}  // namespace
