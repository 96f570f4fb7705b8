// CPU threads: configuring them again (as the in-process sampler does after
// the trainer) keeps the calling thread's torch operators on every core; and
// the heap that configure_cpu_threads sets up keeps what is freed.
#include <unistd.h>

#include <cstdlib>

#include <ATen/Parallel.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include "model/threads.h"

// With Debian's OpenMP build of OpenBLAS, keeping OpenBLAS at one thread
// after torch's setting set this thread's OpenMP team to one: every training
// step of a run with the native sampler then ran on one core.
TEST(CpuThreads, ConfiguringAgainKeepsTheTeamOnThisThread) {
  grpo::model::configure_cpu_threads(2);
  at::Tensor a = at::randn({256, 256});
  (void)at::matmul(a, a).sum().item<float>();  // torch's per-thread setup has run here
  grpo::model::configure_cpu_threads(2);
  EXPECT_EQ(at::get_num_threads(), 2);
  int team = 0;
  at::parallel_for(0, 64, 1, [&](int64_t, int64_t) {
    if (at::get_thread_num() == 0) team = at::get_num_threads();
  });
  EXPECT_EQ(team, 2);
}

// A block freed at the top of the heap stays in it, however large: a training
// step frees its activations (2.3 GB at Qwen2.5-0.5B's shape in bfloat16) at
// the end of the backward, and with glibc's trimming the next step faulted
// every page in again (580,000 faults a step, a third of its time). The block
// here is never touched, so it costs address space, not memory.
TEST(CpuThreads, TheHeapKeepsEvenAFreedBlockOverTwoGigabytes) {
  grpo::model::configure_cpu_threads(2);
  void* block = std::malloc(size_t{3} << 30);  // from the heap: glibc's mmap is off
  ASSERT_NE(block, nullptr);
  const char* end_with = static_cast<const char*>(sbrk(0));
  std::free(block);
  EXPECT_EQ(static_cast<const char*>(sbrk(0)), end_with) << "glibc returned the freed block to the kernel";
}
