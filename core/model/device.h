// Which device a process computes on. Chosen once, where the settings are
// read, and carried by them: every model, optimizer state and batch of the
// run is made on it.
#pragma once

#include <string>
#include <string_view>

#include <c10/core/Device.h>

namespace grpo::model {

// As accelerate and ms-swift choose it: the CPU when `use_cpu` (Hugging
// Face's --use_cpu) or when no GPU is visible, else the visible GPU with
// index `local_rank` (CUDA_VISIBLE_DEVICES has already narrowed what is
// visible), or the only one where one is visible (a GPU bound to each task).
// Throws std::invalid_argument when local_rank has no GPU among several:
// more processes on this machine than it has visible GPUs.
at::Device choose_device(bool use_cpu, int local_rank, int visible_gpus);

// How many GPUs this process sees (0 in a build without CUDA, or with no
// driver or device).
int visible_gpus();

// "cpu", "cuda" (the first visible GPU), "cuda:N", or "auto" (the first
// visible GPU, else the CPU). Throws std::invalid_argument naming `what` (a
// flag or option) for any other spelling, and for a GPU this process cannot
// see.
at::Device parse_device(std::string_view spelled, std::string_view what);

}  // namespace grpo::model
