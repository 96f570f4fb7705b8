// What a CUDA build links, checked without a GPU (label `fast`; built in CUDA
// builds only): LibTorch's CUDA library with its hooks, a CUDA runtime of the
// toolkit's major version, the NCCL that c10d's headers were compiled
// against is the NCCL LibTorch loads, and our NCCL paths are compiled in.
#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>

#include <tuple>

#include "rollout/comm_group.h"

TEST(CudaBuild, LibTorchsCudaLibraryIsLinkedWithTheToolkitsRuntime) {
  const at::CUDAHooksInterface& hooks = at::detail::getCUDAHooks();
  ASSERT_TRUE(hooks.hasCUDART()) << "libtorch_cuda is not linked: its hooks are not registered";
  EXPECT_EQ(hooks.versionCUDART() / 1000, CUDART_VERSION / 1000)
      << "LibTorch's CUDA runtime " << hooks.versionCUDART() << ", the toolkit's headers " << CUDART_VERSION;
}

TEST(CudaBuild, TheNcclHeaderIsTheLoadedNcclRelease) {
  const auto [major, minor, patch] = c10d::getNcclVersionTuple();
  std::ignore = patch;
  EXPECT_EQ(major, NCCL_MAJOR) << "nccl.h is " << NCCL_MAJOR << "." << NCCL_MINOR << ", LibTorch loaded "
                               << c10d::getNcclVersion();
  EXPECT_EQ(minor, NCCL_MINOR) << "nccl.h is " << NCCL_MAJOR << "." << NCCL_MINOR << ", LibTorch loaded "
                               << c10d::getNcclVersion();
}

// The NCCL paths are compiled in only where c10d's NCCL header was seen
// (USE_C10D_NCCL): without it a CUDA build would quietly send every device
// tensor through Gloo.
TEST(CudaBuild, TheWeightPushAndTheTrainingWorldHaveNccl) {
  EXPECT_TRUE(grpo::rollout::nccl_built()) << "comm_group.cpp was compiled without USE_C10D_NCCL";
}
