#include "trainer/step_phase.h"

#include <algorithm>

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include "model/device_memory.h"

namespace grpo::trainer {

namespace {

const char* name_of(StepPhase phase) {
  switch (phase) {
    case StepPhase::Generation: return "generation";
    case StepPhase::Logprobs: return "logprob";
    case StepPhase::Backward: return "backward";
    case StepPhase::Optimizer: return "optimizer";
  }
  return "?";
}

// The flags that lower each phase's memory, cheapest first.
const char* what_lowers(StepPhase phase) {
  switch (phase) {
    case StepPhase::Generation:
      return "lower --max_completion_length, or --num_generations / --generation_batch_size (fewer completions "
             "sampled at once); --train_type lora leaves more of the device to sampling";
    case StepPhase::Logprobs:
    case StepPhase::Backward:
      return "lower --per_device_train_batch_size (raise --gradient_accumulation_steps to keep the batch), keep "
             "--gradient_checkpointing true, lower --max_completion_length, or use --train_type lora";
    case StepPhase::Optimizer:
      return "use --train_type lora (AdamW keeps two moments per trained weight), or shard the optimizer state "
             "over more GPUs with --deepspeed zero1 / zero2";
  }
  return "";
}

// LibTorch's message, without the C++ backtrace it may carry.
std::string first_line(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string text = c10_error ? c10_error->what_without_backtrace() : e.what();
  const size_t end = text.find('\n');
  return end == std::string::npos ? text : text.substr(0, end);
}

}  // namespace

bool is_out_of_memory(const std::exception& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string what = e.what();  // a plugin's report crosses the ABI as text
  // The caching allocator's, a raw CUDA call's (pinned host memory, cuBLAS or NCCL workspaces), the native
  // engine's slot budget's, and the CPU's.
  return what.find("CUDA out of memory") != std::string::npos ||
         what.find("CUDA error: out of memory") != std::string::npos ||
         what.find("out of memory for decoding") != std::string::npos ||
         what.find("DefaultCPUAllocator: can't allocate memory") != std::string::npos ||
         what.find("DefaultCPUAllocator: not enough memory") != std::string::npos;
}

OutOfDeviceMemory out_of_memory_in(StepPhase phase, const at::Device& device, const std::string& sizes,
                                   const std::exception& e, std::optional<bool> weights_intact) {
  return {phase,
          fmt::format("{} ran out of memory in the step's {} phase ({}): {}. To fit: {}", device.str(), name_of(phase),
                      sizes, first_line(e), what_lowers(phase)),
          weights_intact.value_or(phase != StepPhase::Optimizer)};
}

namespace detail {

void begin_phase(const at::Device& device) { model::reset_peak_memory(device); }

void end_phase(StepPhase phase, const at::Device& device, std::map<std::string, double>& metrics) {
  const auto memory = model::device_memory(device);
  if (!memory) return;
  double& peak = metrics[fmt::format("memory/{}_peak_gb", name_of(phase))];
  peak = std::max(peak, memory->peak_allocated_gb);
}

}  // namespace detail

}  // namespace grpo::trainer
