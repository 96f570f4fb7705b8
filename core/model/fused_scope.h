// A region where fused inference kernels may replace at:: ops: the model opens
// one while it decodes with a KV cache (and the engine while it samples).
// Log-probabilities for training (with or without gradient) stay outside, on
// LibTorch's ops, so that the policy, old and reference log-probabilities of
// the same weights agree bitwise and a recomputed (checkpointed) layer gives
// what its first pass gave. The CPU's kernels (cpu_kernels.h) and the GPU's
// (cuda_kernels.h) both ask it.
#pragma once

namespace grpo::model {

class FusedScope {
 public:
  FusedScope();
  ~FusedScope();
  FusedScope(const FusedScope&) = delete;
  FusedScope& operator=(const FusedScope&) = delete;

  // Whether this thread is inside one.
  static bool open();

 private:
  bool previous_;
};

}  // namespace grpo::model
