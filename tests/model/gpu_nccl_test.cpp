// NCCL through LibTorch's c10d (label `gpu`; built in CUDA builds only, skipped
// without a GPU): the process group the multi-GPU trainer builds on, used the
// way this build compiles it (USE_C10D_NCCL, the wheel's nccl.h).
#include <gtest/gtest.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/cuda.h>

#include <tuple>
#include <vector>

TEST(GpuNccl, TheHeaderAndTheLoadedLibraryAreOneNcclRelease) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto [major, minor, patch] = c10d::getNcclVersionTuple();
  EXPECT_EQ(major, NCCL_MAJOR) << "nccl.h is " << NCCL_MAJOR << "." << NCCL_MINOR << ", LibTorch loaded "
                               << c10d::getNcclVersion();
  EXPECT_EQ(minor, NCCL_MINOR) << "LibTorch loaded " << c10d::getNcclVersion();
  std::ignore = patch;
}

TEST(GpuNccl, OneRankGroupReducesAndBroadcastsOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, /*rank=*/0, /*size=*/1);
  const auto on_gpu = at::TensorOptions().device(at::kCUDA);
  // float32 and a bfloat16 bucket, as gradients and pushed weights travel.
  std::vector<at::Tensor> grads{at::arange(1000, on_gpu.dtype(at::kFloat))};
  pg->allreduce(grads)->wait();
  EXPECT_TRUE(at::equal(grads[0].cpu(), at::arange(1000, at::kFloat)));
  std::vector<at::Tensor> bucket{at::randn({1 << 20}, on_gpu.dtype(at::kBFloat16))};
  const at::Tensor before = bucket[0].clone();
  pg->broadcast(bucket)->wait();
  EXPECT_TRUE(at::equal(bucket[0], before));
  EXPECT_TRUE(bucket[0].is_cuda());
  pg->shutdown();
}
