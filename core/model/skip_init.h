// Building a model that a checkpoint fills next. While a SkipInit lives on
// this thread, the modules of transformer.h take uninitialised memory
// instead of drawing initial values: at::uniform_ on the CPU is serial (a
// 7B model's draws take most of a minute, paid again for the reference and
// the sampler's model), and draws nobody reads shift the global generator
// that --seed makes reproducible (LoRA's initial A, dropout).
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>

namespace grpo::model {

class SkipInit {
 public:
  SkipInit();
  ~SkipInit();
  SkipInit(const SkipInit&) = delete;
  SkipInit& operator=(const SkipInit&) = delete;

 private:
  bool outer_;
};

bool init_skipped();  // whether a SkipInit lives on this thread

// Every parameter of `module` replaced by uninitialised memory of `dtype` on
// `device` (nothing copied: host memory of a model built under SkipInit was
// never touched) unless it is there already, its buffers moved to `device`
// in their own dtype.
void empty_on(torch::nn::Module& module, const at::Device& device, at::ScalarType dtype);

}  // namespace grpo::model
