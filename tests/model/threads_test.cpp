// CPU threads: configuring them again (as the in-process sampler does after
// the trainer) keeps the calling thread's torch operators on every core.
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
