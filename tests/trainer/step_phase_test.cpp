// Running out of memory in a phase of the step (trainer/step_phase.h): an
// error naming the device, the phase, its sizes and the flags that lower it.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/step_phase.h"

using namespace grpo::trainer;

TEST(StepPhase, AnAllocationNoMemoryHoldsNamesThePhaseItsSizesAndTheFlags) {
  std::map<std::string, double> metrics;
  try {
    run_phase(StepPhase::Backward, at::kCPU, metrics, "micro-batches of 4 completion(s)",
              [] { (void)at::empty({int64_t(1) << 62}, at::kByte); });  // 4 EiB: no machine has it
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const OutOfDeviceMemory& e) {
    const std::string what = e.what();
    for (const char* part : {"cpu ran out of memory", "backward phase", "micro-batches of 4 completion(s)",
                             "--per_device_train_batch_size", "--gradient_checkpointing true"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << "one line, without LibTorch's backtrace: " << what;
    EXPECT_EQ(e.phase(), StepPhase::Backward);
    EXPECT_TRUE(e.weights_intact()) << "backward does not touch the weights";
  }
}

TEST(StepPhase, OnlyTheOptimizersPhaseLeavesTheWeightsHalfUpdated) {
  std::map<std::string, double> metrics;
  for (StepPhase phase : {StepPhase::Generation, StepPhase::Logprobs, StepPhase::Optimizer}) {
    try {
      run_phase(phase, at::kCPU, metrics, "sizes", [] { (void)at::empty({int64_t(1) << 62}, at::kByte); });
      FAIL() << "a 4 EiB allocation succeeded";
    } catch (const OutOfDeviceMemory& e) {
      EXPECT_EQ(e.weights_intact(), phase != StepPhase::Optimizer);
    }
  }
  // Within the optimizer's phase, before the update (the gradients combined and clipped, the moments
  // brought back from host memory), the weights are still the last step's: said so, the run saves that
  // step's checkpoint. What the part returns comes through; an error of another kind passes unchanged.
  try {
    run_phase(StepPhase::Optimizer, at::kCPU, metrics, "the phase's sizes", [] {
      EXPECT_EQ(before_the_update(at::kCPU, "AdamW state 1.00 GiB", [] { return 7; }), 7);
      EXPECT_THROW(before_the_update(at::kCPU, "", [] { throw std::invalid_argument("x"); }), std::invalid_argument);
      before_the_update(at::kCPU, "AdamW state 1.00 GiB", [] { (void)at::empty({int64_t(1) << 62}, at::kByte); });
    });
    FAIL() << "a 4 EiB allocation succeeded";
  } catch (const OutOfDeviceMemory& e) {
    EXPECT_TRUE(e.weights_intact());
    EXPECT_EQ(e.phase(), StepPhase::Optimizer);
    EXPECT_NE(std::string(e.what()).find("AdamW state 1.00 GiB"), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).find("the phase's sizes"), std::string::npos) << "not wrapped twice: " << e.what();
  }
}

TEST(StepPhase, OtherErrorsPassThroughUnchanged) {
  std::map<std::string, double> metrics;
  EXPECT_THROW(run_phase(StepPhase::Generation, at::kCPU, metrics, "", [] { throw std::invalid_argument("x"); }),
               std::invalid_argument);
  // A sampler plugin reports CUDA's error as text across the ABI: still recognised.
  EXPECT_TRUE(is_out_of_memory(std::runtime_error("native: CUDA out of memory. Tried to allocate 2.00 GiB")));
  EXPECT_TRUE(is_out_of_memory(std::runtime_error("CUDA error: out of memory\nCUDA kernel errors might be ...")));
  EXPECT_TRUE(is_out_of_memory(std::runtime_error(
      "native: out of memory for decoding: one row of 1152 positions needs 13.5 MiB and 2.0 MiB are left")));
  EXPECT_FALSE(is_out_of_memory(std::runtime_error("memory of the run")));
  run_phase(StepPhase::Generation, at::kCPU, metrics, "", [] {});
  EXPECT_TRUE(metrics.empty()) << "the CPU has no device allocator to report on (its size is memory/rss_gb)";
}
