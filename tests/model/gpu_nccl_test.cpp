// NCCL through LibTorch's c10d on the device (label `gpu`; built in CUDA
// builds only, skipped without a GPU): the process group the multi-GPU
// trainer builds on, compiled the way this build compiles it (USE_C10D_NCCL,
// the wheel's nccl.h). One rank: every collective's result is still NCCL's
// work, written into outputs that start as zeros or scaled by a pre-multiplied sum.
#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <torch/cuda.h>

#include <vector>

TEST(GpuNccl, OneRankGroupRunsItsCollectivesOnTheDevice) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto store = c10::make_intrusive<c10d::HashStore>();
  auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, /*rank=*/0, /*size=*/1);
  const auto on_gpu = at::TensorOptions().device(at::kCUDA);

  // A pre-multiplied sum (how gradients are averaged): x * 0.5 over one rank.
  std::vector<at::Tensor> grads{at::arange(1000, on_gpu.dtype(at::kFloat))};
  c10d::AllreduceOptions halve;
  halve.reduceOp = c10d::makeNCCLPreMulSum(0.5);
  pg->allreduce(grads, halve)->wait();
  EXPECT_TRUE(at::equal(grads[0].cpu(), at::arange(1000, at::kFloat) * 0.5));

  // A bfloat16 bucket gathered into zeros, as pushed weights travel.
  std::vector<at::Tensor> bucket{at::randn({1 << 20}, on_gpu.dtype(at::kBFloat16))};
  std::vector<std::vector<at::Tensor>> gathered{{at::zeros_like(bucket[0])}};
  pg->allgather(gathered, bucket)->wait();
  EXPECT_TRUE(at::equal(gathered[0][0], bucket[0]));

  // ZeRO's shard of a summed gradient, scattered into zeros.
  std::vector<at::Tensor> shard{at::zeros({4096}, on_gpu.dtype(at::kFloat))};
  std::vector<std::vector<at::Tensor>> parts{{at::full({4096}, 3.0, on_gpu.dtype(at::kFloat))}};
  pg->reduce_scatter(shard, parts)->wait();
  EXPECT_TRUE(at::equal(shard[0].cpu(), at::full({4096}, 3.0, at::kFloat)));
  pg->shutdown();
}
