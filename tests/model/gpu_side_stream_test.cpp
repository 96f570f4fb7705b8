// model/side_stream.h (label `gpu`; the GPU cases skipped without a GPU): a
// background thread's kernels run on a stream of their own, after what the
// launching thread queued before its mark, and are done when the scope
// finishes; a helper thread of run_interruptible queues on its caller's
// stream; on the CPU there is nothing to order.
#include <gtest/gtest.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/cuda.h>
#include <torch/types.h>

#include <future>
#include <utility>

#include "model/side_stream.h"
#include "trainer/stop_signal.h"

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
    at::Tensor y = x.min();  // 20 where all 20 additions ran before it
    side.finish();           // y is computed when finish() returns
    EXPECT_EQ(c10::cuda::getCurrentCUDAStream(0), current);
    return y;
  });
  const at::Tensor y = background.get();
  EXPECT_EQ(y.item<float>(), 20.0f);
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

// run_interruptible's thread (the sampler's, under async_generate) queues
// its kernels where its caller's would: on the side stream, on the caller's GPU.
TEST(SideStream, WorkHandedToAnInterruptibleThreadQueuesOnTheCallersStream) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const at::Device gpu(at::kCUDA, 0);
  auto background = std::async(std::launch::async, [&] {
    SideStreamScope side(gpu, mark_stream(gpu));
    const c10::cuda::CUDAStream mine = c10::cuda::getCurrentCUDAStream(0);
    const c10::cuda::CUDAStream theirs = grpo::trainer::run_interruptible<c10::cuda::CUDAStream>(
        [] { return c10::cuda::getCurrentCUDAStream(0); }, "a stream check", gpu);
    return std::make_pair(mine, theirs);
  });
  const auto [mine, theirs] = background.get();
  EXPECT_EQ(theirs, mine);
  EXPECT_NE(theirs, c10::cuda::getDefaultCUDAStream(0));
  // On the CPU the helper thread is left as it is.
  EXPECT_EQ(grpo::trainer::run_interruptible<int>([] { return 7; }, "a CPU call", at::kCPU), 7);
}

}  // namespace
