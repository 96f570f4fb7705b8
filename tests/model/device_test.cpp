// Which device a process computes on (model/device.h), and saving tensors of
// any layout through the views a checkpoint writer reads.
#include <filesystem>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/device.h"
#include "model/weights.h"

using namespace grpo::model;

TEST(Device, LocalRanksGpuUnlessUseCpuOrNoneIsVisible) {
  EXPECT_EQ(choose_device(false, 0, 1), at::Device(at::kCUDA, 0));
  EXPECT_EQ(choose_device(false, 3, 8), at::Device(at::kCUDA, 3));  // torchrun's fourth process on an 8-GPU node
  EXPECT_EQ(choose_device(true, 3, 8), at::Device(at::kCPU));       // --use_cpu true
  EXPECT_EQ(choose_device(false, 3, 0), at::Device(at::kCPU));      // no GPU: the CPU, as accelerate falls back
  // One GPU bound to each task (Slurm's --gpus-per-task=1): that one, whatever the rank.
  EXPECT_EQ(choose_device(false, 5, 1), at::Device(at::kCUDA, 0));
}

TEST(Device, MoreProcessesThanVisibleGpusIsAnErrorSayingWhatToDo) {
  try {
    choose_device(false, 2, 2);
    FAIL() << "LOCAL_RANK 2 with 2 GPUs was accepted";
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    for (const char* part : {"LOCAL_RANK=2", "sees 2 GPU(s)", "CUDA_VISIBLE_DEVICES", "NPROC_PER_NODE", "--use_cpu"})
      EXPECT_NE(what.find(part), std::string::npos) << part << " in: " << what;
  }
}

TEST(Device, SpelledDevicesAreParsedAndGpusThatAreNotThereRefused) {
  EXPECT_EQ(parse_device("cpu", "--device"), at::Device(at::kCPU));
  EXPECT_EQ(parse_device("auto", "--device"),
            visible_gpus() > 0 ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU));
  for (const char* bad : {"gpu", "cuda:x", "", "CPU", "mps"})
    EXPECT_THROW(parse_device(bad, "--device"), std::invalid_argument) << bad;
  const std::string past = "cuda:" + std::to_string(visible_gpus());
  try {
    parse_device(past, "--device");
    FAIL() << past << " was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("sees " + std::to_string(visible_gpus()) + " GPU(s)"), std::string::npos)
        << e.what();
  }
}

// A writer copies each tensor into its own buffer as it reaches it
// (TensorView::read): strided and non-contiguous tensors are saved as their
// values, laid out row-major as safetensors wants.
TEST(Device, TensorsOfAnyLayoutAreSavedAsTheirValues) {
  const std::string dir = std::string(::testing::TempDir()) + "/grpo_writable_view";
  std::filesystem::remove_all(dir);
  const at::Tensor base = at::arange(12, at::kFloat).view({3, 4});
  const std::vector<std::pair<std::string, at::Tensor>> tensors = {
      {"transposed", base.t()}, {"every_other_column", base.narrow(1, 1, 2)}, {"bf16", base.to(at::kBFloat16)}};
  std::vector<TensorView> views;
  for (const auto& [name, t] : tensors) views.push_back(writable_view(name, t));
  write_sharded(dir, views, size_t(1) << 20);
  const CheckpointFiles files = CheckpointFiles::open(dir);
  for (const auto& [name, t] : tensors) {
    const at::Tensor back = tensor_view(files.require(name));
    EXPECT_TRUE(at::equal(back, t.contiguous())) << name;
  }
}
