// ms-swift's memory flags for a GPU shared by sampling and training:
// --offload_optimizer keeps AdamW's moments in host memory except while the
// optimizer steps; --offload_model moves what sampling does not read (the
// frozen reference model, and the gradient buffers) to host memory while the
// sampler generates; --gc_collect_after_offload then hands the freed blocks
// back to the driver (for a rollout server or another process on the GPU).
//
// Host copies of GPU tensors are pinned, so both directions are
// asynchronous copies ordered on the device's stream: the kernels that read
// a tensor brought back wait for its copy without the host waiting. The
// policy itself never moves: the colocated native sampler reads its weights.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/optim/optimizer.h>

#include "trainer/host_arena.h"

namespace grpo::trainer {

// Where each kind of offloaded tensor waits in host memory, kept across
// steps so that every offload reuses the memory of the one before.
struct OffloadArenas {
  HostArena reference, gradients, moments;
};

// `t` copied into host memory (into `arena` when given), pinned when `t`
// lives on a GPU. Issued asynchronously: model::synchronize(device) before
// the host reads it.
at::Tensor host_copy(const at::Tensor& t, HostArena* arena = nullptr);

// AdamW's moments (exp_avg, exp_avg_sq, max_exp_avg_sq) moved to `device`
// (host memory: at::kCPU, into `arena` from its start when given), or back
// onto each parameter's own device. Returns the bytes moved.
int64_t optimizer_state_to(torch::optim::Optimizer& optimizer, const at::Device& device, HostArena* arena = nullptr);
int64_t optimizer_state_to_devices(torch::optim::Optimizer& optimizer);

// A module's parameters and buffers moved to `device` (to host memory: into
// `arena` from its start when given); the tensors stay the module's own
// (their data is replaced), so nothing holding them goes stale.
int64_t move_module(torch::nn::Module& module, const at::Device& device, HostArena* arena = nullptr);

// The policy's gradient buffers while the sampler generates. Between steps
// they hold zeros, so they are freed and made again as zeros (nothing to
// copy); inside a step (gradient accumulation) they are copied to host memory
// and back. Parameters without a gradient (another ZeRO rank's) stay so.
class ParkedGradients {
 public:
  ParkedGradients(std::vector<at::Tensor> params, bool all_zero, HostArena* arena = nullptr);
  void restore();
  int64_t bytes() const { return bytes_; }

 private:
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> host_;  // per parameter: its gradient's host copy (undefined when it had none)
  std::vector<bool> had_gradient_;
  bool all_zero_ = false;
  int64_t bytes_ = 0;
};

// What --offload_model moved to host memory for one generation phase: the
// frozen reference model (may be none) and the policy's gradients. It comes
// back with restore(), or with the destructor when the phase throws, so that
// a step that fails (its checkpoint then saved, an evaluation's error
// reported) ends with everything where training expects it.
class AwayForSampling {
 public:
  AwayForSampling() = default;  // nothing away
  AwayForSampling(torch::nn::Module* reference, const at::Device& home, std::vector<at::Tensor> params,
                  bool gradients_zero, OffloadArenas* arenas = nullptr);
  AwayForSampling(AwayForSampling&& other) noexcept;
  AwayForSampling& operator=(AwayForSampling&&) = delete;
  ~AwayForSampling();  // restore(), if not done; an error then is logged, not thrown
  void restore();      // once; later calls do nothing
  int64_t bytes() const { return bytes_; }

 private:
  torch::nn::Module* reference_ = nullptr;  // in host memory until restore()
  at::Device home_ = at::kCPU;
  std::optional<ParkedGradients> gradients_;
  int64_t bytes_ = 0;
};

}  // namespace grpo::trainer
