#include "model/device.h"

#include <stdexcept>

#include <fmt/format.h>
#include <torch/cuda.h>

namespace grpo::model {

at::Device choose_device(bool use_cpu, int local_rank, int visible) {
  if (use_cpu || visible == 0) return at::kCPU;
  // The one GPU a launcher bound to this process (Slurm's --gpus-per-task=1
  // leaves each task one, whatever its LOCAL_RANK); ranks that turn out to
  // share it are found by the World, by the GPU's UUID, and say so.
  if (visible == 1) return {at::kCUDA, 0};
  if (local_rank < 0 || local_rank >= visible)
    throw std::invalid_argument(fmt::format(
        "LOCAL_RANK={} needs GPU {} of this machine, but this process sees {} GPU(s) (CUDA_VISIBLE_DEVICES narrows "
        "them): start at most {} processes per machine (NPROC_PER_NODE), make more GPUs visible, or train on the CPU "
        "with --use_cpu true",
        local_rank, local_rank, visible, visible));
  return {at::kCUDA, static_cast<c10::DeviceIndex>(local_rank)};
}

int visible_gpus() { return static_cast<int>(torch::cuda::device_count()); }

at::Device parse_device(std::string_view spelled, std::string_view what) {
  const int visible = visible_gpus();
  if (spelled == "auto") return visible > 0 ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  at::Device device = at::kCPU;
  try {
    if (spelled != "cpu" && spelled.rfind("cuda", 0) != 0) throw std::invalid_argument("");
    device = at::Device(std::string(spelled));
  } catch (const std::exception&) {
    throw std::invalid_argument(fmt::format("{} must be cpu, cuda, cuda:N or auto, got '{}'", what, spelled));
  }
  if (!device.is_cuda()) return device;
  const int index = device.has_index() ? device.index() : 0;
  if (index >= visible)
    throw std::invalid_argument(fmt::format(
        "{} {}: this process sees {} GPU(s){}; choose one of them (CUDA_VISIBLE_DEVICES renumbers them from 0) or cpu",
        what, spelled, visible, visible == 0 ? " (no CUDA driver or device, or a build without CUDA)" : ""));
  return {at::kCUDA, static_cast<c10::DeviceIndex>(index)};
}

}  // namespace grpo::model
