// The phases of a GRPO step as the device sees them: each phase's peak
// memory is logged (memory/<phase>_peak_gb), and running out of device
// memory in it becomes an error that names the phase, the sizes involved and
// the flags that lower them, instead of LibTorch's bare allocator message.
#pragma once

#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include <c10/core/Device.h>

namespace grpo::trainer {

enum class StepPhase { Generation, Logprobs, Backward, Optimizer };

class OutOfDeviceMemory : public std::runtime_error {
 public:
  OutOfDeviceMemory(StepPhase phase, const std::string& what, bool weights_intact)
      : std::runtime_error(what), phase_(phase), weights_intact_(weights_intact) {}
  StepPhase phase() const { return phase_; }
  // Whether the weights are still those of the last finished step: true for
  // every phase before the optimizer's, and within it before the update.
  bool weights_intact() const { return weights_intact_; }

 private:
  StepPhase phase_;
  bool weights_intact_;
};

// Whether `e` is an allocator's out-of-memory error: LibTorch's (CUDA or
// CPU), or a sampler plugin's report of one.
bool is_out_of_memory(const std::exception& e);

// OutOfDeviceMemory for `e` in `phase`: `sizes` says what was being
// computed (e.g. "micro-batches of 4 completions x 1,536 tokens").
// `weights_intact`: by default whether the phase comes before the
// optimizer's; the optimizer's phase says so itself before its update.
OutOfDeviceMemory out_of_memory_in(StepPhase phase, const at::Device& device, const std::string& sizes,
                                   const std::exception& e, std::optional<bool> weights_intact = std::nullopt);

// Runs `body` as `phase` on `device`. On a GPU the phase's peak memory goes
// into metrics["memory/<phase>_peak_gb"] (the largest of the step's calls).
template <class Body>
void run_phase(StepPhase phase, const at::Device& device, std::map<std::string, double>& metrics,
               const std::string& sizes, Body&& body);

// Runs `body`, a part of the optimizer's phase before its update (the
// gradients combined and clipped, the moments brought back from host
// memory): running out of memory in it leaves the weights the last finished
// step's, and says so, so that the run saves that step's checkpoint.
template <class Body>
auto before_the_update(const at::Device& device, const std::string& sizes, Body&& body);

namespace detail {
void begin_phase(const at::Device& device);
void end_phase(StepPhase phase, const at::Device& device, std::map<std::string, double>& metrics);
}  // namespace detail

template <class Body>
void run_phase(StepPhase phase, const at::Device& device, std::map<std::string, double>& metrics,
               const std::string& sizes, Body&& body) {
  detail::begin_phase(device);
  try {
    std::forward<Body>(body)();
  } catch (const OutOfDeviceMemory&) {
    throw;
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    throw out_of_memory_in(phase, device, sizes, e);
  }
  detail::end_phase(phase, device, metrics);
}

template <class Body>
auto before_the_update(const at::Device& device, const std::string& sizes, Body&& body) {
  try {
    return std::forward<Body>(body)();
  } catch (const OutOfDeviceMemory&) {
    throw;
  } catch (const std::exception& e) {
    if (!is_out_of_memory(e)) throw;
    throw out_of_memory_in(StepPhase::Optimizer, device, sizes, e, /*weights_intact=*/true);
  }
}

}  // namespace grpo::trainer
