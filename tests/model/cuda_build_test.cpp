// What a CUDA build links, checked without a GPU (label `fast`; built in CUDA
// builds only): LibTorch's CUDA library with its hooks, a CUDA runtime of the
// toolkit's major version, and the NCCL that c10d's headers were compiled
// against is the NCCL LibTorch loads.
#include <ATen/detail/CUDAHooksInterface.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/NCCLUtils.hpp>

#include <tuple>

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
