// Where the rollout servers grpo-host starts (--num_infer_workers) sample:
// the GPUs training leaves free, else training's own, else the CPU.
#include <gtest/gtest.h>

#include "trainer/local_rollout_servers.h"

using grpo::trainer::rollout_server_devices;
using Devices = std::vector<std::string>;

TEST(RolloutServerDevices, AsyncModeTakesTheGpusTheRanksLeaveFree) {
  // CUDA_VISIBLE_DEVICES=0..7 NPROC_PER_NODE=7 --num_infer_workers 1: the eighth GPU.
  EXPECT_EQ(rollout_server_devices(c10::Device("cuda:3"), 8, 7, 1), Devices{"cuda:7"});
  // Two free GPUs, three servers: in turn.
  EXPECT_EQ(rollout_server_devices(c10::Device("cuda:0"), 8, 6, 3), (Devices{"cuda:6", "cuda:7", "cuda:6"}));
}

TEST(RolloutServerDevices, WithNoGpuFreeTheyShareTrainingsGpus) {
  EXPECT_EQ(rollout_server_devices(c10::Device("cuda:0"), 1, 1, 2), (Devices{"cuda:0", "cuda:0"}));
  EXPECT_EQ(rollout_server_devices(c10::Device("cuda:1"), 2, 2, 3), (Devices{"cuda:0", "cuda:1", "cuda:0"}));
}

TEST(RolloutServerDevices, ACpuRunStartsThemOnTheCpu) {
  EXPECT_EQ(rollout_server_devices(c10::Device("cpu"), 0, 2, 2), (Devices{"cpu", "cpu"}));
  // --use_cpu on a GPU machine: training on the CPU keeps its servers there too.
  EXPECT_EQ(rollout_server_devices(c10::Device("cpu"), 8, 1, 1), Devices{"cpu"});
}
