// gpu::rms_norm's and gpu::add_rms_norm's kernel (model/norm_kernel.cuh) run
// on the host, its own source, block by block and thread by thread
// (cuda_block_emulation.h), with the threads the launch gives it: against
// Hugging Face's RMSNorm in LibTorch's ops within a rounding step, the
// residual's sum to the bit, for rows shorter than a warp, of a few warps,
// and longer than the block (several elements per thread), in float32 and
// bfloat16. The GPU's tests (gpu_kernels_test.cpp) run it on the device.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>
#include <string>

#include "model/cuda_kernel_math.h"
#include "rounding_steps.h"
// After every other header: it defines CUDA's keywords for the kernel's source.
#include "cuda_block_emulation.h"
#include "model/norm_kernel.cuh"

namespace emu = grpo::testing::cuda_emulation;
namespace norm = grpo::model::gpu::norm;

namespace {

constexpr double kEps = 1e-6;

struct Normed {
  at::Tensor sum, out;
};

// The launch launch_rms_norm makes, on the host: one block per row of x
// [rows, N], norm::threads_for(N) threads; outputs NaN until written.
Normed emulate(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& weight) {
  const int64_t N = x.size(-1), rows = x.numel() / N;
  Normed got{residual.defined() ? at::full_like(x, NAN) : at::Tensor(), at::full_like(x, NAN)};
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, x.scalar_type(), "emulated_rms_norm", [&] {
    emu::launch({static_cast<unsigned int>(rows), 1, 1}, norm::threads_for(N), 0, /*seed=*/5,
                norm::rms_norm_kernel<scalar_t>, x.const_data_ptr<scalar_t>(),
                residual.defined() ? residual.const_data_ptr<scalar_t>() : nullptr, weight.const_data_ptr<scalar_t>(),
                got.sum.defined() ? got.sum.mutable_data_ptr<scalar_t>() : nullptr, got.out.mutable_data_ptr<scalar_t>(),
                N, static_cast<float>(kEps));
  });
  return got;
}

// Hugging Face's Qwen2RMSNorm: in float32, rounded to the dtype, times the weight.
at::Tensor hugging_face_rms_norm(const at::Tensor& h, const at::Tensor& weight) {
  const at::Tensor f = h.to(at::kFloat);
  return weight * (f * at::rsqrt(f.pow(2).mean(-1, true) + kEps)).to(h.scalar_type());
}

TEST(NormKernel, ThreadsAreWholeWarpsUpTo256) {
  EXPECT_EQ(norm::threads_for(16), 32);
  EXPECT_EQ(norm::threads_for(40), 64);
  EXPECT_EQ(norm::threads_for(128), 128);
  EXPECT_EQ(norm::threads_for(896), 256);
  EXPECT_EQ(norm::threads_for(3584), 256);
}

class NormKernelDtypes : public ::testing::TestWithParam<at::ScalarType> {};

TEST_P(NormKernelDtypes, IsHuggingFacesRmsNormWithinARoundingStep) {
  const at::ScalarType dtype = GetParam();
  // 16: less than a warp; 40 and 128: one block of two and four warps; 1000
  // and 896 (Qwen2.5-0.5B's): a block of eight warps, several elements each.
  for (int64_t N : {16, 40, 128, 1000, 896}) {
    const at::Tensor x = (at::randn({3, N}) * 3).to(dtype), weight = (at::rand({N}) + 0.5).to(dtype);
    const Normed got = emulate(x, {}, weight);
    grpo::testing::expect_within_steps(got.out, hugging_face_rms_norm(x, weight), 1, "N " + std::to_string(N));
  }
}

TEST_P(NormKernelDtypes, WithAResidualItIsTheAddToTheBitAndTheNormAfterIt) {
  const at::ScalarType dtype = GetParam();
  for (int64_t N : {40, 896}) {
    const at::Tensor x = (at::randn({4, N}) * 3).to(dtype), residual = at::randn({4, N}).to(dtype);
    const at::Tensor weight = (at::rand({N}) + 0.5).to(dtype);
    const Normed got = emulate(x, residual, weight);
    const at::Tensor h = x + residual;
    EXPECT_TRUE(at::equal(got.sum, h)) << "N " << N;
    grpo::testing::expect_within_steps(got.out, hugging_face_rms_norm(h, weight), 1, "N " + std::to_string(N));
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, NormKernelDtypes, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const ::testing::TestParamInfo<at::ScalarType>& info) {
                           return std::string(c10::toString(info.param));
                         });

}  // namespace
