// model/side_stream.h (label `gpu`; the GPU cases skipped without a GPU): a
// background thread's kernels run on a stream of their own, after what the
// launching thread queued before its mark, and are done when the scope
// finishes; on the CPU there is nothing to order.
#include <gtest/gtest.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <future>

#include "model/side_stream.h"

using namespace grpo::model;

namespace {

TEST(SideStream, OnTheCpuThereIsNothingToOrder) {
  EXPECT_EQ(mark_stream(at::kCPU), nullptr);
  SideStreamScope scope(at::kCPU, nullptr);
  EXPECT_FALSE(scope.active());
  scope.finish();
}

TEST(SideStream, ABackgroundThreadsKernelsFollowTheMarkOnAStreamOfTheirOwn) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const at::Device gpu(at::kCUDA, 0);
  // Long enough on the launching thread's stream that, unordered, the
  // background thread would read it half written.
  at::Tensor x = at::zeros({64, 1024, 1024}, at::TensorOptions().device(gpu));
  for (int i = 0; i < 20; ++i) x.add_(1);
  const std::shared_ptr<StreamMark> mark = mark_stream(gpu);
  ASSERT_NE(mark, nullptr);
  const c10::cuda::CUDAStream launching = c10::cuda::getCurrentCUDAStream(0);
  auto background = std::async(std::launch::async, [&] {
    SideStreamScope side(gpu, mark);
    EXPECT_TRUE(side.active());
    const c10::cuda::CUDAStream current = c10::cuda::getCurrentCUDAStream(0);
    EXPECT_NE(current, launching) << "the background thread's kernels have a stream of their own";
    at::Tensor y = x.sum();  // reads all 20 additions
    side.finish();           // y is computed when finish() returns
    EXPECT_EQ(c10::cuda::getCurrentCUDAStream(0), current);
    return y;
  });
  const at::Tensor y = background.get();
  EXPECT_EQ(y.item<float>(), 20.0f * 64 * 1024 * 1024);
  // The same side stream every time.
  auto again = std::async(std::launch::async, [&] {
    SideStreamScope side(gpu, mark_stream(gpu));
    return c10::cuda::getCurrentCUDAStream(0);
  });
  auto once_more = std::async(std::launch::async, [&] {
    SideStreamScope side(gpu, nullptr);
    return c10::cuda::getCurrentCUDAStream(0);
  });
  EXPECT_EQ(again.get(), once_more.get());
}

}  // namespace
