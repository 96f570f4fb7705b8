#include "model/proj.h"

#include <torch/nn/init.h>

#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>

#include "model/cpu_small_matmul.h"
#include "model/skip_init.h"

namespace grpo::model {

ProjImpl::ProjImpl(int64_t in_features, int64_t out_features, bool bias_) {
  weight = register_parameter("weight", at::empty({out_features, in_features}));
  if (bias_) bias = register_parameter("bias", at::empty({out_features}));
  if (init_skipped()) return;
  // torch::nn::Linear's initialisation, in the same order of random draws.
  torch::nn::init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    torch::nn::init::uniform_(bias, -bound, bound);
  }
}

at::Tensor ProjImpl::forward(const at::Tensor& x) {
  at::Tensor y = cpu::small_linear(x, weight, bias);  // a decode step's few rows, inside a FusedScope
  if (!y.defined()) y = at::linear(x, weight, bias);
  const at::Tensor term = adapter_term(x);
  return term.defined() ? y + term.to(y.scalar_type()) : y;
}

at::Tensor ProjImpl::adapter_term(const at::Tensor& x) {
  if (!lora_A.defined() || !adapter_enabled_) return {};
  at::Tensor h = x.to(lora_A.scalar_type());
  if (dropout_ > 0 && is_training()) h = at::dropout(h, dropout_, /*train=*/true);
  return at::linear(at::linear(h, lora_A), lora_B).mul_(scaling_);
}

void ProjImpl::attach_adapter(at::Tensor a, at::Tensor b, double scaling, double dropout) {
  if (has_adapter()) throw std::logic_error("this projection already carries a LoRA adapter");
  if (a.dim() != 2 || b.dim() != 2 || a.size(1) != in_features() || b.size(0) != out_features() ||
      b.size(1) != a.size(0))
    throw std::invalid_argument("LoRA factors of shapes " + c10::str(a.sizes()) + " and " + c10::str(b.sizes()) +
                                " do not fit a projection of " + std::to_string(in_features()) + " -> " +
                                std::to_string(out_features()));
  // Child modules named lora_A / lora_B give the parameters PEFT's names.
  auto holder_a = std::make_shared<torch::nn::Module>("LoraA");
  auto holder_b = std::make_shared<torch::nn::Module>("LoraB");
  lora_A = holder_a->register_parameter("weight", std::move(a));
  lora_B = holder_b->register_parameter("weight", std::move(b));
  register_module("lora_A", holder_a);
  register_module("lora_B", holder_b);
  scaling_ = scaling;
  dropout_ = dropout;
}

}  // namespace grpo::model
