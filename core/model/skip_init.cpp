#include "model/skip_init.h"

namespace grpo::model {

namespace {
thread_local bool skipping = false;
}  // namespace

SkipInit::SkipInit() : outer_(skipping) { skipping = true; }
SkipInit::~SkipInit() { skipping = outer_; }

bool init_skipped() { return skipping; }

void empty_on(torch::nn::Module& module, const at::Device& device, at::ScalarType dtype) {
  const auto options = at::TensorOptions().device(device).dtype(dtype);
  for (at::Tensor& p : module.parameters())
    if (p.device() != device || p.scalar_type() != dtype) p.set_data(at::empty(p.sizes(), options));
  for (at::Tensor& b : module.buffers()) b.set_data(b.to(device));  // their own dtype: RoPE's frequencies are float32
}

}  // namespace grpo::model
